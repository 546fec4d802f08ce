"""The FastAPI application: routes, the OpenAI error shape for every failure, and the API-key
guard (every route but /health, /metrics included)."""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import FastAPI

from radixgen.runtime.server import metrics, native_api, openai_chat, openai_common, openai_completions
from radixgen.runtime.server.errors import error_body, install_handlers
from radixgen.runtime.server.http_common import ServerState
from radixgen.runtime.server.tracing import TraceContextMiddleware

OPEN_PATHS = frozenset({"/health"})


def build_app(state: ServerState) -> FastAPI:
    """The app for one server; routes read `state` from `app.state.server`."""
    app = FastAPI(title="radixgen", version="0.1.0")
    app.state.server = state
    install_handlers(app)
    for module in (native_api, openai_common, openai_chat, openai_completions, metrics):
        app.include_router(module.router)
    if state.server_cfg.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=state.server_cfg.api_key)
    if state.server_cfg.otlp_traces_url:  # the caller's traceparent, for the request's span
        app.add_middleware(TraceContextMiddleware)
    return app


class ApiKeyMiddleware:
    """Pure ASGI (streaming responses pass through untouched): 401 unless the request
    carries `Authorization: Bearer <key>` (or `x-api-key: <key>`)."""

    def __init__(self, app: Any, api_key: str):
        self.app, self.key = app, api_key.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(error_body("invalid or missing API key; send 'Authorization: Bearer <key>'",
                                     code="invalid_api_key")).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: dict) -> bool:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        token = auth[7:].strip() if auth[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
        return hmac.compare_digest(token, self.key)

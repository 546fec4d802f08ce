"""The FastAPI application: routes, the OpenAI error shape for every failure, the request-size
limit (413 before a body is parsed), the API-key guard (every route but /health, /metrics
included), and an OpenAPI spec that describes every request body."""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from radixgen.runtime.server import (
    lora_api,
    metrics,
    native_api,
    openai_chat,
    openai_common,
    openai_completions,
    weights_api,
)
from radixgen.runtime.server.errors import body_too_large, error_body, install_handlers
from radixgen.runtime.server.http_common import ServerState, version
from radixgen.runtime.server.protocol import BODY_MODELS
from radixgen.runtime.server.tracing import TraceContextMiddleware

OPEN_PATHS = frozenset({"/health"})


def build_app(state: ServerState) -> FastAPI:
    """The app for one server; routes read `state` from `app.state.server`."""
    app = FastAPI(title="radixgen", version=version())
    app.state.server = state
    install_handlers(app)
    for module in (
        native_api,
        openai_common,
        openai_chat,
        openai_completions,
        metrics,
        weights_api,
        lora_api,
    ):
        app.include_router(module.router)
    app.openapi = lambda: _openapi_with_bodies(app)
    app.add_middleware(BodyLimitMiddleware, limit=state.server_cfg.max_request_bytes)
    if state.server_cfg.api_key:  # outermost: no body is read for a client without the key
        app.add_middleware(ApiKeyMiddleware, api_key=state.server_cfg.api_key)
    if state.server_cfg.otlp_traces_url:  # the caller's traceparent, for the request's span
        app.add_middleware(TraceContextMiddleware)
    return app


def _openapi_with_bodies(app: FastAPI) -> dict[str, Any]:
    """FastAPI's spec plus the schemas of the request bodies the routes parse themselves
    (`json_body`), which their `openapi_extra` refers to."""
    if app.openapi_schema is None:
        spec = get_openapi(title=app.title, version=app.version, routes=app.routes)
        _, defs = models_json_schema(
            [(m, "validation") for m in BODY_MODELS], ref_template="#/components/schemas/{model}"
        )
        spec.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        app.openapi_schema = spec
    return app.openapi_schema


async def send_error(send: Any, status: int, body: dict[str, Any], headers: tuple = ()) -> None:
    """A JSON error response straight from an ASGI middleware, with its Content-Length (not
    chunked: a connection closed right after it, with the request body unread, would cut a
    chunked answer short of its last chunk)."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """Pure ASGI: 413 for a body over `limit` bytes before any of it is parsed: at once when
    Content-Length says so, else as soon as the chunks received pass the limit."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await send_error(
                send, 413, body_too_large(self.limit).body(), ((b"connection", b"close"),)
            )
            return
        received = 0

        async def limited_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise body_too_large(self.limit)  # the APIError handler answers 413
            return message

        await self.app(scope, limited_receive, send)


class ApiKeyMiddleware:
    """Pure ASGI (streaming responses pass through untouched): 401 unless the request
    carries `Authorization: Bearer <key>` (or `x-api-key: <key>`)."""

    def __init__(self, app: Any, api_key: str):
        self.app, self.key = app, api_key.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = error_body(
            "invalid or missing API key; send 'Authorization: Bearer <key>'", code="invalid_api_key"
        )
        await send_error(send, 401, body, ((b"www-authenticate", b"Bearer"),))

    def _authorized(self, scope: dict) -> bool:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        token = (
            auth[7:].strip() if auth[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
        )
        return hmac.compare_digest(token, self.key)

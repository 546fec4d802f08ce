"""OpenAI-style errors: every failure the HTTP layer reports has the body
`{"error": {"message", "type", "param", "code"}}`; bad input is a 400, never a 500."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger(__name__)

# pydantic names the union member in an error's location (`stop.str`, `prompt.list[int]`,
# `content.list[TextPart]`): not a field, so left out of `param`
_UNION_TAG = re.compile(
    r"^(str|int|float|bool|none|constrained-[\w-]+|function-[\w-]+|[A-Z]\w*|.*\[.*)$"
)


class APIError(Exception):
    """An error with its HTTP status and OpenAI error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = (
            status,
            message,
            param,
            code,
            type,
        )

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def invalid(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 invalid_request_error."""
    return APIError(400, message, param, code)


def body_too_large(limit: int) -> APIError:
    return APIError(
        413,
        f"the request body is larger than {limit} bytes (--max-request-bytes)",
        code="request_too_large",
    )


def unavailable(message: str) -> APIError:
    return APIError(503, message, code="server_unavailable", type="server_error")


def error_body(
    message: str,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def from_validation_error(errors: list[dict[str, Any]]) -> APIError:
    """A pydantic error as a 400 naming the offending field: the deepest one, since a union
    (`content`: a string or a list of parts) reports each member's error and the deepest is
    the member the client meant."""
    if not errors:
        return invalid("invalid request body")
    first = max(errors, key=lambda e: len(e.get("loc", ())))
    loc = [str(p) for p in first.get("loc", ()) if p != "body" and not _UNION_TAG.match(str(p))]
    param = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return invalid(
            f"the request body is not valid JSON: {first.get('msg')}", None, "invalid_json"
        )
    message = f"{param}: {first.get('msg')}" if param else str(first.get("msg"))
    return invalid(message, param, "invalid_value")


def install_handlers(app: FastAPI) -> None:
    """Route every exception to the OpenAI error shape."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return from_validation_error(list(exc.errors())).response()

    @app.exception_handler(ValidationError)
    async def _validation(request: Request, exc: ValidationError) -> JSONResponse:
        return from_validation_error(exc.errors()).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return JSONResponse(
            error_body(str(exc.detail), param=None, code=code),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s", request.url.path)
        return JSONResponse(
            error_body(f"internal error: {type(exc).__name__}", "server_error"), status_code=500
        )

"""Helpers every route uses: the shared server state, body parsing (off the event loop when
large) and sampling-parameter validation, waiting for a request group while watching for a
client that disconnects, and SSE streaming."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import msgspec
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from radixgen.config import EngineConfig, ServerConfig
from radixgen.core import SEED_MAX, SEED_MIN, SamplingParams
from radixgen.runtime.grammar_backend import CONSTRAINT_ERROR
from radixgen.runtime.server.errors import APIError, from_validation_error, invalid
from radixgen.runtime.server.request_group import ReqState, RequestGroup
from radixgen.runtime.server.tokenizer_manager import TokenizerManager

DISCONNECT_POLL_S = 0.25
INLINE_PARSE_BYTES = 64 * 1024  # bodies up to this size are parsed on the event loop (~0.1 ms)


@dataclass
class ServerState:
    """What the routes read (stored as `app.state.server`)."""

    tm: TokenizerManager
    model_path: Path
    served_model_name: str
    engine_cfg: EngineConfig
    server_cfg: ServerConfig
    child_pids: dict[str, int] = field(default_factory=dict)
    token_text_cache: dict[int, str] = field(default_factory=dict)

    @functools.cached_property
    def system_fingerprint(self) -> str:
        """OpenAI's `system_fingerprint`: changes when the version, model or engine config do."""
        config = json.dumps(
            [version(), str(self.model_path), dataclasses.asdict(self.engine_cfg)],
            sort_keys=True,
            default=str,
        )
        return "fp_" + hashlib.sha256(config.encode()).hexdigest()[:12]

    def token_text(self, token_id: int) -> str:
        """The text of one token, for logprobs (a partial character shows as U+FFFD)."""
        text = self.token_text_cache.get(token_id)
        if text is None:
            text = self.token_text_cache[token_id] = self.tm.decode([token_id])
        return text


def server_state(request: Request) -> ServerState:
    return request.app.state.server


def check_model(st: ServerState, model: str) -> None:
    """404 unless `model` names the served model (by its name or its path), as OpenAI answers."""
    if model not in (st.served_model_name, str(st.model_path)):
        raise APIError(
            404,
            f"the model {model!r} does not exist; this server serves {st.served_model_name!r}",
            "model",
            "model_not_found",
        )


def version() -> str:
    try:
        return importlib.metadata.version("radixgen")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def json_body(model: type[BaseModel]) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that validates the raw body as JSON against `model` (whatever the
    content-type header says), strictly; a 400 naming the field otherwise. Large bodies are
    parsed in a thread, so the event loop keeps answering."""

    def validate(raw: bytes) -> Any:
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise from_validation_error(exc.errors()) from None

    async def parse(request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            raise invalid("the request body is empty; send a JSON object", None, "invalid_json")
        if len(raw) <= INLINE_PARSE_BYTES:
            return validate(raw)
        return await asyncio.to_thread(validate, raw)

    return parse


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` of a route whose body `json_body(model)` reads (FastAPI cannot see it):
    the schema lives in the spec's components (app.py puts it there)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def checked_rids(st: ServerState, rids: list[str] | None, n: int) -> list[str] | None:
    """Client-chosen rids of n requests: distinct, non-empty, none of them running."""
    if rids is None:
        return None
    if len(rids) != n or len(set(rids)) != n or any(not r for r in rids):
        raise invalid(f"rid must be {n} distinct non-empty strings", "rid")
    if any(r in st.tm.queues for r in rids):
        raise invalid("a request with this rid is already running", "rid")
    return rids


def make_params(fields: dict[str, Any], param: str | None = None) -> SamplingParams:
    """SamplingParams from a dict, with exactly the types the scheduler process decodes
    (so a bad value is a 400 here, never a failure over there)."""
    try:
        params = SamplingParams.from_dict(fields)
        msgspec.convert(msgspec.to_builtins(params), SamplingParams)
    except (ValueError, TypeError, msgspec.ValidationError) as exc:
        raise invalid(str(exc), param, "invalid_value") from None
    return params


def n_params(fields: dict[str, Any], n: int, param: str | None = None) -> list[SamplingParams]:
    """One SamplingParams per sample: with a seed, sample i uses seed + i, wrapped into the
    int64 range (so the n samples differ but the response is reproducible). Checked once: the
    copies share its constraint (a large schema is parsed once)."""
    first, seed = make_params(fields, param), fields.get("seed")
    return [first] + [
        dataclasses.replace(first, seed=None if seed is None else _wrapped_seed(seed + i))
        for i in range(1, n)
    ]


def _wrapped_seed(seed: int) -> int:
    return (seed - SEED_MIN) % (SEED_MAX - SEED_MIN + 1) + SEED_MIN


def request_rids(rid: str | None, count: int) -> list[str] | None:
    """The rids of a request's `count` requests when the client names it (SGLang's `rid`):
    the rid itself for one, `<rid>-<i>` for several (what /abort_request takes)."""
    if rid is None:
        return None
    return [rid] if count == 1 else [f"{rid}-{i}" for i in range(count)]


async def collect(request: Request, group: RequestGroup) -> list[ReqState] | None:
    """Wait until every request of the group finished; None if the client went away first
    (the group is then aborted, so its KV is freed)."""
    task = asyncio.ensure_future(group.wait())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return _raise_constraint_errors(task.result())
            if await request.is_disconnected():
                return None
    finally:
        if not task.done():
            task.cancel()
            group.abort()


def _raise_constraint_errors(states: list[ReqState]) -> list[ReqState]:
    """A constraint the edge checks passed but the scheduler could not compile is still the
    client's error: a 400 with the compiler's message."""
    for state in states:
        message = (state.finish or {}).get("message", "")
        if message.startswith(CONSTRAINT_ERROR):
            raise invalid(message, "sampling_params", "invalid_constraint")
    return states


def client_gone() -> Response:
    return Response(status_code=499)


def sse(chunks: AsyncIterator[dict[str, Any]], group: RequestGroup) -> StreamingResponse:
    """Server-sent events: `data: {json}` per chunk, then `data: [DONE]`. A client that
    disconnects cancels the generator, which aborts the group's unfinished requests."""

    async def body() -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        except APIError as exc:  # the runtime died mid-stream
            yield f"data: {json.dumps(exc.body())}\n\n"
        finally:
            if not group.done:
                group.abort()
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )

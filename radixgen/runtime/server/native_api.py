"""The native API (SGLang's shape): /generate, health, model and server info, cache and
abort control."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from fastapi import APIRouter, Depends, Request

from radixgen.core import SamplingParams
from radixgen.runtime.native_output import LogprobFormat, native_result
from radixgen.runtime.server.errors import APIError, invalid, unavailable
from radixgen.runtime.server.http_common import (
    ServerState,
    body_schema,
    check_model,
    checked_rids,
    client_gone,
    collect,
    json_body,
    request_rids,
    server_state,
    sse,
    version,
)
from radixgen.runtime.server.native_fields import (
    native_adapters,
    native_specs,
    refuse_unsupported,
)
from radixgen.runtime.server.native_result import stream_chunks
from radixgen.runtime.server.protocol import AbortRequest, GenerateRequest
from radixgen.runtime.server.request_group import RequestGroup

router = APIRouter()

HEALTH_GENERATE_TIMEOUT_S = 20.0


@router.post("/generate", openapi_extra=body_schema(GenerateRequest))
async def generate(
    request: Request, body: GenerateRequest = Depends(json_body(GenerateRequest))
) -> Any:
    """Text or token ids (one or a batch) -> {"text", "output_ids", "meta_info"} (a list for
    a batch or n > 1, each prompt's samples in a row); with stream=true, SSE chunks of the
    cumulative text and ids with each chunk's own output logprobs."""
    st = server_state(request)
    if body.model is not None:
        check_model(st, body.model)
    refuse_unsupported(body)
    prompts, single = await _prompts(st, body)
    specs = await asyncio.to_thread(native_specs, body, prompts, single, st.tm.limits)
    for ids, p in specs:
        st.tm.check_prompt(
            ids, p.max_new_tokens, "input_ids" if body.input_ids is not None else "text"
        )
    await st.tm.check_constraints([p for _, p in specs], "sampling_params")
    adapters = native_adapters(body, len(prompts), len(specs) // len(prompts))
    for name in adapters if isinstance(adapters, list) else [adapters]:
        st.tm.check_adapter(name, "lora_path")
    rids = checked_rids(st, _rids(body.rid, len(specs)), len(specs))
    group = RequestGroup(st.tm, specs, rids, adapters)
    group.start()
    fmt = LogprobFormat(body.return_text_in_logprobs, st.token_text)
    one = single and len(specs) == 1
    if body.stream:
        return sse(stream_chunks(group, fmt, with_index=not one), group)
    states = await collect(request, group)
    if states is None:
        return client_gone()
    results = [native_result(s, fmt) for s in states]
    return results[0] if one else results


async def _prompts(st: ServerState, body: GenerateRequest) -> tuple[list[list[int]], bool]:
    if (body.text is None) == (body.input_ids is None):
        raise invalid("give exactly one of text or input_ids", "text")
    if body.text is not None:
        texts = [body.text] if isinstance(body.text, str) else body.text
        if not texts:
            raise invalid("text is an empty list", "text")
        return await st.tm.encode_async(texts, "text"), isinstance(body.text, str)
    ids = body.input_ids
    if not ids:
        raise invalid("input_ids is empty", "input_ids")
    single = isinstance(ids[0], int)
    return ([list(ids)] if single else [list(x) for x in ids]), single


def _rids(rid: str | list[str] | None, count: int) -> list[str] | None:
    """Client-chosen rids: a list with one per request, or one string (SGLang: the prefix of
    a batch's rids)."""
    return rid if isinstance(rid, list) else request_rids(rid, count)


@router.get("/health")
async def health(request: Request) -> Any:
    """200 while the model is loaded and every child process runs, else 503 (no API key)."""
    tm = server_state(request).tm
    if not tm.healthy:
        raise unavailable(tm.dead_reason or "the runtime is not ready")
    return {}


@router.get("/health_generate")
async def health_generate(request: Request) -> Any:
    """Healthy only if a one-token generation completes."""
    st = server_state(request)
    if not st.tm.healthy:
        raise unavailable(st.tm.dead_reason or "the runtime is not ready")
    params = SamplingParams(max_new_tokens=1, temperature=0)
    group = RequestGroup(st.tm, [(st.tm.encode("ping") or [0], params)])
    group.start()
    try:
        await asyncio.wait_for(group.wait(), HEALTH_GENERATE_TIMEOUT_S)
    except asyncio.TimeoutError:
        group.abort()
        raise unavailable(f"no token generated in {HEALTH_GENERATE_TIMEOUT_S:.0f}s") from None
    return {}


@router.get("/get_model_info")
@router.get("/model_info")  # SGLang's newer name, which sglang-router asks first
async def get_model_info(request: Request) -> Any:
    """Model path, served name and the limits requests are checked against."""
    st = server_state(request)
    limits = st.tm.limits
    return {
        "model_path": str(st.model_path),
        "tokenizer_path": str(st.model_path),
        "served_model_name": st.served_model_name,
        "is_generation": True,
        "max_context_length": limits.max_context_len,
        "vocab_size": limits.vocab_size,
        "max_total_tokens": limits.num_slots,
        "weight_version": st.tm.weight_version,
    }


@router.get("/get_server_info")
@router.get("/server_info")
async def get_server_info(request: Request) -> Any:
    """Configs (API key masked), child pids, and the scheduler's queue and cache statistics."""
    st = server_state(request)
    server_cfg = dataclasses.asdict(st.server_cfg)
    server_cfg["api_key"] = "<set>" if st.server_cfg.api_key else None
    return {
        "version": version(),
        "model_path": str(st.model_path),
        "served_model_name": st.served_model_name,
        "engine_config": dataclasses.asdict(st.engine_cfg),
        "server_config": server_cfg,
        "max_context_length": st.tm.limits.max_context_len,
        # SGLang's parallelism fields, which routers read (dp-aware routing)
        "tp_size": st.engine_cfg.parallel.tp_size,
        "dp_size": 1,
        "pids": st.child_pids,
        "scheduler": await st.tm.get_stats(),
    }


@router.get("/get_load")
async def get_load(request: Request) -> Any:
    """SGLang's load report, one entry per data-parallel rank (one here): running and waiting
    requests and the KV tokens in use (cached prefixes included)."""
    stats = await server_state(request).tm.get_stats()
    return [
        {
            "dp_rank": 0,
            "num_reqs": stats["num_running_reqs"],
            "num_waiting_reqs": stats["num_waiting_reqs"],
            "num_tokens": stats["num_slots"] - stats["num_free_slots"],
            "ts_tic": time.perf_counter(),
        }
    ]


@router.get("/version")
async def get_version() -> Any:
    """The radixgen version (vLLM's and SGLang's route)."""
    return {"version": version()}


@router.api_route("/flush_cache", methods=["GET", "POST"])
async def flush_cache(request: Request) -> Any:
    """Drop every cached prefix; refused (400) while requests are in flight."""
    if not await server_state(request).tm.flush_cache():
        raise APIError(400, "cache not flushed: requests are in flight", code="requests_in_flight")
    return {"success": True, "message": "cache flushed"}


@router.post("/abort_request", openapi_extra=body_schema(AbortRequest))
async def abort_request(
    request: Request, body: AbortRequest = Depends(json_body(AbortRequest))
) -> Any:
    """Abort a running request by rid: a /generate client receives finish_reason `abort`
    (SGLang's shape), an OpenAI client an error."""
    if not server_state(request).tm.abort(body.rid, notify=True):
        raise APIError(404, f"no running request with rid {body.rid!r}", "rid", "not_found")
    return {"success": True}

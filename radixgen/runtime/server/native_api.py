"""The native API (SGLang's shape): /generate, health, model and server info, cache and
abort control."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request

from radixgen.core import SamplingParams
from radixgen.runtime.server.errors import APIError, invalid, unavailable
from radixgen.runtime.server.http_common import (ServerState, body_schema, checked_rids, client_gone, collect,
                                                 finite, json_body, make_params, server_state, sse, version)
from radixgen.runtime.server.protocol import AbortRequest, GenerateRequest
from radixgen.runtime.server.request_group import ReqState, RequestGroup

router = APIRouter()

HEALTH_GENERATE_TIMEOUT_S = 20.0


@router.post("/generate", openapi_extra=body_schema(GenerateRequest))
async def generate(request: Request, body: GenerateRequest = Depends(json_body(GenerateRequest))) -> Any:
    """Text or token ids (one or a batch) -> {"text", "output_ids", "meta_info"} (a list for
    a batch); with stream=true, SSE chunks of the cumulative result."""
    st = server_state(request)
    prompts, single = await _prompts(st, body)
    params = await asyncio.to_thread(_params_per_prompt, body, len(prompts), _logprob_start(body, prompts, single))
    for ids, p in zip(prompts, params):
        st.tm.check_prompt(ids, p.max_new_tokens, "input_ids" if body.input_ids is not None else "text")
    await st.tm.check_constraints(params, "sampling_params")
    rids = None if body.rid is None else [body.rid] if isinstance(body.rid, str) else list(body.rid)
    group = RequestGroup(st.tm, list(zip(prompts, params)), checked_rids(st, rids, len(prompts)))
    group.start()
    if body.stream:
        return sse(_stream(group, single), group)
    states = await collect(request, group)
    if states is None:
        return client_gone()
    results = [native_result(s) for s in states]
    return results[0] if single else results


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


def _logprob_start(body: GenerateRequest, prompts: list[list[int]], single: bool) -> int:
    """Where prompt logprobs start: `logprob_start_len`, or with `logprob_start_common_prefix`
    the length of the longest token prefix every prompt of the batch shares."""
    if not body.logprob_start_common_prefix:
        return body.logprob_start_len
    param = "logprob_start_common_prefix"
    if not body.return_logprob:
        raise invalid("logprob_start_common_prefix needs return_logprob", param)
    if body.logprob_start_len != -1:
        raise invalid("give logprob_start_len or logprob_start_common_prefix, not both", param)
    if single or len(prompts) < 2:
        raise invalid("logprob_start_common_prefix needs a batch of at least two prompts", param)
    return len(os.path.commonprefix(prompts))


def _params_per_prompt(body: GenerateRequest, n: int, logprob_start_len: int) -> list[SamplingParams]:
    raw = body.sampling_params
    if isinstance(raw, list) and len(raw) != n:
        raise invalid(f"{len(raw)} sampling_params for {n} prompts", "sampling_params")
    dicts = raw if isinstance(raw, list) else [raw or {}] * n
    out = []
    for d in dicts:
        d = dict(d)
        if body.return_logprob:
            d["return_logprob"] = True
        if body.top_logprobs_num:
            d["top_logprobs_num"] = body.top_logprobs_num
        if body.return_logprob and logprob_start_len >= 0:
            d["logprob_start_len"] = logprob_start_len
        out.append(make_params(d, "sampling_params"))
    return out


def native_result(s: ReqState) -> dict[str, Any]:
    """SGLang's result shape; logprobs as [logprob, token_id] pairs."""
    meta: dict[str, Any] = {
        "id": s.rid, "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
        "cached_tokens": s.cached_tokens, "finish_reason": s.finish, "e2e_latency": s.e2e_latency,
        **(s.spec.meta_info() if s.spec else {})}
    if s.params.return_logprob or s.params.top_logprobs_num:
        meta["output_token_logprobs"] = [[finite(lp), t] for lp, t in zip(s.logprobs, s.output_ids)]
    if s.params.logprob_start_len >= 0 and s.input_logprobs is not None:
        start = s.params.logprob_start_len
        meta["logprob_start_len"] = start  # where the entries begin (a common-prefix batch's start)
        meta["input_token_logprobs"] = [[None if lp is None else finite(lp), t]
                                        for lp, t in zip(s.input_logprobs, s.input_ids[start:])]
    if s.params.top_logprobs_num:
        meta["output_top_logprobs"] = [[[finite(lp), t] for t, lp in top] for top in s.top_logprobs]
    return {"text": s.text, "output_ids": list(s.output_ids), "meta_info": meta}


async def _stream(group: RequestGroup, single: bool) -> AsyncIterator[dict[str, Any]]:
    """One chunk per scheduler output: cumulative text and ids (SGLang's shape)."""
    async for state, _ in group:
        chunk = native_result(state)
        if not single:
            chunk["index"] = state.index
        yield chunk


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
async def get_model_info(request: Request) -> Any:
    """Model path, served name and the limits requests are checked against."""
    st = server_state(request)
    limits = st.tm.limits
    return {"model_path": str(st.model_path), "tokenizer_path": str(st.model_path),
            "served_model_name": st.served_model_name, "is_generation": True,
            "max_context_length": limits.max_context_len, "vocab_size": limits.vocab_size,
            "max_total_tokens": limits.num_slots}


@router.get("/get_server_info")
async def get_server_info(request: Request) -> Any:
    """Configs (API key masked), child pids, and the scheduler's queue and cache statistics."""
    st = server_state(request)
    server_cfg = dataclasses.asdict(st.server_cfg)
    server_cfg["api_key"] = "<set>" if st.server_cfg.api_key else None
    return {"version": version(), "model_path": str(st.model_path),
            "served_model_name": st.served_model_name,
            "engine_config": dataclasses.asdict(st.engine_cfg), "server_config": server_cfg,
            "max_context_length": st.tm.limits.max_context_len, "pids": st.child_pids,
            "scheduler": await st.tm.get_stats()}


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
async def abort_request(request: Request, body: AbortRequest = Depends(json_body(AbortRequest))) -> Any:
    """Abort a running request by rid: a /generate client receives finish_reason `abort`
    (SGLang's shape), an OpenAI client an error."""
    if not server_state(request).tm.abort(body.rid, notify=True):
        raise APIError(404, f"no running request with rid {body.rid!r}", "rid", "not_found")
    return {"success": True}

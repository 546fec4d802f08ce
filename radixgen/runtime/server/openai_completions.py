"""POST /v1/completions: prompts as text, a list of texts, token ids or lists of token ids;
n samples per prompt (sharing its KV), echo, logprobs, SSE streaming."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request

from radixgen.runtime.native_output import finite
from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import (
    ServerState,
    body_schema,
    checked_rids,
    client_gone,
    collect,
    json_body,
    n_params,
    request_rids,
    server_state,
    sse,
)
from radixgen.runtime.server.openai_common import (
    check_common,
    field_constraint,
    finish_reason,
    response_metadata,
    sampling_dict,
    usage,
)
from radixgen.runtime.server.protocol import CompletionRequest
from radixgen.runtime.server.request_group import ReqState, RequestGroup

router = APIRouter()


@router.post("/v1/completions", openapi_extra=body_schema(CompletionRequest))
async def completions(
    request: Request, body: CompletionRequest = Depends(json_body(CompletionRequest))
) -> Any:
    """OpenAI (legacy) completions; choice index = prompt index * n + sample index."""
    st = server_state(request)
    adapter = _check_completion(st, body)
    constraint, constraint_param = await asyncio.to_thread(field_constraint, body)
    prompts = await _prompts(st, body.prompt)
    fields = sampling_dict(body, body.max_tokens)
    fields.update(return_logprob=body.logprobs is not None, top_logprobs_num=body.logprobs or 0)
    if constraint is not None:
        fields[constraint.kind] = constraint.spec
    params = await asyncio.to_thread(n_params, fields, body.n)  # a large schema parses off the loop
    await st.tm.check_constraints(params, constraint_param or "prompt")
    specs = []
    for ids in prompts:
        st.tm.check_prompt(ids, body.max_tokens, "prompt")
        specs += [(ids, p) for p in params]
    group = RequestGroup(
        st.tm, specs, checked_rids(st, request_rids(body.rid, len(specs)), len(specs)), adapter
    )
    group.start()
    head = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.model,
        "system_fingerprint": st.system_fingerprint,
    }
    if body.stream:
        return sse(_chunks(st, body, group, head), group)
    states = await collect(request, group)
    if states is None:
        return client_gone()
    choices = [
        {
            "index": s.index,
            "text": _echo(st, body, s) + s.text,
            "logprobs": _logprobs(st, s, 0, body.logprobs),
            "finish_reason": finish_reason(s),
        }
        for s in states
    ]
    return {
        **head,
        "choices": choices,
        "usage": usage(states, body.n),
        "metadata": response_metadata(states),
    }


def _check_completion(st: ServerState, body: CompletionRequest) -> str | None:
    """The LoRA adapter `model` names; 400/404 for what cannot be served."""
    adapter = check_common(st, body)
    if body.suffix is not None:
        raise invalid("suffix is not supported", "suffix", "unsupported_parameter")
    if body.best_of not in (None, 1):
        raise invalid("best_of > 1 is not supported", "best_of", "unsupported_parameter")
    if body.echo and body.logprobs is not None:
        raise invalid(
            "echo with logprobs (prompt logprobs) is not supported yet",
            "echo",
            "unsupported_parameter",
        )
    return adapter


async def _prompts(st: ServerState, prompt: Any) -> list[list[int]]:
    if isinstance(prompt, str):
        return await st.tm.encode_async([prompt], "prompt")
    if not prompt:
        raise invalid("prompt is an empty list", "prompt")
    if isinstance(prompt[0], int):
        return [list(prompt)]
    if isinstance(prompt[0], str):
        return await st.tm.encode_async(prompt, "prompt")
    return [list(p) for p in prompt]


def _echo(st: ServerState, body: CompletionRequest, s: ReqState) -> str:
    return st.tm.decode(s.input_ids) if body.echo else ""


def _logprobs(st: ServerState, s: ReqState, start: int, k: int | None) -> dict[str, Any] | None:
    """Legacy completions logprobs of the output tokens from `start` on."""
    if k is None:
        return None
    texts = [st.token_text(t) for t in s.output_ids[: len(s.logprobs)]]
    tokens, offsets, pos = texts[start:], [], sum(len(t) for t in texts[:start])
    for t in tokens:  # offsets of the token texts, concatenated from the first output token
        offsets.append(pos)
        pos += len(t)
    tops = [{st.token_text(t): finite(lp) for t, lp in top} for top in s.top_logprobs[start:]]
    return {
        "tokens": tokens,
        "token_logprobs": [finite(lp) for lp in s.logprobs[start:]],
        "top_logprobs": tops if k else None,
        "text_offset": offsets,
    }


async def _chunks(
    st: ServerState, body: CompletionRequest, group: RequestGroup, head: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    with_usage = body.stream_options is not None and body.stream_options.include_usage
    extra = {"usage": None} if with_usage else {}
    seen = {s.rid: 0 for s in group.states}
    echoed: set[str] = set()
    async for s, out in group:
        start, seen[s.rid] = seen[s.rid], len(s.logprobs)
        text = out.text
        if s.rid not in echoed:
            echoed.add(s.rid)
            text = _echo(st, body, s) + text
        if not (text or out.finish or seen[s.rid] > start):
            continue
        choice = {
            "index": s.index,
            "text": text,
            "logprobs": _logprobs(st, s, start, body.logprobs),
            "finish_reason": finish_reason(s),
        }
        yield {**head, "choices": [choice], **extra}
    if with_usage:
        yield {**head, "choices": [], "usage": usage(group.states, body.n)}

"""What the OpenAI endpoints share: model-name and unsupported-field checks, the mapping of
request fields onto SamplingParams, usage, and `/v1/models`."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request

from radixgen.core import SamplingParams
from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import ServerState, make_params, server_state
from radixgen.runtime.server.protocol import SamplingFields
from radixgen.runtime.server.request_group import ReqState

router = APIRouter()
CREATED = int(time.time())


@router.get("/v1/models")
async def list_models(request: Request) -> Any:
    """The one served model."""
    st = server_state(request)
    return {"object": "list", "data": [{
        "id": st.served_model_name, "object": "model", "created": CREATED, "owned_by": "radixgen",
        "root": str(st.model_path), "max_model_len": st.tm.limits.max_context_len}]}


def check_common(st: ServerState, body: SamplingFields) -> None:
    """400 for an unknown model and for fields that would change the output but are not
    supported."""
    if body.model not in (st.served_model_name, str(st.model_path)):
        raise invalid(f"the model {body.model!r} does not exist; this server serves "
                      f"{st.served_model_name!r}", "model", "model_not_found")
    if body.logit_bias:
        raise invalid("logit_bias is not supported yet", "logit_bias", "unsupported_parameter")
    if body.stream_options is not None and not body.stream:
        raise invalid("stream_options is only allowed when stream is true", "stream_options")


def sampling_dict(body: SamplingFields, max_new_tokens: int) -> dict[str, Any]:
    """The SamplingParams fields an OpenAI request sets (logprob fields added by callers)."""
    fields: dict[str, Any] = {
        "max_new_tokens": max_new_tokens, "top_k": body.top_k, "min_p": body.min_p,
        "repetition_penalty": body.repetition_penalty, "frequency_penalty": body.frequency_penalty,
        "presence_penalty": body.presence_penalty, "ignore_eos": body.ignore_eos,
        "skip_special_tokens": body.skip_special_tokens, "seed": body.seed,
        "temperature": 1.0 if body.temperature is None else body.temperature,
        "top_p": 1.0 if body.top_p is None else body.top_p,
    }
    if body.stop is not None:
        fields["stop"] = [body.stop] if isinstance(body.stop, str) else body.stop
    if body.stop_token_ids is not None:
        fields["stop_token_ids"] = body.stop_token_ids
    return fields


def n_params(fields: dict[str, Any], n: int) -> list[SamplingParams]:
    """One SamplingParams per sample: with a seed, sample i uses seed + i (so the n samples
    differ but the response is reproducible)."""
    seed = fields.get("seed")
    return [make_params({**fields, "seed": None if seed is None else seed + i}) for i in range(n)]


def usage(states: list[ReqState], n: int) -> dict[str, Any]:
    """Prompt tokens counted once per prompt (not per sample); completion and cached tokens
    summed over all samples (SGLang's convention)."""
    prompt = sum(s.prompt_tokens for s in states[::n])
    completion = sum(s.completion_tokens for s in states)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": sum(s.cached_tokens for s in states)}}


def finish_reason(state: ReqState) -> str | None:
    return None if state.finish is None else state.finish.get("type")

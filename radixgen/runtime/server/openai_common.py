"""What the OpenAI endpoints share: model-name and unsupported-field checks, constraints given
as top-level fields, the mapping of request fields onto SamplingParams, usage, finish reasons,
and `/v1/models`."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request

from radixgen.core import Constraint
from radixgen.runtime.grammar_backend import CONSTRAINT_ERROR
from radixgen.runtime.server.errors import APIError, invalid
from radixgen.runtime.server.http_common import ServerState, server_state
from radixgen.runtime.server.protocol import SamplingFields
from radixgen.runtime.server.request_group import ReqState

router = APIRouter()
CREATED = int(time.time())
OPENAI_FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")

# top-level constraint field -> Constraint kind (SGLang's names, then vLLM's guided_*)
CONSTRAINT_FIELDS = {
    "regex": "regex",
    "ebnf": "ebnf",
    "json_schema": "json_schema",
    "guided_json": "json_schema",
    "guided_regex": "regex",
    "guided_grammar": "ebnf",
    "guided_choice": "choices",
}


@router.get("/v1/models")
async def list_models(request: Request) -> Any:
    """The served model, then each loaded LoRA adapter (`parent`: the base model)."""
    st = server_state(request)
    return {
        "object": "list",
        "data": [
            {
                "id": st.served_model_name,
                "object": "model",
                "created": CREATED,
                "owned_by": "radixgen",
                "root": str(st.model_path),
                "max_model_len": st.tm.limits.max_context_len,
                "weight_version": st.tm.weight_version,
            },
            *(
                {
                    "id": name,
                    "object": "model",
                    "created": CREATED,
                    "owned_by": "radixgen",
                    "root": info["lora_path"],
                    "parent": st.served_model_name,
                    "max_model_len": st.tm.limits.max_context_len,
                    "weight_version": st.tm.weight_version,
                }
                for name, info in (st.tm.lora_adapters or {}).items()
            ),
        ],
    }


def check_common(st: ServerState, body: SamplingFields) -> str | None:
    """The LoRA adapter `model` names (None: the base model). 404 for an unknown model (as
    OpenAI answers); 400 for token ids outside the vocabulary and for fields that would change
    the output but are not supported."""
    adapter = adapter_of(st, body.model)
    if body.return_hidden_states:
        raise invalid(
            "hidden states are not returned by radixgen",
            "return_hidden_states",
            "unsupported_field",
        )
    vocab = st.tm.limits.vocab_size
    if any(t >= vocab for t in body.stop_token_ids or ()):
        raise invalid(f"stop_token_ids must be token ids in [0, {vocab})", "stop_token_ids")
    if body.logit_bias:
        if not all(key.isdigit() and int(key) < vocab for key in body.logit_bias):
            raise invalid(
                f"logit_bias keys must be token ids in [0, {vocab}) written as strings",
                "logit_bias",
            )
        raise invalid("logit_bias is not supported yet", "logit_bias", "unsupported_parameter")
    if body.stream_options is not None and not body.stream:
        raise invalid("stream_options is only allowed when stream is true", "stream_options")
    return adapter


def adapter_of(st: ServerState, model: str) -> str | None:
    """The base model's names give None; a loaded adapter's name gives itself (vLLM's way of
    choosing an adapter); anything else is a 404."""
    if model in (st.served_model_name, str(st.model_path)):
        return None
    if st.tm.lora_adapters and model in st.tm.lora_adapters:
        return model
    served = [st.served_model_name, *(st.tm.lora_adapters or ())]
    raise APIError(
        404,
        f"the model {model!r} does not exist; this server serves "
        + ", ".join(repr(name) for name in served),
        "model",
        "model_not_found",
    )


def field_constraint(body: SamplingFields) -> tuple[Constraint, str] | tuple[None, None]:
    """The constraint given as a top-level field (`extra_body` of the OpenAI client) and that
    field's name; 400 if more than one is given or it is malformed."""
    given = [name for name in CONSTRAINT_FIELDS if getattr(body, name) is not None]
    if len(given) > 1:
        raise invalid(
            f"give at most one of {', '.join(CONSTRAINT_FIELDS)}; got {', '.join(given)}", given[1]
        )
    if not given:
        return None, None
    try:
        return Constraint(CONSTRAINT_FIELDS[given[0]], getattr(body, given[0])), given[0]
    except ValueError as exc:
        raise invalid(str(exc), given[0], "invalid_constraint") from None


def sampling_dict(body: SamplingFields, max_new_tokens: int) -> dict[str, Any]:
    """The SamplingParams fields an OpenAI request sets (logprob fields added by callers)."""
    fields: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "top_k": body.top_k,
        "min_p": body.min_p,
        "repetition_penalty": body.repetition_penalty,
        "frequency_penalty": body.frequency_penalty,
        "presence_penalty": body.presence_penalty,
        "ignore_eos": body.ignore_eos,
        "no_stop_trim": body.no_stop_trim,
        "skip_special_tokens": body.skip_special_tokens,
        "seed": body.seed,
        "min_new_tokens": body.min_tokens,
        "temperature": 1.0 if body.temperature is None else body.temperature,
        "top_p": 1.0 if body.top_p is None else body.top_p,
    }
    if body.stop is not None:
        fields["stop"] = [body.stop] if isinstance(body.stop, str) else body.stop
    if body.stop_token_ids is not None:
        fields["stop_token_ids"] = body.stop_token_ids
    if body.stop_regex is not None:
        fields["stop_regex"] = body.stop_regex
    return fields


def usage(states: list[ReqState], n: int) -> dict[str, Any]:
    """Prompt and cached tokens counted once per prompt (the first sample's: its copies read
    the prompt's KV that sample wrote), completion tokens summed over all samples."""
    prompt = sum(s.prompt_tokens for s in states[::n])
    cached = sum(min(s.cached_tokens, s.prompt_tokens) for s in states[::n])
    completion = sum(s.completion_tokens for s in states)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def response_metadata(states: list[ReqState]) -> dict[str, Any]:
    """SGLang's `metadata` of a non-streamed response: the weight version of its first choice."""
    return {"weight_version": states[0].weight_version if states else None}


def finish_reason(state: ReqState) -> str | None:
    """OpenAI's finish_reason (None while running). An aborted request has none: it raises
    its error (a response of its own, or an error event in a stream)."""
    if state.finish is None:
        return None
    if state.finish.get("type") == "abort":
        raise abort_error(state.finish.get("message") or "the request was aborted")
    return state.finish["type"]


def abort_error(message: str) -> APIError:
    """Why a request was aborted, as an error: a constraint that did not compile or a request
    the KV pool cannot hold is the client's (400), a grammar failure while decoding is ours."""
    if message.startswith(CONSTRAINT_ERROR):
        return invalid(message, None, "invalid_constraint")
    if message.startswith("internal error"):
        return APIError(500, message, code="internal_error", type="server_error")
    return APIError(400, message, code="request_aborted")

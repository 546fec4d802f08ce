"""The OpenAI backend's wire format: native sampling fields to OpenAI's (and vLLM's extra
ones), and OpenAI answers back to the native result shape the interpreter reads."""

from __future__ import annotations

import json
from typing import Any, Iterator

from radixgen.frontend_lang.backend import BackendError

# native name -> OpenAI-compatible name (vLLM's for the fields OpenAI lacks)
FIELD_NAMES = {
    "max_new_tokens": "max_tokens",
    "min_new_tokens": "min_tokens",
    "stop": "stop",
    "stop_token_ids": "stop_token_ids",
    "stop_regex": "stop_regex",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "seed": "seed",
    "ignore_eos": "ignore_eos",
    "regex": "guided_regex",
    "json_schema": "guided_json",
    "ebnf": "guided_grammar",
    "choices": "guided_choice",
}


def _sampling(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in params.items():
        if key not in FIELD_NAMES:
            raise BackendError(
                f"the OpenAI backend cannot send {key!r}: OpenAI-compatible APIs have no such field"
            )
        out[FIELD_NAMES[key]] = (
            json.loads(value) if key == "json_schema" and isinstance(value, str) else value
        )
    return out


def _refuse_text_in_logprobs(request: dict[str, Any]) -> None:
    unknown = set(request) - {
        "return_logprob",
        "top_logprobs_num",
        "logprob_start_len",
        "return_text_in_logprobs",
    }
    if unknown:
        raise BackendError(f"the OpenAI backend cannot send {', '.join(sorted(unknown))}")
    if request.get("logprob_start_len") not in (None, -1):
        raise BackendError(
            "logprob_start_len (prompt logprobs) has no OpenAI chat/completions field"
        )


def completion_fields(params: dict[str, Any], request: dict[str, Any] | None) -> dict[str, Any]:
    out = _sampling(params)
    request = request or {}
    _refuse_text_in_logprobs(request)
    if request.get("return_logprob") or request.get("top_logprobs_num"):
        out["logprobs"] = int(request.get("top_logprobs_num") or 0)
    return out


def chat_fields(params: dict[str, Any], request: dict[str, Any] | None) -> dict[str, Any]:
    out = _sampling(params)
    request = request or {}
    _refuse_text_in_logprobs(request)
    if request.get("return_logprob") or request.get("top_logprobs_num"):
        out["logprobs"] = True
        if request.get("top_logprobs_num"):
            out["top_logprobs"] = int(request["top_logprobs_num"])
    return out


def _meta(usage: dict[str, Any] | None, finish: Any, share: int = 1) -> dict[str, Any]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "prompt_tokens": int(usage.get("prompt_tokens") or 0) // share,
        "completion_tokens": int(usage.get("completion_tokens") or 0) // share,
        "cached_tokens": int(cached) // share,
        "finish_reason": {"type": finish} if finish else None,
    }


def _completion_logprobs(logprobs: dict[str, Any] | None) -> list[list[Any]] | None:
    """OpenAI's `{tokens, token_logprobs}` as native `[logprob, token_id, token_text]` (no ids)."""
    if not logprobs:
        return None
    return [
        [lp, None, tok]
        for lp, tok in zip(logprobs.get("token_logprobs") or [], logprobs.get("tokens") or [])
    ]


def _chat_logprobs(logprobs: dict[str, Any] | None) -> list[list[Any]] | None:
    if not logprobs or logprobs.get("content") is None:
        return None
    return [[e.get("logprob"), None, e.get("token")] for e in logprobs["content"]]


def _result(text: str, meta: dict[str, Any], logprobs: list[list[Any]] | None) -> dict[str, Any]:
    if logprobs is not None:
        meta = {**meta, "output_token_logprobs": logprobs}
    return {"text": text or "", "output_ids": [], "meta_info": meta}


def completion_results(answer: dict[str, Any], n: int) -> list[dict[str, Any]]:
    choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise BackendError(f"the server answered {len(choices)} choices for {n} prompts")
    return [
        _result(
            c.get("text", ""),
            _meta(answer.get("usage"), c.get("finish_reason"), n),
            _completion_logprobs(c.get("logprobs")),
        )
        for c in choices
    ]


def chat_results(answer: dict[str, Any], n: int) -> list[dict[str, Any]]:
    choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise BackendError(f"the server answered {len(choices)} choices for n={n}")
    return [
        _result(
            (c.get("message") or {}).get("content") or "",
            _meta(answer.get("usage"), c.get("finish_reason"), n),
            _chat_logprobs(c.get("logprobs")),
        )
        for c in choices
    ]


def stream_results(
    chunks: Iterator[dict[str, Any]], chat: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(delta, result) per chunk: the text cumulative, the logprobs the chunk's own; a last
    result carries the usage once the server sends it."""
    text, finish = "", None
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = (
                (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            ) or ""
            finish = choice.get("finish_reason") or finish
            lps = (
                _chat_logprobs(choice.get("logprobs"))
                if chat
                else _completion_logprobs(choice.get("logprobs"))
            )
            text += delta
            yield delta, _result(text, _meta(None, finish), lps)
        if chunk.get("usage"):
            yield "", _result(text, _meta(chunk["usage"], finish), None)


def echo_tails(answer: dict[str, Any], start: int, n: int) -> list[list[list[Any]]]:
    """Per prompt of an echo answer, the `[logprob, None, token]` entries of the tokens that
    end after character `start` (the choice's tokens, a token across the boundary included)."""
    choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise BackendError(f"the server answered {len(choices)} choices for {n} prompts")
    tails = []
    for choice in choices:
        lp = choice.get("logprobs") or {}
        tokens, logprobs, offsets = (
            lp.get("tokens"),
            lp.get("token_logprobs"),
            lp.get("text_offset"),
        )
        if not tokens or logprobs is None or offsets is None:
            raise BackendError(
                "the server echoed no prompt logprobs (tokens, token_logprobs, text_offset)", 400
            )
        tails.append(
            [
                [float(p), None, t]
                for t, p, o in zip(tokens, logprobs, offsets)
                if p is not None and o + len(t) > start
            ]
        )
    return tails

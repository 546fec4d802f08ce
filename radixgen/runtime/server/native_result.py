"""/generate answers in SGLang's shape: `text`, `output_ids` and `meta_info` (counts, SGLang's
finish_reason, logprob entries as [logprob, token_id] or, with return_text_in_logprobs,
[logprob, token_id, token_text]). Streamed chunks carry the cumulative text and ids, and only
their own new output logprobs (what SGLang streams); prompt logprobs, complete once the
prefill is done, ride on every chunk, so a client reading the last chunk's meta_info has them."""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from radixgen.runtime.server.http_common import finite
from radixgen.runtime.server.request_group import ReqState, RequestGroup


class LogprobFormat:
    """SGLang's logprob entries; JSON has no -inf, so impossible tokens show -9999."""

    def __init__(self, with_text: bool, token_text: Callable[[int], str]):
        self.with_text, self.token_text = with_text, token_text

    def entry(self, logprob: float | None, token_id: int) -> list[Any]:
        value = None if logprob is None else finite(logprob)
        return [value, token_id, self.token_text(token_id)] if self.with_text else [value, token_id]

    def entries(self, logprobs: list[float | None], token_ids: list[int]) -> list[list[Any]]:
        return [self.entry(lp, t) for lp, t in zip(logprobs, token_ids)]

    def tops(self, tops: list[Any]) -> list[list[list[Any]] | None]:
        """Per position, its top tokens ((token_id, logprob) pairs) as entries; None stays None."""
        return [None if top is None else [self.entry(lp, t) for t, lp in top] for top in tops]


def sglang_finish_reason(
    finish: dict[str, Any] | None, completion_tokens: int
) -> dict[str, Any] | None:
    """SGLang's finish_reason: a length finish carries `length` (the tokens generated)."""
    if finish is None or finish.get("type") != "length":
        return finish
    return {**finish, "length": completion_tokens}


def native_result(s: ReqState, fmt: LogprobFormat, output_from: int = 0) -> dict[str, Any]:
    """One request's answer; output logprobs from the `output_from`-th token on."""
    meta: dict[str, Any] = {
        "id": s.rid,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "cached_tokens": s.cached_tokens,
        "finish_reason": sglang_finish_reason(s.finish, s.completion_tokens),
        "e2e_latency": s.e2e_latency,
        **(s.spec.meta_info() if s.spec else {}),
    }
    p = s.params
    if p.return_logprob or p.top_logprobs_num:
        meta["output_token_logprobs"] = fmt.entries(
            s.logprobs[output_from:], s.output_ids[output_from:]
        )
        meta["input_token_logprobs"] = _input_entries(s, fmt)
    if p.top_logprobs_num:
        meta["output_top_logprobs"] = fmt.tops(s.top_logprobs[output_from:])
        meta["input_top_logprobs"] = (
            fmt.tops(s.input_top_logprobs or []) if p.logprob_start_len >= 0 else []
        )
    if p.logprob_start_len >= 0:
        meta["logprob_start_len"] = (
            p.logprob_start_len
        )  # where the entries begin (a common-prefix batch's start)
    return {"text": s.text, "output_ids": list(s.output_ids), "meta_info": meta}


def _input_entries(s: ReqState, fmt: LogprobFormat) -> list[list[Any]]:
    """Prompt logprobs from logprob_start_len on (the first prompt token has none: None);
    none without a start (SGLang's default of output logprobs only)."""
    start = s.params.logprob_start_len
    if start < 0 or s.input_logprobs is None:
        return []
    return fmt.entries(s.input_logprobs, s.input_ids[start:])


async def stream_chunks(
    group: RequestGroup, fmt: LogprobFormat, with_index: bool
) -> AsyncIterator[dict[str, Any]]:
    """One chunk per scheduler output of any request of the group."""
    sent: dict[str, int] = {}  # rid -> output logprobs already streamed
    async for state, _ in group:
        chunk = native_result(state, fmt, sent.get(state.rid, 0))
        sent[state.rid] = len(state.logprobs)
        if with_index:
            chunk["index"] = state.index
        yield chunk

"""One request's answer in SGLang's native shape, `{"text", "output_ids", "meta_info"}`, as the
server's `/generate` and the offline `Engine` both return it.

`meta_info` holds the counts, SGLang's `finish_reason` dict and, when asked for, the logprob
entries: `(logprob, token_id, token_text)` tuples where `token_text` is None unless
`return_text_in_logprobs` (SGLang's tuples; JSON sends them as lists)."""

from __future__ import annotations

import math
from typing import Any, Callable, Protocol

from radixgen.core import SamplingParams


def finite(value: float) -> float:
    """JSON has no -inf: clamp impossible-token logprobs."""
    return value if math.isfinite(value) else -9999.0


class LogprobFormat:
    """SGLang's logprob entries; impossible tokens show -9999 (see `finite`)."""

    def __init__(self, with_text: bool, token_text: Callable[[int], str]):
        self.with_text, self.token_text = with_text, token_text

    def entry(self, logprob: float | None, token_id: int) -> tuple[float | None, int, str | None]:
        value = None if logprob is None else finite(logprob)
        return value, token_id, self.token_text(token_id) if self.with_text else None

    def entries(self, logprobs: list[float | None], token_ids: list[int]) -> list[tuple[Any, ...]]:
        return [self.entry(lp, t) for lp, t in zip(logprobs, token_ids)]

    def tops(self, tops: list[Any]) -> list[list[tuple[Any, ...]] | None]:
        """Per position, its top tokens ((token_id, logprob) pairs) as entries; None stays None."""
        return [None if top is None else [self.entry(lp, t) for t, lp in top] for top in tops]


class RequestOutput(Protocol):
    """What a request produced so far (the server's ReqState, the Engine's pending request)."""

    rid: str
    params: SamplingParams
    input_ids: list[int]
    text: str
    output_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    input_logprobs: list[float | None] | None  # from params.logprob_start_len on
    input_top_logprobs: list[list[tuple[int, float]] | None] | None
    finish: dict[str, Any] | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    e2e_latency: float
    spec: Any  # SpecCounts | None
    weight_version: str | None  # the weight version that produced it


def sglang_finish_reason(
    finish: dict[str, Any] | None, completion_tokens: int
) -> dict[str, Any] | None:
    """SGLang's finish_reason: a length finish carries `length` (the tokens generated)."""
    if finish is None or finish.get("type") != "length":
        return finish
    return {**finish, "length": completion_tokens}


def native_result(s: RequestOutput, fmt: LogprobFormat, output_from: int = 0) -> dict[str, Any]:
    """One request's answer; output logprobs from the `output_from`-th token on."""
    meta: dict[str, Any] = {
        "id": s.rid,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "cached_tokens": s.cached_tokens,
        "finish_reason": sglang_finish_reason(s.finish, s.completion_tokens),
        "e2e_latency": s.e2e_latency,
        "weight_version": s.weight_version,
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
        with_start = p.logprob_start_len >= 0
        meta["input_top_logprobs"] = fmt.tops(s.input_top_logprobs or []) if with_start else []
    if p.logprob_start_len >= 0:
        # where the entries begin (a common-prefix batch's start)
        meta["logprob_start_len"] = p.logprob_start_len
    return {"text": s.text, "output_ids": list(s.output_ids), "meta_info": meta}


def _input_entries(s: RequestOutput, fmt: LogprobFormat) -> list[tuple[Any, ...]]:
    """Prompt logprobs from logprob_start_len on (the first prompt token has none: None);
    none without a start (SGLang's default of output logprobs only)."""
    start = s.params.logprob_start_len
    if start < 0 or s.input_logprobs is None:
        return []
    return fmt.entries(s.input_logprobs, s.input_ids[start:])

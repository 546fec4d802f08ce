"""Typed messages between the frontend (Engine or TokenizerManager) and the scheduler.
Small msgspec structs: one family per direction, never pickled live objects."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from radixgen.core import SamplingParams


class GenerateReq(msgspec.Struct, frozen=True, tag=True):
    rid: str
    input_ids: list[int]
    params: SamplingParams
    namespace: str | None = None


class AbortReq(msgspec.Struct, frozen=True, tag=True):
    rid: str


class FlushCacheReq(msgspec.Struct, frozen=True, tag=True):
    pass


ToScheduler = Union[GenerateReq, AbortReq, FlushCacheReq]


class TokenOut(msgspec.Struct, frozen=True):
    """New tokens of one request since its last TokenOut; `finish` set on the last one."""

    rid: str
    token_ids: list[int]
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    finish: dict[str, Any] | None = None
    logprobs: list[float] | None = None
    top_logprobs: list[list[tuple[int, float]]] | None = None

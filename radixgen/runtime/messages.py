"""Typed messages between the frontend (Engine or TokenizerManager) and the scheduler.
Small msgspec structs: one family per direction, never pickled live objects."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from radixgen.core import Constraint, SamplingParams


class GenerateReq(msgspec.Struct, frozen=True, tag=True):
    rid: str
    input_ids: list[int]
    params: SamplingParams
    adapter: str | None = None  # the LoRA adapter's cache key (None: the base model)


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
    # prompt-token logprobs from logprob_start_len on (None where there is none), sent once
    input_logprobs: list[float | None] | None = None
    input_top_logprobs: list[list[tuple[int, float]] | None] | None = None  # the same positions
    spec: "SpecCounts | None" = None  # speculative decoding, on the finishing message
    times: "ReqTimes | None" = None  # once, on the first message after the prompt's prefill
    weight_version: str | None = None  # the version every token of the request comes from


class ReqTimes(msgspec.Struct, frozen=True):
    """When the scheduler received a request, admitted it into a batch (its first prefill
    chunk) and finished its prefill forward. Unix seconds (`time.time()`), so the main process
    can place them beside its own clock on the same host."""

    received: float
    admitted: float
    prefilled: float


class SpecCounts(msgspec.Struct, frozen=True):
    """One request's speculative decoding: verify steps, drafts accepted, drafts the grammar cut."""

    verify_ct: int
    accepted: int
    pruned: int

    def meta_info(self) -> dict[str, Any]:
        """SGLang-style meta_info keys; accept length = tokens emitted per verify step."""
        if not self.verify_ct:
            return {}
        return {
            "spec_verify_ct": self.verify_ct,
            "spec_accept_length": round((self.accepted + self.verify_ct) / self.verify_ct, 4),
            "spec_draft_tokens_pruned": self.pruned,
        }


# ---- server mode: the scheduler process's wider input ---------------------------------------
class GetInfoReq(msgspec.Struct, frozen=True, tag=True):
    """Ask the scheduler process for its cache and queue statistics (answered by InfoResp)."""


class CompileReq(msgspec.Struct, frozen=True, tag=True):
    """Start compiling a constraint a request being checked at the HTTP edge will need, so the
    scheduler's compile runs while the edge checks it (no answer; a failed compile is cached
    like any other, and the request, if it comes, fails the edge's check first)."""

    constraint: Constraint


class WeightsReq(msgspec.Struct, frozen=True, tag=True):
    """A weight-version operation (answered by WeightsResp with the same op_id): `update` from a
    folder (`model_path`) or from safetensors bytes (`tensors`), `rollback`, `release` (the
    standby version), `pause` (`abort`: finish the requests in flight with abort), `resume`,
    or a LoRA adapter's `load_lora` / `unload_lora`."""

    op_id: str
    op: str
    model_path: str | None = None
    load_format: str = "auto"
    version: str | None = None
    tensors: bytes | None = None
    abort: bool = False
    lora_name: str | None = None  # `load_lora` / `unload_lora`: the adapter's name
    lora_path: str | None = None  # `load_lora`: its PEFT folder
    pinned: bool = False  # `load_lora`: never evicted from the adapter pool


ToSchedulerProcess = Union[GenerateReq, AbortReq, FlushCacheReq, GetInfoReq, CompileReq, WeightsReq]


# ---- scheduler process -> detokenizer process -----------------------------------------------
class DetokRegister(msgspec.Struct, frozen=True, tag=True):
    """A new request: sent before any of its TokenOut, on the same socket (so in order)."""

    rid: str
    params: SamplingParams


class TokenBatch(msgspec.Struct, frozen=True, tag=True):
    outs: list[TokenOut]


ToDetokenizer = Union[DetokRegister, TokenBatch]


# ---- detokenizer / scheduler process -> main process ----------------------------------------
class TextOut(msgspec.Struct, frozen=True):
    """A TokenOut with its text delta (stop strings trimmed, never a partial character)."""

    rid: str
    text: str
    token_ids: list[int]
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    finish: dict[str, Any] | None = None
    logprobs: list[float] | None = None
    top_logprobs: list[list[tuple[int, float]]] | None = None
    input_logprobs: list[float | None] | None = None
    input_top_logprobs: list[list[tuple[int, float]] | None] | None = None
    spec: SpecCounts | None = None
    times: ReqTimes | None = None
    weight_version: str | None = None


class TextBatch(msgspec.Struct, frozen=True, tag=True):
    outs: list[TextOut]


class SchedulerReady(msgspec.Struct, frozen=True, tag=True):
    """The model is loaded: the limits the main process validates requests against."""

    max_context_len: int
    num_slots: int
    vocab_size: int
    weight_version: str = "default"
    lora_adapters: list[dict[str, Any]] | None = None  # None: LoRA not enabled


class SchedulerFailed(msgspec.Struct, frozen=True, tag=True):
    """The scheduler process could not start (e.g. the model failed to load)."""

    error: str


class FlushCacheResp(msgspec.Struct, frozen=True, tag=True):
    ok: bool


class InfoResp(msgspec.Struct, frozen=True, tag=True):
    stats: dict[str, Any]


class WeightsResp(msgspec.Struct, frozen=True, tag=True):
    """The answer to WeightsReq `op_id`: `result` on success, else an HTTP status, an error
    code, a message and, for a failed validation, the check's name."""

    op_id: str
    result: dict[str, Any] | None = None
    status: int = 200
    code: str | None = None
    message: str | None = None
    check: str | None = None


ToFrontend = Union[
    TextBatch, SchedulerReady, SchedulerFailed, FlushCacheResp, InfoResp, WeightsResp
]

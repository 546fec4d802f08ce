"""SGLang's /generate request fields mapped onto radixgen's: per-prompt logprob fields (a value
or a list, as SGLang takes them), the sampling dict (`n`, `sampling_seed`, None meaning the
default), and the fields that cannot be honoured here, each refused with a 400 naming it and
why (never silently dropped)."""

from __future__ import annotations

import os
from typing import Any

from radixgen.core import SamplingParams
from radixgen.runtime.messages import SchedulerReady
from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import make_params, n_params
from radixgen.runtime.server.protocol import GenerateRequest

MAX_N = 64

UNSUPPORTED_REQUEST_FIELDS = {
    "input_embeds": "radixgen takes prompts as text or input_ids only",
    "image_data": "images need a vision model; radixgen serves text-only models",
    "video_data": "videos need a vision model; radixgen serves text-only models",
    "audio_data": "audio needs an audio model; radixgen serves text-only models",
    "modalities": "radixgen serves text-only models",
    "token_ids_logprob": "logprobs of chosen token ids are not supported; use top_logprobs_num",
    "return_hidden_states": "hidden states are not returned by radixgen",
    "custom_logit_processor": "custom logit processors (serialized Python code) are not run by "
    "radixgen",
    "lora_id": "name the adapter with lora_path (its name, as loaded)",
    "session_params": "radixgen keeps no sessions: send the full text (the radix cache reuses its "
    "prefix)",
    "bootstrap_host": "prefill/decode disaggregation is not supported",
    "bootstrap_port": "prefill/decode disaggregation is not supported",
    "bootstrap_room": "prefill/decode disaggregation is not supported",
    "data_parallel_rank": "radixgen runs one data-parallel rank",
    "priority": "radixgen schedules without request priorities",
    "background": "background requests are not supported: the answer comes on this connection",
    "return_bytes": "token bytes are not returned; use return_text_in_logprobs",
    "return_entropy": "token entropies are not returned",
}

UNSUPPORTED_SAMPLING_FIELDS = {
    "structural_tag": "structural_tag is not supported; use json_schema, regex or ebnf",
    "custom_params": "custom_params belong to custom logit processors, which radixgen does not run",
    "logit_bias": "logit_bias is not supported yet",
    "stream_interval": "radixgen streams every scheduler step; stream_interval cannot be set per "
    "request",
}


def refuse_unsupported(body: GenerateRequest) -> None:
    """400 for the first request field set that radixgen cannot honour."""
    for name, reason in UNSUPPORTED_REQUEST_FIELDS.items():
        if _given(getattr(body, name)):
            raise invalid(f"{name}: {reason}", name, "unsupported_field")


def native_adapters(body: GenerateRequest, num_prompts: int, n: int) -> list[str | None] | None:
    """The LoRA adapter of every request from `lora_path` (SGLang's field: one name, or one per
    prompt), each prompt's n samples on its prompt's adapter; None: the base model."""
    names = body.lora_path
    if names is None or isinstance(names, str):
        return names
    if not isinstance(names, list) or not all(x is None or isinstance(x, str) for x in names):
        raise invalid("lora_path must be an adapter name or a list of them", "lora_path")
    if len(names) != num_prompts:
        raise invalid(f"lora_path has {len(names)} names for {num_prompts} prompts", "lora_path")
    return [name for name in names for _ in range(n)]


def native_specs(
    body: GenerateRequest, prompts: list[list[int]], single: bool, limits: SchedulerReady
) -> list[tuple[list[int], SamplingParams]]:
    """(prompt, params) of every request: each prompt's `n` samples in a row."""
    count = len(prompts)
    raw = body.sampling_params
    if isinstance(raw, list) and len(raw) != count:
        raise invalid(f"{len(raw)} sampling_params for {count} prompts", "sampling_params")
    dicts = raw if isinstance(raw, list) else [raw or {}] * count
    return_logprob = _per_prompt(body.return_logprob, count, "return_logprob")
    top_num = _per_prompt(body.top_logprobs_num, count, "top_logprobs_num")
    starts = _logprob_starts(body, prompts, single, return_logprob)
    specs = []
    for ids, d, want, top, start in zip(prompts, dicts, return_logprob, top_num, starts):
        fields, n = sampling_fields(d)
        if fields.get("max_new_tokens", 0) is None:  # SGLang: up to the context
            fields["max_new_tokens"] = max(limits.max_context_len - len(ids), 0)
        _check_top_level(start, top)
        fields.update(_logprob_fields(bool(want), int(top or 0), int(start)))
        params = n_params(fields, n, "sampling_params")
        _check_token_ids(params[0], limits.vocab_size)
        specs += [(ids, p) for p in params]
    return specs


def sampling_fields(raw: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """SGLang's sampling_params -> (SamplingParams fields, n samples). None means the field's
    default, as SGLang reads it (its client sends unset fields as null)."""
    fields = {k: v for k, v in raw.items() if v is not None or k == "max_new_tokens"}
    for name, reason in UNSUPPORTED_SAMPLING_FIELDS.items():
        if _given(fields.pop(name, None)):
            raise invalid(reason, f"sampling_params.{name}", "unsupported_field")
    if "sampling_seed" in fields:
        fields["seed"] = fields.pop("sampling_seed")
    n = fields.pop("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise invalid(f"n must be an integer in [1, {MAX_N}]", "sampling_params.n", "invalid_value")
    return fields, n


def _check_top_level(start: Any, top: Any) -> None:
    """The request's own logprob fields, so a bad one is named (not its sampling_params)."""
    if start is not None and start != -1:
        make_params({"logprob_start_len": start}, "logprob_start_len")
    if top:
        make_params({"top_logprobs_num": top}, "top_logprobs_num")


def _logprob_fields(want: bool, top: int, start: int) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if want:
        fields["return_logprob"] = True
        if start >= 0:
            fields["logprob_start_len"] = start
    if top:
        fields["top_logprobs_num"] = top
    return fields


def _logprob_starts(
    body: GenerateRequest, prompts: list[list[int]], single: bool, return_logprob: list[Any]
) -> list[int]:
    """Where each prompt's logprobs start: `logprob_start_len`, or with
    `logprob_start_common_prefix` the length of the longest token prefix every prompt of the
    batch shares."""
    if not body.logprob_start_common_prefix:
        return [
            -1 if s is None else s
            for s in _per_prompt(body.logprob_start_len, len(prompts), "logprob_start_len")
        ]
    param = "logprob_start_common_prefix"
    if not all(return_logprob):
        raise invalid("logprob_start_common_prefix needs return_logprob", param)
    if body.logprob_start_len not in (None, -1):
        raise invalid("give logprob_start_len or logprob_start_common_prefix, not both", param)
    if single or len(prompts) < 2:
        raise invalid("logprob_start_common_prefix needs a batch of at least two prompts", param)
    return [len(os.path.commonprefix(prompts))] * len(prompts)


def _per_prompt(value: Any, count: int, name: str) -> list[Any]:
    """A field SGLang takes as one value for the batch or a list with one per prompt."""
    if not isinstance(value, list):
        return [value] * count
    if len(value) != count:
        raise invalid(f"{name} has {len(value)} values for {count} prompts", name)
    return value


def _check_token_ids(params: SamplingParams, vocab_size: int) -> None:
    if any(t >= vocab_size for t in params.stop_token_ids):
        raise invalid(
            f"stop_token_ids must be token ids in [0, {vocab_size})",
            "sampling_params.stop_token_ids",
        )


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != {}

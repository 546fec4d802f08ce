"""SGLang's /generate fields mapped onto radixgen's: the sampling dict (`n`, `sampling_seed`,
fields that cannot be honoured here), the request fields refused with their reason, and the
`meta_info` shapes of logprobs (`return_text_in_logprobs`) and finish reasons."""

from __future__ import annotations

from typing import Any, Callable

from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import finite

MAX_N = 64

# request fields SGLang's /generate takes that radixgen cannot honour: a value other than
# "not given" is a 400 naming the field and why (never silently dropped)
UNSUPPORTED_REQUEST_FIELDS = {
    "input_embeds": "radixgen takes prompts as text or input_ids only",
    "image_data": "images need a vision model; radixgen serves text-only models",
    "video_data": "videos need a vision model; radixgen serves text-only models",
    "audio_data": "audio needs an audio model; radixgen serves text-only models",
    "modalities": "radixgen serves text-only models",
    "token_ids_logprob": "logprobs of chosen token ids are not supported; use top_logprobs_num",
    "return_hidden_states": "hidden states are not returned by radixgen",
    "custom_logit_processor": "custom logit processors (serialized Python code) are not run by radixgen",
    "lora_path": "radixgen serves no LoRA adapters",
    "lora_id": "radixgen serves no LoRA adapters",
    "session_params": "radixgen keeps no sessions: send the full text (the radix cache reuses its prefix)",
    "bootstrap_host": "prefill/decode disaggregation is not supported",
    "bootstrap_port": "prefill/decode disaggregation is not supported",
    "bootstrap_room": "prefill/decode disaggregation is not supported",
    "data_parallel_rank": "radixgen runs one data-parallel rank",
    "priority": "radixgen schedules without request priorities",
}

# sampling fields SGLang takes that cannot be honoured here (others unknown to both are 400s too)
UNSUPPORTED_SAMPLING_FIELDS = {
    "structural_tag": "structural_tag is not supported; use json_schema, regex or ebnf",
    "custom_params": "custom_params belong to custom logit processors, which radixgen does not run",
    "logit_bias": "logit_bias is not supported yet",
    "stream_interval": "radixgen streams every scheduler step; stream_interval cannot be set per request",
}

# sampling fields whose "not given" value SGLang's client sends explicitly
_NONE_MEANS_DEFAULT = ("stop", "stop_token_ids", "stop_regex", "regex", "json_schema", "ebnf",
                       "seed", "min_new_tokens")


def refuse_unsupported(body: Any) -> None:
    """400 for the first request field set that radixgen cannot honour."""
    for name, reason in UNSUPPORTED_REQUEST_FIELDS.items():
        if _given(getattr(body, name, None)):
            raise invalid(f"{name}: {reason}", name, "unsupported_field")


def sampling_fields(raw: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """SGLang's sampling_params -> (SamplingParams fields, n samples)."""
    fields = {k: v for k, v in raw.items() if not (v is None and k in _NONE_MEANS_DEFAULT)}
    for name, reason in UNSUPPORTED_SAMPLING_FIELDS.items():
        if _given(fields.pop(name, None)):
            raise invalid(reason, f"sampling_params.{name}", "unsupported_field")
    if "sampling_seed" in fields:
        seed = fields.pop("sampling_seed")
        if seed is not None:
            fields["seed"] = seed
    n = fields.pop("n", 1)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise invalid(f"n must be an integer in [1, {MAX_N}]", "sampling_params.n", "invalid_value")
    return fields, n


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != {}


class LogprobFormat:
    """SGLang's logprob entries: [logprob, token_id], or with return_text_in_logprobs
    [logprob, token_id, token_text]; JSON has no -inf, so impossible tokens show -9999."""

    def __init__(self, with_text: bool, token_text: Callable[[int], str]):
        self.with_text, self.token_text = with_text, token_text

    def entry(self, logprob: float | None, token_id: int) -> list[Any]:
        value = None if logprob is None else finite(logprob)
        return [value, token_id, self.token_text(token_id)] if self.with_text else [value, token_id]

    def entries(self, logprobs: list[float | None], token_ids: list[int]) -> list[list[Any]]:
        return [self.entry(lp, t) for lp, t in zip(logprobs, token_ids)]

    def tops(self, tops: list[list[tuple[int, float]] | None]) -> list[list[list[Any]] | None]:
        return [None if top is None else [self.entry(lp, t) for t, lp in top] for top in tops]


def sglang_finish_reason(finish: dict[str, Any] | None, completion_tokens: int) -> dict[str, Any] | None:
    """SGLang's finish_reason: a length finish carries `length` (the tokens generated)."""
    if finish is None or finish.get("type") != "length":
        return finish
    return {**finish, "length": completion_tokens}

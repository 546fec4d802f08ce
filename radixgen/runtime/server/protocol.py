"""Pydantic request models of the HTTP API. Strict types (a string where a number belongs is a
400, never coerced), unknown fields rejected (`extra="forbid"`).

Accepted but ignored, because they cannot change an output: `user`, `metadata`, `store`,
`service_tier`. Rejected with a 400 until supported: non-empty `logit_bias`, `suffix`,
`best_of` > 1, `echo` together with `logprobs`. `response_format`, `tools`, `tool_choice` and
`parallel_tool_calls`: see openai_tools.py.
Extensions (SGLang names): `top_k`, `min_p`, `repetition_penalty`, `ignore_eos`,
`stop_token_ids`, `skip_special_tokens`.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

Stop = Optional[Union[str, list[str]]]


class StrictModel(BaseModel):
    model_config = STRICT


class StreamOptions(StrictModel):
    include_usage: bool = False


class SamplingFields(StrictModel):
    """Fields the OpenAI endpoints share; each maps onto a SamplingParams field."""

    model: str
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1, le=64)
    stop: Stop = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    seed: Optional[int] = None
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    logit_bias: Optional[dict[str, float]] = None
    user: Optional[str] = None
    metadata: Optional[dict[str, Any]] = None
    store: Optional[bool] = None
    service_tier: Optional[str] = None
    # extensions
    top_k: int = Field(-1, ge=-1)
    min_p: float = Field(0.0, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    ignore_eos: bool = False
    stop_token_ids: Optional[list[int]] = None
    skip_special_tokens: bool = True


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class ChatMessage(StrictModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, list[TextPart]]] = None
    name: Optional[str] = None
    tool_call_id: Optional[str] = None
    tool_calls: Optional[list[dict[str, Any]]] = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: Optional[int] = Field(None, ge=1)
    max_completion_tokens: Optional[int] = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    response_format: Optional[dict[str, Any]] = None
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    parallel_tool_calls: Optional[bool] = None


PromptIds = list[int]


class CompletionRequest(SamplingFields):
    prompt: Union[str, list[str], PromptIds, list[PromptIds]]
    max_tokens: int = Field(16, ge=0)
    logprobs: Optional[int] = Field(None, ge=0, le=5)
    echo: bool = False
    best_of: Optional[int] = Field(None, ge=1)
    suffix: Optional[str] = None


class GenerateRequest(StrictModel):
    """Native /generate (SGLang's shape). `sampling_params` is checked by SamplingParams."""

    text: Optional[Union[str, list[str]]] = None
    input_ids: Optional[Union[PromptIds, list[PromptIds]]] = None
    sampling_params: Optional[Union[dict[str, Any], list[dict[str, Any]]]] = None
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = Field(0, ge=0, le=20)
    logprob_start_len: int = Field(-1, ge=-1)  # >= 0 with return_logprob: prompt logprobs too
    # extension: prompt logprobs of a batch from where its prompts' token ids first differ
    # (what scoring continuations of one prefix needs, without knowing its token count)
    logprob_start_common_prefix: bool = False
    rid: Optional[Union[str, list[str]]] = None


class AbortRequest(StrictModel):
    rid: str

"""Pydantic request models of the HTTP API. Strict types (a string where a number belongs is a
400, never coerced), unknown fields rejected (`extra="forbid"`).

Every integer is bounded (int32 counts, int64 seeds), so nothing a client sends can overflow
on the way to the scheduler; limits that depend on the model (vocabulary, context) are checked
by the routes.

Accepted but ignored, because they cannot change an output: `user`, `metadata`, `store`,
`service_tier`; SGLang's `separate_reasoning` and `stream_reasoning` (they act only under a
reasoning parser, which radixgen does not run, as SGLang ignores them without one) and the
/generate logging switches `log_metrics` and `no_logs` (radixgen logs no request contents and
counts every request in /metrics). sglang-router re-serializes every request with these set to
their defaults, so they must be accepted.
Rejected with a 400 until supported: non-empty `logit_bias` (its shape and ranges checked
first), `suffix`, `best_of` > 1, `echo` together with `logprobs`, image and audio content
parts. `response_format`, `tools`, `tool_choice` and `parallel_tool_calls`: see
openai_tools.py.
Extensions (SGLang names): `top_k`, `min_p`, `repetition_penalty`, `ignore_eos`,
`stop_token_ids`, `stop_regex`, `no_stop_trim`, `skip_special_tokens`, `rid`,
`continue_final_message` (chat), `return_hidden_states` (false only), vLLM's `min_tokens`, and the
constraints `regex`, `ebnf`,
`json_schema` (what the OpenAI client sends through `extra_body`); vLLM's `guided_json`,
`guided_regex`, `guided_grammar` (GBNF) and `guided_choice`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from radixgen.core import INT32_MAX, SEED_MAX, SEED_MIN

STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

Stop = Optional[Union[str, list[str]]]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
TokenId = Annotated[int, Field(ge=0, le=INT32_MAX)]  # and < the vocabulary, checked by the routes
JsonSchema = Union[str, dict[str, Any]]


class StrictModel(BaseModel):
    model_config = STRICT


class StreamOptions(StrictModel):
    include_usage: bool = False


class ConstraintFields(StrictModel):
    """Constraints as top-level fields of the OpenAI routes (at most one per request)."""

    regex: Optional[str] = None
    ebnf: Optional[str] = None
    json_schema: Optional[JsonSchema] = None
    guided_json: Optional[JsonSchema] = None
    guided_regex: Optional[str] = None
    guided_grammar: Optional[str] = None
    guided_choice: Optional[list[str]] = None


class SamplingFields(ConstraintFields):
    """Fields the OpenAI endpoints share; each maps onto a SamplingParams field."""

    model: str
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1, le=64)
    stop: Stop = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    seed: Optional[int] = Field(None, ge=SEED_MIN, le=SEED_MAX)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    logit_bias: Optional[dict[str, Annotated[float, Field(ge=-100, le=100)]]] = None
    user: Optional[str] = None
    metadata: Optional[dict[str, Any]] = None
    store: Optional[bool] = None
    service_tier: Optional[str] = None
    # extensions
    top_k: int = Field(-1, ge=-1, le=INT32_MAX)
    min_p: float = Field(0.0, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    ignore_eos: bool = False
    stop_token_ids: Optional[list[TokenId]] = None
    stop_regex: Stop = None
    min_tokens: Count = 0  # vLLM's name: no stop or EOS before this many tokens
    no_stop_trim: bool = False  # keep the matched stop string in the text
    skip_special_tokens: bool = True
    rid: Optional[str] = Field(None, min_length=1, max_length=256)
    return_hidden_states: bool = False  # true is refused: no hidden states are returned


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class MediaPart(BaseModel):
    """An image, audio or file part: parsed so its refusal names it (the models served take
    text only)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["image_url", "input_audio", "file", "image", "audio"]


class FunctionCall(StrictModel):
    name: str = Field(min_length=1)
    arguments: str  # a JSON object as text, as OpenAI returned it


class ToolCall(StrictModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(StrictModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, list[Union[TextPart, MediaPart]]]] = None
    name: Optional[str] = None
    tool_call_id: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: Optional[int] = Field(None, ge=1, le=INT32_MAX)
    max_completion_tokens: Optional[int] = Field(None, ge=1, le=INT32_MAX)
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    response_format: Optional[dict[str, Any]] = None
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    parallel_tool_calls: Optional[bool] = None
    # the last (assistant) message is continued instead of a new assistant turn opened
    continue_final_message: bool = False
    separate_reasoning: bool = True
    stream_reasoning: bool = True


PromptIds = list[int]  # each checked against the vocabulary by the routes


class CompletionRequest(SamplingFields):
    prompt: Union[str, list[str], PromptIds, list[PromptIds]]
    max_tokens: int = Field(16, ge=0, le=INT32_MAX)
    logprobs: Optional[int] = Field(None, ge=0, le=5)
    echo: bool = False
    best_of: Optional[int] = Field(None, ge=1, le=INT32_MAX)
    suffix: Optional[str] = None


TopLogprobsNum = Annotated[int, Field(ge=0, le=20)]
LogprobStart = Annotated[int, Field(ge=-1, le=INT32_MAX)]


class GenerateRequest(StrictModel):
    """Native /generate (SGLang's shape). `sampling_params` is checked by SamplingParams (see
    native_fields.py); the logprob fields take one value or a list with one per prompt."""

    text: Optional[Union[str, list[str]]] = None
    input_ids: Optional[Union[PromptIds, list[PromptIds]]] = None
    sampling_params: Optional[Union[dict[str, Any], list[dict[str, Any]]]] = None
    stream: bool = False
    return_logprob: Optional[Union[bool, list[bool]]] = None
    top_logprobs_num: Optional[Union[TopLogprobsNum, list[TopLogprobsNum]]] = None
    # >= 0 with return_logprob: prompt logprobs too; -1 (the default): output logprobs only
    logprob_start_len: Optional[Union[LogprobStart, list[LogprobStart]]] = None
    return_text_in_logprobs: bool = False  # entries [logprob, token_id, token_text]
    # extension: prompt logprobs of a batch from where its prompts' token ids first differ
    # (what scoring continuations of one prefix needs, without knowing its token count)
    logprob_start_common_prefix: bool = False
    rid: Optional[Union[str, list[str]]] = None
    model: Optional[str] = None  # when given, the served model's name (or path), else a 404
    log_metrics: bool = True
    no_logs: bool = False
    # the LoRA adapter's name (SGLang's field), or one per prompt (None: the base model)
    lora_path: Optional[Union[str, list[Optional[str]]]] = None
    # SGLang fields radixgen cannot honour: parsed so that the 400 names them (native_fields.py)
    input_embeds: Any = None
    image_data: Any = None
    video_data: Any = None
    audio_data: Any = None
    modalities: Any = None
    token_ids_logprob: Any = None
    return_hidden_states: Any = None
    custom_logit_processor: Any = None
    lora_id: Any = None
    session_params: Any = None
    bootstrap_host: Any = None
    bootstrap_port: Any = None
    bootstrap_room: Any = None
    data_parallel_rank: Any = None
    priority: Any = None
    background: Any = None
    return_bytes: Any = None
    return_entropy: Any = None


class AbortRequest(StrictModel):
    rid: str


class UpdateWeightsFromDiskRequest(StrictModel):
    """SGLang's body; `version` is accepted as another name of `weight_version`. `flush_cache`
    is accepted and has no effect: KV of each version stays in its own namespace."""

    model_path: str
    load_format: Optional[Literal["auto", "safetensors", "dummy"]] = None
    weight_version: Optional[str] = Field(None, min_length=1, max_length=128)
    version: Optional[str] = Field(None, min_length=1, max_length=128)
    abort_all_requests: bool = False
    flush_cache: bool = True


class UpdateWeightsFromTensorRequest(StrictModel):
    """SGLang's shape, with one entry per tensor-parallel rank (one here): base64 of a
    safetensors file holding every weight by its HF name (never a pickle)."""

    serialized_named_tensors: list[str] = Field(min_length=1, max_length=1)
    load_format: Optional[str] = None
    weight_version: Optional[str] = Field(None, min_length=1, max_length=128)
    abort_all_requests: bool = False
    flush_cache: bool = True


class PauseGenerationRequest(StrictModel):
    """`abort`: requests in flight finish with abort (SGLang's default); `in_place`: they keep
    their state and go on after /continue_generation."""

    mode: Literal["abort", "in_place"] = "abort"


class LoadLoraAdapterRequest(StrictModel):
    """SGLang's body: an adapter's name and its PEFT folder; `pinned`: never evicted from the
    adapter pool."""

    lora_name: str = Field(min_length=1, max_length=256)
    lora_path: str = Field(min_length=1)
    pinned: bool = False


class UnloadLoraAdapterRequest(StrictModel):
    lora_name: str = Field(min_length=1, max_length=256)


BODY_MODELS = (
    ChatCompletionRequest,
    CompletionRequest,
    GenerateRequest,
    AbortRequest,
    UpdateWeightsFromDiskRequest,
    UpdateWeightsFromTensorRequest,
    PauseGenerationRequest,
    LoadLoraAdapterRequest,
    UnloadLoraAdapterRequest,
)

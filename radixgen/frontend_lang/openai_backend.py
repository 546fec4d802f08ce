"""`OpenAI`: programs against any OpenAI-compatible server (OpenAI, vLLM, radixgen's own
`/v1`), over plain HTTP. Chat models get `/chat/completions` with the program's messages
(a gen must open an assistant message unless the program speculates, see
api_speculation.py); other models get `/completions` with the program's text.

Constraints go out as vLLM's fields (`guided_regex`, `guided_json`, `guided_grammar`,
`guided_choice`), which radixgen and vLLM serve and a hosted API refuses with its own 400.
`select` scores the choices from prompt logprobs (`echo` with `logprobs`, character offsets
marking where each choice starts) where the server gives them, else decodes one choice
under `guided_choice`; see openai_wire.py for the field mapping."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Iterator

import httpx

from radixgen.frontend_lang import openai_wire as wire
from radixgen.frontend_lang.backend import Backend, BackendError, SelectResult
from radixgen.frontend_lang.chat_template import ChatTemplate, resolve_template, template_for_name
from radixgen.frontend_lang.endpoint import _error_of, _sse_payloads

DEFAULT_BASE_URL = "https://api.openai.com/v1"
INSTRUCT_MODEL_NAMES = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")


@dataclass
class TokenUsage:
    """Tokens billed so far (from each answer's `usage`); `reset()` starts again."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def reset(self) -> None:
        self.prompt_tokens = self.completion_tokens = 0


class OpenAI(Backend):
    """`OpenAI(model_name, is_chat_model=None, chat_template=None, base_url=..., api_key=...)`.
    `is_chat_model` defaults to True except for OpenAI's completion-only models;
    `api_key` defaults to $OPENAI_API_KEY."""

    def __init__(
        self,
        model_name: str,
        is_chat_model: bool | None = None,
        chat_template: str | ChatTemplate | None = None,
        is_azure: bool = False,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        transport: httpx.BaseTransport | None = None,
        organization: str | None = None,
    ):
        if is_azure:
            raise ValueError(
                "is_azure: Azure OpenAI deployments are not supported; pass the deployment's "
                "OpenAI-compatible base_url instead"
            )
        self.model_name = model_name
        self.is_chat_model = (
            (model_name not in INSTRUCT_MODEL_NAMES) if is_chat_model is None else is_chat_model
        )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if organization:
            headers["OpenAI-Organization"] = organization
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self.client = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._template = (
            resolve_template({}, chat_template)
            if chat_template is not None
            else template_for_name(model_name)
        )
        self.token_usage = TokenUsage()
        self._usage_lock = threading.Lock()
        self._echo_logprobs = True  # False once the server refused echo with logprobs

    def chat_template(self) -> ChatTemplate:
        return self._template

    def get_model_name(self) -> str:
        return self.model_name

    # ---- HTTP ---------------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self.client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise BackendError(f"cannot reach {self.base_url}{path}: {exc}") from exc
        if resp.status_code >= 400:
            raise _error_of(resp.status_code, resp.text)
        answer = resp.json()
        self._count(answer.get("usage"))
        return answer

    def _count(self, usage: dict[str, Any] | None) -> None:
        if usage:
            with self._usage_lock:
                self.token_usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.token_usage.completion_tokens += int(usage.get("completion_tokens") or 0)

    def _stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            with self.client.stream("POST", path, json=body) as resp:
                if resp.status_code >= 400:
                    raise _error_of(resp.status_code, resp.read().decode(errors="replace"))
                for chunk in _sse_payloads(resp.iter_lines()):
                    self._count(chunk.get("usage"))
                    yield chunk
        except httpx.HTTPError as exc:
            raise BackendError(f"stream from {self.base_url}{path} failed: {exc}") from exc

    # ---- generation ---------------------------------------------------------------------------
    def generate(self, text, sampling_params, request=None):
        many = not isinstance(text, str)
        body = {
            "model": self.model_name,
            "prompt": text,
            **wire.completion_fields(sampling_params, request),
        }
        answer = self._post("/completions", body)
        results = wire.completion_results(answer, len(text) if many else 1)
        return results if many else results[0]

    def generate_stream(self, text, sampling_params, request=None):
        body = {
            "model": self.model_name,
            "prompt": text,
            **wire.completion_fields(sampling_params, request),
        }
        return wire.stream_results(self._stream("/completions", body), chat=False)

    def generate_chat(self, messages, sampling_params, request, n=1):
        body = {
            "model": self.model_name,
            "messages": messages,
            **wire.chat_fields(sampling_params, request),
        }
        if n > 1:
            body["n"] = n
        results = wire.chat_results(self._post("/chat/completions", body), n)
        return results if n > 1 else results[0]

    def generate_chat_stream(self, messages, sampling_params, request):
        body = {
            "model": self.model_name,
            "messages": messages,
            **wire.chat_fields(sampling_params, request),
        }
        return wire.stream_results(self._stream("/chat/completions", body), chat=True)

    def cache_prefix(self, text: str) -> dict[str, Any]:
        """OpenAI-compatible servers cache prefixes by themselves: nothing to send."""
        return {"prompt_tokens": 0, "cached_tokens": 0}

    def select(self, text: str, choices: list[str], unconditional: bool = False) -> SelectResult:
        if self.is_chat_model:
            raise BackendError(
                "select on a chat model: chat APIs give no prompt logprobs to score choices "
                "with; use a completion model, or gen(..., choices_method='constraint') "
                "right after assistant_begin()"
            )
        if self._echo_logprobs:
            try:
                return self._score(text, choices, unconditional)
            except BackendError as exc:
                if exc.status not in (400, 422):
                    raise
                self._echo_logprobs = False
        return self._constrained(text, choices)

    def _score(self, text: str, choices: list[str], unconditional: bool) -> SelectResult:
        body = {
            "model": self.model_name,
            "prompt": [text + c for c in choices],
            "echo": True,
            "logprobs": 0,
            "max_tokens": 0,
            "temperature": 0,
        }
        tails = wire.echo_tails(self._post("/completions", body), len(text), len(choices))
        uncond = None
        if unconditional:
            answer = self._post("/completions", {**body, "prompt": list(choices)})
            uncond = wire.echo_tails(answer, 0, len(choices))
        sums, counts = [sum(e[0] for e in t) for t in tails], [len(t) for t in tails]
        normalized = [s / c if c else s for s, c in zip(sums, counts)]
        best = max(range(len(choices)), key=lambda i: (normalized[i], -i))
        return SelectResult(choices[best], normalized, normalized, sums, counts, {}, tails, uncond)

    def _constrained(self, text: str, choices: list[str]) -> SelectResult:
        """The server decodes one of the choices (greedy, `guided_choice`): no scores."""
        result = self.generate(
            text,
            {
                "choices": list(choices),
                "temperature": 0,
                "max_new_tokens": max(len(c) for c in choices) + 1,
            },
        )
        if result["text"] not in choices:
            raise BackendError(
                f"the server gave {result['text']!r}, not one of the choices: it neither "
                "returns prompt logprobs (echo) nor honours guided_choice"
            )
        return SelectResult(
            result["text"], [], meta_info={**result["meta_info"], "constrained": True}, scored=False
        )

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"OpenAI({self.model_name!r}, base_url={self.base_url!r}, chat={self.is_chat_model})"

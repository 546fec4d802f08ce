"""`RuntimeEndpoint`: the HTTP backend, talking to a radixgen (or SGLang-shaped) server's native
`/generate`. Every request sends the full text; the server's radix cache turns the shared
part into cache hits, so no client-side session state is needed."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import httpx

from radixgen.frontend_lang import select_scoring
from radixgen.frontend_lang.backend import Backend, BackendError, SelectResult
from radixgen.frontend_lang.chat_template import ChatTemplate, resolve_template

DEFAULT_TIMEOUT_S = 600.0


class RuntimeEndpoint(Backend):
    """A running server at `base_url` (SGLang's signature; `verify` is httpx's TLS check).
    `chat_template` (or SGLang's `chat_template_name`): a registry name or a ChatTemplate
    that overrides the one derived from the server's model (see chat_template.py)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        verify: Any = None,
        chat_template_name: str | None = None,
        chat_template: str | ChatTemplate | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ):
        self.url = self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=timeout,
            verify=True if verify is None else verify,
            transport=transport,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
        self._template_override = chat_template or chat_template_name
        self._template: ChatTemplate | None = None
        self._model_info: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._common_prefix_logprobs = True  # False once the server refused the field

    # ---- plain HTTP ---------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self.client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise BackendError(f"cannot reach {self.url}{path}: {exc}") from exc
        if resp.status_code >= 400:
            raise _error_of(resp.status_code, resp.text)
        return resp.json()

    def get_model_info(self) -> dict[str, Any]:
        with self._lock:
            if self._model_info is None:
                self._model_info = self._request("GET", "/get_model_info")
            return self._model_info

    def get_model_name(self) -> str:
        """The served model's path (SGLang's answer), else its served name."""
        info = self.get_model_info()
        return str(info.get("model_path") or info.get("served_model_name") or "")

    def get_server_info(self) -> dict[str, Any]:
        return self._request("GET", "/get_server_info")

    def flush_cache(self) -> bool:
        """Empty the server's radix cache; True when it did."""
        self._request("POST", "/flush_cache")
        return True

    def chat_template(self) -> ChatTemplate:
        info = self.get_model_info()
        with self._lock:
            if self._template is None:
                self._template = resolve_template(info, self._template_override)
            return self._template

    # ---- generation ---------------------------------------------------------------------------
    def generate(
        self,
        text: str | list[str],
        sampling_params: dict[str, Any],
        request: dict[str, Any] | None = None,
    ) -> Any:
        """SGLang's body: sampling fields (`min_new_tokens`, `stop_regex`, ...) in
        sampling_params, logprob fields (`return_logprob`, `return_text_in_logprobs`, ...)
        at the top level. A server without one of them answers 400 naming it."""
        return self._request(
            "POST",
            "/generate",
            {"text": text, "sampling_params": sampling_params, **(request or {})},
        )

    def generate_stream(
        self, text: str, sampling_params: dict[str, Any], request: dict[str, Any] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        body = {"text": text, "sampling_params": sampling_params, "stream": True, **(request or {})}
        sent = ""
        try:
            with self.client.stream("POST", "/generate", json=body) as resp:
                if resp.status_code >= 400:
                    raise _error_of(resp.status_code, resp.read().decode(errors="replace"))
                for chunk in _sse_payloads(resp.iter_lines()):  # output logprobs come per chunk
                    text_so_far = chunk.get("text", "")
                    delta, sent = text_so_far[len(sent) :], text_so_far
                    yield delta, chunk
        except httpx.HTTPError as exc:
            raise BackendError(f"stream from {self.url}/generate failed: {exc}") from exc

    def cache_prefix(self, text: str) -> dict[str, Any]:
        return self.generate(text, {"max_new_tokens": 0})["meta_info"]

    def select(self, text: str, choices: list[str], unconditional: bool = False) -> SelectResult:
        """One batched prefill-only request over `[text, text + c_1, ...]` whose prompt
        logprobs start where the prompts' token ids first differ (the server's
        `logprob_start_common_prefix`), so the prefix is computed once and no extra round trip
        is needed (select_scoring.py). A server without that field (SGLang) gets SGLang's two
        requests: a pin that returns the prefix's token count, then the scoring batch."""
        result = self._select(text, choices)
        if unconditional:
            result.unconditional_token_logprobs = [
                _input_logprobs(r)
                for r in self._request(
                    "POST",
                    "/generate",
                    {
                        "text": list(choices),
                        "sampling_params": {"max_new_tokens": 0},
                        "return_logprob": True,
                        "logprob_start_len": 0,
                    },
                )
            ]
        return result

    def _select(self, text: str, choices: list[str]) -> SelectResult:
        if not text:
            return self._score(text, choices, {"logprob_start_len": 0})
        if self._common_prefix_logprobs:
            try:
                return self._score(text, choices, {"logprob_start_common_prefix": True})
            except _NoCommonPrefixStart:
                self._common_prefix_logprobs = False
            except BackendError as exc:
                if exc.status not in (400, 422) or "logprob_start_common_prefix" not in str(
                    exc.body or exc.message
                ):
                    raise
                self._common_prefix_logprobs = False
        start = select_scoring.logprob_start(self.cache_prefix(text)["prompt_tokens"])
        return self._score(text, choices, {"logprob_start_len": start})

    def _score(self, text: str, choices: list[str], start: dict[str, Any]) -> SelectResult:
        """Score the choices from one batched request; `start` says where prompt logprobs begin."""
        prompts = ([text] if text else []) + [text + c for c in choices]
        results = self._request(
            "POST",
            "/generate",
            {
                "text": prompts,
                "sampling_params": {"max_new_tokens": 0},
                "return_logprob": True,
                **start,
            },
        )
        entries = _choice_entries(results, "logprob_start_common_prefix" in start)
        prefix_entries = entries.pop(0) if text else []
        tails = select_scoring.choice_tails(prefix_entries, entries)
        sums, counts = [float(sum(e[0] for e in t)) for t in tails], [len(t) for t in tails]
        normalized = select_scoring.normalize(sums, counts)
        meta = {
            "prompt_tokens": sum(r["meta_info"]["prompt_tokens"] for r in results),
            "cached_tokens": sum(r["meta_info"]["cached_tokens"] for r in results),
        }
        return SelectResult(
            choices[select_scoring.argmax(normalized)],
            normalized,
            normalized,
            sums,
            counts,
            meta,
            tails,
        )

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"RuntimeEndpoint({self.url!r})"


class _NoCommonPrefixStart(Exception):
    """The server ignored `logprob_start_common_prefix` (its entries start elsewhere)."""


def _choice_entries(results: list[dict[str, Any]], common_prefix: bool) -> list[list[list[Any]]]:
    """Every answer's input_token_logprobs; with `common_prefix`, _NoCommonPrefixStart unless
    they start where the prompts first differ (a server may drop a field it does not know)."""
    metas = [r.get("meta_info", {}) for r in results]
    if common_prefix and any("logprob_start_len" not in m for m in metas):
        raise _NoCommonPrefixStart
    entries = [_input_logprobs(r) for r in results]
    if common_prefix and not select_scoring.starts_at_common_prefix(metas, entries):
        raise _NoCommonPrefixStart
    return entries


def _input_logprobs(result: dict[str, Any]) -> list[list[Any]]:
    entries = result.get("meta_info", {}).get("input_token_logprobs")
    if entries is None:
        raise BackendError(
            "the server returned no input_token_logprobs: select needs /generate "
            "with logprob_start_len (prompt logprobs)"
        )
    return entries


def _sse_payloads(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parsed `data:` chunks until `[DONE]`; an error chunk raises BackendError."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        chunk = json.loads(payload)
        if "error" in chunk:
            raise _error_of(None, payload)
        yield chunk


def _error_of(status: int | None, raw: str) -> BackendError:
    """The server's message out of an OpenAI-style error body (or the raw body)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return BackendError(raw.strip() or "empty error response", status)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return BackendError(str(err["message"]), status, body)
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return BackendError(body["detail"], status, body)
    return BackendError(raw.strip(), status, body)

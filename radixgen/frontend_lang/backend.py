"""What the interpreter needs from a serving runtime, and the process-wide default backend.

A backend answers in the native `/generate` result shape: `{"text", "output_ids",
"meta_info": {"prompt_tokens", "completion_tokens", "cached_tokens", "finish_reason", ...}}`.
`RuntimeEndpoint` (HTTP) is the real one; tests use a fake."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from radixgen.frontend_lang.chat_template import ChatTemplate


class BackendError(RuntimeError):
    """The server refused or failed a request; `message` is the server's own message."""

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(f"{message} (HTTP {status})" if status else message)
        self.message, self.status, self.body = message, status, body


@dataclass
class SelectResult:
    """The chosen text and, per choice, the scores the decision used."""

    choice: str
    scores: list[float]
    normalized_logprobs: list[float] = field(default_factory=list)
    unnormalized_logprobs: list[float] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)
    meta_info: dict[str, Any] = field(default_factory=dict)
    # per choice, the [logprob, token_id] entries of its scored tokens (and, when asked for,
    # of the same choice scored with no text before it)
    input_token_logprobs: list[list[list[Any]]] = field(default_factory=list)
    unconditional_token_logprobs: list[list[list[Any]]] | None = None
    scored: bool = True  # False: the backend decided by constrained decoding (no logprobs)


class Backend:
    """The operations programs compile to. Every method may be called from many threads.
    `request` holds request-level fields (`return_logprob`, `top_logprobs_num`, ...)."""

    is_chat_model = False  # True: gens go out as chat messages (generate_chat), not text

    def chat_template(self) -> ChatTemplate:
        """Role markers for the served model (fetched once)."""
        raise NotImplementedError

    def generate(
        self,
        text: str | list[str],
        sampling_params: dict[str, Any],
        request: dict[str, Any] | None = None,
    ) -> Any:
        """One native result for a string, a list of them for a list (one batched request)."""
        raise NotImplementedError

    def generate_stream(
        self, text: str, sampling_params: dict[str, Any], request: dict[str, Any] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(text delta, result) per chunk: the result's text is cumulative, its
        meta_info's logprobs are the chunk's own; the last result is the final one."""
        raise NotImplementedError

    def generate_chat(
        self,
        messages: list[dict[str, str]],
        sampling_params: dict[str, Any],
        request: dict[str, Any],
        n: int = 1,
    ) -> Any:
        """A chat backend's `generate`: the next assistant message after `messages`."""
        raise NotImplementedError(f"{type(self).__name__} is not a chat backend")

    def generate_chat_stream(
        self,
        messages: list[dict[str, str]],
        sampling_params: dict[str, Any],
        request: dict[str, Any],
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        raise NotImplementedError(f"{type(self).__name__} is not a chat backend")

    def cache_prefix(self, text: str) -> dict[str, Any]:
        """Prefill `text` without generating (max_new_tokens=0) so the radix cache holds it;
        returns its meta_info (prompt_tokens is the prefix's token count)."""
        raise NotImplementedError

    def select(self, text: str, choices: list[str], unconditional: bool = False) -> SelectResult:
        """Score every choice as a continuation of `text` (log-probabilities of its tokens);
        `unconditional`: also score each choice alone."""
        raise NotImplementedError

    def get_server_info(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} has no server info")

    def flush_cache(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} has no cache to flush")

    def close(self) -> None:
        """Release connections; the backend is unusable afterwards."""


_default_lock = threading.Lock()
_default: Backend | None = None


def as_backend(obj: Any) -> Backend:
    """A Backend, or an object that carries one as `.endpoint` (a `Runtime`)."""
    if isinstance(obj, Backend):
        return obj
    endpoint = getattr(obj, "endpoint", None)
    if isinstance(endpoint, Backend):
        return endpoint
    raise TypeError(f"not a backend: {obj!r} (use RuntimeEndpoint(url) or Runtime())")


def set_default_backend(backend: Any) -> None:
    """The backend `prog.run()` uses when none is passed (None: no default)."""
    global _default
    with _default_lock:
        _default = as_backend(backend) if backend is not None else None


def get_default_backend() -> Backend:
    with _default_lock:
        if _default is None:
            raise RuntimeError(
                "no backend: call set_default_backend(RuntimeEndpoint(url)) or pass backend="
            )
        return _default


class GlobalConfig:
    """`sgl.global_config`: SGLang's process-wide settings object; `default_backend` is the
    backend `set_default_backend` set (None before)."""

    @property
    def default_backend(self) -> Backend | None:
        with _default_lock:
            return _default

    @default_backend.setter
    def default_backend(self, backend: Any) -> None:
        set_default_backend(backend)


global_config = GlobalConfig()


def _resolve(backend: Any) -> Backend | None:
    if backend is None:
        return global_config.default_backend
    return as_backend(backend)


def flush_cache(backend: Any = None) -> bool:
    """Empty the radix cache of `backend` (default: the default backend); False with none."""
    resolved = _resolve(backend)
    return resolved.flush_cache() if resolved is not None else False


def get_server_info(backend: Any = None) -> dict[str, Any] | None:
    """The server's /get_server_info of `backend` (default: the default backend), or None."""
    resolved = _resolve(backend)
    return resolved.get_server_info() if resolved is not None else None

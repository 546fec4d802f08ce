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


class Backend:
    """The operations programs compile to. Every method may be called from many threads."""

    def chat_template(self) -> ChatTemplate:
        """Role markers for the served model (fetched once)."""
        raise NotImplementedError

    def generate(self, text: str | list[str], sampling_params: dict[str, Any]) -> Any:
        """One native result for a string, a list of them for a list (one batched request)."""
        raise NotImplementedError

    def generate_stream(self, text: str, sampling_params: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(text delta, cumulative result) per chunk; the last result is the final one."""
        raise NotImplementedError

    def cache_prefix(self, text: str) -> dict[str, Any]:
        """Prefill `text` without generating (max_new_tokens=0) so the radix cache holds it;
        returns its meta_info (prompt_tokens is the prefix's token count)."""
        raise NotImplementedError

    def select(self, text: str, choices: list[str], normalize: bool = True) -> SelectResult:
        """Score every choice as a continuation of `text` (log-probabilities of its tokens)."""
        raise NotImplementedError

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
    """The backend `prog.run()` uses when none is passed."""
    global _default
    with _default_lock:
        _default = as_backend(backend)


def get_default_backend() -> Backend:
    with _default_lock:
        if _default is None:
            raise RuntimeError("no backend: call set_default_backend(RuntimeEndpoint(url)) or pass backend=")
        return _default

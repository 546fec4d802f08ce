"""radixgen: a radix-tree structured-generation runtime.

`radixgen.Engine` is the offline engine; the `@function` DSL (`radixgen.function`, `gen`,
`select`, `RuntimeEndpoint`, ...) comes from `radixgen.frontend_lang`. Both load on first use."""

from typing import Any

from radixgen.core import FinishReason, SamplingParams

__version__ = "0.1.0"
# the frontend DSL, exported lazily (it needs no torch)
_FRONTEND = (
    "Backend",
    "BackendError",
    "ChatTemplate",
    "ForkGroup",
    "Program",
    "ProgramState",
    "Runtime",
    "RuntimeEndpoint",
    "assistant",
    "assistant_begin",
    "assistant_end",
    "function",
    "gen",
    "get_default_backend",
    "select",
    "set_default_backend",
    "system",
    "system_begin",
    "system_end",
    "user",
    "user_begin",
    "user_end",
)

__all__ = ["Engine", "FinishReason", "SamplingParams", "__version__", *_FRONTEND]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from radixgen.runtime.engine import Engine

        return Engine
    if name in _FRONTEND:
        from radixgen import frontend_lang

        return getattr(frontend_lang, name)
    raise AttributeError(f"module 'radixgen' has no attribute {name!r}")

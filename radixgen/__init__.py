"""radixgen: a radix-tree structured-generation runtime.

`radixgen.Engine` is the offline engine; heavy modules load on first use."""

from typing import Any

from radixgen.core import FinishReason, SamplingParams

__version__ = "0.1.0"
__all__ = ["Engine", "FinishReason", "SamplingParams", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from radixgen.runtime.engine import Engine

        return Engine
    raise AttributeError(f"module 'radixgen' has no attribute {name!r}")

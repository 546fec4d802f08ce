"""`separate_reasoning`: a reasoning model's thinking, split from its answer by the markers
of its model type (`<think>...</think>` unless the type names others)."""

from __future__ import annotations

from typing import Any

from radixgen.frontend_lang.primitives import Concat, Expr, Gen, Select

# model type -> (opening marker, closing marker); a model type not listed uses the default
MARKERS = {"kimi": ("◁think▷", "◁/think▷")}
DEFAULT_MARKERS = ("<think>", "</think>")


def split(text: str, model_type: str | None = None) -> tuple[str, str]:
    """(reasoning, answer). Text before the closing marker is reasoning even without the
    opening one (DeepSeek-R1 opens it in the prompt); an opening marker never closed makes
    everything reasoning (the budget ran out while thinking)."""
    begin, end = MARKERS.get((model_type or "").lower(), DEFAULT_MARKERS)
    stripped = text.lstrip()
    if end in text:
        thought, answer = text.split(end, 1)
        thought = thought.lstrip()
        return thought[len(begin) :].strip() if thought.startswith(
            begin
        ) else thought.strip(), answer.lstrip()
    if stripped.startswith(begin):
        return stripped[len(begin) :].strip(), ""
    return "", text


def generated_names(expr: Expr) -> list[str]:
    """The variables the gens and selects of `expr` fill, in order."""
    if isinstance(expr, (Gen, Select)):
        return [expr.name] if expr.name else []
    if isinstance(expr, Concat):
        return [name for part in expr.parts for name in generated_names(part)]
    return []


def reasoning_name(name: Any) -> str:
    return f"{name}_reasoning_content"

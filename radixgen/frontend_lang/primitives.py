"""The expressions a program adds to its state (`s += ...`): plain text, `gen`, `select`, the
chat roles and the markers of variable scopes. They are inert values; `interpreter.py`
executes them against a backend. The user-facing constructors live in `api.py`.

`a + b` concatenates expressions and strings in order: `assistant("Answer: " + gen("a"))`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant")


class Expr:
    """Base of every expression: supports `+` with strings and other expressions."""

    def __add__(self, other: Any) -> "Concat":
        return Concat([self, to_expr(other)])

    def __radd__(self, other: Any) -> "Concat":
        return Concat([to_expr(other), self])


@dataclass
class Text(Expr):
    text: str


@dataclass
class Concat(Expr):
    parts: list[Expr]


@dataclass
class RoleBegin(Expr):
    role: str


@dataclass
class RoleEnd(Expr):
    role: str


@dataclass
class VarScopeBegin(Expr):
    name: str


@dataclass
class VarScopeEnd(Expr):
    name: str


@dataclass
class Gen(Expr):
    """Generate text. `sampling_params` holds only the sampling arguments the caller gave;
    `request` the request-level ones (`return_logprob`, `top_logprobs_num`, ...)."""

    name: str | None
    sampling_params: dict[str, Any] = field(default_factory=dict)
    n: int | None = None  # None: the run's n (1 unless run(n=...) says otherwise)
    request: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # "int" | "float" | "str" | "bool": constrained by a regex


@dataclass
class Select(Expr):
    """Pick one choice. `method` is a ChoicesSamplingMethod, or "constraint"."""

    name: str | None
    choices: list[str]
    method: Any = None
    temperature: float = 0.0


@dataclass
class Media(Expr):
    """An image or a video: needs a vision-language model, which radixgen does not serve."""

    kind: str
    source: Any
    num_frames: int | None = None


@dataclass
class SeparateReasoning(Expr):
    """Split the reasoning out of what `expr` generated (`<think>...</think>` by default)."""

    expr: Expr | None
    model_type: str | None = None


def to_expr(value: Any) -> Expr:
    """A string becomes Text; an expression stays; anything else is a TypeError."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return Text(value)
    if value is None:
        raise ValueError("tried to add None to a program state")
    raise TypeError(
        f"cannot add a {type(value).__name__} to a program state (use str or a primitive)"
    )

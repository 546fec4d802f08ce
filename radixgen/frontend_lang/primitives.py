"""The expressions a program adds to its state (`s += ...`): plain text, `gen`, `select` and the
chat roles. They are inert values; `interpreter.py` executes them against a backend.

`a + b` concatenates expressions and strings in order: `assistant("Answer: " + gen("a"))`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

ROLES = ("system", "user", "assistant")
SELECT_METHODS = ("token_length_normalized", "unnormalized", "constraint")


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
class Gen(Expr):
    """Generate text; `sampling_params` holds only the arguments the caller gave."""

    name: str | None
    sampling_params: dict[str, Any] = field(default_factory=dict)
    n: int = 1


@dataclass
class Select(Expr):
    name: str | None
    choices: list[str]
    method: str = "token_length_normalized"


def to_expr(value: Any) -> Expr:
    """A string becomes Text; an expression stays; anything else is a TypeError."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return Text(value)
    raise TypeError(f"cannot add a {type(value).__name__} to a program state (use str or a primitive)")


def gen(name: str | None = None, max_tokens: int | None = None, stop: str | Sequence[str] | None = None,
        stop_token_ids: Sequence[int] | None = None, temperature: float | None = None,
        top_p: float | None = None, top_k: int | None = None, min_p: float | None = None,
        frequency_penalty: float | None = None, presence_penalty: float | None = None,
        regex: str | None = None, json_schema: str | dict | None = None, ebnf: str | None = None,
        lark: str | None = None, choices: Sequence[str] | None = None, n: int = 1,
        ignore_eos: bool | None = None, seed: int | None = None) -> Gen:
    """Generate into variable `name`. Constraints (regex, json_schema, ebnf, lark, choices)
    pass through as `sampling_params` keys of the same names. With n > 1 the variable holds a
    list of n completions and the first one is appended to the text."""
    if not isinstance(n, int) or n < 1:
        raise ValueError("n must be an integer >= 1")
    if isinstance(json_schema, dict):
        json_schema = json.dumps(json_schema)
    if isinstance(stop, str):
        stop = [stop]
    raw = {"max_new_tokens": max_tokens, "stop": list(stop) if stop is not None else None,
           "stop_token_ids": list(stop_token_ids) if stop_token_ids is not None else None,
           "temperature": temperature, "top_p": top_p, "top_k": top_k, "min_p": min_p,
           "frequency_penalty": frequency_penalty, "presence_penalty": presence_penalty,
           "regex": regex, "json_schema": json_schema, "ebnf": ebnf, "lark": lark,
           "choices": list(choices) if choices is not None else None,
           "ignore_eos": ignore_eos, "seed": seed}
    return Gen(name, {k: v for k, v in raw.items() if v is not None}, n)


def select(name: str | None = None, choices: Sequence[str] | None = None, temperature: float = 0.0,
           choices_method: str = "token_length_normalized") -> Select:
    """Pick one of `choices` by the log-probability of its tokens after the current text
    (`token_length_normalized`: mean over its tokens, the default; `unnormalized`: sum), or
    by constrained greedy decoding (`constraint`: needs server support for `choices`).
    The pick is deterministic: `temperature` (SGLang's positional slot) must stay 0."""
    if not choices or not all(isinstance(c, str) and c for c in choices):
        raise ValueError("select needs a non-empty list of non-empty strings")
    if choices_method not in SELECT_METHODS:
        raise ValueError(f"choices_method must be one of {', '.join(SELECT_METHODS)}")
    if temperature != 0:
        raise ValueError("select picks the most likely choice; sampling (temperature != 0) is not supported")
    return Select(name, list(choices), choices_method)


def _role(role: str, expr: Any = None) -> Expr:
    if expr is None:
        return RoleBegin(role)
    return Concat([RoleBegin(role), to_expr(expr), RoleEnd(role)])


def system(expr: Any = None) -> Expr:
    """`system("...")`: a whole system message; `system()` alone only opens it."""
    return _role("system", expr)


def user(expr: Any = None) -> Expr:
    """`user("...")`: a whole user message; `user()` alone only opens it."""
    return _role("user", expr)


def assistant(expr: Any = None) -> Expr:
    """`assistant(gen("answer"))`: a whole assistant message; `assistant()` only opens it."""
    return _role("assistant", expr)


def system_begin() -> Expr:
    return RoleBegin("system")


def system_end() -> Expr:
    return RoleEnd("system")


def user_begin() -> Expr:
    return RoleBegin("user")


def user_end() -> Expr:
    return RoleEnd("user")


def assistant_begin() -> Expr:
    return RoleBegin("assistant")


def assistant_end() -> Expr:
    return RoleEnd("assistant")

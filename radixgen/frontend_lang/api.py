"""The language's constructors, with SGLang's names, signatures and defaults: `gen` (and its
typed forms), `select`, the chat roles, `image`/`video` and `separate_reasoning`.

Typed generation (`gen_int`, `gen_string`, `gen(dtype=...)`) is a regex constraint decoded by
the server, so the value always parses as its type."""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Sequence, Union

from radixgen.frontend_lang.choices import (
    METHODS_BY_NAME,
    ChoicesSamplingMethod,
    token_length_normalized,
)
from radixgen.frontend_lang.primitives import (
    Concat,
    Expr,
    Gen,
    Media,
    RoleBegin,
    RoleEnd,
    Select,
    SeparateReasoning,
    to_expr,
)

# SGLang's public patterns (ir.py), for `gen(regex=REGEX_INT)`; they allow trailing blanks
REGEX_INT = r"[-+]?[0-9]+[ \n]*"
REGEX_FLOAT = r"[-+]?[0-9]*\.?[0-9]+[ \n]*"
REGEX_BOOL = r"(True|False)"
REGEX_STR = r"\"[\w\d\s]*\""

# what `dtype` decodes: exactly one value, nothing around it, so int()/float()/json.loads take it
DTYPE_REGEX = {
    "int": r"[-+]?[0-9]{1,18}",
    "float": r"[-+]?[0-9]{1,18}(\.[0-9]{1,18})?",
    "bool": r"(True|False)",
    "str": r'"([^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
}
_DTYPE_NAMES = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "string": "str",
}
_REQUEST_KEYS = (
    "return_logprob",
    "logprob_start_len",
    "top_logprobs_num",
    "return_text_in_logprobs",
)


def _dtype_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"dtype must be int, float, bool or str, not {dtype!r}") from None


def _choices_method(method: Any) -> Any:
    if method is None:
        return token_length_normalized
    if isinstance(method, str):
        if method == "constraint":
            return method
        if method not in METHODS_BY_NAME:
            raise ValueError(
                f"unknown choices_method {method!r}; known: {', '.join(METHODS_BY_NAME)}, constraint"
            )
        return METHODS_BY_NAME[method]
    if not callable(method):
        raise TypeError(
            "choices_method must be a ChoicesSamplingMethod (e.g. sgl.greedy_token_selection)"
        )
    return method


def _check_regex(regex: str | None) -> None:
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ValueError(f"invalid regex {regex!r}: {exc}") from None


def _as_list(value: Any) -> list | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def gen(
    name: Optional[str] = None,
    max_tokens: Optional[int] = None,
    min_tokens: Optional[int] = None,
    n: Optional[int] = None,
    stop: Optional[Union[str, Sequence[str]]] = None,
    stop_token_ids: Optional[Sequence[int]] = None,
    stop_regex: Optional[Union[str, Sequence[str]]] = None,
    temperature: Optional[float] = None,
    top_p: Optional[float] = None,
    top_k: Optional[int] = None,
    min_p: Optional[float] = None,
    frequency_penalty: Optional[float] = None,
    presence_penalty: Optional[float] = None,
    ignore_eos: Optional[bool] = None,
    return_logprob: Optional[bool] = None,
    logprob_start_len: Optional[int] = None,
    top_logprobs_num: Optional[int] = None,
    return_text_in_logprobs: Optional[bool] = None,
    dtype: Any = None,
    choices: Optional[Sequence[str]] = None,
    choices_method: Optional[ChoicesSamplingMethod] = None,
    regex: Optional[str] = None,
    json_schema: Optional[Union[str, dict]] = None,
    *,
    ebnf: Optional[str] = None,
    lark: Optional[str] = None,
    seed: Optional[int] = None,
) -> Expr:
    """Generate into variable `name` (SGLang's positional order). `choices` makes it a
    `select` (scored, see `choices_method`). With n > 1 the variable holds a list of n
    completions and the first one is appended to the text."""
    if choices:
        return select(name, choices, 0.0 if temperature is None else temperature, choices_method)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError("n must be an integer >= 1")
    _check_regex(regex)
    kind = _dtype_name(dtype)
    if kind is not None and (regex is not None or json_schema is not None or ebnf or lark):
        raise ValueError(
            "dtype is a constraint of its own: give dtype or regex/json_schema/ebnf/lark, not both"
        )
    if isinstance(json_schema, dict):
        json_schema = json.dumps(json_schema)
    raw = {
        "max_new_tokens": max_tokens,
        "min_new_tokens": min_tokens,
        "stop": _as_list(stop),
        "stop_token_ids": _as_list(stop_token_ids),
        "stop_regex": _as_list(stop_regex),
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": min_p,
        "frequency_penalty": frequency_penalty,
        "presence_penalty": presence_penalty,
        "regex": DTYPE_REGEX[kind] if kind else regex,
        "json_schema": json_schema,
        "ebnf": ebnf,
        "lark": lark,
        "ignore_eos": ignore_eos,
        "seed": seed,
    }
    request = dict(
        zip(
            _REQUEST_KEYS,
            (return_logprob, logprob_start_len, top_logprobs_num, return_text_in_logprobs),
        )
    )
    return Gen(
        name,
        {k: v for k, v in raw.items() if v is not None},
        n,
        {k: v for k, v in request.items() if v is not None},
        kind,
    )


def _typed_gen(dtype: type, name_: str, doc: str) -> Any:
    """SGLang's `gen_int` / `gen_string`: `gen`'s arguments in their order, minus the
    constraint ones, with `dtype` fixed."""

    def typed(
        name: Optional[str] = None,
        max_tokens: Optional[int] = None,
        n: Optional[int] = None,
        stop: Optional[Union[str, Sequence[str]]] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
        stop_regex: Optional[Union[str, Sequence[str]]] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        top_k: Optional[int] = None,
        min_p: Optional[float] = None,
        frequency_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        ignore_eos: Optional[bool] = None,
        return_logprob: Optional[bool] = None,
        logprob_start_len: Optional[int] = None,
        top_logprobs_num: Optional[int] = None,
        return_text_in_logprobs: Optional[bool] = None,
        min_tokens: Optional[int] = None,
    ) -> Expr:
        return gen(
            name,
            max_tokens,
            min_tokens,
            n,
            stop,
            stop_token_ids,
            stop_regex,
            temperature,
            top_p,
            top_k,
            min_p,
            frequency_penalty,
            presence_penalty,
            ignore_eos,
            return_logprob,
            logprob_start_len,
            top_logprobs_num,
            return_text_in_logprobs,
            dtype=dtype,
        )

    typed.__name__ = typed.__qualname__ = name_
    typed.__doc__ = doc
    return typed


gen_int = _typed_gen(
    int, "gen_int", "`gen(dtype=int)`: an integer, constrained by the server (`int(value)` works)."
)
gen_string = _typed_gen(
    str, "gen_string", "`gen(dtype=str)`: a double-quoted JSON string (`json.loads(value)` works)."
)


def select(
    name: Optional[str] = None,
    choices: Optional[Sequence[str]] = None,
    temperature: float = 0.0,
    choices_method: Any = token_length_normalized,
) -> Select:
    """Pick one of `choices` from the logprobs of its tokens after the current text, scored in
    one batched prefill (`choices_method`: `token_length_normalized`, the default,
    `greedy_token_selection`, `unconditional_likelihood_normalized`, or radixgen's
    "unnormalized" sum and "constraint", greedy decoding restricted to the choices). The pick
    is deterministic: `temperature` must stay 0."""
    if not choices or not all(isinstance(c, str) and c for c in choices):
        raise ValueError("select needs a non-empty list of non-empty strings")
    if temperature not in (0, None):
        raise ValueError("select picks by score; sampling (temperature != 0) is not supported")
    return Select(name, list(choices), _choices_method(choices_method), 0.0)


def image(expr: Any) -> Media:
    """An image for a vision-language model (a path, URL or base64 string). radixgen does not
    serve vision models yet: running a program that contains one raises NotImplementedError."""
    return Media("image", expr)


def video(path: str, num_frames: int) -> Media:
    """A video (`num_frames` sampled) for a vision-language model; see `image`."""
    return Media("video", path, num_frames)


def separate_reasoning(expr: Any = None, model_type: Optional[str] = None) -> Expr:
    """Run `expr` (a gen, usually), then move its reasoning (`<think>...</think>`) into the
    variable `<name>_reasoning_content`; the variable and the text keep the rest."""
    inner = to_expr(expr) if expr is not None else None
    return SeparateReasoning(inner, model_type)


def role_message(role: str, expr: Any = None) -> Expr:
    if expr is None:
        return Concat([RoleBegin(role), RoleEnd(role)])
    return Concat([RoleBegin(role), to_expr(expr), RoleEnd(role)])


def system(expr: Any = None) -> Expr:
    """`system("...")`: a whole system message (`system()`: an empty one)."""
    return role_message("system", expr)


def user(expr: Any = None) -> Expr:
    """`user("...")`: a whole user message (`user()`: an empty one)."""
    return role_message("user", expr)


def assistant(expr: Any = None) -> Expr:
    """`assistant(gen("answer"))`: a whole assistant message (`assistant()`: an empty one)."""
    return role_message("assistant", expr)


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

"""Executes one expression against a state (on the state's worker thread): text and role
markers are appended locally; `gen` and `select` become backend requests that carry the
full text, so the server's radix cache supplies every prefix it has seen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from radixgen.frontend_lang.primitives import Concat, Expr, Gen, RoleBegin, RoleEnd, Select, Text

if TYPE_CHECKING:
    from radixgen.frontend_lang.state import ProgramState


def execute(state: "ProgramState", expr: Expr) -> None:
    """Run `expr`; mutates the state's text, variables, meta info and messages."""
    if isinstance(expr, Text):
        state.append(expr.text)
    elif isinstance(expr, Concat):
        for part in expr.parts:
            execute(state, part)
    elif isinstance(expr, RoleBegin):
        _role_begin(state, expr.role)
    elif isinstance(expr, RoleEnd):
        _role_end(state, expr.role)
    elif isinstance(expr, Gen):
        _gen(state, expr)
    elif isinstance(expr, Select):
        _select(state, expr)
    else:
        raise TypeError(f"unknown expression {expr!r}")


def _role_begin(state: "ProgramState", role: str) -> None:
    if state.role is not None:
        raise RuntimeError(f"cannot open a {role} message inside the open {state.role} message")
    state.append(state.template().begin(role, is_first=not state.text_))
    state.role, state.role_start = role, len(state.text_)


def _role_end(state: "ProgramState", role: str) -> None:
    if state.role != role:
        raise RuntimeError(f"cannot close a {role} message: the open one is {state.role or 'none'}")
    state.messages_.append({"role": role, "content": state.text_[state.role_start:]})
    state.role = None
    state.append(state.template().end(role))


def sampling_params(state: "ProgramState", expr: Gen) -> dict[str, Any]:
    """The run's defaults overridden by the gen's own arguments."""
    return {**state.defaults, **expr.sampling_params}


def _gen(state: "ProgramState", expr: Gen) -> None:
    params = sampling_params(state, expr)
    if expr.n > 1:
        results = state.backend.generate([state.text_] * expr.n, params)
        state.append(results[0]["text"])
        state.set_var(expr.name, [r["text"] for r in results], _merge_meta(results))
        return
    if state.stream is not None:
        result = _gen_streaming(state, expr.name, params)
    else:
        result = state.backend.generate(state.text_, params)
        state.append(result["text"])
    state.set_var(expr.name, result["text"], result["meta_info"])


def _gen_streaming(state: "ProgramState", name: str | None, params: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"text": "", "meta_info": {}}
    for delta, chunk in state.backend.generate_stream(state.text_, params):
        state.stream.push(delta, name)
        result = chunk
    state.append(result["text"], push=False)
    return result


def _merge_meta(results: list[dict[str, Any]]) -> dict[str, Any]:
    """meta_info of n samples: the first one's, with counts summed and every sample's kept."""
    meta = dict(results[0]["meta_info"])
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        meta[key] = sum(r["meta_info"].get(key, 0) for r in results)
    meta["samples"] = [r["meta_info"] for r in results]
    return meta


def _select(state: "ProgramState", expr: Select) -> None:
    if expr.method == "constraint":
        params = {**state.defaults, "choices": expr.choices, "temperature": 0,
                  "max_new_tokens": max(len(c) for c in expr.choices) + 1}
        result = state.backend.generate(state.text_, params)
        state.append(result["text"])
        state.set_var(expr.name, result["text"], result["meta_info"])
        return
    res = state.backend.select(state.text_, expr.choices, normalize=expr.method == "token_length_normalized")
    state.append(res.choice)
    meta = {**res.meta_info, "choices": list(expr.choices), "scores": res.scores,
            "normalized_logprobs": res.normalized_logprobs,
            "unnormalized_logprobs": res.unnormalized_logprobs, "num_tokens": res.num_tokens}
    state.set_var(expr.name, res.choice, meta)

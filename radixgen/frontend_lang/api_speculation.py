"""API speculative execution (`@function(num_api_spec_tokens=N)`, SGLang's definition): fewer
requests, and fewer prompt tokens re-sent, for programs that interleave fixed text and
short gens. It matters for backends billed or limited per request (an OpenAI API).

- Completion models: the first gen asks for N tokens with no stop string. Each gen then
  takes the speculated text up to its own stop; the fixed text that follows must match the
  speculated text's continuation, else the speculation is dropped and the next gen asks
  again. A gen whose stop is not in the speculated text makes a real request.
- Chat models: a whole assistant message (fixed text and gens) is produced by one call at the
  message's end with max N tokens, then split by matching the fixed parts (up to
  MAX_CHAT_TRIES calls until one matches). Variables the reply did not reach are "" with
  `meta_info["api_spec_matched"] = False`.

A gen's own `max_tokens` does not cut a speculated value (the client has no tokenizer)."""

from __future__ import annotations

from typing import Any

from radixgen.frontend_lang.primitives import Gen
from radixgen.frontend_lang.state_data import StateData

MAX_CHAT_TRIES = 3
CONSTRAINT_KEYS = ("regex", "json_schema", "ebnf", "lark", "choices")
_CHAT_POSITION = (
    "This use case is not supported if api speculative execution is off. For chat models, "
    "sgl.gen must be right after sgl.assistant. Example of adding api speculative execution: "
    "@function(num_api_spec_tokens=128)."
)


def check_chat_position(state: StateData) -> None:
    """A chat API continues only a whole conversation: a gen must open the assistant message."""
    if state.role != "assistant" or state.text_[state.role_start :]:
        raise RuntimeError(_CHAT_POSITION)


def speculable(
    expr: Gen, params: dict[str, Any], request: dict[str, Any], state: StateData
) -> bool:
    """Completion-mode speculation applies to a plain single gen without a stream."""
    return (
        not state.backend.is_chat_model
        and (expr.n or state.default_n) == 1
        and expr.dtype is None
        and not request
        and state.stream is None
        and not any(k in params for k in CONSTRAINT_KEYS)
    )


def consume_text(state: StateData, text: str | None) -> None:
    """Fixed text (None: anything else) added after speculated text: keep the speculation
    only while it continues with exactly that text."""
    if not state.spec_text:
        return
    if text is not None and state.spec_text.startswith(text):
        state.spec_text = state.spec_text[len(text) :]
    else:
        state.spec_text = ""


def _first_stop(text: str, stops: list[str]) -> int:
    found = [text.find(s) for s in stops if s and s in text]
    return min(found) if found else -1


def completion_gen(state: StateData, expr: Gen, params: dict[str, Any]) -> None:
    stops = list(params.get("stop") or [])
    meta: dict[str, Any] = {"api_spec": True}
    if not state.spec_text:
        ask = {k: v for k, v in params.items() if k not in ("stop", "max_new_tokens")}
        result = state.backend.generate(
            state.text_, {**ask, "max_new_tokens": state.num_api_spec_tokens}
        )
        state.spec_text, meta = result["text"], {**result["meta_info"], "api_spec": True}
    pos = _first_stop(state.spec_text, stops) if stops else len(state.spec_text)
    if pos < 0:
        state.spec_text = ""
        result = state.backend.generate(state.text_, params)
        value, meta = result["text"], result["meta_info"]
    else:
        value, state.spec_text = state.spec_text[:pos], state.spec_text[pos:]
    state.append(value, expr.name)
    state.set_var(expr.name, value, meta)


def defer_gen(state: StateData, expr: Gen, params: dict[str, Any]) -> None:
    """Inside a speculated chat message: record the gen; `finish_chat_message` fills it."""
    if (
        (expr.n or state.default_n) != 1
        or expr.dtype is not None
        or any(k in params for k in CONSTRAINT_KEYS)
    ):
        raise RuntimeError(
            "num_api_spec_tokens chat messages take plain gens only (no n, dtype or constraint)"
        )
    state.spec_format.append(
        {"text": "", "name": expr.name, "stop": list(params.get("stop") or []), "params": params}
    )


def match(reply: str, terms: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """Each term's text out of one reply: fixed text must come next in it; a gen takes the
    reply up to its stop (or, without one, up to the next fixed text; the last takes the
    rest). Returns the texts and whether the whole pattern matched."""
    texts: list[str] = []
    for i, term in enumerate(terms):
        if term["name"] is None and term.get("stop") is None:
            if not reply.startswith(term["text"]):
                return texts + [""] * (len(terms) - i), False
            texts.append(term["text"])
            reply = reply[len(term["text"]) :]
            continue
        following = next(
            (t["text"] for t in terms[i + 1 :] if t["name"] is None and t["text"]), None
        )
        ends = term["stop"] or ([following] if following else [])
        pos = _first_stop(reply, ends) if ends else len(reply)
        if pos < 0:
            if i != len(terms) - 1:
                return texts + [""] * (len(terms) - i), False
            pos = len(reply)
        texts.append(reply[:pos])
        reply = reply[pos:]
    return texts, True


def finish_chat_message(state: StateData) -> None:
    """One chat call for the deferred assistant message, split into its variables."""
    terms, state.spec_format = state.spec_format or [], None
    gens = [t for t in terms if t["name"] is not None or t.get("stop") is not None]
    texts, matched, meta = [t["text"] for t in terms], True, {}
    if gens:
        params = {k: v for k, v in gens[0]["params"].items() if k not in ("stop", "max_new_tokens")}
        params["max_new_tokens"] = state.num_api_spec_tokens
        for _ in range(MAX_CHAT_TRIES):
            result = state.backend.generate_chat(state.messages_, params, {}, 1)
            texts, matched = match(result["text"], terms)
            meta = {**result["meta_info"], "api_spec": True, "api_spec_matched": matched}
            if matched:
                break
    for term, text in zip(terms, texts):
        state.append(text, term["name"])
        if term["name"] is not None:
            state.set_var(term["name"], text, dict(meta))

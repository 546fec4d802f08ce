"""Value types shared across subpackages (no radixgen imports).

`SamplingParams` is what a user asks for; `Constraint` is the grammar its output must follow;
`FinishReason` is why a request ended.
`Request` and `Batch` live in `radixgen.runtime`: only plain values cross package lines.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import regex

# The widest integers a request may carry: counts and token ids fit int32, seeds int64 (what
# torch.Generator.manual_seed and the msgpack channel to the scheduler take).
INT32_MAX = 2**31 - 1
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
MAX_STOP_REGEX_LEN = 4096


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next tokens of one request. Validated on construction (ValueError)."""

    max_new_tokens: int = 128
    min_new_tokens: int = 0  # no EOS, stop token, stop string or stop regex before this many
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = -1  # -1: whole vocabulary
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # HF-style: divides positive logits of seen tokens
    frequency_penalty: float = 0.0  # OpenAI-style: subtracts count * penalty (output tokens)
    presence_penalty: float = 0.0  # OpenAI-style: subtracts penalty once per seen output token
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    stop_regex: tuple[str, ...] = ()  # a stop where the output text matches one (re.search)
    no_stop_trim: bool = False  # keep the matched stop string / regex match in the text
    ignore_eos: bool = False
    seed: int | None = None
    return_logprob: bool = False
    top_logprobs_num: int = 0
    logprob_start_len: int = -1  # >= 0: also return logprobs of prompt tokens from here on
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = (
        True  # honoured by slow tokenizers (fast ones never add them)
    )
    constraint: "Constraint | None" = None  # the grammar the output must follow
    no_jump_forward: bool = False  # decode grammar-forced tokens one step at a time

    def __post_init__(self) -> None:
        for name in ("stop", "stop_regex"):
            value = getattr(self, name)
            _check(
                isinstance(value, (str, list, tuple)),
                f"{name} must be a string or a list of strings",
            )
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        _check(
            isinstance(self.stop_token_ids, (list, tuple)),
            "stop_token_ids must be a list of integers",
        )
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        _check(
            _int_in(self.max_new_tokens, 0, INT32_MAX),
            f"max_new_tokens must be an integer in [0, {INT32_MAX}]",
        )
        _check(
            _int_in(self.min_new_tokens, 0, INT32_MAX),
            f"min_new_tokens must be an integer in [0, {INT32_MAX}]",
        )
        _check(
            self.min_new_tokens <= self.max_new_tokens,
            f"min_new_tokens ({self.min_new_tokens}) must be at most max_new_tokens "
            f"({self.max_new_tokens})",
        )
        _check(_finite(self.temperature) and self.temperature >= 0, "temperature must be >= 0")
        _check(_finite(self.top_p) and 0 < self.top_p <= 1, "top_p must be in (0, 1]")
        _check(
            self.top_k == -1 or _int_in(self.top_k, 1, INT32_MAX),
            f"top_k must be -1 (disabled) or an integer in [1, {INT32_MAX}]",
        )
        _check(_finite(self.min_p) and 0 <= self.min_p <= 1, "min_p must be in [0, 1]")
        _check(
            _finite(self.repetition_penalty) and self.repetition_penalty > 0,
            "repetition_penalty must be > 0",
        )
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            _check(_finite(value) and -2 <= value <= 2, f"{name} must be in [-2, 2]")
        _check(all(isinstance(s, str) and s for s in self.stop), "stop must be non-empty strings")
        for pattern in self.stop_regex:
            _check(
                isinstance(pattern, str) and pattern != "", "stop_regex must be non-empty strings"
            )
            _check_regex(pattern)
        _check(
            all(_int_in(t, 0, INT32_MAX) for t in self.stop_token_ids),
            f"stop_token_ids must be integers in [0, {INT32_MAX}]",
        )
        _check(
            _int_in(self.top_logprobs_num, 0, 20), "top_logprobs_num must be an integer in [0, 20]"
        )
        _check(
            _int_in(self.logprob_start_len, -1, INT32_MAX),
            f"logprob_start_len must be an integer in [-1, {INT32_MAX}]",
        )
        _check(
            self.seed is None or _int_in(self.seed, SEED_MIN, SEED_MAX),
            f"seed must be an integer in [{SEED_MIN}, {SEED_MAX}]",
        )

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    @classmethod
    def from_dict(cls, params: dict[str, Any] | None) -> "SamplingParams":
        """Build from a JSON-like dict; unknown keys raise ValueError naming them. At most one
        of the constraint keys (CONSTRAINT_KINDS) may be given."""
        params = dict(params or {})
        kinds = [k for k in CONSTRAINT_KINDS if params.get(k) is not None]
        _check(
            len(kinds) <= 1,
            f"give at most one of {', '.join(CONSTRAINT_KINDS)}; got {', '.join(kinds)}",
        )
        for kind in CONSTRAINT_KINDS:
            spec = params.pop(kind, None)
            if spec is not None:
                params["constraint"] = Constraint(kind, spec)
        known = {f.name for f in dataclasses.fields(cls)} - {"constraint"}
        unknown = sorted(set(params) - known - {"constraint"})
        _check(not unknown, f"unknown sampling parameter(s): {', '.join(unknown)}")
        if params.get("stop") is None:
            params.pop("stop", None)
        for key in ("stop_token_ids", "stop_regex"):
            if params.get(key) is None:
                params.pop(key, None)
        try:
            return cls(**params)
        except TypeError as exc:  # e.g. a list where a number belongs
            raise ValueError(f"invalid sampling parameters: {exc}") from None


CONSTRAINT_KINDS = ("json_schema", "regex", "choices", "lark", "ebnf", "tool_calls")


@dataclass(frozen=True)
class Constraint:
    """A grammar the output must follow; hashable, so compiled grammars are cached by it.

    kind        spec
    json_schema the schema as a compact JSON string (property order kept: it is the output order)
    regex       a regular expression the whole output must fullmatch
    choices     a tuple of strings; the output is exactly one of them
    lark        a Lark grammar (start rule `start`), or the name of a shipped grammar ("sql")
    ebnf        a GBNF-style grammar (root rule `root`)
    tool_calls  {"schema", "open", "close"} as a compact JSON string (OpenAI tool_choice "auto"):
                free text that does not start with open's first character, or open, a JSON
                instance of schema, close
    """

    kind: str
    spec: Any

    def __post_init__(self) -> None:
        _check(
            self.kind in CONSTRAINT_KINDS,
            f"constraint kind must be one of {', '.join(CONSTRAINT_KINDS)}, got {self.kind!r}",
        )
        if self.kind == "choices":
            _check(
                isinstance(self.spec, (list, tuple))
                and len(self.spec) > 0
                and all(isinstance(c, str) and c for c in self.spec),
                "choices must be a non-empty list of non-empty strings",
            )
            object.__setattr__(self, "spec", tuple(self.spec))
        elif self.kind == "json_schema":
            spec = _parsed_json(self.kind, self.spec)
            _check(isinstance(spec, (dict, bool)), "json_schema must be a JSON object")
            object.__setattr__(self, "spec", json.dumps(spec, separators=(",", ":")))
        elif self.kind == "tool_calls":
            spec = _parsed_json(self.kind, self.spec)
            _check(
                isinstance(spec, dict)
                and set(spec) == {"schema", "open", "close"}
                and isinstance(spec["schema"], (dict, bool))
                and isinstance(spec["open"], str)
                and spec["open"] != ""
                and isinstance(spec["close"], str),
                'tool_calls must be {"schema": a JSON schema, "open": a non-empty string, "close": '
                "a string}",
            )
            object.__setattr__(self, "spec", json.dumps(spec, separators=(",", ":")))
        else:
            _check(
                isinstance(self.spec, str) and self.spec.strip() != "",
                f"{self.kind} must be a non-empty string",
            )


def _parsed_json(kind: str, spec: Any) -> Any:
    """A constraint spec given as JSON text, parsed (other values are returned as they are)."""
    if not isinstance(spec, str):
        return spec
    try:
        return json.loads(spec)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{kind} is not valid JSON: {exc}") from None


@dataclass(frozen=True)
class FinishReason:
    """Why a request ended: `stop` (EOS, stop token or stop string), `length`, or `abort`."""

    kind: Literal["stop", "length", "abort"]
    matched: int | str | None = None  # the stop token id or stop string that matched
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        if self.matched is not None:
            out["matched"] = self.matched
        if self.message:
            out["message"] = self.message
        return out


def _int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_regex(pattern: str) -> None:
    """ValueError unless pattern compiles (the `regex` module: the stop checker runs it with a
    timeout, so a pattern that backtracks badly cannot stall the scheduler)."""
    _check(
        len(pattern) <= MAX_STOP_REGEX_LEN,
        f"stop_regex patterns must be at most {MAX_STOP_REGEX_LEN} characters",
    )
    try:
        regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ValueError(
            f"stop_regex {pattern!r} is not a valid regular expression: {exc}"
        ) from None


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


__all__ = [
    "CONSTRAINT_KINDS",
    "INT32_MAX",
    "SEED_MIN",
    "SEED_MAX",
    "Constraint",
    "SamplingParams",
    "FinishReason",
]

"""Size budgets checked before outlines-core builds anything, so a constraint too large to compile
is a GrammarError (an HTTP 400) in milliseconds instead of minutes of work, gigabytes of memory
or an aborted process.

- `SchemaRegexSize`: an upper estimate of the length of the regex outlines-core would write for a
  (rewritten) JSON Schema, against REGEX_BUDGET. outlines-core copies a subschema into every place
  that uses it, and on regexes of hundreds of megabytes its allocation fails by aborting.
- `check_index_size`: the (state, token) entries of a regex's token index, against
  INDEX_ENTRY_BUDGET. outlines-core's index keeps, per automaton state, a map of every allowed
  token to its next state; a state inside a free string allows nearly the whole vocabulary.
  Measured on SmolLM2's 49k vocabulary: about 10 bytes and 0.33 us per entry (a SchemaStore
  schema of 81 million entries: 27 s, 0.9 GB), and a counted repeat `"[^"]{0,99}"` makes 99
  such states. The automaton is built in a helper process (`automata.probe`) first: a short
  regex can have exponentially many states, and outlines-core aborts when it runs out of memory.
"""

from __future__ import annotations

import json
import re
import threading
import weakref

import numpy as np

from radixgen.grammar.automata.probe import default_probe
from radixgen.grammar.index.token_index import outlines_vocabulary
from radixgen.grammar.matcher import RegexTooLarge
from radixgen.grammar.regex.markers import escape_end
from radixgen.grammar.tokenizer_info import TokenizerInfo

REGEX_BUDGET = 16 << 20  # characters of regex (the token index of one takes several GB before this)
INDEX_ENTRY_BUDGET = 100_000_000  # (state, token) entries of a token index: ~1 GB, ~35 s to build
WIDE_CLASS = 26  # a character class with at least this many characters counts as wide ([a-z] does)
_WIDE_ESCAPES = frozenset("wWSDP")  # \w, \W, \S, \D, \P{..}: most characters
_CODEPOINTS = 0x110000
_COUNTED = re.compile(r"\{(\d+)(,?)(\d*)\}")
_GROUP_HEAD = re.compile(r"\?(?:P?<[A-Za-z_][A-Za-z0-9_]*>|[A-Za-z-]*:|[A-Za-z-]*\))")


def check_regex_size(size: int) -> None:
    if size > REGEX_BUDGET:
        raise RegexTooLarge(
            f"json_schema expands to too large a grammar (a regex of about {size >> 20} MiB; "
            f"the limit is {REGEX_BUDGET >> 20} MiB: nested objects with many optional "
            "properties multiply, and each use of a reference copies its schema)"
        )


def written_size(regex: str, placeholders: dict) -> int:
    """The length of `regex` once each placeholder name in it is replaced by `(?:leaf)` (counted
    before writing them: a long leaf copied into every place a subschema is used can take more
    memory and time than the machine has)."""
    return len(regex) + sum(
        regex.count(name) * (len(leaf) + 4 - len(name)) for name, leaf in placeholders.items()
    )


def check_index_size(regex: str, info: TokenizerInfo) -> int:
    """Refuse a regex whose token index would hold more than INDEX_ENTRY_BUDGET (state, token)
    entries; else return the estimate. The automaton is built over single bytes by the automaton
    probe (`index_entries`: a fraction of the real index's cost, in a helper process that
    refuses an automaton that explodes), each state weighed by the tokens that start with a byte
    it allows. Every regex is measured: a short one can have exponentially many states."""
    # the copies counted repeats make are states of their own (the automaton cannot merge the
    # k-th and the j-th character of a repeat): too many of them is refused without measuring
    copies = wide_states(regex) - wide_states(regex, repeats=False)
    entries = copies * info.vocab_size
    if entries <= INDEX_ENTRY_BUDGET:
        entries = index_entries(regex, info)
    if entries > INDEX_ENTRY_BUDGET:
        raise RegexTooLarge(
            f"constraint too large to index: its automaton's token table would hold about "
            f"{entries / 1e6:.0f} million entries (the limit is {INDEX_ENTRY_BUDGET / 1e6:.0f} million, "
            "about 1 GB and half a minute of compiling). Places that accept almost any text cost a row "
            "over the whole vocabulary each, and counted repeats multiply them: a long {m,n} in a "
            "pattern, free strings in many alternatives, large schemas of free strings"
        )
    return entries


def index_entries(regex: str, info: TokenizerInfo) -> int:
    """Estimated (state, token) entries of the token index of `regex`: the automaton over
    single-byte tokens (built by the automaton probe, which refuses one that explodes), each
    state's allowed bytes weighed by how many of `info`'s tokens start with them."""
    vocab = outlines_vocabulary(info)
    return default_probe().weighted_moves(
        f"{vocab.start}(?:{regex}){vocab.sentinel}",
        (vocab.sentinel.encode(), vocab.start.encode()),
        _first_byte_counts(info).tolist(),
    )


_counts_lock = threading.Lock()
_first_counts: "weakref.WeakKeyDictionary[TokenizerInfo, np.ndarray]" = weakref.WeakKeyDictionary()


def _first_byte_counts(info: TokenizerInfo) -> np.ndarray:
    """How many of `info`'s tokens start with each byte."""
    with _counts_lock:
        if info not in _first_counts:
            counts = np.zeros(256, dtype=np.int64)
            for data in info.token_bytes:
                if data:
                    counts[data[0]] += 1
            _first_counts[info] = counts
        return _first_counts[info]


def wide_states(regex: str, repeats: bool = True) -> int:
    """Estimated automaton states of `regex` (Rust syntax) inside a wide character class: wide
    atoms counted once per copy the automaton makes of them (a counted repeat {m,n} copies its
    atom n times, {m,} m + 1 times, unless not `repeats`; alternatives add up)."""
    return _WideCount(regex, repeats).total()


class _WideCount:
    """One left-to-right scan; `stack` holds the wide count of each open group, `last` that of the
    atom just read (what a following quantifier repeats)."""

    def __init__(self, regex: str, repeats: bool) -> None:
        self.regex = regex
        self.repeats = repeats
        self.i = 0

    def total(self) -> int:
        stack, count, last = [], 0, 0
        regex, n = self.regex, len(self.regex)
        while self.i < n:
            c = regex[self.i]
            if c == "(":
                self.i += 1
                head = _GROUP_HEAD.match(regex, self.i)  # (?:  (?P<name>  (?<name>  (?i:  or (?i)
                if head is not None:
                    self.i = head.end()
                    if head.group(0).endswith(")"):  # flags alone: no group
                        last = 0
                        continue
                stack.append(count)
                count, last = 0, 0
                continue
            if c == ")":
                last = count
                count = (stack.pop() if stack else 0) + last
                self.i += 1
            elif c == "|":
                last = 0
                self.i += 1
            elif c in "{*+?" and not self._at_literal_brace():
                times = self._quantifier()
                count += last * (times - 1)
                last = 0
                continue
            else:
                last = self._atom()
                count += last
        while stack:
            count += stack.pop()
        return count

    def _at_literal_brace(self) -> bool:
        """A `{` that does not start a counted repeat is a literal."""
        return self.regex[self.i] == "{" and not _COUNTED.match(self.regex, self.i)

    def _quantifier(self) -> int:
        """Consume a quantifier (and a lazy/possessive mark); the copies it makes of its atom."""
        regex = self.regex
        c = regex[self.i]
        if c == "{":
            low, comma, high = _COUNTED.match(regex, self.i).groups()
            times = int(high) if high else int(low) + bool(comma)
            self.i = regex.index("}", self.i) + 1
        else:
            times = 1
            self.i += 1
        if self.i < len(regex) and regex[self.i] in "?+":
            self.i += 1
        return max(times, 1) if self.repeats else 1

    def _atom(self) -> int:
        """Consume one atom outside a class: 1 when it is wide, else 0."""
        regex = self.regex
        c = regex[self.i]
        if c == "[":
            return self._class()
        if c == "\\":
            kind = regex[self.i + 1 : self.i + 2]
            self.i = escape_end(regex, self.i)
            return int(kind in _WIDE_ESCAPES)
        self.i += 1
        return int(c == ".")

    def _class(self) -> int:
        """Consume a bracketed class (nested classes too); 1 when it covers WIDE_CLASS or more
        characters (negated classes count their complement)."""
        regex = self.regex
        self.i += 1
        negated = regex.startswith("^", self.i)
        if negated:
            self.i += 1
        width, depth, first, prev = 0, 1, True, None
        while self.i < len(regex) and depth:
            c = regex[self.i]
            if c == "]" and not first:
                depth -= 1
                self.i += 1
                continue
            first = False
            if c == "[" and not regex.startswith("[:", self.i):
                depth += 1
                self.i += 1
                if regex.startswith("^", self.i):
                    self.i += 1
                width = _CODEPOINTS  # a nested class (set operations): assume wide
                continue
            point, wide = self._class_char()
            if wide:
                width = _CODEPOINTS
            elif prev is not None and point == "-" and self.i < len(regex) and regex[self.i] != "]":
                high, wide = self._class_char()
                width += _CODEPOINTS if wide else max(_ord(high) - _ord(prev), 0)
                prev = None
                continue
            else:
                width += 1
            prev = point
        covered = min(width, _CODEPOINTS)
        return int((_CODEPOINTS - covered if negated else covered) >= WIDE_CLASS)

    def _class_char(self) -> tuple[str, bool]:
        """Consume one character of a class: (the character, or '' for a set escape; whether the
        escape stands for a wide set)."""
        regex = self.regex
        c = regex[self.i]
        if c != "\\":
            self.i += 1
            return c, False
        kind = regex[self.i + 1] if self.i + 1 < len(regex) else ""
        self.i += 2
        if kind == "x":
            if regex.startswith("{", self.i):
                end = regex.index("}", self.i)
                digits, self.i = regex[self.i + 1 : end], end + 1
            else:
                digits, self.i = regex[self.i : self.i + 2], self.i + 2
            return chr(int(digits, 16)), False
        if kind == "u":
            digits, self.i = regex[self.i : self.i + 4], self.i + 4
            return chr(int(digits, 16)), False
        if kind in "pP" and regex.startswith("{", self.i):
            self.i = regex.index("}", self.i) + 1
            return "", True
        if kind in "dsw":
            return "", kind == "w"
        if kind in _WIDE_ESCAPES:
            return "", True
        return {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}.get(kind, kind), False


def _ord(c: str) -> int:
    return ord(c) if len(c) == 1 else 0


class SchemaRegexSize:
    """An upper estimate of the length of outlines-core's regex for a rewritten schema, following
    its construction (outlines-core 0.2: json_schema/parsing.rs): references expanded at each use,
    an object without required properties writes property j in n - j of its alternatives, an
    array's item twice. Leaves count a fixed size: only the multiplication matters here."""

    def __init__(self, root, target, max_depth: int) -> None:
        self.root = root
        self.target = target  # ref -> the node it names
        self.max_depth = max_depth
        self.memo: dict[str, int] = {}

    def of(self, node, depth: int = 0) -> int:
        if depth > self.max_depth or not isinstance(node, dict):
            return 64
        if "$ref" in node:
            ref = node["$ref"]
            if ref not in self.memo:
                self.memo[ref] = 64  # a cycle (never expected by now) counts as a leaf
                self.memo[ref] = self.of(self.target(self.root, ref), depth + 1)
            return self.memo[ref]
        if "properties" in node:
            sizes = [
                len(name) + 16 + self.of(value, depth) for name, value in node["properties"].items()
            ]
            if node.get("required"):
                return 16 + sum(sizes)
            return 16 + sum(size * (len(sizes) - j) for j, size in enumerate(sizes))
        for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if key in node:
                return 16 + sum(self.of(sub, depth) for sub in node[key])
        if "enum" in node or "const" in node:
            return 16 + len(json.dumps(node.get("enum", node.get("const"))))
        items = 2 * self.of(node["items"], depth) if isinstance(node.get("items"), dict) else 0
        values = (
            2 * self.of(node["additionalProperties"], depth)
            if isinstance(node.get("additionalProperties"), dict)
            else 0
        )
        types = node.get("type")
        free = {"object", "array"} & set(types if isinstance(types, list) else [types])
        if items or values or not free:
            return 64 + items + values  # scalars, arrays and objects of given items / values
        return 1600 * len(free)  # arrays and objects of any values

"""Python-regex subset -> byte-level DFA, for Lark terminals.

Supported: literals and escapes (\\n \\t \\xHH \\uHHHH, \\d \\w \\s and their negations, ASCII
only), classes `[...]` / `[^...]` with ranges, `.`, groups `(...)`, `(?:...)`, `(?P<n>...)`,
inline-flag groups `(?i:...)` / `(?s:...)`, `|`, and the quantifiers `* + ? {m} {m,} {m,n}`.
Non-ASCII code points are encoded as UTF-8 byte sequences, so the DFA runs over token bytes.

Lazy quantifiers (`*?`): Python's matcher stops at the first place the rest of the pattern
matches, so a terminal whose regex has one is made prefix-free (a match ends at its first
accepting position). Lark's `ESCAPED_STRING` uses a look-behind; its exact lookaround-free
equivalent is substituted. Other lookarounds, anchors and back-references raise ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

from radixgen.grammar.automata.code_point_sets import (
    MAX_CP,
)
from radixgen.grammar.automata.code_point_sets import (
    negated as _negate,
)
from radixgen.grammar.automata.code_point_sets import (
    normalized as _normalize,
)

_ESCAPED_STRING = '".*?(?<!\\\\)(\\\\\\\\)*?"'
_ESCAPED_STRING_EQUIV = '"(?:[^"\\\\\\n]|\\\\.)*"'
_DIGIT = [(48, 57)]
_WORD = [(48, 57), (65, 90), (95, 95), (97, 122)]
_SPACE = [(9, 13), (32, 32)]
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CHAR_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7, "0": 0}


@dataclass(frozen=True)
class ByteDfa:
    """trans[s][b] is the next state (-1: dead); state 0 is the start."""

    trans: tuple[tuple[int, ...], ...]
    accepting: frozenset[int]


def _fold_case(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    extra = []
    for lo, hi in ranges:
        for c in range(max(lo, 65), min(hi, 122) + 1):
            ch = chr(c)
            if ch.isalpha():
                extra.append((ord(ch.swapcase()),) * 2)
    return _normalize(ranges + extra)


class _RegexParser:
    """Recursive descent over the pattern text; builds an AST of tuples:
    ("set", ranges) | ("cat", [nodes]) | ("alt", [nodes]) | ("rep", node, min, max|None)."""

    def __init__(self, text: str, rust: bool = False) -> None:
        self.text, self.pos, self.lazy, self.rust = text, 0, False, rust

    def error(self, message: str) -> ValueError:
        return ValueError(f"{message} at position {self.pos} of regex {self.text!r}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> tuple:
        node = self.alternation(frozenset())
        if self.pos != len(self.text):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self, flags: frozenset) -> tuple:
        branches = [self.concat(flags)]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concat(flags))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concat(self, flags: frozenset) -> tuple:
        items = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.atom(flags)))
        return ("cat", items)

    def quantified(self, node: tuple) -> tuple:
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.pos += 1
                node = ("rep", node, 1 if c == "+" else 0, 1 if c == "?" else None)
            elif c == "{" and self._brace_ahead():
                lo, hi = self._braces()
                node = ("rep", node, lo, hi)
            else:
                return node
            if self.peek() == "?":
                self.pos += 1
                self.lazy = True

    def _brace_ahead(self) -> bool:
        end = self.text.find("}", self.pos)
        body = self.text[self.pos + 1 : end] if end > 0 else ""
        return bool(body) and all(ch.isdigit() or ch == "," for ch in body) and body[0] != ","

    def _braces(self) -> tuple[int, int | None]:
        end = self.text.index("}", self.pos)
        body, self.pos = self.text[self.pos + 1 : end], end + 1
        if "," not in body:
            return int(body), int(body)
        lo, hi = body.split(",", 1)
        return int(lo), (int(hi) if hi else None)

    def atom(self, flags: frozenset) -> tuple:
        c = self.peek()
        if c == "(":
            return self.group(flags)
        self.pos += 1
        if c == ".":
            return ("set", [(0, MAX_CP)] if "s" in flags else _negate([(10, 10)]))
        if c == "[":
            return ("set", self._maybe_fold(self.char_class(), flags))
        if c == "\\":
            return ("set", self._maybe_fold(self.escape(), flags))
        if c in "^$":
            raise self.error("anchors are not supported")
        if c in "*+?":
            raise self.error("nothing to repeat")
        return ("set", self._maybe_fold([(ord(c), ord(c))], flags))

    @staticmethod
    def _maybe_fold(ranges: list, flags: frozenset) -> list:
        return _fold_case(ranges) if "i" in flags else ranges

    def group(self, flags: frozenset) -> tuple:
        self.pos += 1
        if self.text.startswith("?P<", self.pos):
            self.pos = self.text.index(">", self.pos) + 1
        elif self.peek() == "?":
            flags = self._inline_flags(flags)
        node = self.alternation(flags)
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.pos += 1
        return node

    def _inline_flags(self, flags: frozenset) -> frozenset:
        self.pos += 1
        start = self.pos
        while self.peek().isalpha() or self.peek() == "-":
            self.pos += 1
        spec = self.text[start : self.pos]
        if self.peek() != ":":
            raise self.error("lookarounds, back-references and global flags are not supported")
        self.pos += 1
        on, _, off = spec.partition("-")
        if set(on + off) - {"i", "s", "m", "x", "u"} or "x" in on:
            raise self.error(f"unsupported inline flags {spec!r}")
        return (flags | set(on)) - set(off)

    def escape(self) -> list[tuple[int, int]]:
        c = self.peek()
        self.pos += 1
        if c.lower() in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[c.lower()]
            return _negate(ranges) if c.isupper() else list(ranges)
        if c in _CHAR_ESCAPES:
            return [(_CHAR_ESCAPES[c],) * 2]
        width = {"x": 2, "u": 4, "U": 8}.get(c)
        if width and self.rust and self.peek() == "{":  # \x{1F600}
            end = self.text.index("}", self.pos)
            code = int(self.text[self.pos + 1 : end], 16)
            self.pos = end + 1
            return [(code, code)]
        if width:
            code = int(self.text[self.pos : self.pos + width], 16)
            self.pos += width
            return [(code, code)]
        if c.isalnum():
            raise self.error(f"unsupported escape \\{c}")
        return [(ord(c), ord(c))]

    def char_class(self) -> list[tuple[int, int]]:
        if self.rust:
            return self._rust_class()
        negated = self.peek() == "^"
        self.pos += negated
        ranges: list[tuple[int, int]] = []
        first = True
        while first or self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class")
            first = False
            ranges.extend(self._class_member(("]", "")))
        self.pos += 1
        return _negate(ranges) if negated else _normalize(ranges)

    def _rust_class(self) -> list[tuple[int, int]]:
        """Rust's class syntax (the regexes json_schema writes): nested classes are unions, and
        `--` (difference), `&&` (intersection) and `~~` (symmetric difference) combine the
        unions around them, left to right."""
        negated = self.peek() == "^"
        self.pos += negated
        ranges = self._rust_union(first=True)
        while self.text.startswith(("--", "&&", "~~"), self.pos):
            op = self.text[self.pos : self.pos + 2]
            self.pos += 2
            other = self._rust_union(first=False)
            if op == "--":
                ranges = _intersect(ranges, _negate(other))
            elif op == "&&":
                ranges = _intersect(ranges, other)
            else:
                ranges = _normalize(
                    _intersect(ranges, _negate(other)) + _intersect(other, _negate(ranges))
                )
        if self.peek() != "]":
            raise self.error("unterminated character class")
        self.pos += 1
        return _negate(ranges) if negated else _normalize(ranges)

    def _rust_union(self, first: bool) -> list[tuple[int, int]]:
        ranges: list[tuple[int, int]] = []
        while first or (
            self.peek() != "]" and not self.text.startswith(("--", "&&", "~~"), self.pos)
        ):
            if not self.peek():
                raise self.error("unterminated character class")
            first = False
            if self.peek() == "[":  # a nested class: part of the union
                self.pos += 1
                ranges.extend(self._rust_class())
                continue
            ranges.extend(self._class_member(("]", "-", "")))
        return _normalize(ranges)

    def _class_member(self, literal_before: tuple[str, ...]) -> list[tuple[int, int]]:
        """One class item, or the range `a-b` (a `-` followed by one of `literal_before` is the
        character itself)."""
        lo = self._class_item()
        if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in literal_before:
            self.pos += 1
            hi = self._class_item()
            return [(lo[0][0], hi[0][1])]
        return lo

    def _class_item(self) -> list[tuple[int, int]]:
        c = self.peek()
        self.pos += 1
        if c == "\\":
            return self.escape() if self.peek() != "b" else [(8, 8)]
        return [(ord(c), ord(c))]


def parse_regex(text: str, rust: bool = False) -> tuple[tuple, bool]:
    """AST of a Python regex (with `rust`: of the Rust syntax outlines-core reads, where classes
    nest and combine, and `\\x{...}` escapes), and whether it uses a lazy quantifier."""
    parser = _RegexParser(text.replace(_ESCAPED_STRING, _ESCAPED_STRING_EQUIV), rust)
    return parser.parse(), parser.lazy


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, i, j = [], 0, 0
    a, b = _normalize(a), _normalize(b)
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out

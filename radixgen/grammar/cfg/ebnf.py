"""GBNF (llama.cpp grammar syntax) -> an equivalent Lark grammar.

Syntax: `name ::= alternatives` (names `[a-zA-Z0-9_-]+`, root rule `root`), "strings" with
\\n \\t \\r \\\\ \\" \\xHH \\uHHHH escapes, classes `[a-z]` / `[^...]`, `.`, grouping `( )`, `|`,
postfix `* + ? {m} {m,} {m,n}`, `#` comments. A rule runs until the next `name ::=`.

Lark lexes before it parses, so the conversion gives the lexer whole words where it can: every
rule that is regular (reaches no recursion) becomes one regex terminal, inlined into the
terminals that use it; a nullable one becomes a terminal for its non-empty language, used as
`TERM?`. The recursive rules become Lark rules over those terminals and the remaining literals.
A GBNF grammar whose terminals then overlap ambiguously, or that is not LALR(1), is refused by
Lark with a GrammarError (the character-level grammars of llama.cpp are not all LALR).
"""

from __future__ import annotations

import re

from radixgen.grammar.matcher import GrammarError

_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<name>[A-Za-z0-9_-]+)|(?P<define>::=)|(?P<str>"(?:[^"\\]|\\.)*")
    |(?P<cls>\[(?:[^\]\\]|\\.)*\])|(?P<op>[()|*+?.])|(?P<rep>\{\s*\d+\s*(?:,\s*\d*\s*)?\})""",
    re.X,
)
_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "]": "]",
    "[": "[",
    "-": "-",
    "^": "^",
}


def _lex(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise GrammarError(
                f"GBNF syntax error at position {pos}: unexpected {text[pos : pos + 10]!r}"
            )
        if m.lastgroup:
            out.append((m.lastgroup, m.group(m.lastgroup), pos))
        pos = m.end()
    return out


def _unescape(body: str, pos: int) -> list[str]:
    """Characters of a string/class body; escapes resolved."""
    chars, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            chars.append(c)
            i += 1
            continue
        e = body[i + 1 : i + 2]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            chars.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif e in _ESC:
            chars.append(_ESC[e])
            i += 2
        else:
            raise GrammarError(f"GBNF syntax error at position {pos + i}: unknown escape \\{e}")
    return chars


class _Parser:
    """Recursive descent: AST nodes ("alt", [seq]) ("seq", [items]) ("lit", str)
    ("cls", negated, [(lo, hi)]) ("any",) ("ref", name, pos) ("rep", node, lo, hi|None)."""

    def __init__(self, text: str) -> None:
        self.toks, self.i, self.text = _lex(text), 0, text

    def error(self, message: str) -> GrammarError:
        pos = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        return GrammarError(f"GBNF syntax error at position {pos}: {message}")

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "", len(self.text))

    def rules(self) -> dict[str, tuple]:
        rules: dict[str, tuple] = {}
        while self.peek()[0] != "eof":
            kind, name, _ = self.peek()
            if kind != "name" or self.peek(1)[0] != "define":
                raise self.error("expected `name ::=`")
            if name in rules:
                raise self.error(f"rule {name!r} is defined twice")
            self.i += 2
            rules[name] = self.alternatives()
        return rules

    def alternatives(self) -> tuple:
        branches = [self.sequence()]
        while self.peek()[1] == "|" and self.peek()[0] == "op":
            self.i += 1
            branches.append(self.sequence())
        return ("alt", branches)

    def sequence(self) -> tuple:
        items = []
        while True:
            kind, value, _ = self.peek()
            if (
                kind == "eof"
                or (kind == "op" and value in "|)")
                or (kind == "name" and self.peek(1)[0] == "define")
            ):
                return ("seq", items)
            items.append(self.postfix(self.atom()))

    def atom(self) -> tuple:
        kind, value, pos = self.peek()
        self.i += 1
        if kind == "name":
            return ("ref", value, pos)
        if kind == "str":
            return ("lit", "".join(_unescape(value[1:-1], pos + 1)))
        if kind == "cls":
            return self._char_class(value, pos)
        if kind == "op" and value == "(":
            node = self.alternatives()
            if self.peek()[1] != ")":
                raise self.error("missing ')'")
            self.i += 1
            return node
        if kind == "op" and value == ".":
            return ("any",)
        self.i -= 1
        raise self.error(f"unexpected {value!r}")

    @staticmethod
    def _char_class(value: str, pos: int) -> tuple:
        body = value[1:-1]
        negated = body.startswith("^")
        chars = _unescape(body[1:] if negated else body, pos + 1 + negated)
        ranges, k = [], 0
        while k < len(chars):
            if k + 2 < len(chars) and chars[k + 1] == "-":
                ranges.append((chars[k], chars[k + 2]))
                k += 3
            else:
                ranges.append((chars[k], chars[k]))
                k += 1
        return ("cls", negated, ranges)

    def postfix(self, node: tuple) -> tuple:
        while True:
            kind, value, _ = self.peek()
            if kind == "op" and value in "*+?":
                node = ("rep", node, 1 if value == "+" else 0, 1 if value == "?" else None)
            elif kind == "rep":
                lo, _, hi = value[1:-1].replace(" ", "").partition(",")
                upper = int(lo) if "," not in value else (int(hi) if hi else None)
                if upper is not None and upper < int(lo):
                    raise self.error(f"bad repetition {value}")
                node = ("rep", node, int(lo), upper)
            else:
                return node
            self.i += 1


def parse_gbnf(text: str) -> dict[str, tuple]:
    """Rule name -> AST; GrammarError (a ValueError) with the position on syntax errors."""
    rules = _Parser(text).rules()
    if "root" not in rules:
        raise GrammarError("GBNF grammar has no `root` rule")
    _check_refs(rules)
    return rules


def _check_refs(rules: dict[str, tuple]) -> None:
    def walk(node: tuple) -> None:
        if node[0] == "ref" and node[1] not in rules:
            raise GrammarError(f"GBNF error at position {node[2]}: undefined rule {node[1]!r}")
        for child in _children(node):
            walk(child)

    for ast in rules.values():
        walk(ast)


def _children(node: tuple) -> list[tuple]:
    if node[0] in ("alt", "seq"):
        return node[1]
    return [node[1]] if node[0] == "rep" else []


def ebnf_to_lark(text: str) -> str:
    """A Lark grammar (start rule `start`) equivalent to a GBNF grammar (root rule `root`)."""
    from radixgen.grammar.cfg.gbnf import LarkEmitter

    return LarkEmitter(parse_gbnf(text)).emit()

"""The Thompson automaton of a pattern with lookarounds (regex.lookaround), and the characters of
its classes in both flavours: counted positively, what ECMA-262 and Python both put in a class;
under a negation, what either does."""

from __future__ import annotations

from re import _constants as C

from radixgen.grammar.automata.code_point_sets import MAX_CP, negated, normalized

# what a string written out may hold: no control character, '"', '\\', surrogate or astral character
# (nor a line terminator: then `.` is every character, and `(?=.{m,n}$)` a length)
UNIVERSE = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x2027), (0x202A, 0xD7FF), (0xE000, 0xFFFD))
ANY_TEXT = ((0, 0xD7FF), (0xE000, 0xFFFD))  # (whole texts: astral characters left out too)
_NON_ASCII = ((0x80, MAX_CP),)
_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# white space in both ECMA-262 and Python, and in either
_SPACE_BOTH = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
_SPACE_EITHER = _SPACE_BOTH + ((0x1C, 0x1F), (0x85, 0x85), (0xFEFF, 0xFEFF))


class LookaroundError(ValueError):
    """The pattern cannot be written out (the message says why)."""


# ---------------------------------------------------------------- sets of code points


def norm(ranges) -> tuple:
    return tuple(normalized(ranges))


def _complement(a) -> tuple:
    return tuple(negated(a))


def intersect(a, b) -> tuple:
    return _complement(norm(_complement(a) + _complement(b)))


def _category(name, positive: bool) -> tuple:
    """A shorthand class: the characters ECMA-262 and Python both put in it (positive), or
    either does (under a negation)."""
    negated = name in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_WORD, C.CATEGORY_NOT_SPACE)
    if negated:
        plain = {
            C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT,
            C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
            C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
        }[name]
        return _complement(_category(plain, not positive))
    if name == C.CATEGORY_DIGIT:
        return _DIGIT if positive else norm(_DIGIT + _NON_ASCII)
    if name == C.CATEGORY_WORD:
        return _WORD if positive else norm(_WORD + _NON_ASCII)
    if name == C.CATEGORY_SPACE:
        return _SPACE_BOTH if positive else _SPACE_EITHER
    raise LookaroundError(f"unsupported class {name}")


def _char_set(op, arg, positive: bool) -> tuple:
    if op == C.LITERAL:
        return ((arg, arg),)
    if op == C.NOT_LITERAL:
        return _complement(((arg, arg),))
    if op == C.ANY:  # ECMA-262 leaves out \n \r U+2028 U+2029, Python \n alone
        return _complement(
            ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)) if positive else ((0x0A, 0x0A),)
        )
    if op == C.RANGE:
        return (arg,)
    if op == C.CATEGORY:
        return _category(arg, positive)
    if op == C.IN:
        negate = bool(arg) and arg[0][0] == C.NEGATE
        items = arg[1:] if negate else arg
        members = norm([r for o, a in items for r in _char_set(o, a, positive != negate)])
        return _complement(members) if negate else members
    raise LookaroundError(f"unsupported class item {op}")


# ---------------------------------------------------------------- the automaton


class Nfa:
    """States with edges (kind, ...): ("c", set) reads a character of the set; ("e",) epsilon;
    ("^",) / ("$",) anchors; ("la", start, final, positive) a lookahead of the automaton
    start..final; ("lb", index, positive) lookbehind `index` (self.behind)."""

    def __init__(self, universe: tuple):
        self.universe = universe  # the characters a string written out may hold
        self.edges: list[list] = []
        self.behind: list[tuple[int, int]] = []  # (start, final) of each lookbehind's automaton
        self.final = -1

    def new(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def edge(self, src: int, label: tuple, dst: int) -> None:
        self.edges[src].append((label, dst))

    def build(self, items: list, positive: bool, where: str) -> tuple[int, int]:
        """A fragment (start, end) for a sequence of parsed items; `where`: "main", "ahead" (a
        lookahead's body) or "behind" (a lookbehind's body)."""
        start = cur = self.new()
        for op, arg in items:
            nxt = self.new()
            self._item(op, arg, positive, where, cur, nxt)
            cur = nxt
        return start, cur

    def _item(self, op, arg, positive: bool, where: str, src: int, dst: int) -> None:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            self.edge(src, ("c", intersect(_char_set(op, arg, positive), self.universe)), dst)
        elif op == C.SUBPATTERN:
            _, add_flags, del_flags, sub = arg
            if add_flags or del_flags:
                raise LookaroundError("inline flags are not supported")
            self._sequence(list(sub), positive, where, src, dst)
        elif op == C.BRANCH:
            for alternative in arg[1]:
                self._sequence(list(alternative), positive, where, src, dst)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            self._repeat(*arg, positive, where, src, dst)
        elif op == C.AT:
            if where == "behind" or arg not in (C.AT_BEGINNING, C.AT_END):
                raise LookaroundError(f"anchor {arg} is not supported here")
            self.edge(src, ("^",) if arg == C.AT_BEGINNING else ("$",), dst)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            if where != "main":
                raise LookaroundError("a lookaround inside a lookaround is not supported")
            direction, sub = arg
            keep = op == C.ASSERT
            body = self.build(list(sub), positive == keep, "ahead" if direction == 1 else "behind")
            if direction == 1:
                self.edge(src, ("la", body[0], body[1], keep), dst)
            else:
                self.behind.append(body)
                self.edge(src, ("lb", len(self.behind) - 1, keep), dst)
        else:
            raise LookaroundError(f"{op} is not supported")

    def _sequence(self, items, positive, where, src, dst) -> None:
        start, end = self.build(items, positive, where)
        self.edge(src, ("e",), start)
        self.edge(end, ("e",), dst)

    def _repeat(self, least: int, most, sub, positive, where, src, dst) -> None:
        if least > 1024 or (most != C.MAXREPEAT and most > 1024):
            raise LookaroundError("repeat counts above 1024 are not supported")
        cur = src
        for _ in range(least):
            nxt = self.new()
            self._sequence(list(sub), positive, where, cur, nxt)
            cur = nxt
        if most == C.MAXREPEAT:  # a loop
            loop = self.new()
            self.edge(cur, ("e",), loop)
            self._sequence(list(sub), positive, where, loop, loop)
            self.edge(loop, ("e",), dst)
            return
        for _ in range(most - least):
            nxt = self.new()
            self.edge(cur, ("e",), dst)
            self._sequence(list(sub), positive, where, cur, nxt)
            cur = nxt
        self.edge(cur, ("e",), dst)

"""An automaton written out as a regex by state elimination (regex.lookaround), in pattern syntax:
classes of code points, `(?:...)`, `|`, `*`, `?`."""

from __future__ import annotations

from radixgen.grammar.automata.lookaround_nfa import LookaroundError, norm

MAX_TEXT = 150_000  # characters of the written-out pattern (one of 125,000 compiled in 5 s)
# group nesting of the written-out pattern (Rust's regex parser stops at 250, Python's around 300)
MAX_DEPTH = 120


def write_out(moves: list[dict], accepting: list[bool], atom_sets: list) -> str:
    """A regex for the automaton, by state elimination (the state whose elimination adds the
    least text first, `_weight`)."""
    n = len(moves)
    start, end = n, n + 1
    succ: dict = {i: {} for i in range(n + 2)}
    pred: dict = {i: set() for i in range(n + 2)}

    def put(a: int, b: int, r: "_Re") -> None:
        merged = succ[a][b].alt(r) if b in succ[a] else r
        if (
            len(merged.text) > MAX_TEXT
        ):  # (every state is live: an edge's text ends up in the result)
            raise LookaroundError(
                f"written out without lookarounds it is over {MAX_TEXT} characters long"
            )
        succ[a][b] = merged
        pred[b].add(a)

    for i, row in enumerate(moves):
        by_target: dict = {}
        for atom, j in row.items():
            by_target.setdefault(j, []).append(atom)
        for j, atoms in by_target.items():
            put(i, j, _Re("atom", _class_text(norm([r for a in atoms for r in atom_sets[a]]))))
    put(start, 0, _EPS)
    for i in range(n):
        if accepting[i]:
            put(i, end, _EPS)
    remaining = set(range(n))
    while remaining:
        k = min(remaining, key=lambda s: (_weight(s, succ, pred), s))
        remaining.discard(k)
        loop = succ[k].pop(k, None)
        pred[k].discard(k)
        ins = [(a, succ[a].pop(k)) for a in pred.pop(k)]
        outs = list(succ.pop(k).items())
        for b, _ in outs:
            pred[b].discard(k)
        middle = _EPS if loop is None else loop.star()
        for a, r_in in ins:
            for b, r_out in outs:
                put(a, b, r_in.cat(middle).cat(r_out))
    return succ[start][end].text


def _weight(k: int, succ: dict, pred: dict) -> int:
    """How much text eliminating state k adds (Delgado and Morais' measure): each incoming label
    is copied once per further outgoing one, and the other way round, the loop once per path."""
    ins = [len(succ[a][k].text) for a in pred[k] if a != k]
    outs = [len(r.text) for b, r in succ[k].items() if b != k]
    loop = len(succ[k][k].text) if k in succ[k] else 0
    return (
        sum(ins) * (len(outs) - 1) + sum(outs) * (len(ins) - 1) + loop * (len(ins) * len(outs) - 1)
    )


class _Re:
    """Regex text with what it needs around it: kind "eps" (empty), "atom" (takes a quantifier
    as it is), "quant" (X*, X?), "cat" or "alt"; depth: how deep its groups nest."""

    def __init__(self, kind: str, text: str, depth: int = 0):
        self.kind, self.text, self.depth = kind, text, depth
        if depth > MAX_DEPTH:
            raise LookaroundError(
                f"written out without lookarounds its groups nest more than {MAX_DEPTH} deep"
            )

    def _quantifiable(self) -> tuple[str, int]:
        return (
            (self.text, self.depth) if self.kind == "atom" else (f"(?:{self.text})", self.depth + 1)
        )

    def _concatenable(self) -> tuple[str, int]:
        return (
            (f"(?:{self.text})", self.depth + 1) if self.kind == "alt" else (self.text, self.depth)
        )

    def star(self) -> "_Re":
        if self.kind == "eps":
            return self
        text, depth = self._quantifiable()
        return _Re("quant", text + "*", depth)

    def opt(self) -> "_Re":
        if self.kind == "eps" or self.text.endswith("*") and self.kind == "quant":
            return self
        text, depth = self._quantifiable()
        return _Re("quant", text + "?", depth)

    def cat(self, other: "_Re") -> "_Re":
        if self.kind == "eps":
            return other
        if other.kind == "eps":
            return self
        (a, da), (b, db) = self._concatenable(), other._concatenable()
        return _Re("cat", a + b, max(da, db))

    def alt(self, other: "_Re") -> "_Re":
        if self.text == other.text and self.kind == other.kind:
            return self
        if self.kind == "eps":
            return other.opt()
        if other.kind == "eps":
            return self.opt()
        return _Re("alt", self.text + "|" + other.text, max(self.depth, other.depth))


_EPS = _Re("eps", "")


def _char_text(code: int) -> str:
    ch = chr(code)
    return ch if ch.isascii() and ch.isalnum() else f"\\u{code:04x}"


def _class_text(ranges: tuple) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char_text(ranges[0][0])
    parts = [
        _char_text(lo) if lo == hi else f"{_char_text(lo)}-{_char_text(hi)}" for lo, hi in ranges
    ]
    return "[" + "".join(parts) + "]"

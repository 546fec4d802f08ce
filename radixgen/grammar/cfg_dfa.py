"""Regex AST (cfg_regex) -> byte NFA (Thompson) -> minimal byte DFA (subset construction + Moore).

Code-point sets become UTF-8 byte-range sequences (surrogates excluded), so a DFA walks the raw
bytes of tokens, including tokens that end in the middle of a multi-byte character.
"""

from __future__ import annotations

from radixgen.grammar.cfg_regex import ByteDfa, parse_regex

_LENGTH_LIMITS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))
MAX_DFA_STATES = 5000


def _utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose concatenations are exactly the UTF-8 encodings of lo..hi."""
    out: list[list[tuple[int, int]]] = []
    for a, b in _LENGTH_LIMITS:
        s, e = max(lo, a), min(hi, b)
        if s <= e:
            out.extend(_split_same_length(s, e))
    return out


def _split_same_length(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    if lo <= 0xDFFF and hi >= 0xD800:  # surrogates are not encodable
        parts = [(lo, 0xD7FF), (0xE000, hi)]
        return [seq for s, e in parts if s <= e for seq in _split_same_length(s, e)]
    lo_b, hi_b = chr(lo).encode(), chr(hi).encode()
    for i in range(1, len(lo_b)):
        mask = (1 << (6 * i)) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask:
                return _split_same_length(lo, lo | mask) + _split_same_length((lo | mask) + 1, hi)
            if hi & mask != mask:
                return _split_same_length(lo, (hi & ~mask) - 1) + _split_same_length(hi & ~mask, hi)
    return [list(zip(lo_b, hi_b))]


class _Nfa:
    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int, int]]] = []  # (lo byte, hi byte, target)
        self.eps: list[list[int]] = []

    def new(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: tuple, start: int) -> int:
        """Adds `node` starting at `start`; returns its end state."""
        kind = node[0]
        if kind == "set":
            end = self.new()
            for lo, hi in node[1]:
                for seq in _utf8_sequences(lo, hi):
                    self._chain(start, end, seq)
            return end
        if kind == "cat":
            for item in node[1]:
                start = self.build(item, start)
            return start
        if kind == "alt":
            end = self.new()
            for branch in node[1]:
                self.eps[self.build(branch, start)].append(end)
            return end
        return self._repeat(node, start)

    def _chain(self, start: int, end: int, seq: list[tuple[int, int]]) -> None:
        for i, (lo, hi) in enumerate(seq):
            nxt = end if i == len(seq) - 1 else self.new()
            self.edges[start].append((lo, hi, nxt))
            start = nxt

    def _repeat(self, node: tuple, start: int) -> int:
        _, body, lo, hi = node
        for _ in range(lo):
            start = self.build(body, start)
        if hi is None:
            loop = self.new()
            self.eps[start].append(loop)
            self.eps[self.build(body, loop)].append(loop)
            return loop
        end = self.new()
        for _ in range(hi - lo):
            self.eps[start].append(end)
            start = self.build(body, start)
        self.eps[start].append(end)
        return end

    def closure(self, states) -> frozenset[int]:
        seen, todo = set(states), list(states)
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


def _determinize(nfa: _Nfa, final: int) -> tuple[list[list[int]], set[int]]:
    start = nfa.closure([0])
    ids, order, trans, accepting = {start: 0}, [start], [], set()
    while len(trans) < len(order):
        current = order[len(trans)]
        if final in current:
            accepting.add(len(trans))
        bins: list[set[int]] = [set() for _ in range(256)]
        for s in current:
            for lo, hi, t in nfa.edges[s]:
                for b in range(lo, hi + 1):
                    bins[b].add(t)
        row = []
        for targets in bins:
            if not targets:
                row.append(-1)
                continue
            key = nfa.closure(targets)
            if key not in ids:
                if len(order) >= MAX_DFA_STATES:
                    raise ValueError("regex DFA is too large")
                ids[key] = len(order)
                order.append(key)
            row.append(ids[key])
        trans.append(row)
    return trans, accepting


def _minimize(trans: list[list[int]], accepting: set[int]) -> ByteDfa:
    """Moore partition refinement; unreachable-to-accept states become dead (-1)."""
    block = [1 if s in accepting else 0 for s in range(len(trans))]
    while True:
        sigs = {}
        new_block = []
        for s, row in enumerate(trans):
            sig = (block[s], tuple(block[t] if t >= 0 else -1 for t in row))
            new_block.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(block)):
            break
        block = new_block
    live = _live_states(trans, accepting)
    remap: dict[int, int] = {}
    for s in range(len(trans)):  # state 0's block first, so the start stays 0
        if s in live and block[s] not in remap:
            remap[block[s]] = len(remap)
    rows: list[tuple[int, ...] | None] = [None] * len(remap)
    for s, row in enumerate(trans):
        if s in live and rows[remap[block[s]]] is None:
            rows[remap[block[s]]] = tuple(remap.get(block[t], -1) if t in live else -1 for t in row)
    final = frozenset(remap[block[s]] for s in accepting if s in live)
    return ByteDfa(tuple(rows), final)


def _live_states(trans: list[list[int]], accepting: set[int]) -> set[int]:
    live, changed = set(accepting), True
    while changed:
        changed = False
        for s, row in enumerate(trans):
            if s not in live and any(t in live for t in row if t >= 0):
                live.add(s)
                changed = True
    return live


def compile_regex(pattern: str, rust: bool = False) -> ByteDfa:
    """A minimal byte DFA for the full-match language of a Python regex (see cfg_regex; `rust`:
    of the Rust syntax outlines-core reads)."""
    ast, lazy = parse_regex(pattern, rust)
    return compile_ast(ast, lazy, pattern)


def compile_ast(ast: tuple, lazy: bool = False, pattern: str = "") -> ByteDfa:
    """A minimal byte DFA for the full-match language of a regex AST (cfg_regex's tuples)."""
    nfa = _Nfa()
    nfa.new()
    final = nfa.build(ast, 0)
    trans, accepting = _determinize(nfa, final)
    if lazy:  # first-match semantics: nothing continues past an accepting position
        trans = [[-1] * 256 if s in accepting else row for s, row in enumerate(trans)]
    if 0 not in _live_states(trans, accepting):
        raise ValueError(f"regex {pattern or ast!r} matches nothing")
    return _minimize(trans, accepting)

"""Regex AST (cfg.terminal_regex) -> byte NFA (Thompson) -> minimal byte DFA (subset construction + Moore).

Code-point sets become UTF-8 byte-range sequences (surrogates excluded), so a DFA walks the raw
bytes of tokens, including tokens that end in the middle of a multi-byte character.
"""

from __future__ import annotations

from array import array

from radixgen.grammar.cfg.terminal_regex import ByteDfa, parse_regex

_LENGTH_LIMITS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))
MAX_DFA_STATES = (
    20000  # (as cfg.lexer.MAX_LEXER_STATES: no lexer of a larger terminal could be built)
)
MAX_NFA_STATES = 100_000  # a counted repeat is unrolled: `"a"{100000}` stops here, not in memory
# NFA states visited while determinizing (each DFA state reads its subset, each new closure is
# built): the budget that refuses `(("a"?){50}){50}` (2,500 optional bytes: every subset holds
# ~2,500 states) in under a second instead of 18 s; the shipped grammars' terminals need ~100
MAX_SUBSET_WORK = 500_000


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
        if len(self.edges) >= MAX_NFA_STATES:
            raise ValueError(
                "regex DFA is too large (its counted repeats unroll to more than "
                f"{MAX_NFA_STATES} states)"
            )
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
    closures: dict[frozenset[int], frozenset[int]] = {}  # targets -> their closure
    work = 0
    while len(trans) < len(order):
        current = order[len(trans)]
        work += len(current)
        if work > MAX_SUBSET_WORK:
            raise ValueError(
                "regex DFA is too large (building it visits more than "
                f"{MAX_SUBSET_WORK} NFA states: nested or ambiguous optional repeats)"
            )
        if final in current:
            accepting.add(len(trans))
        edges = [edge for s in current for edge in nfa.edges[s]]
        cuts = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges} | {0, 256})
        row = [-1] * 256
        for a, b in zip(cuts, cuts[1:]):  # byte intervals no edge boundary splits
            targets = frozenset(t for lo, hi, t in edges if lo <= a <= hi)
            if not targets:
                continue
            key = closures.get(targets)
            if key is None:
                key = closures[targets] = nfa.closure(targets)
                work += len(key)
            target = ids.get(key)
            if target is None:
                if len(order) >= MAX_DFA_STATES:
                    raise ValueError("regex DFA is too large")
                target = ids[key] = len(order)
                order.append(key)
            row[a:b] = [target] * (b - a)
        trans.append(
            array("i", row)
        )  # (1 KB a state, half a list's: MAX_DFA_STATES of them is 20 MB)
    return trans, accepting


def _minimize(trans: list[list[int]], accepting: set[int]) -> ByteDfa:
    """Hopcroft's partition refinement over byte classes (bytes no state tells apart); states
    that cannot reach acceptance become dead (-1). Moore's rounds would be as many as the
    longest chain of states (a `.{0,1023}` has a thousand), each over every state."""
    live = _live_states(trans, accepting)
    states = [s for s in range(len(trans)) if s in live]  # (state 0 first: the start stays 0)
    index = {s: i for i, s in enumerate(states)}
    dead = len(states)  # one dead state for every missing transition
    columns = dict.fromkeys(tuple(index.get(trans[s][b], dead) for s in states) for b in range(256))
    inverse = []  # per byte class: target -> the states that go there on it
    for column in columns:
        back: list[list[int]] = [[] for _ in range(dead + 1)]
        for i, j in enumerate(column):
            back[j].append(i)
        back[dead].append(dead)
        inverse.append(back)
    block_of = _hopcroft(inverse, [index[s] for s in accepting if s in live], dead)
    remap: dict[int, int] = {}
    for i in range(dead):
        remap.setdefault(block_of[i], len(remap))
    rows: list[tuple[int, ...] | None] = [None] * len(remap)
    for i, s in enumerate(states):
        if rows[remap[block_of[i]]] is None:
            rows[remap[block_of[i]]] = tuple(
                remap[block_of[index[t]]] if t in index else -1 for t in trans[s]
            )
    final = frozenset(remap[block_of[index[s]]] for s in accepting if s in live)
    return ByteDfa(tuple(rows), final)


def _hopcroft(inverse: list[list[list[int]]], accepting: list[int], dead: int) -> list[int]:
    """Block of each state (0..dead) in the coarsest partition that refines accepting / not
    and is stable under every byte class (`inverse[c][j]`: the states class c takes to j)."""
    block_of = [1] * (dead + 1)
    for i in accepting:
        block_of[i] = 0
    blocks = [set(accepting), set(range(dead + 1)) - set(accepting)]  # (the second holds `dead`)
    smaller = min(range(len(blocks)), key=lambda k: len(blocks[k]))
    todo = {(smaller, c) for c in range(len(inverse))}
    while todo:
        a, c = todo.pop()
        back = inverse[c]
        hit: dict[int, list[int]] = {}
        for j in blocks[a]:
            for i in back[j]:
                hit.setdefault(block_of[i], []).append(i)
        for y, members in hit.items():
            if len(members) == len(blocks[y]):
                continue
            moved = set(members)
            blocks[y] -= moved
            z = len(blocks)
            blocks.append(moved)
            for i in moved:
                block_of[i] = z
            for d in range(len(inverse)):
                if (y, d) in todo:
                    todo.add((z, d))
                else:
                    todo.add((z, d) if len(moved) <= len(blocks[y]) else (y, d))
    return block_of


def _live_states(trans: list[list[int]], accepting: set[int]) -> set[int]:
    """The states from which an accepting state can be reached (backwards from them)."""
    back: list[list[int]] = [[] for _ in trans]
    for s, row in enumerate(trans):
        for t in set(row):
            if t >= 0:
                back[t].append(s)
    live, todo = set(accepting), list(accepting)
    while todo:
        for s in back[todo.pop()]:
            if s not in live:
                live.add(s)
                todo.append(s)
    return live


def compile_regex(pattern: str, rust: bool = False) -> ByteDfa:
    """A minimal byte DFA for the full-match language of a Python regex (see cfg.terminal_regex; `rust`:
    of the Rust syntax outlines-core reads)."""
    ast, lazy = parse_regex(pattern, rust)
    return compile_ast(ast, lazy, pattern)


def compile_ast(ast: tuple, lazy: bool = False, pattern: str = "") -> ByteDfa:
    """A minimal byte DFA for the full-match language of a regex AST (cfg.terminal_regex's tuples)."""
    nfa = _Nfa()
    nfa.new()
    final = nfa.build(ast, 0)
    trans, accepting = _determinize(nfa, final)
    if lazy:  # first-match semantics: nothing continues past an accepting position
        trans = [[-1] * 256 if s in accepting else row for s, row in enumerate(trans)]
    if 0 not in _live_states(trans, accepting):
        raise ValueError(f"regex {pattern or ast!r} matches nothing")
    return _minimize(trans, accepting)

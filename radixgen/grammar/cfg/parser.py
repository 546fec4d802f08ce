"""The parser side: Lark's LALR(1) tables driven over an immutable state stack.

Lark's `InteractiveParser` builds trees and copies callbacks on every step; constrained decoding
only needs to know which terminal sequences a stack accepts, so this walks the same parse table
(`Lark(..., parser="lalr")`) with the state stack as a tuple: feeding a terminal returns a new
stack (or None on a syntax error), never mutating the old one, so a matcher's history, rollback
and fork are free. `acceptable(stack)` is exact (like `InteractiveParser.accepts()`): a terminal
counts only if the reductions it triggers end in a shift, because LALR's merged lookaheads may
list terminals that fail after some reductions.

Both are memoised by stack *suffix*: a simulation reads only the top few states of the stack
(the reductions' pops and gotos), so its result - the terminals accepted, or the new stack as
"pop k states, push these" - is stored under exactly the states it read and reused for every
stack with the same top states. Exact by construction (the same reads give the same result), and
it makes a stack never seen before (a mask's first visit) cheap when its top looks like one seen.
"""

from __future__ import annotations

from lark.parsers.lalr_analysis import Shift

from radixgen.grammar.cfg.search_budget import SizedMemo

END = "$END"
_CACHE_LIMIT = 200_000

Stack = tuple[int, ...]
_MISS = object()


class SuffixMemo:
    """Values of a computation on a stack that read only its top `depth` states, stored under
    those states (and an extra key, e.g. the terminal fed)."""

    def __init__(self) -> None:
        self._depths: dict[tuple, tuple[int, ...]] = {}  # (top state, extra) -> depths stored
        self._values: dict[tuple, object] = {}

    def get(self, stack: Stack, extra: object) -> object:
        """The stored value valid for `stack`, or _MISS."""
        values = self._values
        for depth in self._depths.get((stack[-1], extra), ()):
            hit = values.get((stack[-depth:], extra), _MISS)
            if hit is not _MISS:
                return hit
        return _MISS

    def put(self, stack: Stack, extra: object, depth: int, value: object) -> None:
        key = (stack[-1], extra)
        depths = self._depths.get(key, ())
        if depth not in depths:
            self._depths[key] = tuple(sorted(depths + (depth,)))
        if len(self._values) > _CACHE_LIMIT:
            self._values.clear()  # the depths stay: they are only the lengths to try
        self._values[(stack[-depth:], extra)] = value


class LalrTables:
    def __init__(self, lark, start: str = "start") -> None:
        table = lark.parser.parser.parser.parse_table
        self.actions: dict[int, dict] = table.states
        self.start_stack: Stack = (table.start_states[start],)
        self._end_state = table.end_states[start]
        self._feed = SuffixMemo()  # term -> None or (states popped, states pushed)
        self._acceptable = SuffixMemo()
        self._end = SizedMemo(
            _CACHE_LIMIT * 8
        )  # stack -> may the input end (keys weigh their length)
        # per state: the terminals it shifts, and its reductions as (states popped, nonterminal
        # pushed, terminals) triples
        self._shifts: dict[int, frozenset[str]] = {}
        self._reduces: dict[int, list[tuple[int, str, frozenset[str]]]] = {}
        # fast paths for callers' hot loops (the trie walk): per state, terminal -> the state it
        # shifts to (feeding it is `stack + (state,)`); per state without reductions, its
        # terminals (`acceptable` of any stack with that top, no simulation or memo lookup)
        self.shift_to: dict[int, dict[str, int]] = {}
        self.shift_only: dict[int, frozenset[str]] = {}
        for state, row in self.actions.items():
            terms = [(t, a) for t, a in row.items() if t.isupper() and t != END]
            self._shifts[state] = frozenset(t for t, (kind, _) in terms if kind is Shift)
            self.shift_to[state] = {t: arg for t, (kind, arg) in terms if kind is Shift}
            rules: dict[object, set[str]] = {}
            for t, (kind, rule) in terms:
                if kind is not Shift:
                    rules.setdefault(rule, set()).add(t)
            self._reduces[state] = [
                (len(rule.expansion), rule.origin.name, frozenset(ts)) for rule, ts in rules.items()
            ]
            if not rules:
                self.shift_only[state] = self._shifts[state]

    def feed(self, stack: Stack, term: str) -> Stack | None:
        """The stack after shifting `term` (after its reductions), or None if it is an error."""
        action = self.actions[stack[-1]].get(term)
        if action is None:
            return None
        if action[0] is Shift:  # no reduction: no simulation
            return None if term == END else stack + (action[1],)
        hit = self._feed.get(stack, term)
        if hit is _MISS:
            out, low = self._simulate(stack, term)
            hit = None if out is None else (len(stack) - low, out[low:])
            self._feed.put(stack, term, len(stack) - low + 1, hit)
        if hit is None:
            return None
        pops, pushed = hit
        return stack[: len(stack) - pops] + pushed

    def _simulate(self, stack: Stack, term: str) -> tuple[Stack | None, int]:
        """(feed's result, low): only the states from stack[low - 1] up were read."""
        actions, low = self.actions, len(stack)
        while True:
            action = actions[stack[-1]].get(term)
            if action is None:
                return None, low
            kind, arg = action
            if kind is Shift:
                return (None if term == END else stack + (arg,)), low
            # reduce by rule `arg`: pop its expansion, push the goto of its nonterminal from the
            # state below (the lowest state read: states below `keep - 1` were not)
            keep = len(stack) - len(arg.expansion)
            stack = stack[:keep] + (actions[stack[keep - 1]][arg.origin.name][1],)
            if keep < low:
                low = keep
            if term == END and stack[-1] == self._end_state:
                return stack, low

    def accepts(self, stack: Stack, term: str) -> bool:
        """Would `feed(stack, term)` succeed? A shift needs no simulation."""
        action = self.actions[stack[-1]].get(term)
        return action is not None and (action[0] is Shift or self.feed(stack, term) is not None)

    def accepts_end(self, stack: Stack) -> bool:
        """True if the input may end here."""
        out = self._end.get(stack, None)
        if out is None:
            out = self._simulate(stack, END)[0] is not None
            self._end.put(stack, out, len(stack))
        return out

    def acceptable(self, stack: Stack) -> frozenset[str]:
        """Exactly the terminals (not $END) that `feed` accepts from `stack`."""
        out = self.shift_only.get(stack[-1])
        if out is not None:  # shifts only: no simulation
            return out
        out = self._acceptable.get(stack, None)
        if out is _MISS:
            out, low = self._accepted(stack, None)
            self._acceptable.put(stack, None, len(stack) - low + 1, out)
        return out

    def _accepted(self, stack: Stack, terms: frozenset[str] | None) -> tuple[frozenset[str], int]:
        """(the terminals of `terms` (None: all) that `feed` accepts from `stack`, low as in
        `_simulate`). Terminals that trigger the same reduction share its simulation."""
        state, low = stack[-1], len(stack)
        shifts = self._shifts[state]
        out = shifts if terms is None else shifts & terms
        for pops, name, group in self._reduces[state]:
            sub = group if terms is None else group & terms
            if sub:  # reduce (as in `_simulate`), then see which of `sub` the reduced stack takes
                keep = len(stack) - pops
                reduced = stack[:keep] + (self.actions[stack[keep - 1]][name][1],)
                accepted, deeper = self._accepted(reduced, sub)
                out = out | accepted
                low = min(low, keep, deeper)
        return out, low

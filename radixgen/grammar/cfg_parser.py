"""The parser side: Lark's LALR(1) tables driven over an immutable state stack.

Lark's `InteractiveParser` builds trees and copies callbacks on every step; constrained decoding
only needs to know which terminal sequences a stack accepts, so this walks the same parse table
(`Lark(..., parser="lalr")`) with the state stack as a tuple: feeding a terminal returns a new
stack (or None on a syntax error), never mutating the old one, so a matcher's history, rollback
and fork are free. `acceptable(stack)` is exact (like `InteractiveParser.accepts()`): a terminal
counts only if the reductions it triggers end in a shift, because LALR's merged lookaheads may
list terminals that fail after some reductions.
"""

from __future__ import annotations

from lark.parsers.lalr_analysis import Shift

END = "$END"
_CACHE_LIMIT = 200_000

Stack = tuple[int, ...]


class LalrTables:
    def __init__(self, lark, start: str = "start") -> None:
        table = lark.parser.parser.parser.parse_table
        self.actions: dict[int, dict] = table.states
        self.start_stack: Stack = (table.start_states[start],)
        self._end_state = table.end_states[start]
        self._feed: dict[tuple[Stack, str], Stack | None] = {}
        self._acceptable: dict[Stack, frozenset[str]] = {}
        self._end: dict[Stack, bool] = {}

    def feed(self, stack: Stack, term: str) -> Stack | None:
        """The stack after shifting `term` (after its reductions), or None if it is an error."""
        key = (stack, term)
        out = self._feed.get(key, key)
        if out is key:
            out = self._simulate(stack, term)
            if len(self._feed) > _CACHE_LIMIT:
                self._feed.clear()
            self._feed[key] = out
        return out

    def _simulate(self, stack: Stack, term: str) -> Stack | None:
        actions = self.actions
        while True:
            action = actions[stack[-1]].get(term)
            if action is None:
                return None
            kind, arg = action
            if kind is Shift:
                return None if term == END else stack + (arg,)
            size = len(arg.expansion)
            if size:
                stack = stack[:-size]
            stack = stack + (actions[stack[-1]][arg.origin.name][1],)
            if term == END and stack[-1] == self._end_state:
                return stack

    def accepts(self, stack: Stack, term: str) -> bool:
        """Would `feed(stack, term)` succeed? A shift needs no simulation."""
        action = self.actions[stack[-1]].get(term)
        return action is not None and (action[0] is Shift or self.feed(stack, term) is not None)

    def accepts_end(self, stack: Stack) -> bool:
        """True if the input may end here."""
        out = self._end.get(stack)
        if out is None:
            out = self._end[stack] = self._simulate(stack, END) is not None
        return out

    def can_continue(self, stack: Stack) -> bool:
        """True if some terminal may still follow (not only the end of input). Where only the
        end may follow, ignored text (trailing whitespace) is not allowed either: the only
        continuation of a finished parse is EOS, so generation stops instead of padding."""
        return bool(self.acceptable(stack))

    def acceptable(self, stack: Stack) -> frozenset[str]:
        """Exactly the terminals (not $END) that `feed` accepts from `stack`."""
        out = self._acceptable.get(stack)
        if out is None:
            names = (t for t in self.actions[stack[-1]] if t.isupper() and t != END)
            out = frozenset(t for t in names if self.feed(stack, t) is not None)
            if len(self._acceptable) > _CACHE_LIMIT:
                self._acceptable.clear()
            self._acceptable[stack] = out
        return out

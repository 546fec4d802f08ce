"""Bounds on the work and memory of searches over a grammar at decoding time.

A CFG matcher's state holds an LALR stack as long as the output's nesting, so every memo keyed
by stacks (masks, $END tests, shortest completions) and every search that builds stacks grows
with the output, and a grammar whose completions are long makes each search long. None of this
may grow without bound in the scheduler: memos are bounded by the total length of the stacks
they hold (`SizedMemo`), and a search is given a number of work units (`WorkBudget`, one unit
about one stack state touched) after which it raises `OutOfBudget`, which the caller turns into
a safe degradation (no narrowing for that step), never an error of the request or the process.
Units rather than seconds keep outputs deterministic: the same request narrows the same way on
a loaded machine and an idle one.
"""

from __future__ import annotations

_MISS = object()


class OutOfBudget(Exception):
    """A search spent its work units; `budget` is the WorkBudget that ran out."""

    def __init__(self, budget: "WorkBudget") -> None:
        super().__init__("search budget spent")
        self.budget = budget


class WorkBudget:
    """Work units left to one search; spending also spends the `parent`'s (one mask's searches
    together), and OutOfBudget names whichever ran out first."""

    __slots__ = ("left", "parent")

    def __init__(self, units: int, parent: "WorkBudget | None" = None) -> None:
        self.left, self.parent = units, parent

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise OutOfBudget(self)
        if self.parent is not None:
            self.parent.spend(units)


class SizedMemo:
    """A dict bounded by the total size of its entries (a stack key weighs its length): cleared
    when it would exceed `max_weight` (a memo, so losing entries costs only recomputation)."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self.weight = 0
        self._values: dict = {}

    def get(self, key, default=_MISS):
        return self._values.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def put(self, key, value, weight: int) -> None:
        """Store `value` under `key`, counting `weight` (at least 1) against the bound."""
        weight = max(1, weight)
        if self.weight + weight > self.max_weight:
            self._values.clear()
            self.weight = 0
        if key not in self._values:
            self.weight += weight
        self._values[key] = value

"""The cheapest way to complete an LALR parser stack, read off the grammar's LR(0) items.

Lark keeps only the parse table, not the item sets behind its states (and a cached table numbers
its states differently from a fresh one), so the LR(0) automaton is rebuilt here from the rules
and matched to the table's states by walking both from the start state along the same symbols:
the two automata are the same up to state names.

A stack's top state was pushed while reading some rule A -> alpha . beta of its kernel items,
its top len(alpha) states being alpha. Every completion finishes one of these: it spells beta,
reduces A (popping alpha, pushing the goto of A from the state below), then completes that
stack. With each symbol's cheapest yield (a fixpoint over the rules, a terminal costing what the
caller says), the cheapest completion is a minimum over the top state's kernel items, one level
of recursion per reduction, memoised per stack. The terminals found form a sentence of the
grammar with the stack's prefix, so the LALR parser accepts them unless the table resolved a
conflict against them; callers check (`Closer` feeds them to the parser).
"""

from __future__ import annotations

from lark.parsers.lalr_analysis import Shift

_MISS = object()
_MEMO_LIMIT = 100_000

Yield = tuple[int, tuple[str, ...]]  # (cost, terminal names)


class StackCompletions:
    def __init__(self, rules: list, parser, start: str, cost: dict[str, int],
                 kernels: dict[int, tuple] | None = None) -> None:
        """`kernels`: table state -> its kernel items, where the table's builder kept them
        (json_cfg's lalr_table); else the LR(0) automaton is rebuilt and matched to the table."""
        self.parser = parser
        self._rhs = [tuple(s.name for s in r.expansion) for r in rules] + [(start,)]
        self._origin = [r.origin.name for r in rules] + ["$root"]
        self._root = len(rules)  # the augmented rule $root -> start
        self._by_origin: dict[str, list[int]] = {}
        for i, name in enumerate(self._origin[:self._root]):
            self._by_origin.setdefault(name, []).append(i)
        self.yields = self._cheapest_yields(cost)
        self.kernel = kernels if kernels is not None else self._kernels(parser.start_stack[0])
        self._memo: dict = {}

    def _cheapest_yields(self, cost: dict[str, int]) -> dict[str, Yield]:
        """Per symbol, its cheapest terminal string (terminals without a cost never appear)."""
        out: dict[str, Yield] = {t: (c, (t,)) for t, c in cost.items()}
        changed = True
        while changed:
            changed = False
            for i, rhs in enumerate(self._rhs[:self._root]):
                found = self._sequence(out, rhs)
                name = self._origin[i]
                if found is not None and (name not in out or found[0] < out[name][0]):
                    out[name] = found
                    changed = True
        return out

    @staticmethod
    def _sequence(yields: dict[str, Yield], symbols) -> Yield | None:
        total, terms = 0, ()
        for s in symbols:
            y = yields.get(s)
            if y is None:
                return None
            total, terms = total + y[0], terms + y[1]
        return total, terms

    def _closure(self, kernel: frozenset) -> set:
        items, todo = set(kernel), list(kernel)
        while todo:
            rule, dot = todo.pop()
            rhs = self._rhs[rule]
            if dot < len(rhs) and rhs[dot] in self._by_origin:
                for r in self._by_origin[rhs[dot]]:
                    if (r, 0) not in items:
                        items.add((r, 0))
                        todo.append((r, 0))
        return items

    def _kernels(self, start_state: int) -> dict[int, tuple[tuple[int, int], ...]]:
        """Table state -> its kernel items (rule index, dot), for the states the walk reaches."""
        actions = self.parser.actions
        root = frozenset({(self._root, 0)})
        out, todo = {start_state: root}, [(start_state, root)]
        while todo:
            state, kernel = todo.pop()
            moves: dict[str, set] = {}
            for rule, dot in self._closure(kernel):
                rhs = self._rhs[rule]
                if dot < len(rhs):
                    moves.setdefault(rhs[dot], set()).add((rule, dot + 1))
            for symbol, items in moves.items():
                action = actions[state].get(symbol)
                if action is None or action[0] is not Shift:  # a conflict the table resolved
                    continue
                nxt = action[1]
                if nxt not in out:
                    out[nxt] = frozenset(items)
                    todo.append((nxt, out[nxt]))
        return {s: tuple(k) for s, k in out.items()}

    def complete(self, stack) -> tuple[str, ...] | None:
        """The cheapest terminal sequence completing `stack` (None: no item path found)."""
        found = self._complete(stack, set())
        return None if found is None else found[1]

    def _complete(self, stack, active: set) -> Yield | None:
        known = self._memo.get(stack, _MISS)
        if known is not _MISS:
            return known
        if self.parser.accepts_end(stack):
            return 0, ()
        if stack in active:  # a chain of unit reductions came back: no progress this way
            return None
        active.add(stack)
        best = None
        for rule, dot in self.kernel.get(stack[-1], ()):
            rest = self._sequence(self.yields, self._rhs[rule][dot:])
            if rest is None or (best is not None and rest[0] >= best[0]):
                continue
            if rule == self._root:  # $root -> . start: the whole input is still to come
                after = (0, ())
            elif dot >= len(stack):
                continue
            else:
                below = stack[:-dot]
                goto = self.parser.actions[below[-1]].get(self._origin[rule])
                after = None if goto is None else self._complete(below + (goto[1],), active)
            if after is not None and (best is None or rest[0] + after[0] < best[0]):
                best = rest[0] + after[0], rest[1] + after[1]
        active.discard(stack)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[stack] = best
        return best

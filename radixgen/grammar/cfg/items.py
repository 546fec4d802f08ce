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

from radixgen.grammar.cfg.search_budget import SizedMemo, WorkBudget

_MISS = object()
_MEMO_WEIGHT = 4_000_000  # stack states the memo's keys may hold together (~32 MB)

Yield = tuple[int, tuple[str, ...]]  # (cost, terminal names)


class StackCompletions:
    def __init__(
        self,
        rules: list,
        parser,
        start: str,
        cost: dict[str, int],
        kernels: dict[int, tuple] | None = None,
    ) -> None:
        """`kernels`: table state -> its kernel items, where the table's builder kept them
        (json_grammar.cfg's cfg.lalr_table); else the LR(0) automaton is rebuilt and matched to the table."""
        self.parser = parser
        self._rhs = [tuple(s.name for s in r.expansion) for r in rules] + [(start,)]
        self._origin = [r.origin.name for r in rules] + ["$root"]
        self._root = len(rules)  # the augmented rule $root -> start
        self._by_origin: dict[str, list[int]] = {}
        for i, name in enumerate(self._origin[: self._root]):
            self._by_origin.setdefault(name, []).append(i)
        self.yields = self._cheapest_yields(cost)
        self.kernel = kernels if kernels is not None else self._kernels(parser.start_stack[0])
        self._memo = SizedMemo(_MEMO_WEIGHT)

    def _cheapest_yields(self, cost: dict[str, int]) -> dict[str, Yield]:
        """Per symbol, its cheapest terminal string (terminals without a cost never appear)."""
        out: dict[str, Yield] = {t: (c, (t,)) for t, c in cost.items()}
        changed = True
        while changed:
            changed = False
            for i, rhs in enumerate(self._rhs[: self._root]):
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

    def complete(self, stack, budget: WorkBudget | None = None) -> tuple[str, ...] | None:
        """The cheapest terminal sequence completing `stack` (None: no item path found).
        `budget`: work units (a stack state each) it may spend, else OutOfBudget."""
        found = self._complete(stack, budget or WorkBudget(1 << 62))
        return None if found is None else _flatten(found[1])

    def _complete(self, stack, budget: WorkBudget) -> "Linked | None":
        """Depth first over the reductions (one frame per stack; an explicit stack of frames,
        since a completion reduces once per nesting level and outputs nest deeper than Python
        recurses). A frame is [stack, its kernel items left, best so far, the item waited on]."""
        found = self._known(stack)
        if found is not _MISS:
            return found
        frames, active, returned = (
            [[stack, iter(self.kernel.get(stack[-1], ())), None, None]],
            {stack},
            _MISS,
        )
        while frames:
            frame = frames[-1]
            if returned is not _MISS:  # the frame's waited-on item came back with `returned`
                frame[2] = _better(frame[2], frame[3], returned)
                returned = _MISS
            child = self._next_child(frame, active, budget)
            if child is not None:
                active.add(child)
                frames.append([child, iter(self.kernel.get(child[-1], ())), None, None])
                continue
            frames.pop()
            active.discard(frame[0])
            self._memo.put(frame[0], frame[2], len(frame[0]))
            returned = frame[2]
        return returned

    def _next_child(self, frame: list, active: set, budget: WorkBudget):
        """Fold the frame's items whose completion is known into its best; the stack below the
        first that needs a search of its own (frame[3] = that item's own cost), or None."""
        stack, items = frame[0], frame[1]
        for rule, dot in items:
            rest = self._sequence(self.yields, self._rhs[rule][dot:])
            if rest is None or (frame[2] is not None and rest[0] >= frame[2][0]):
                continue
            if rule == self._root:  # $root -> . start: the whole input is still to come
                frame[2] = _better(frame[2], rest, (0, None))
                continue
            if dot >= len(stack):
                continue
            below = stack[:-dot]
            budget.spend(len(below))
            goto = self.parser.actions[below[-1]].get(self._origin[rule])
            if goto is None:
                continue
            child = below + (goto[1],)
            known = self._known(child)
            if known is _MISS and child in active:  # a chain of unit reductions came back
                continue
            if known is _MISS:
                frame[3] = rest
                return child
            frame[2] = _better(frame[2], rest, known)
        return None

    def _known(self, stack):
        """The memoised completion of `stack`, (0, None) where it may end, or _MISS."""
        known = self._memo.get(stack, _MISS)
        if known is _MISS and self.parser.accepts_end(stack):
            return (0, None)
        return known


# a completion's terminals as a linked list ((terminals, rest) or None), so that the frames of a
# deep stack share their tails instead of each holding its whole completion
Linked = tuple[int, "tuple | None"]


def _better(best, rest: Yield, after):
    """The cheaper of `best` and `rest` followed by `after` (either may be None: no path)."""
    if after is None or rest is None:
        return best
    cost = rest[0] + after[0]
    if best is not None and cost >= best[0]:
        return best
    return cost, (rest[1], after[1])


def _flatten(linked) -> tuple[str, ...]:
    out: list[str] = []
    while linked is not None:
        out.extend(linked[0])
        linked = linked[1]
    return tuple(out)

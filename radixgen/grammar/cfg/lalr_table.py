"""LALR(1) parse tables over integer items (DeRemer and Pennello), in Lark's table format.

A JSON Schema compiled to a grammar (json_grammar.cfg) has thousands of rules and states whose item sets
hold hundreds of items (an object's optional properties); Lark's analysis, written for grammars
a person writes, spends most of a large schema's compile time hashing its item and symbol
objects. The same construction over ints: items are (rule, dot) numbered per rule, item sets
of LR(0) states are closures of their kernels (a nonterminal's closure computed once),
lookaheads come from the reads / includes relations through an iterative `digraph` over
bitsets of terminals. Conflicts are resolved as Lark resolves them: reduce/reduce by rule
priority (an error where the best is tied), shift/reduce as the shift. The table equals Lark's
own on the same rules (tests/grammar/json_grammar/test_cfg.py).
"""

from __future__ import annotations

from lark.exceptions import GrammarError as LarkGrammarError
from lark.grammar import NonTerminal, Rule
from lark.parsers.lalr_analysis import IntParseTable, Reduce, Shift

END = "$END"


class LalrTable:
    """`table`: Lark's IntParseTable of `rules` (Lark Rule objects) from `start`; `items[state]`
    the LR(0) item set of each state as (rule index, dot) pairs, the root rule last."""

    def __init__(self, rules: list[Rule], start: str) -> None:
        self.rules = list(rules) + [Rule(NonTerminal("$root_" + start), [NonTerminal(start)])]
        self._symbols()
        self._lr0()
        follow = self._lookaheads()
        self.table = self._table(follow)

    def kernels(self) -> dict[int, tuple[tuple[int, int], ...]]:
        """State -> its kernel items (rule index, dot): those past their start, and the root's."""
        root = len(self.rules) - 1
        return {
            sid: tuple(item for item in items if item[1] > 0 or item[0] == root)
            for sid, items in enumerate(self.items)
        }

    # symbols and items ---------------------------------------------------------------------
    def _symbols(self) -> None:
        names: dict[str, int] = {}
        self.by_origin: dict[int, list[int]] = {}
        self.expansions: list[tuple[int, ...]] = []
        self.terminal: list[bool] = []
        for k, rule in enumerate(self.rules):
            for symbol in (rule.origin, *rule.expansion):
                if symbol.name not in names:
                    names[symbol.name] = len(names)
                    self.terminal.append(symbol.is_term)
            self.by_origin.setdefault(names[rule.origin.name], []).append(k)
            self.expansions.append(tuple(names[s.name] for s in rule.expansion))
        for name in list(names):  # (a nonterminal without rules is an error, as in Lark)
            if not self.terminal[names[name]] and names[name] not in self.by_origin:
                raise LarkGrammarError(f"Using an undefined rule: {name}")
        self.names = list(names)
        self.name_id = names
        if END not in names:
            self.name_id[END] = len(self.names)
            self.names.append(END)
            self.terminal.append(True)
        self.origins = [names[rule.origin.name] for rule in self.rules]
        self.nullable = _nullable(
            list(zip(self.origins, self.expansions)), lambda s: self.terminal[s]
        )
        self._closures: dict[int, frozenset[tuple[int, int]]] = {}

    def _closure_of(self, symbol: int) -> frozenset[tuple[int, int]]:
        """The items (rule, 0) that start `symbol`'s expansions, transitively."""
        found = self._closures.get(symbol)
        if found is None:
            items, seen, todo = set(), {symbol}, [symbol]
            while todo:
                for k in self.by_origin[todo.pop()]:
                    items.add((k, 0))
                    expansion = self.expansions[k]
                    if expansion and not self.terminal[expansion[0]] and expansion[0] not in seen:
                        seen.add(expansion[0])
                        todo.append(expansion[0])
            found = self._closures[symbol] = frozenset(items)
        return found

    # LR(0) ---------------------------------------------------------------------------------
    def _lr0(self) -> None:
        root = len(self.rules) - 1
        kernels: dict[frozenset, int] = {}
        self.items: list[frozenset[tuple[int, int]]] = []
        self.goto: list[dict[int, int]] = []

        def state_of(kernel: frozenset) -> int:
            sid = kernels.get(kernel)
            if sid is None:
                sid = kernels[kernel] = len(self.items)
                closure = set(kernel)
                for k, dot in kernel:
                    expansion = self.expansions[k]
                    if dot < len(expansion) and not self.terminal[expansion[dot]]:
                        closure |= self._closure_of(expansion[dot])
                self.items.append(frozenset(closure))
                self.goto.append({})
            return sid

        self.start_state = state_of(frozenset([(root, 0)]))
        sid = 0
        while sid < len(self.items):
            moves: dict[int, list[tuple[int, int]]] = {}
            for k, dot in self.items[sid]:
                expansion = self.expansions[k]
                if dot < len(expansion):
                    moves.setdefault(expansion[dot], []).append((k, dot + 1))
            for symbol, kernel in moves.items():
                self.goto[sid][symbol] = state_of(frozenset(kernel))
            sid += 1
        root_done = (root, len(self.expansions[root]))
        self.end_state = next(s for s, items in enumerate(self.items) if root_done in items)

    # lookaheads ----------------------------------------------------------------------------
    def _lookaheads(self) -> dict[tuple[int, int], int]:
        """(state, rule) -> bitset of the terminals after which the state reduces by the rule."""
        transitions: dict[tuple[int, int], int] = {}  # (state, nonterminal) -> index
        for sid, moves in enumerate(self.goto):
            for symbol in moves:
                if not self.terminal[symbol]:
                    transitions[(sid, symbol)] = len(transitions)
        keys = list(transitions)
        direct, reads = [0] * len(keys), [[] for _ in keys]
        for i, (sid, symbol) in enumerate(keys):
            target = self.goto[sid][symbol]
            for s2 in self.goto[target]:
                if self.terminal[s2]:
                    direct[i] |= 1 << s2
                elif s2 in self.nullable:
                    reads[i].append(transitions[(target, s2)])
        direct[transitions[(self.start_state, self.expansions[-1][0])]] |= 1 << self.name_id[END]
        includes: list[list[int]] = [[] for _ in keys]
        lookback: dict[tuple[int, int], list[int]] = {}
        by_state: dict[int, dict[int, list[tuple[int, int]]]] = {}
        for i, (sid, symbol) in enumerate(keys):
            grouped = by_state.get(sid)
            if grouped is None:
                grouped = by_state[sid] = {}
                for k, dot in self.items[sid]:
                    grouped.setdefault(self.origins[k], []).append((k, dot))
            # (every item of the state with that origin, from its dot, as Lark's analysis walks
            # them: the same table)
            for k, dot in grouped[symbol]:
                expansion, at = self.expansions[k], sid
                for j in range(dot, len(expansion)):
                    s = expansion[j]
                    if not self.terminal[s] and all(x in self.nullable for x in expansion[j + 1 :]):
                        includes[transitions[(at, s)]].append(i)
                    at = self.goto[at][s]
                if dot == 0:
                    lookback.setdefault((at, k), []).append(i)
        follow = _digraph(includes, _digraph(reads, direct))
        out: dict[tuple[int, int], int] = {}
        for key, sources in lookback.items():
            bits = 0
            for i in sources:
                bits |= follow[i]
            out[key] = bits
        return out

    # the table -----------------------------------------------------------------------------
    def _table(self, follow: dict[tuple[int, int], int]) -> IntParseTable:
        states: dict[int, dict[str, tuple]] = {}
        by_state: dict[int, list[tuple[int, int]]] = {}
        for (sid, k), bits in follow.items():
            by_state.setdefault(sid, []).append((k, bits))
        collisions = []
        for sid, moves in enumerate(self.goto):
            actions = {self.names[s]: (Shift, target) for s, target in moves.items()}
            reductions: dict[int, list[int]] = {}
            for k, bits in by_state.get(sid, ()):
                for t in _bits(bits):
                    reductions.setdefault(t, []).append(k)
            for t, ks in reductions.items():
                if len(ks) > 1:
                    ranked = sorted(
                        ((self.rules[k].options.priority or 0, k) for k in ks), key=lambda p: -p[0]
                    )
                    if ranked[0][0] == ranked[1][0]:
                        collisions.append((self.names[t], [self.rules[k] for k in ks]))
                        continue
                    ks = [ranked[0][1]]
                name = self.names[t]
                if name not in actions:  # (a shift/reduce conflict keeps the shift)
                    actions[name] = (Reduce, self.rules[ks[0]])
            states[sid] = actions
        if collisions:
            raise LarkGrammarError(
                "\n\n".join(
                    f"Reduce/Reduce collision in {t} between the following rules: "
                    + "".join(f"\n\t- {r}" for r in rules)
                    for t, rules in collisions
                )
            )
        return IntParseTable(
            states,
            {self.names[self.expansions[-1][0]]: self.start_state},
            {self.names[self.expansions[-1][0]]: self.end_state},
        )


def _nullable(rules: list[tuple], is_terminal) -> set:
    """The origins of (origin, expansion) rules that derive the empty text: each rule waits for
    the symbols of its expansion (none with a terminal can be empty), its origin nullable once
    they all are."""
    waiting: dict = {}
    left, todo = [], []
    for k, (origin, expansion) in enumerate(rules):
        if any(is_terminal(s) for s in expansion):
            left.append(-1)
            continue
        left.append(len(expansion))
        for s in expansion:
            waiting.setdefault(s, []).append(k)  # (once per occurrence)
        if not expansion:
            todo.append(origin)
    nullable: set = set()
    while todo:
        symbol = todo.pop()
        if symbol in nullable:
            continue
        nullable.add(symbol)
        for k in waiting.get(symbol, ()):
            left[k] -= 1
            if left[k] == 0:
                todo.append(rules[k][0])
    return nullable


def _bits(bits: int):
    """The set bits' positions."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


def _digraph(edges: list[list[int]], init: list[int]) -> list[int]:
    """F(x) = init(x) | the union of F(y) over edges x -> y (DeRemer and Pennello's digraph:
    Tarjan's strongly connected components, each sharing one set), iteratively."""
    n = len(edges)
    done = n + 1
    result, low, depth = list(init), [0] * n, [0] * n
    stack: list[int] = []
    for root in range(n):
        if low[root]:
            continue
        stack.append(root)
        low[root] = depth[root] = len(stack)
        work = [(root, 0)]
        while work:
            x, i = work[-1]
            if i < len(edges[x]):
                work[-1] = (x, i + 1)
                y = edges[x][i]
                if low[y] == 0:
                    stack.append(y)
                    low[y] = depth[y] = len(stack)
                    work.append((y, 0))
                else:
                    low[x] = min(low[x], low[y])
                    result[x] |= result[y]
                continue
            work.pop()
            if low[x] == depth[x]:
                while True:
                    top = stack.pop()
                    low[top] = done
                    result[top] = result[x]
                    if top == x:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[x])
                result[parent] |= result[x]
    return result


def terminal_follows(
    rules: dict[str, list[list[str]]], terminals: list[str], start: str
) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """(the terminals a text of `start` can begin with, per terminal the terminals that can come
    right after it) of a grammar given as rule name -> alternatives of symbol names: the FIRST
    and FOLLOW sets, as bitsets through `_digraph`."""
    bit = {name: 1 << i for i, name in enumerate(terminals)}
    names = list(rules)
    index = {name: i for i, name in enumerate(names)}
    nullable = _nullable(
        [(name, alt) for name, alternatives in rules.items() for alt in alternatives],
        lambda s: s in bit,
    )

    def firsts(symbols: list[str]) -> tuple[int, list[int], bool]:
        """(terminal bits, rules whose FIRST joins, all nullable) of a symbol sequence."""
        bits, joined = 0, []
        for s in symbols:
            if s in bit:
                return bits | bit[s], joined, False
            joined.append(index[s])
            if s not in nullable:
                return bits, joined, False
        return bits, joined, True

    init, edges = [0] * len(names), [[] for _ in names]
    for name, alternatives in rules.items():
        for alt in alternatives:
            bits, joined, _ = firsts(alt)
            init[index[name]] |= bits
            edges[index[name]] += joined
    first = _digraph(edges, init)
    # FOLLOW over every symbol: terminals after the rules
    symbols = names + [t for t in terminals if t not in index]
    where = {s: i for i, s in enumerate(symbols)}
    init, edges = [0] * len(symbols), [[] for _ in symbols]
    for name, alternatives in rules.items():
        for alt in alternatives:
            for i, s in enumerate(alt):
                bits, joined, rest_nullable = firsts(alt[i + 1 :])
                for r in joined:
                    bits |= first[r]
                init[where[s]] |= bits
                if rest_nullable:
                    edges[where[s]].append(where[name])
    follow = _digraph(edges, init)
    return (
        frozenset(terminals[i] for i in _bits(first[index[start]])),
        {t: frozenset(terminals[i] for i in _bits(follow[where[t]])) for t in terminals},
    )

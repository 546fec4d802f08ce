"""The subset construction of a lookaround automaton (automata.lookaround_nfa) over atoms, and its
minimisation (regex.lookaround's docstring says how lookarounds run as threads)."""

from __future__ import annotations

from radixgen.grammar.automata.lookaround_nfa import LookaroundError, Nfa, intersect, norm

MAX_STATES = 2000  # automaton states before the pattern is refused


class Dfa:
    """The automaton over atoms: a configuration is (at the start, each lookbehind's states,
    threads); a thread is (state, must end, obligations), an obligation (positive, final of
    the lookahead, its threads (state, must end))."""

    def __init__(self, nfa: Nfa):
        self.nfa = nfa
        sets = {label[1] for edges in nfa.edges for label, _ in edges if label[0] == "c"}
        self.atom_sets, self.atoms_of = _atoms(sets, nfa.universe)
        # each lookbehind's `.*Y` automaton starts anew at every position: its start's closure
        self.behind_starts = [self._plain_closure([y_start]) for y_start, _ in nfa.behind]
        start = (True, tuple(self.behind_starts))
        first = self._config(start, [(0, False, frozenset())])  # state 0: the start
        self.states, self.moves, self.accepting = [first], [], []
        index = {first: 0}
        i = 0
        while i < len(self.states):
            config = self.states[i]
            self.accepting.append(self._accepts(config))
            row = {}
            for atom in range(len(self.atom_sets)):
                nxt = self._step(config, atom)
                if not nxt[2]:
                    continue
                if nxt not in index:
                    if len(self.states) >= MAX_STATES:
                        raise LookaroundError(f"its automaton has more than {MAX_STATES} states")
                    index[nxt] = len(self.states)
                    self.states.append(nxt)
                row[atom] = index[nxt]
            self.moves.append(row)
            i += 1

    # -- lookbehinds: the states of `.*Y` after the prefix read so far
    def _plain_closure(self, states) -> frozenset:
        seen, stack = set(states), list(states)
        while stack:
            for label, dst in self.nfa.edges[stack.pop()]:
                if label[0] == "e" and dst not in seen:
                    seen.add(dst)
                    stack.append(dst)
        return frozenset(seen)

    def _read(self, state: int, atom: int):
        for label, dst in self.nfa.edges[state]:
            if label[0] == "c" and atom in self.atoms_of[label[1]]:
                yield dst

    # -- threads
    def _config(self, glob, threads) -> tuple:
        out = set()
        for state, must_end, obligations in threads:
            self._closure(glob, state, must_end, obligations, out)
        return (glob[0], glob[1], frozenset(out))

    def _closure(self, glob, state, must_end, obligations, out: set) -> None:
        stack, seen = [(state, must_end, obligations)], set()
        while stack:
            thread = stack.pop()
            if thread in seen:
                continue
            seen.add(thread)
            s, end, obs = thread
            if s == self.nfa.final or any(label[0] == "c" for label, _ in self.nfa.edges[s]):
                out.add(thread)
            for label, dst in self.nfa.edges[s]:
                kind = label[0]
                if kind == "e" or (kind == "^" and glob[0]):
                    stack.append((dst, end, obs))
                elif kind == "$":
                    stack.append((dst, True, obs))
                elif kind == "lb":
                    if (self.nfa.behind[label[1]][1] in glob[1][label[1]]) == label[2]:
                        stack.append((dst, end, obs))
                elif kind == "la":
                    ahead = self._ahead_closure(glob, [(label[1], False)])
                    decided = _decide(label[3], label[2], ahead)
                    if decided != "dead":
                        stack.append((dst, end, obs if decided == "ok" else obs | {decided}))

    def _ahead_closure(self, glob, threads) -> frozenset:
        seen, stack = set(threads), list(threads)
        while stack:
            s, end = stack.pop()
            for label, dst in self.nfa.edges[s]:
                nxt = None
                if label[0] == "e" or (label[0] == "^" and glob[0]):
                    nxt = (dst, end)
                elif label[0] == "$":
                    nxt = (dst, True)
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    def _step(self, config, atom: int) -> tuple:
        behind = tuple(
            self._plain_closure([d for s in states for d in self._read(s, atom)]) | begun
            for states, begun in zip(config[1], self.behind_starts)
        )
        glob = (False, behind)
        threads = []
        for state, must_end, obligations in config[2]:
            if must_end:
                continue
            targets = list(self._read(state, atom))
            if not targets:
                continue
            kept, alive = set(), True
            for positive, final, ahead in obligations:
                moved = self._ahead_closure(
                    glob, [(d, False) for s, end in ahead if not end for d in self._read(s, atom)]
                )
                decided = _decide(positive, final, moved)
                if decided == "dead":
                    alive = False
                    break
                if decided != "ok":
                    kept.add(decided)
            if alive:
                threads += [(d, False, frozenset(kept)) for d in targets]
        return self._config(glob, threads)

    def _accepts(self, config) -> bool:
        return any(
            state == self.nfa.final
            and all(
                any(s == final for s, _ in ahead) == positive
                for positive, final, ahead in obligations
            )
            for state, _, obligations in config[2]
        )

    def minimal(self) -> tuple[list[dict], list[bool]]:
        """The minimal automaton of the states that can reach acceptance: (moves, accepting),
        state 0 the start."""
        n = len(self.states)
        live = {i for i in range(n) if self.accepting[i]}
        changed = True
        while changed:
            changed = False
            for i in range(n):
                if i not in live and any(j in live for j in self.moves[i].values()):
                    live.add(i)
                    changed = True
        if 0 not in live:
            raise LookaroundError(
                "it matches no string that can be written out (JSON string contents "
                "hold no control character, '\"' or '\\' unescaped)"
            )
        block = {i: int(self.accepting[i]) for i in live}
        while True:
            keys = {
                i: (
                    block[i],
                    tuple(sorted((a, block[j]) for a, j in self.moves[i].items() if j in live)),
                )
                for i in live
            }
            names: dict = {}
            new = {i: names.setdefault(keys[i], len(names)) for i in sorted(live)}
            if len(names) == len(set(block.values())):
                break
            block = new
        order = {}
        for i in sorted(live):  # the start's block first
            order.setdefault(new[i], len(order))
        moves: list[dict] = [{} for _ in order]
        accepting = [False] * len(order)
        for i in live:
            b = order[new[i]]
            accepting[b] = self.accepting[i]
            for a, j in self.moves[i].items():
                if j in live:
                    moves[b][a] = order[new[j]]
        return moves, accepting


def _decide(positive: bool, final: int, ahead: frozenset):
    """An obligation's fate: "ok" (kept no longer), "dead" (its thread dies), or the obligation."""
    if any(s == final and not end for s, end in ahead):  # the lookahead has matched
        return "ok" if positive else "dead"
    if not ahead:
        return "dead" if positive else "ok"
    return (positive, final, ahead)


def _atoms(sets, universe: tuple) -> tuple[list[tuple], dict]:
    """The universe cut into atoms (sets of code points no class of `sets` tells apart), and the
    atoms of each set."""
    sets = list(sets)
    cuts = {lo for lo, _ in universe} | {hi + 1 for _, hi in universe}
    for s in sets:
        cuts |= {lo for lo, _ in s} | {hi + 1 for _, hi in s}
    cuts = sorted(cuts)
    pieces = [(a, b - 1) for a, b in zip(cuts, cuts[1:]) if intersect(((a, b - 1),), universe)]
    groups: dict = {}
    for lo, hi in pieces:
        signature = tuple(any(a <= lo and hi <= b for a, b in s) for s in sets)
        groups.setdefault(signature, []).append((lo, hi))
    atom_sets = [norm(v) for v in groups.values()]
    signatures = list(groups)
    atoms_of = {
        s: frozenset(i for i, sig in enumerate(signatures) if sig[k]) for k, s in enumerate(sets)
    }
    return atom_sets, atoms_of

"""A byte-level lexer DFA that lexes exactly like Lark's basic lexer (conservatively).

Lark's lexer tries terminals in a fixed order (priority, then max width, then pattern length,
then name) and takes the first that matches, with its greedy match; a regex terminal's match is
then retyped to an equal string terminal of the same priority (the "unless" keywords, e.g.
NAME "select" -> SELECT). Here every terminal is a byte DFA (cfg.dfa) and a lexer state is the
tuple of live candidates `(candidate, dfa_state)` in that order, so all terminals a prefix may
still become advance together, byte by byte:

- once a candidate accepts, every later candidate is dropped (it can no longer win), except the
  keyword "shadows" of that candidate, which decide its final type;
- a byte that extends some live candidate extends the token (greedy, as Python's `re`);
- a byte that extends none ends the token: its type is that of the last (winning) candidate if
  it accepts at this length, and the byte starts a new token from FRESH;
- otherwise (a winner would need to give back bytes) the text is rejected: a conservative
  refusal of rare texts such as "1.x" for FLOAT|INT, never an acceptance Lark would not lex alike.

The product automaton is built eagerly: `trans[q, byte]`, `emit[q, byte]` (the type a byte
finalises, or -1) and, per state, `winnable[q]`: the types the current token may still end as.
Lexing is context-free (all terminals, like Lark's `lexer="basic"`): a terminal sequence it
produces that the parser accepts is also what Lark's default contextual lexer produces (that
lexer only removes terminals the parser cannot take; tests/grammar/cfg/test_toy.py checks this
differentially). The price: where the contextual lexer would read a keyword as a NAME because
the keyword is not acceptable there, this lexer refuses it (keywords are reserved everywhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from radixgen.grammar.cfg.dfa import compile_regex
from radixgen.grammar.cfg.terminal_regex import ByteDfa

DEAD, FRESH = 0, 1
MAX_LEXER_STATES = 20000


@dataclass(frozen=True)
class _Candidate:
    name: str
    dfa: ByteDfa
    parent: int  # index of the regex candidate this keyword shadows; -1 for real candidates


def _lark_order(terminals: list) -> list:
    return sorted(
        terminals, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)
    )


def _candidates(terminals: list, regex_flags: int) -> list[_Candidate]:
    """Scanner terminals in Lark order, each regex followed by its unless-keywords (shadows)."""
    ordered = _lark_order(terminals)
    strings = [t for t in ordered if t.pattern.type == "str"]
    embedded, unless = set(), {}
    for rt in (t for t in ordered if t.pattern.type == "re"):
        unless[rt.name] = []
        for st in strings:
            m = re.match(rt.pattern.to_regexp(), st.pattern.value, regex_flags)
            if st.priority == rt.priority and m and m.group(0) == st.pattern.value:
                unless[rt.name].append(st)
                if st.pattern.flags <= rt.pattern.flags:
                    embedded.add(st.name)
    out: list[_Candidate] = []
    for t in ordered:
        if t.name in embedded:
            continue
        out.append(_Candidate(t.name, _dfa_for(t), -1))
        parent = len(out) - 1
        out.extend(_Candidate(s.name, _dfa_for(s), parent) for s in unless.get(t.name, []))
    return out


def _dfa_for(terminal) -> ByteDfa:
    try:
        return compile_regex(terminal.pattern.to_regexp())
    except ValueError as exc:
        raise ValueError(f"terminal {terminal.name}: {exc}") from None


class LexerDfa:
    """The product lexer automaton over bytes (see module docstring). States: DEAD=0, FRESH=1."""

    def __init__(self, terminals: list, ignore: list[str], regex_flags: int = 0) -> None:
        self.cands = _candidates(terminals, regex_flags)
        self.type_names = sorted({c.name for c in self.cands})
        self.type_id = {n: i for i, n in enumerate(self.type_names)}
        self.ignored = frozenset(ignore)
        self.starts = [FRESH]  # the states a token starts from (from_token_automaton: several)
        self._states: list[tuple] = [(), tuple((i, 0) for i in range(len(self.cands)))]
        self._ids = {s: i for i, s in enumerate(self._states)}
        self._build()

    def _step(self, q: tuple, b: int) -> tuple:
        new, alive = [], set()
        for ci, s in q:
            c = self.cands[ci]
            t = c.dfa.trans[s][b]
            if t >= 0 and (c.parent < 0 or c.parent in alive):
                new.append((ci, t))
                if c.parent < 0:
                    alive.add(ci)
        for i, (ci, s) in enumerate(new):
            c = self.cands[ci]
            if c.parent < 0 and s in c.dfa.accepting:
                return tuple(
                    new[: i + 1] + [x for x in new[i + 1 :] if self.cands[x[0]].parent == ci]
                )
        return tuple(new)

    def _winner(self, q: tuple) -> int:
        """Type id the token in state q ends as if it ends here, or -1: the first accepting real
        candidate, retyped by its first accepting shadow (Lark's unless keyword)."""
        for i, (ci, s) in enumerate(q):
            c = self.cands[ci]
            if c.parent < 0 and s in c.dfa.accepting:
                for cj, sj in q[i + 1 :]:
                    shadow = self.cands[cj]
                    if shadow.parent == ci and sj in shadow.dfa.accepting:
                        return self.type_id[shadow.name]
                return self.type_id[c.name]
        return -1

    def _intern(self, q: tuple) -> int:
        sid = self._ids.get(q)
        if sid is None:
            if len(self._states) >= MAX_LEXER_STATES:
                raise ValueError("grammar's lexer automaton is too large")
            sid = self._ids[q] = len(self._states)
            self._states.append(q)
        return sid

    @classmethod
    def from_token_automaton(
        cls,
        type_names: list[str],
        token_rows: list[list[int]],
        winner: list[int],
        restart: list[int] | None = None,
        starts: list[int] | None = None,
    ) -> "LexerDfa":
        """A lexer over terminals given as one automaton of a single token: `token_rows[s][b]` the
        state after byte b inside the token (DEAD: the token cannot go on), FRESH its start,
        `winner[s]` the type id of a token ending in s (-1: none). Maximal munch: a byte the
        token can take always extends it (json_grammar's terminals, JSON tokens, need no other
        rule). Nothing is ignored. `restart[type]`: the start of the token after one of that
        type (json_grammar.tokens: the terminals that can follow it, whitespace), FRESH by default;
        `starts`: every such start."""
        lexer = cls.__new__(cls)
        lexer.type_names = list(type_names)
        lexer.type_id = {n: i for i, n in enumerate(lexer.type_names)}
        lexer.ignored = frozenset()
        lexer.starts = list(starts or [FRESH])
        lexer._finish(token_rows, list(winner), restart)
        return lexer

    def _build(self) -> None:
        rows = [
            [DEAD] * 256,
            [self._intern(self._step(self._states[FRESH], b)) for b in range(256)],
        ]
        sid = 2
        while sid < len(self._states):
            rows.append(
                [
                    self._intern(nxt) if (nxt := self._step(self._states[sid], b)) else DEAD
                    for b in range(256)
                ]
            )
            sid += 1
        self._finish(rows, [self._winner(q) for q in self._states])

    def _finish(
        self, token_rows: list[list[int]], winner: list[int], restart: list[int] | None = None
    ) -> None:
        """The lexer's tables from the automaton of one token: where the token cannot take a
        byte, it ends as its winner and the byte starts the next token (DEAD where it has none)."""
        trans, emit = [[DEAD] * 256, list(token_rows[FRESH])], [[-1] * 256, [-1] * 256]
        for sid in range(2, len(token_rows)):
            win, t_row, e_row = winner[sid], [], []
            fresh_row = token_rows[FRESH if restart is None or win < 0 else restart[win]]
            for b, nxt in enumerate(token_rows[sid]):
                if nxt != DEAD:
                    t_row.append(nxt)
                    e_row.append(-1)
                else:
                    ok = win >= 0 and fresh_row[b] != DEAD
                    t_row.append(fresh_row[b] if ok else DEAD)
                    e_row.append(win if ok else -1)
            trans.append(t_row)
            emit.append(e_row)
        self.trans = np.array(trans, dtype=np.int32)  # [num_states, 256]
        self.emit = np.array(emit, dtype=np.int16)  # [num_states, 256]
        self.trans_rows = [tuple(r) for r in trans]
        self.emit_rows = [tuple(r) for r in emit]
        self.winner = winner
        self._winnable()

    def _winnable(self) -> None:
        """winnable[q]: frozenset of type names the current token may still end as."""
        bits = [(1 << w) if w >= 0 else 0 for w in self.winner]
        preds: list[set[int]] = [set() for _ in self.winner]
        for q in range(2, len(self.winner)):
            for b, t in enumerate(self.trans_rows[q]):
                if t > FRESH and self.emit_rows[q][b] < 0:
                    preds[t].add(q)
        todo = list(range(len(self.winner)))
        while todo:
            t = todo.pop()
            for p in preds[t]:
                merged = bits[p] | bits[t]
                if merged != bits[p]:
                    bits[p] = merged
                    todo.append(p)
        names = self.type_names
        cache: dict[int, frozenset[str]] = {}
        self.winnable = [
            cache.setdefault(x, frozenset(names[i] for i in range(len(names)) if x >> i & 1))
            for x in bits
        ]

    @property
    def num_states(self) -> int:
        return len(self.trans_rows)

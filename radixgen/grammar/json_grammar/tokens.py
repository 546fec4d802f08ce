"""The lexer of a schema grammar (json_grammar.rules): JSON tokens typed by the terminals they match.

A schema grammar's terminals are sets of JSON tokens (a key `"name"`, a string pattern, a number
range, `{`, ...) and they overlap: the key `"name"` is also a free string, 7 is an integer and a
number. A lexer that picks one terminal per text, as Lark's does, would then forbid `"name"` as a
string value wherever the key wins, and a constrained generation could be stuck inside a value
that can only end as the wrong terminal. So the terminals are split into *atoms*: one product
automaton of all the terminals' byte DFAs reads one token, and each of its accepting states is
labelled by the set of terminals accepting there; every distinct set is one atom, a lexer type
of its own, and a terminal is the grammar rule `terminal: atom | atom ...` of the atoms whose sets
hold it. Atoms are disjoint, so every token has exactly one type, whatever the parser expects.

Every terminal matches whole JSON tokens only: a string ends at its closing quote, a number or
literal at the first byte that cannot continue it, and in valid JSON no token can take the byte
that follows it, so the longest match (maximal munch, `LexerDfa.from_token_automaton`) lexes a
JSON text into exactly its tokens.

Where that one product automaton would be too large (long counted patterns in overlapping
strings multiply: an ARN's `{1,512}` beside another's `{1,256}`), each token is read instead
among the terminals that can follow the one before it (`follows`; a key's colon is a terminal of
its own, so a value is read among its key's values): one start state per such context, the
token after each atom starting from its context's.
"""

from __future__ import annotations

from functools import lru_cache

from radixgen.grammar.cfg.dfa import compile_regex
from radixgen.grammar.cfg.lexer import DEAD, FRESH, MAX_LEXER_STATES, LexerDfa
from radixgen.grammar.cfg.terminal_regex import ByteDfa
from radixgen.grammar.matcher import GrammarError


class LexerTooLarge(GrammarError):
    """The product automaton passed MAX_LEXER_STATES."""


class TokenAtoms:
    """The product automaton of a set of terminals; `atoms_of[terminal]` its atom type names."""

    def __init__(
        self,
        terminals: dict[str, "str | ByteDfa"],
        punctuation: frozenset[str] = frozenset(),
        whitespace: str = "",
        follows: tuple | None = None,
    ) -> None:
        """`terminals`: name -> regex (Rust syntax, see cfg.terminal_regex) or DFA of the JSON tokens it
        matches; each not in `punctuation` (regexes) is checked to match JSON scalar tokens only
        (strings, numbers, literals). `whitespace`: the regex of the whitespace between tokens
        (`with_whitespace`). `follows`: (the terminals a text can start with, per terminal those
        that can come right after it; cfg.lalr_table.terminal_follows): each token is then read
        among the terminals that can follow the one before it (the union over its atom's
        terminals) instead of among all of them, so terminals that never meet (two long
        counted patterns under different keys) never multiply in one product."""
        self.names = list(terminals)
        dfas = [t if isinstance(t, ByteDfa) else _dfa(name, t) for name, t in terminals.items()]
        for name, dfa in zip(self.names, dfas):
            if terminals[name] not in punctuation and not is_scalar_token(dfa):
                raise GrammarError(
                    f"json_schema: a value's regex ({str(terminals[name])[:80]}) matches more than "
                    "one JSON token"
                )
        self._owners = list(range(len(dfas)))
        self._closed_dfa: dict[
            int, int
        ] = {}  # after a value: terminal -> its DFA taking whitespace before it
        self._opening = frozenset()
        if whitespace:
            dfas, self._owners, self._closed_dfa = with_whitespace(terminals, dfas, whitespace)
            self._opening = frozenset(
                i for i, name in enumerate(self.names) if terminals[name] in _OPENING
            )
        self._whitespace = bool(whitespace)
        position = {name: i for i, name in enumerate(self.names)}
        self._everything = frozenset(range(len(self.names)))
        if follows is None:
            self._first, self._follow = self._everything, None
        else:
            self._first = frozenset(position[t] for t in follows[0])
            self._follow = [frozenset(position[u] for u in follows[1][t]) for t in self.names]
        # per DFA and state: its live transitions as (byte, next state) pairs
        self._moves = [
            [[(b, t) for b, t in enumerate(row) if t >= 0] for row in dfa.trans] for dfa in dfas
        ]
        self._accepting = [dfa.accepting for dfa in dfas]
        self._build()

    def _start(self, context: frozenset[int], closed: bool) -> tuple:
        """The product state that starts a token among the terminals of `context` (`closed`:
        after a value or `}` `]`, where punctuation takes whitespace before it)."""
        return tuple((self._closed_dfa.get(i, i) if closed else i, 0) for i in sorted(context))

    def _restart_key(self, found: frozenset[int]) -> tuple:
        """The start of the token after one whose atom is the terminal set `found`."""
        if self._follow is None:
            context = self._everything
        else:
            context = frozenset().union(*(self._follow[i] for i in found))
        return self._start(context, self._whitespace and not found <= self._opening)

    def _build(self) -> None:
        states: list[tuple] = [(), self._start(self._first, False)]
        ids = {state: i for i, state in enumerate(states)}
        rows: list[list[int]] = [[DEAD] * 256]
        restart_of: dict[frozenset, int] = {}  # accepting terminal set -> the start after it

        def intern(key: tuple) -> int:
            target = ids.get(key)
            if target is None:
                if len(states) >= MAX_LEXER_STATES:
                    raise LexerTooLarge(
                        "json_schema's JSON tokens need too large a lexer (more than "
                        f"{MAX_LEXER_STATES} states: too many distinct names and patterns)"
                    )
                target = ids[key] = len(states)
                states.append(key)
            return target

        sets = [frozenset()]  # per state: the terminals accepting there
        sid = FRESH
        while sid < len(states):
            nexts: dict[int, list] = {}
            for i, s in states[sid]:
                for b, t in self._moves[i][s]:
                    nexts.setdefault(b, []).append((i, t))
            row = [DEAD] * 256
            for b, nxt in nexts.items():
                row[b] = intern(tuple(nxt))
            rows.append(row)
            found = frozenset(self._owners[i] for i, s in states[sid] if s in self._accepting[i])
            sets.append(found)
            if found and found not in restart_of:
                restart_of[found] = intern(self._restart_key(found))
            sid += 1
        atom_of_set: dict[frozenset, int] = {}
        for found in sets:
            if found and found not in atom_of_set:
                atom_of_set[found] = len(atom_of_set)
        self.type_names = [f"A{k}" for k in range(len(atom_of_set))]
        self.winner = [atom_of_set[found] if found else -1 for found in sets]
        self.atoms_of: dict[str, list[str]] = {name: [] for name in self.names}
        for found, k in atom_of_set.items():
            for i in sorted(found):
                self.atoms_of[self.names[i]].append(self.type_names[k])
        self.restart = [restart_of[found] for found in atom_of_set]  # per atom, the start after it
        self.starts = sorted((set(self.restart) - {DEAD}) | {FRESH})
        self.rows = rows

    def lexer(self) -> LexerDfa:
        return LexerDfa.from_token_automaton(
            self.type_names, self.rows, self.winner, self.restart, self.starts
        )


# whitespace: after these (and at the start) a token takes none before it; after any other
# token, `,` `:` `}` `]` take it before them
_OPENING = frozenset((r"\{", r"\[", ",", ":"))
_LEADING = frozenset((",", ":", r"\}", r"\]"))
_JSON_WHITESPACE = "[ \t\n\r]*"


def with_whitespace(
    terminals: dict, dfas: list[ByteDfa], whitespace: str
) -> tuple[list, list, dict]:
    """(DFAs, the terminal each belongs to, terminal -> its DFA after a value) of terminals with
    `whitespace` in each gap between tokens, once: `{` `[` `,` `:` take it after them; after a
    value or `}` `]`, `,` `:` `}` `]` take it before them (DFAs of their own). So no gap has it
    twice and the text neither starts nor ends with it. The pattern must match only JSON
    whitespace (which no token starts or continues with: maximal munch still lexes exactly) and
    the empty text (the shortest completions need none)."""
    ws = _dfa("the whitespace", whitespace)
    if not _within(ws, _compiled(_JSON_WHITESPACE)) or 0 not in ws.accepting:
        raise GrammarError(
            f"the whitespace pattern {whitespace!r} must match only spaces, tabs and newlines, "
            "and the empty text, for a schema compiled to a grammar"
        )
    names = list(terminals)
    dfas, owners, closed = list(dfas), list(range(len(names))), {}
    for i, name in enumerate(names):
        regex = terminals[name]
        if regex in _OPENING:
            dfas[i] = _dfa(name, f"{regex}(?:{whitespace})")
        if regex in _LEADING:
            dfas.append(
                _dfa(
                    name,
                    f"(?:{whitespace}){regex}" + (f"(?:{whitespace})" if regex in _OPENING else ""),
                )
            )
            owners.append(i)
            closed[i] = len(dfas) - 1
    return dfas, owners, closed


def starts_container(regex: str) -> bool:
    """Whether a match of `regex` may start with `{` or `[` (an object or an array)."""
    row = _dfa("a value", regex).trans[0]
    return row[ord("{")] >= 0 or row[ord("[")] >= 0


_SCALAR_TOKEN = (
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
    r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null"
)


@lru_cache(maxsize=1)
def _scalar_tokens() -> ByteDfa:
    return compile_regex(_SCALAR_TOKEN)


def is_scalar_token(dfa: ByteDfa) -> bool:
    """Whether every text `dfa` matches is one JSON string, number or literal."""
    return _within(dfa, _scalar_tokens())


def _within(inner: ByteDfa, outer: ByteDfa) -> bool:
    """Whether every text `inner` matches, `outer` matches (both trimmed: a live state can
    still reach acceptance)."""
    seen, todo = {(0, 0)}, [(0, 0)]
    while todo:
        s, u = todo.pop()
        if s in inner.accepting and u not in outer.accepting:
            return False
        for b, t in enumerate(inner.trans[s]):
            if t < 0:
                continue
            v = outer.trans[u][b]
            if v < 0:
                return False
            if (t, v) not in seen:
                seen.add((t, v))
                todo.append((t, v))
    return True


def _dfa(name: str, regex: str) -> ByteDfa:
    try:
        return _compiled(regex)
    except (ValueError, RecursionError) as exc:
        raise GrammarError(f"json_schema: cannot compile the tokens of {name} ({exc})") from None


@lru_cache(maxsize=4096)
def _compiled(regex: str) -> ByteDfa:
    return compile_regex(regex, rust=True)

"""The lexer of a schema grammar (schema_grammar): JSON tokens typed by the terminals they match.

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
"""

from __future__ import annotations

from functools import lru_cache

from radixgen.grammar.cfg_dfa import compile_regex
from radixgen.grammar.cfg_lexer import DEAD, FRESH, MAX_LEXER_STATES, LexerDfa
from radixgen.grammar.cfg_regex import ByteDfa
from radixgen.grammar.matcher import GrammarError


class TokenAtoms:
    """The product automaton of a set of terminals; `atoms_of[terminal]` its atom type names."""

    def __init__(self, terminals: dict[str, "str | ByteDfa"], punctuation: frozenset[str] = frozenset(),
                 whitespace: str = "") -> None:
        """`terminals`: name -> regex (Rust syntax, see cfg_regex) or DFA of the JSON tokens it
        matches; each not in `punctuation` (regexes) is checked to match JSON scalar tokens only
        (strings, numbers, literals). `whitespace`: the regex of the whitespace between tokens
        (`with_whitespace`)."""
        self.names = list(terminals)
        dfas = [t if isinstance(t, ByteDfa) else _dfa(name, t) for name, t in terminals.items()]
        for name, dfa in zip(self.names, dfas):
            if terminals[name] not in punctuation and not is_scalar_token(dfa):
                raise GrammarError(f"json_schema: a value's regex ({str(terminals[name])[:80]}) matches more than "
                                   "one JSON token")
        owners = list(range(len(dfas)))
        starts = [tuple(range(len(dfas)))]
        if whitespace:
            dfas, owners, starts = with_whitespace(terminals, dfas, whitespace)
        self._owners = owners
        # per DFA and state: its live transitions as (byte, next state) pairs
        self._moves = [[[(b, t) for b, t in enumerate(row) if t >= 0] for row in dfa.trans] for dfa in dfas]
        self._accepting = [dfa.accepting for dfa in dfas]
        self._build([tuple((i, 0) for i in start) for start in starts])
        self.restart = None  # per atom, the start state of the token after it (None: FRESH)
        if whitespace:
            opening = {i for i, name in enumerate(self.names) if terminals[name] in _OPENING}
            self.restart = [FRESH if atom <= opening else FRESH + 1 for atom in self._atom_sets]

    def _build(self, starts: list[tuple]) -> None:
        states: list[tuple] = [(), *starts]
        ids = {state: i for i, state in enumerate(states)}
        rows: list[list[int]] = [[DEAD] * 256]
        sid = FRESH
        while sid < len(states):
            nexts: dict[int, list] = {}
            for i, s in states[sid]:
                for b, t in self._moves[i][s]:
                    nexts.setdefault(b, []).append((i, t))
            row = [DEAD] * 256
            for b, nxt in nexts.items():
                key = tuple(nxt)
                target = ids.get(key)
                if target is None:
                    if len(states) >= MAX_LEXER_STATES:
                        raise GrammarError("json_schema's JSON tokens need too large a lexer (more than "
                                           f"{MAX_LEXER_STATES} states: too many distinct names and patterns)")
                    target = ids[key] = len(states)
                    states.append(key)
                row[b] = target
            rows.append(row)
            sid += 1
        sets = [frozenset(self._owners[i] for i, s in q if s in self._accepting[i]) for q in states]
        atom_of_set: dict[frozenset, int] = {}
        for found in sets:
            if found and found not in atom_of_set:
                atom_of_set[found] = len(atom_of_set)
        self._atom_sets = list(atom_of_set)
        self.type_names = [f"A{k}" for k in range(len(atom_of_set))]
        self.winner = [atom_of_set[found] if found else -1 for found in sets]
        self.atoms_of: dict[str, list[str]] = {name: [] for name in self.names}
        for found, k in atom_of_set.items():
            for i in sorted(found):
                self.atoms_of[self.names[i]].append(self.type_names[k])
        self.rows = rows

    def lexer(self) -> LexerDfa:
        return LexerDfa.from_token_automaton(self.type_names, self.rows, self.winner, self.restart)


# whitespace: after these (and at the start) a token takes none before it; after any other
# token, `,` `:` `}` `]` take it before them
_OPENING = frozenset((r"\{", r"\[", ",", ":"))
_LEADING = frozenset((",", ":", r"\}", r"\]"))
_JSON_WHITESPACE = "[ \t\n\r]*"


def with_whitespace(terminals: dict, dfas: list[ByteDfa], whitespace: str) -> tuple[list, list, list]:
    """(DFAs, the terminal each belongs to, the DFAs of the two starts) of terminals with
    `whitespace` in each gap between tokens, once: `{` `[` `,` `:` take it after them; after a
    value or `}` `]` (the second start), `,` `:` `}` `]` take it before them. So no gap has it twice
    and the text neither starts nor ends with it. The pattern must match only JSON whitespace
    (which no token starts or continues with: maximal munch still lexes exactly) and the empty
    text (the shortest completions need none)."""
    ws = _dfa("the whitespace", whitespace)
    if not _within(ws, _compiled(_JSON_WHITESPACE)) or 0 not in ws.accepting:
        raise GrammarError(f"the whitespace pattern {whitespace!r} must match only spaces, tabs and newlines, "
                           "and the empty text, for a schema compiled to a grammar")
    names = list(terminals)
    dfas, owners = list(dfas), list(range(len(names)))
    first, second = [], []
    for i, name in enumerate(names):
        regex = terminals[name]
        if regex in _OPENING:
            dfas[i] = _dfa(name, f"{regex}(?:{whitespace})")
        first.append(i)
        if regex in _LEADING:
            dfas.append(_dfa(name, f"(?:{whitespace}){regex}" + (f"(?:{whitespace})" if regex in _OPENING else "")))
            owners.append(i)
            second.append(len(dfas) - 1)
        else:
            second.append(i)
    return dfas, owners, [first, second]


def starts_container(regex: str) -> bool:
    """Whether a match of `regex` may start with `{` or `[` (an object or an array)."""
    row = _dfa("a value", regex).trans[0]
    return row[ord("{")] >= 0 or row[ord("[")] >= 0


_SCALAR_TOKEN = (r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
                 r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")


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

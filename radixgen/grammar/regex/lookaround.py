"""Lookarounds and inner anchors written out: a pattern as an equal pattern without them.

outlines-core's regexes have no lookaround, and the pattern translation (regex.leaves) reads `^` and
`$` only at the ends. (A `regex` constraint, matched whole, goes through here too: `whole`.) A lookahead or lookbehind without backreferences keeps a language regular, so
`lookarounds_written_out` builds the automaton of the whole strings a pattern accepts (as a JSON
Schema pattern: a search, lookarounds seeing the whole string) and writes it back as a pattern of
classes, groups and `* ? |` that the translation takes like any other. What CloudFormation writes
(`^[a-zA-Z_](?!.*--)[a-zA-Z0-9_-]*$`, `^(?!svc-)(?![-])(?!.*[-]$)[a-z0-9-]+$`,
`^[0-9a-z.-]*(?<!\\.)$`, `(^s3://.+$)|(^(?=(.{4})*$)[A-Za-z0-9+/]*={0,2}$)`) comes out exact.

The automaton runs threads of a Thompson automaton of `.*` pattern `.*` in step over the string
(its subset construction over atoms: the classes of the pattern cut into disjoint sets):
- `^` holds at position 0 only, `$` marks a thread that any further character kills;
- a lookahead `(?=X)` / `(?!X)` gives its thread an obligation: the threads of X started there, run
  alongside; the thread lives on once X has matched (positive) or can no longer match (negative),
  and dies in the other case; at the end of the string pending obligations are decided by whether
  X matches up to the end;
- a lookbehind `(?<=Y)` / `(?<!Y)` reads the state of an automaton of `.*Y` run from the start.
Word boundaries are lookarounds too (`\\b`: a word character before and none after, or the
other way round). Lookarounds inside lookarounds, backreferences and flags are refused.

Classes keep the rule of the rest of the translation: the output is a subset of the pattern's
language in ECMA-262 and in Python's `re` alike. Where the two read a class differently (`\\s`,
`\\d`, `\\w`, `.`), a class counted positively takes the characters both put in it, and one under
a negation (a negative lookaround, a negated class) every character either puts in it, so what
is excluded is never too small; a Unicode property under a negation is refused (the translation
narrows properties to ASCII). Characters JSON strings must escape, lone surrogates and characters
past U+FFFF are never generated.
"""

from __future__ import annotations

import re
import warnings
from re import _constants as C
from re import _parser

from radixgen.grammar.automata import write_out
from radixgen.grammar.automata.lookaround_dfa import Dfa
from radixgen.grammar.automata.lookaround_nfa import ANY_TEXT, UNIVERSE, LookaroundError, Nfa
from radixgen.grammar.regex.lengths import both_lengths
from radixgen.grammar.regex.properties import group_end, pattern_tokens

__all__ = ["LookaroundError", "lookarounds_written_out", "needs_writing_out"]
_LOOKAROUND = re.compile(r"\(\?<?[=!]")


# word boundaries as lookarounds: a word character on one side only (`\\B`: on both or neither);
# the polarity rule then takes a word character ECMA-262 and Python both count where one must be
# there, and any either counts where none may be (ECMA-262's \\w is ASCII, Python's Unicode)
_BOUNDARIES = {
    "\\b": "(?:(?<=\\w)(?!\\w)|(?<!\\w)(?=\\w))",
    "\\B": "(?:(?<=\\w)(?=\\w)|(?<!\\w)(?!\\w))",
}


def needs_writing_out(pattern: str) -> bool:
    return bool(_LOOKAROUND.search(pattern)) or any(
        text in _BOUNDARIES and not in_class for _, text, in_class in pattern_tokens(pattern)
    )


def _boundaries_as_lookarounds(python_text: str) -> str:
    return "".join(
        _BOUNDARIES.get(text, text) if not in_class else text
        for _, text, in_class in pattern_tokens(python_text)
    )


def lookarounds_written_out(
    pattern: str, python_text: str, whole: bool = False
) -> tuple[str, int, int | None]:
    """`pattern` (its Python view, `python_text`: properties as ASCII classes) as an anchored
    pattern without lookarounds or inner anchors, and a length range: the pattern's strings of
    those lengths are the same strings (see the module docstring for the classes). Lengths keep
    counted repeats out of the automaton (`_lengths_taken_out`). `whole`: the pattern matches the
    whole text, any character but a surrogate (a `regex` constraint), not a JSON string's
    contents found by a search; no lengths then. Raises LookaroundError."""
    _refuse_properties_under_lookarounds(pattern)
    try:
        with warnings.catch_warnings():  # (re's FutureWarning for `||` in a class: two characters)
            warnings.simplefilter("ignore", FutureWarning)
            parsed = _parser.parse(_boundaries_as_lookarounds(python_text))
    except re.error as exc:
        raise LookaroundError(f"not a valid regular expression ({exc})") from None
    except RecursionError:
        raise LookaroundError("its groups nest too deeply") from None
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE):
        raise LookaroundError("inline flags are not supported")
    items, least, most = (
        (list(parsed), 0, None) if whole else _lengths_taken_out(list(parsed), parsed.state)
    )
    nfa = Nfa(ANY_TEXT if whole else UNIVERSE)
    start = nfa.new()
    if not whole:  # a search: anything before the match
        nfa.edge(start, ("c", nfa.universe), start)
    body_start, body_end = nfa.build(items, True, "main")
    nfa.edge(start, ("e",), body_start)
    final = nfa.new()
    nfa.edge(body_end, ("e",), final)
    if not whole:  # and after it
        nfa.edge(final, ("c", nfa.universe), final)
    nfa.final = final
    dfa = Dfa(nfa)
    text = write_out.write_out(*dfa.minimal(), dfa.atom_sets)
    return "^(?:" + text + ")$", least, most


def _lengths_taken_out(items: list, state) -> tuple[list, int, int | None]:
    """Counted repeats as lengths, where that is exact: a leading `(?=^.{m,n}$)` at the start of
    the string bounds its length (no string written out holds a line terminator, so `.` is any
    character); in a pattern anchored at both ends whose pieces all have one width but one
    counted repeat `X{a,b}` of a piece of one width, that repeat becomes `X{a,}` and its counts
    lengths. (Counted repeats in the automaton multiply its states: `[a-z0-9-]{1,48}` after a
    lookahead would take a state per count and lookahead state.) Returns (items, least, most)."""
    least, most = 0, None
    while len(items) == 1 and items[0][0] == C.SUBPATTERN and not any(items[0][1][1:3]):
        items = list(items[0][1][3])  # `(^...$)`: the group's own items
    anchored = bool(items) and items[0] == (C.AT, C.AT_BEGINNING)
    head = 1 if anchored else 0
    if head < len(items) and items[head][0] == C.ASSERT and items[head][1][0] == 1:
        inner = list(items[head][1][1])
        at_start = anchored or (inner and inner[0] == (C.AT, C.AT_BEGINNING))
        inner = inner[1:] if inner and inner[0] == (C.AT, C.AT_BEGINNING) else inner
        if (
            at_start
            and len(inner) == 2
            and inner[1] == (C.AT, C.AT_END)
            and inner[0][0] == C.MAX_REPEAT
            and list(inner[0][1][2]) == [(C.ANY, None)]
        ):
            least, count = inner[0][1][0], inner[0][1][1]
            most = None if count == C.MAXREPEAT else count
            items = (
                items[:head] + items[head + 1 :]
                if anchored
                else [(C.AT, C.AT_BEGINNING)] + items[head + 1 :]
            )
            anchored = True
    if not (anchored and items[-1] == (C.AT, C.AT_END)):
        return items, least, most
    widths = [_parser.SubPattern(state, [item]).getwidth() for item in items]
    variable = [i for i, (lo, hi) in enumerate(widths) if lo != hi]
    if len(variable) != 1 or items[variable[0]][0] not in (C.MAX_REPEAT, C.MIN_REPEAT):
        return items, least, most
    i = variable[0]
    low, high, sub = items[i][1]
    piece = _parser.SubPattern(state, list(sub)).getwidth()
    if high == C.MAXREPEAT or piece[0] != piece[1] or piece[0] == 0 or high - low < 4:
        return items, least, most
    fixed = sum(lo for k, (lo, _) in enumerate(widths) if k != i)
    items = items[:i] + [(C.MAX_REPEAT, (low, C.MAXREPEAT, sub))] + items[i + 1 :]
    return (items, *both_lengths(least, most, fixed + piece[0] * low, fixed + piece[0] * high))


def _refuse_properties_under_lookarounds(pattern: str) -> None:
    for m in _LOOKAROUND.finditer(pattern):
        end = group_end(pattern[m.start() :])
        inside = (
            pattern[m.start() : m.start() + end + 1] if end is not None else pattern[m.start() :]
        )
        if re.search(r"\\[pP]", inside):
            raise LookaroundError("a Unicode property inside a lookaround is not supported")

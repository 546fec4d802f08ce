"""Patterns anchored at one end only, opened at the other as validators search them.

radixgen generates a pattern's full matches (a subset of what it finds). For an alternative
anchored at one end only that subset is too narrow to be what the author meant: `^https://`
would generate only `https://`. `open_ends` opens such an alternative at its free end with
`[\\s\\S]*`. A repeat at the opened end is cut to its least count first, which finds the same
strings (`[\\s\\S]*[a-z]{1,1023}/$` finds what `[\\s\\S]*[a-z]/$` finds: the rest of the run
is in the open part) and keeps the automaton small. An open start before a larger counted
repeat further in would not (the automaton keeps every place a run may have started), so such
an alternative, like one whose free end is a group with a repeat, keeps its full matches."""

from __future__ import annotations

import re
from typing import Callable, TypeVar

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.dialects import neutral
from radixgen.grammar.regex.lengths import top_level_alternatives
from radixgen.grammar.regex.properties import pattern_tokens

_OPEN = r"[\s\S]*"
_MAX_SEARCHED_COUNT = 8
_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d+)(?:,\d*)?\})[?+]?")
_INNER_REPEAT = re.compile(r"[*+]|\{\d")
_CODE_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}")
T = TypeVar("T")


def searched_translation(pattern: str, translate: Callable[[str], T]) -> T:
    """translate() of the strings a validator's search of `pattern` finds, as radixgen generates
    them: the pattern in the syntax it reads (regex.dialects.neutral), opened at an unanchored
    end, else (where the opened pattern is refused: lookarounds, sizes) its full matches, a subset."""
    pattern = neutral(pattern)
    opened = open_ends(pattern)
    if opened != pattern:
        try:
            return translate(opened)
        except GrammarError:
            pass
    return translate(pattern)


def open_ends(pattern: str) -> str:
    """`pattern` with each top-level alternative that anchors one end only opened at the other:
    `^https://` finds every string that starts so, `\\.ya?ml$` every one that ends so.
    Alternatives anchored at both ends or at neither are left as they are (an unanchored
    `[0-9]+` is meant as the whole string), as is one whose free end is a group with a repeat."""
    opened = []
    for alternative in top_level_alternatives(pattern):
        anchors = {
            text
            for _, text, in_class in pattern_tokens(alternative)
            if not in_class and text in ("^", "$")
        }
        if anchors in ({"^"}, {"$"}):
            alternative = _opened(alternative, at_end=anchors == {"^"})
        opened.append(alternative)
    return "|".join(opened)


def _opened(alternative: str, at_end: bool) -> str:
    """An alternative anchored at one end, opened at the other (its end when `at_end`, else its
    start), its repeats there cut to their least counts first; closed where the free end is a
    group with a repeat, or an open start would come before a count above _MAX_SEARCHED_COUNT."""
    at = -1 if at_end else 0
    pieces = _pieces(alternative)
    while pieces and (least := _least_count(alternative, pieces[at])) is not None:
        alternative, pieces = _cut_to_least(alternative, pieces[at], least)
    if pieces and _repeated_group(alternative, pieces[at]):
        return alternative
    if at_end:
        return alternative + _OPEN
    return _OPEN + alternative if _small_counts(alternative) else alternative


def _pieces(alternative: str) -> list[tuple[int, int, int]]:
    """(start, end of the atom, end with its quantifier) of each top-level piece: a group, a
    class, an escape or one character, with the quantifier that follows it."""
    atoms, depth, start = [], 0, None
    for i, text, in_class in pattern_tokens(alternative):
        if in_class:
            if text == "]" and depth == 0:
                atoms.append((start, i + 1))
            continue
        if depth == 0 and text != ")":
            start = i
            if text.startswith("["):
                continue  # (the class ends at its "]", above)
            if text == "(":
                depth = 1
                continue
            code = _CODE_ESCAPE.match(alternative, i)  # \u0041, \x41: one character
            atoms.append((i, code.end() if code else i + len(text)))
        elif text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                atoms.append((start, i + 1))
    pieces, covered = [], 0
    for begin, end in atoms:
        if begin < covered:
            continue  # a quantifier's own characters ("{2,3}")
        match = _QUANTIFIER.match(alternative, end)
        stop = match.end() if match else end
        pieces.append((begin, end, stop))
        covered = stop
    return pieces


def _least_count(alternative: str, piece: tuple) -> int | None:
    """The least count of a repeated one-character piece (a class, an escape, a character);
    None for a piece that is not repeated, or a group."""
    begin, end, stop = piece
    if stop == end or alternative[begin] in "()^$":
        return None
    counted = _QUANTIFIER.match(alternative, end)
    return int(counted.group(1)) if counted.group(1) is not None else int(alternative[end] == "+")


def _cut_to_least(alternative: str, piece: tuple, least: int) -> tuple[str, list]:
    """The alternative with the repeat of `piece` cut to its `least` count (dropped at 0), and
    its pieces where a further cut may follow (none once the piece stays)."""
    begin, end, stop = piece
    atom = alternative[begin:end]
    cut = "" if least == 0 else atom if least == 1 else f"{atom}{{{least}}}"
    alternative = alternative[:begin] + cut + alternative[stop:]
    return alternative, [] if cut else _pieces(alternative)


def _small_counts(alternative: str) -> bool:
    """Whether every counted repeat of the alternative counts at most _MAX_SEARCHED_COUNT: a
    search for `[a-z]{1,64}x` keeps every place a run may have started (2^64 automaton states)."""
    for i, text, in_class in pattern_tokens(alternative):
        counted = _QUANTIFIER.match(alternative, i) if text == "{" and not in_class else None
        if counted and any(int(n) > _MAX_SEARCHED_COUNT for n in re.findall(r"\d+", counted[0])):
            return False
    return True


def _repeated_group(alternative: str, piece: tuple) -> bool:
    """A group that is repeated or holds a repeat (`(ab)+`, `([a-z]{1,1023}/)`): left closed."""
    begin, end, stop = piece
    return alternative[begin] == "(" and (
        stop > end or _INNER_REPEAT.search(alternative, begin, end) is not None
    )

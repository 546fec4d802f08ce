"""minLength / maxLength on a translated pattern: repeat counts chosen so that every string the
regex allows has an allowed length (`fit_length`, used by `regex.leaves.string_pattern_regex`
through `fit_lengths`, which adds a tail of any text after a search that needs one), and the
top-level alternatives a pattern is fitted by one by one when it cannot be fitted whole."""

from __future__ import annotations

import re
from re import _constants

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.classes import ANY_SAFE
from radixgen.grammar.regex.properties import pattern_tokens, python_parsed, unwrapped

_UNBOUNDED_WIDTH = int(_constants.MAXREPEAT)
REPEAT_MAX = 256  # most count of a repeat under a maxLength (a subset: the automaton has a state
# per count, and CloudFormation's `^[\s\S]*$` with maxLength 10,000,000 would need ten million)
_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT)
_ONE_CHAR = (
    _constants.LITERAL,
    _constants.NOT_LITERAL,
    _constants.IN,
    _constants.ANY,
    _constants.CATEGORY,
)
_SAMPLE = [chr(c) for c in range(0x20, 0x7F)] + list(
    "\t\n\u00a0\u00e9\u00df\u0416\u4e2d\u2028\U0001f600"
)


def fit_length(
    body: str,
    out: list,
    unbounded: list,
    min_length: int,
    max_length: int | None,
    refuse,
    bounded: tuple = (),
) -> None:
    """Make every string of the translated pattern `out` (in place) min_length..max_length long.
    `unbounded` lists the pattern's unbounded repeats (`*`, `+`, `{n,}`) as (index in `out`,
    start and end in `body`, least count).

    Widths are counted on the pattern itself (each translated piece matches one character where
    the pattern's does, or nothing), so they bound the translation's strings too. A pattern whose
    widths already fit is left alone; otherwise every unbounded repeat gets the same least count
    a and most count b: the smallest a and then the largest b for which the pattern's widths fit.
    The result is exact for the common shape, one repeat of a fixed-width piece among fixed-width
    pieces (`^[a-z0-9_]+$` with maxLength 32 is `[a-z0-9_]{1,32}`), and a subset of the strings
    allowed otherwise, so every output validates; a pattern that cannot fit at all is refused.

    Equal counts can make an automaton with exponentially many states where repeats overlap
    (`^.*[a-z0-9]+.*$` with maxLength 128 is `.{0,42}[a-z0-9]{1,42}.{0,42}`: after a run of
    letters the last repeat may have begun at any subset of the positions). So with several
    repeats and a maxLength, equal counts are kept only where each repeat's end is determined
    (`_ends_are_determined`: `^[a-z]+-[a-z]+$`); elsewhere only the last repeat varies and the
    others keep their least count (`[a-z0-9].{0,127}`, again a subset). No repeat is counted
    past REPEAT_MAX (unless its least count is larger).

    Where that cannot fit, the bounded repeats `{a,b}` (`bounded`: (index in `out`, start, end,
    a, b)) vary too, each within its own a..b: `^[a-z0-9_-]{0,64}$` under minLength 1 is
    `{1,64}`, `^[a-z](?:-?[a-z0-9]){0,62}$` under maxLength 63 is `{0,31}`. Counts inside the
    pattern's own ranges, checked against the widths once more: still a subset."""

    def fits(width: tuple[int, int | None]) -> bool:
        lo, hi = width
        return lo >= min_length and (max_length is None or (hi is not None and hi <= max_length))

    span = _width(body)
    if fits(span):
        return
    try:
        repeats, counts = (
            unbounded,
            _open_counts(body, unbounded, min_length, max_length, fits, span, refuse),
        )
    except GrammarError:
        if not bounded:
            raise
        repeats = sorted([(*r, None) for r in unbounded] + list(bounded), key=lambda r: r[1])
        caps = [r[4] for r in repeats]
        repeats = [r[:4] for r in repeats]
        counts = _counts_that_fit(
            body, repeats, min_length, max_length, list(range(len(repeats))), caps
        )
        if counts is None or not fits(_width_with(body, repeats, counts)):
            raise
    for (index, *_), count in zip(repeats, counts):
        out[index] = _count_text(*count)


def _open_counts(
    body: str, unbounded: list, min_length: int, max_length: int | None, fits, span, refuse
) -> list:
    """fit_length's counts for the unbounded repeats alone (GrammarError where none fit)."""
    if not unbounded:
        raise refuse(
            f"its strings are {span[0]}..{span[1]} characters long, outside "
            f"minLength {min_length} / maxLength {max_length}"
        )
    counts = _counts_that_fit(body, unbounded, min_length, max_length, list(range(len(unbounded))))
    if counts is None or not fits(_width_with(body, unbounded, counts)):
        raise refuse(f"no repeat count gives strings of length {min_length}..{max_length}")
    if (
        len(unbounded) > 1
        and max_length is not None
        and not _ends_are_determined(body, len(unbounded))
    ):
        last = _counts_that_fit(body, unbounded, min_length, max_length, [len(unbounded) - 1])
        if last is not None and fits(_width_with(body, unbounded, last)):
            counts = last
    return counts


def _counts_that_fit(
    body: str,
    unbounded: list,
    min_length: int,
    max_length: int | None,
    varied: list,
    caps: list | None = None,
) -> list | None:
    """(least, most) per repeat: the `varied` ones share the smallest least count a and then the
    largest most count b for which the widths fit, the others keep their own least count; a
    repeat with a cap (its own most count) never counts past it."""
    caps = caps or [None] * len(unbounded)

    def count(n: int, cap: int | None, least: int, most: int | None) -> tuple[int, int | None]:
        lo, hi = max(n, least), None if most is None else max(n, least, most)
        return (lo, hi) if cap is None else (min(lo, cap), cap if hi is None else min(hi, cap))

    def counts(least: int, most: int | None) -> list:
        return [
            count(n, cap, least, most) if i in varied else (n, n)
            for i, ((*_, n), cap) in enumerate(zip(unbounded, caps))
        ]

    def width(least: int, most: int | None) -> tuple[int, int | None]:
        return _width_with(body, unbounded, counts(least, most))

    def too_wide(
        least: int, most: int
    ) -> bool:  # (no most: a repeat the counts leave open; checked after)
        hi = width(least, most)[1]
        return hi is None or hi > max_length

    least = _smallest(lambda a: width(a, None)[0] >= min_length, 0, max(min_length, 1))
    if least is None:
        return None
    most = None
    if max_length is not None:
        most = _smallest(lambda b: too_wide(least, b + 1), least, max_length)
        most = max_length if most is None else most  # repeats of empty strings never grow
        most = min(most, max(least, REPEAT_MAX))
    return counts(least, most)


def _ends_are_determined(body: str, num_unbounded: int) -> bool:
    """Whether every unbounded repeat of `body` but the last is a top-level repeat of one
    character class followed by one character it never matches (`[a-z]+-`): then each repeat's
    end is where the input says, and equal counts make an automaton linear in them. Classes are
    compared on a sample alphabet (printable ASCII and a few others) with Python's semantics, which
    are wider than the translation's, so a false "disjoint" cannot come from the sample's ASCII
    part; a pattern judged wrongly is still refused by the automaton probe, never built."""
    parsed = python_parsed(body)
    items = parsed.data
    tops = [i for i, (op, av) in enumerate(items) if op in _REPEATS and av[1] == _UNBOUNDED_WIDTH]
    if len(tops) != num_unbounded:  # a repeat inside a group
        return False

    def chars(item) -> set:
        one = re._compiler.compile(re._parser.SubPattern(parsed.state, [item]))
        return {c for c in _SAMPLE if one.fullmatch(c)}

    for i in tops[:-1]:
        repeated = items[i][1][2].data
        if (
            len(repeated) != 1
            or repeated[0][0] not in _ONE_CHAR
            or i + 1 >= len(items)
            or items[i + 1][0] not in _ONE_CHAR
            or chars(repeated[0]) & chars(items[i + 1])
        ):
            return False
    return True


def _count_text(least: int, most: int | None) -> str:
    return f"{{{least},{'' if most is None else most}}}"


def _width_with(body: str, unbounded: list, counts: list) -> tuple[int, int | None]:
    """`_width` of `body` with its unbounded repeats given these (least, most) counts."""
    text, end = [], 0
    for (_, start, stop, _), count in zip(unbounded, counts):
        text += [body[end:start], _count_text(*count)]
        end = stop
    return _width("".join(text) + body[end:])


def _width(body: str) -> tuple[int, int | None]:
    """Fewest and most characters a fullmatch of `body` spans (None: no most)."""
    lo, hi = python_parsed(body).getwidth()
    return lo, (None if hi >= _UNBOUNDED_WIDTH else hi)


def _smallest(ok, lo: int, hi: int) -> int | None:
    """The smallest n in lo..hi with ok(n) (ok is monotone), or None."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def fit_lengths(
    body: str,
    out: list,
    unbounded: list,
    bounded: list,
    min_length: int,
    max_length: int | None,
    refuse,
    open_end: bool,
) -> str:
    """fit_length on the translation `out` (in place); where nothing fits and the pattern is a
    search that need not end where it does (`open_end`, `\\S` under minLength 20), any text may
    follow it, which fit_length then sizes (still a subset of the strings that match). Returns
    the body the counts were fitted on."""
    try:
        fit_length(body, out, unbounded, min_length, max_length, refuse, bounded)
        return body
    except GrammarError:
        if not open_end or len(top_level_alternatives(body)) > 1:  # (`a|b.*` would be a|(b.*))
            raise
    unbounded.append((len(out) + 1, len(body) + 1, len(body) + 2, 0))
    out += [ANY_SAFE, "*"]
    fit_length(body + ".*", out, unbounded, min_length, max_length, refuse, bounded)
    return body + ".*"


def both_lengths(
    min_length: int, max_length: int | None, least: int, most: int | None
) -> tuple[int, int | None]:
    """The lengths two bounds allow together (None: no most)."""
    return max(
        min_length, least
    ), most if max_length is None else max_length if most is None else min(max_length, most)


LENGTH_REFUSAL = re.compile("characters long, outside|no repeat count gives")


def top_level_alternatives(pattern: str) -> list[str]:
    """The alternatives of a pattern's top-level `|` (one item when it has none)."""
    parts, depth, start = [], 0, 0
    for i, text, in_class in pattern_tokens(pattern):
        if not in_class:
            depth += (text == "(") - (text == ")")
            if text == "|" and depth == 0:
                parts.append(pattern[start:i])
                start = i + 1
    return parts + [pattern[start:]]


def alternatives_of(pattern: str) -> list[str]:
    """The top-level alternatives of `pattern`, or those of the one group it is (between its
    anchors: `^((\\d{12})|(\\d{4}-\\d{4}-\\d{4}))$`), each with the anchors."""
    alternatives = top_level_alternatives(pattern)
    if len(alternatives) > 1:
        return alternatives
    start = 1 if pattern.startswith("^") else 0
    end = len(pattern) - 1 if _last_token(pattern) == "$" else len(pattern)
    inner = unwrapped(pattern[start:end])
    if inner == pattern[start:end]:
        return alternatives
    return [pattern[:start] + part + pattern[end:] for part in top_level_alternatives(inner)]


def _last_token(text: str) -> str | None:
    """The last token of a pattern outside a class (an escape whole), else None."""
    last = None
    for _, token, in_class in pattern_tokens(text):
        last = None if in_class else token
    return last

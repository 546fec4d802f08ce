"""Negative lookaheads of literal prefixes at the start of a pattern, without lookaround.

AWS writes tag keys as `^(?!aws:)[a-zA-Z0-9 _.:/=+@-]{1,128}$`: strings of one character class that
do not start with a reserved prefix. outlines-core has no lookaround, so `string_pattern_regex`
strips such lookaheads (`leading_excluded_prefixes`) and, once the rest is translated to one
repeated class, writes the same language as a walk of the literals' trie (`without_prefixes`).
"Not only whitespace", `^(?!\\s*$).+$`, is written out (`not_blank_written_out`). A lookahead
that only bounds the length, `^(?=.{2,256}$)[a-z0-9]+(...)*$`, or one that holds the whole pattern
before a bounded `.`, `^(?=^[a-z0-9-]+$).{3,64}$`, becomes the pattern with minLength / maxLength
(`length_lookahead`). "Not only digits", `^(?!^[0-9]+$)([a-zA-Z0-9-_]+)$` (a class repeated, not
only characters of a smaller class), is written as that class with at least one character outside
the smaller one (`leading_not_only`, `not_only_written_out`). Other lookarounds stay refused.
"""

from __future__ import annotations

import re
from re import _constants

from radixgen.grammar.regex.properties import (
    group_end,
    python_compiled,
    python_parsed,
    python_view,
    unwrapped,
)

_LOOKAHEAD_LITERAL = re.compile(r"\(\?!((?:[A-Za-z0-9 _:/@#%&=,;'<>~`-]|\\[^A-Za-z0-9])+)(\.\*)?\)")
_REPEAT = re.compile(r"\*|\+|\{([0-9]+)(?:,([0-9]*))?\}")
_TRAILING_REPEAT = re.compile(r"(?:[*+]|\{[0-9]+(?:,[0-9]*)?\})$")


_LENGTH_ONLY = re.compile(r"\(\?=\^?\.\{([0-9]+)(?:(,)([0-9]*))?\}\$\)")
_ANY_RUN = re.compile(r"\.(?:\{([0-9]+)(?:(,)([0-9]*))?\}|([*+]))")
_LINE_BREAKS = "\n\r\u2028\u2029"  # what `.` excludes (ECMA-262; Python's excludes "\n" alone)


def length_lookahead(body: str) -> tuple[str, int, int | None] | None:
    """A pattern's body (its outer anchors removed) that opens with a lookahead bounding the
    length: `(?=^.{m,n}$)REST` as (REST, m, n), or `(?=^X$).{m,n}` as (X, m, n); n None for
    `{m,}`. Every string of REST (or X) with m..n characters and no line break matches the pattern
    as a search at its start, anchored or not. `.` matches no line break, so this holds only where
    the text kept cannot match one either (None otherwise, and for every other body)."""
    m = _LENGTH_ONLY.match(body)
    if m:
        kept, bounds = body[m.end() :], (m[1], m[2], m[3])
    else:
        inner, tail = _leading_lookahead(body)
        run = _ANY_RUN.fullmatch(tail) if inner is not None else None
        if run is None:
            return None
        inner = inner[1:] if inner.startswith("^") else inner
        if not inner.endswith("$") or inner.endswith("\\$"):
            return None
        kept = inner[:-1]
        bounds = ("1" if run[4] == "+" else "0", ",", "") if run[4] else (run[1], run[2], run[3])
    least, comma, most = bounds
    if _matches_line_break(kept):
        return None
    return kept, int(least), (int(most) if most else None) if comma else int(least)


def _leading_lookahead(body: str) -> tuple[str | None, str]:
    """(X, the rest) for a body opening with `(?=X)`; (None, body) otherwise."""
    end = group_end(body) if body.startswith("(?=") else None
    return (None, body) if end is None else (body[3:end], body[end + 1 :])


def _matches_line_break(pattern: str) -> bool:
    """True when some piece of `pattern` can match a line break (or the pattern does not parse)."""
    try:
        tree = python_parsed(pattern)
    except (re.error, OverflowError):
        return True
    return _tree_matches(tree, set(map(ord, _LINE_BREAKS)))


def _tree_matches(items, codes: set[int]) -> bool:
    """Whether a piece of the parsed pattern `items` can match a character of `codes`."""
    for op, arg in items:
        if op in (_constants.LITERAL, _constants.NOT_LITERAL, _constants.ANY, _constants.IN):
            if any(_piece_matches(op, arg, c) for c in codes):
                return True
        elif op == _constants.SUBPATTERN:
            if _tree_matches(arg[-1], codes):
                return True
        elif op in (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT):
            if _tree_matches(arg[2], codes):
                return True
        elif op == _constants.BRANCH:
            if any(_tree_matches(branch, codes) for branch in arg[1]):
                return True
        elif op not in (
            _constants.AT,
        ):  # anything else (lookarounds, backreferences): assume it can
            return True
    return False


def _piece_matches(op, arg, code: int) -> bool:
    if op == _constants.LITERAL:
        return arg == code
    if op == _constants.NOT_LITERAL:
        return arg != code
    if op == _constants.ANY:  # excludes what the lookahead's `.` excludes, in either flavour
        return False
    negate = any(o == _constants.NEGATE for o, _ in arg)
    hit = any(_class_item_matches(o, a, code) for o, a in arg if o != _constants.NEGATE)
    return hit != negate


def _class_item_matches(op, arg, code: int) -> bool:
    if op == _constants.LITERAL:
        return arg == code
    if op == _constants.RANGE:
        return arg[0] <= code <= arg[1]
    if op == _constants.CATEGORY:
        return re.fullmatch(_CATEGORY_TEXT.get(arg, "[\\s\\S]"), chr(code)) is not None
    return True  # unknown: assume it can


_CATEGORY_TEXT = {
    _constants.CATEGORY_DIGIT: r"\d",
    _constants.CATEGORY_NOT_DIGIT: r"\D",
    _constants.CATEGORY_SPACE: r"\s",
    _constants.CATEGORY_NOT_SPACE: r"\S",
    _constants.CATEGORY_WORD: r"\w",
    _constants.CATEGORY_NOT_WORD: r"\W",
}


_NOT_ONLY = re.compile(r"\(\?!\^?(\[(?:[^\]\\]|\\.)*\]|\\d)[+*]\$\)")
_ONE_REPEATED_CLASS = re.compile(r"\[(?:[^\]\\]|\\.)*\][+*]")


def leading_not_only(body: str) -> tuple[str | None, str]:
    """A negative lookahead `(?!^D+$)` (D a class or `\\d`) at the start of a pattern whose rest is
    one repeated class, as in AWS's `^(?!^[0-9]+$)([a-zA-Z0-9-_]+)$`: (D, the rest unwrapped);
    (None, body) for any other body."""
    m = _NOT_ONLY.match(body)
    if m is None:
        return None, body
    rest = unwrapped(body[m.end() :])
    return (m[1], rest) if _ONE_REPEATED_CLASS.fullmatch(rest) else (None, body)


def not_only_written_out(rest: str, out: list, excluded: str, excluded_text: str, refuse) -> str:
    """The strings of `out` (`rest`, one class and its count, translated) with a character outside
    the `excluded` class (translated: `excluded_text`): `C*[C--D]C*` for an open count, exact;
    under a count fitted to minLength / maxLength, `[C--D]C{a-1,b-1}`, a subset (the first
    character is the one outside D), since two counted repeats side by side would make the
    automaton a product of their counts."""
    cls, count = out
    if not any(
        re.fullmatch(python_view(rest[:-1]), ch) and not re.fullmatch(python_view(excluded), ch)
        for ch in map(chr, range(0x20, 0x7F))
    ):
        raise refuse("a negative lookahead leaves no printable character of the class")
    outside = f"[{cls}--{excluded_text}]"
    if count in ("+", "*"):
        return f"(?:{cls}*{outside}{cls}*)"
    least, most = (int(n) if n else None for n in count.strip("{}").split(","))
    return f"(?:{outside}{cls}{{{max(least - 1, 0)},{'' if most is None else most - 1}}})"


_NOT_BLANK = re.compile(r"\(\?!\^?(?:\\s|\[\\s\])\*\$\)\.[*+]")


def not_blank_written_out(body: str) -> str:
    """`(?!\\s*$).+` (or `.*`: "not only whitespace", CloudFormation's descriptions) written
    without the lookahead as ` *[^\\s].*`: spaces, one character that is no whitespace, then
    anything. A subset (only spaces before it), and `[^\\s]` is narrowed to printable ASCII, which
    no regex flavour counts as whitespace; other bodies are returned as they are."""
    return " *[^\\s].*" if _NOT_BLANK.fullmatch(body) else body


def leading_excluded_prefixes(body: str) -> tuple[list[str], str]:
    """Negative lookaheads of literal text at the start of a pattern, as in AWS's
    `^(?!aws:)[a-zA-Z0-9 _.:/=+@-]{1,128}$`: (the literals, the rest of the pattern). A string
    matches them when it starts with none of the literals (`(?!aws:.*)` says the same)."""
    literals = []
    while (m := _LOOKAHEAD_LITERAL.match(body)) is not None:
        literals.append(re.sub(r"\\(.)", r"\1", m[1]))
        body = body[m.end() :]
    return literals, (unwrapped(body) if literals else body)


def without_prefixes(body: str, out: list, excluded: list[str], refuse) -> str:
    """The strings of `out` (translated from `body`), one repeated character class (`C*`, `C+`,
    `C{a,b}`, `C{a,}`), that start with none of the `excluded` literals, as a regex with no
    lookaround: walk the literals' trie; at each proper prefix a string may end (if long enough),
    continue with a character that leads to no literal (class difference `[C--[..]]`) and then
    anything, or take a trie edge that does not complete a literal."""
    quantifier = "".join(out[1:])
    m = _REPEAT.fullmatch(quantifier)
    source = _TRAILING_REPEAT.sub("", body)
    if not out or not out[0].startswith("[") or m is None or source == body:
        raise refuse(
            "a negative lookahead is supported only as literal prefixes before one repeated "
            "character class"
        )
    atom = out[0]
    least = {"*": 0, "+": 1}.get(quantifier, int(m[1] or 0))
    most = (
        None if quantifier in ("*", "+") or m[2] == "" else int(m[2] if m[2] is not None else m[1])
    )
    allowed = python_compiled(
        source
    )  # the class as the pattern wrote it: which literal characters it takes

    def rest(count: int) -> str:  # any tail of the class, after `count` characters
        lo = max(least - count, 0)
        return f"{atom}{{{lo},}}" if most is None else f"{atom}{{{lo},{most - count}}}"

    def node(prefix: str) -> str | None:  # the tails after `prefix`; None: no string
        depth = len(prefix)
        children = sorted(
            {lit[depth] for lit in excluded if lit.startswith(prefix) and len(lit) > depth}
        )
        options = []
        if most is None or depth < most:
            diff = "".join(f"\\x{{{ord(ch):x}}}" for ch in children)
            options.append(
                f"[{atom}--[{diff}]]{rest(depth + 1)}" if diff else f"{atom}{rest(depth + 1)}"
            )
            for ch in children:
                if (
                    prefix + ch not in excluded
                    and allowed.fullmatch(ch)
                    and ch not in '"\\'
                    and ch >= " "
                ):
                    tail = node(prefix + ch)
                    if tail is not None:
                        options.append(f"\\x{{{ord(ch):x}}}" + tail)
        if least <= depth:  # may end here: the options made optional (an empty alternative
            return (
                f"(?:{'|'.join(options)})?" if options else ""
            )  # would end outlines' match early)
        return f"(?:{'|'.join(options)})" if options else None

    regex = node("")
    if regex is None:
        raise refuse("no string of its length starts with none of the excluded prefixes")
    return f"(?:{regex})"

"""Negative lookaheads of literal prefixes at the start of a pattern, without lookaround.

AWS writes tag keys as `^(?!aws:)[a-zA-Z0-9 _.:/=+@-]{1,128}$`: strings of one character class that
do not start with a reserved prefix. outlines-core has no lookaround, so `string_pattern_regex`
strips such lookaheads (`leading_excluded_prefixes`) and, once the rest is translated to one
repeated class, writes the same language as a walk of the literals' trie (`without_prefixes`).
"Not only whitespace", `^(?!\\s*$).+$`, is written out (`not_blank_written_out`). Other
lookarounds stay refused.
"""

from __future__ import annotations

import re

from .regex_properties import pattern_tokens, python_view

_LOOKAHEAD_LITERAL = re.compile(r"\(\?!((?:[A-Za-z0-9 _:/@#%&=,;'<>~`-]|\\[^A-Za-z0-9])+)(\.\*)?\)")
_REPEAT = re.compile(r"\*|\+|\{([0-9]+)(?:,([0-9]*))?\}")
_TRAILING_REPEAT = re.compile(r"(?:[*+]|\{[0-9]+(?:,[0-9]*)?\})$")


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
        body = body[m.end():]
    return literals, (_unwrapped(body) if literals else body)


def _unwrapped(body: str) -> str:
    """`(X)` or `(?:X)` around the whole rest as X (`^(?!aws:)([a-z\\d_.:/=+@-]+)$`)."""
    prefix = 3 if body.startswith("(?:") else 1 if body.startswith("(") and not body.startswith("(?") else 0
    if not prefix or not body.endswith(")"):
        return body
    depth = 0
    for i, text, in_class in pattern_tokens(body):
        if not in_class:
            depth += (text == "(") - (text == ")")
            if depth == 0:
                return body[prefix:-1] if i == len(body) - 1 else body
    return body


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
        raise refuse("a negative lookahead is supported only as literal prefixes before one repeated "
                     "character class")
    atom = out[0]
    least = {"*": 0, "+": 1}.get(quantifier, int(m[1] or 0))
    most = None if quantifier in ("*", "+") or m[2] == "" else int(m[2] if m[2] is not None else m[1])
    allowed = re.compile(python_view(source))  # the class as the pattern wrote it: which literal characters it takes

    def rest(count: int) -> str:  # any tail of the class, after `count` characters
        lo = max(least - count, 0)
        return f"{atom}{{{lo},}}" if most is None else f"{atom}{{{lo},{most - count}}}"

    def node(prefix: str) -> str | None:  # the tails after `prefix`; None: no string
        depth = len(prefix)
        children = sorted({lit[depth] for lit in excluded if lit.startswith(prefix) and len(lit) > depth})
        options = []
        if most is None or depth < most:
            diff = "".join(f"\\x{{{ord(ch):x}}}" for ch in children)
            options.append(f"[{atom}--[{diff}]]{rest(depth + 1)}" if diff else f"{atom}{rest(depth + 1)}")
            for ch in children:
                if prefix + ch not in excluded and allowed.fullmatch(ch) and ch not in '"\\' and ch >= " ":
                    tail = node(prefix + ch)
                    if tail is not None:
                        options.append(f"\\x{{{ord(ch):x}}}" + tail)
        if least <= depth:  # may end here: the options made optional (an empty alternative
            return f"(?:{'|'.join(options)})?" if options else ""  # would end outlines' match early)
        return f"(?:{'|'.join(options)})" if options else None

    regex = node("")
    if regex is None:
        raise refuse("no string of its length starts with none of the excluded prefixes")
    return f"(?:{regex})"

"""Keep a user's regex from matching the private-use marker characters of the token index.

`index.token_index` compiles every regex as `<start>(?:regex)<end>` (see `OutlinesVocab`); the automaton
library also builds an unanchored search, which starts a new match at every `<start>`. Where the
regex's own classes can match `<start>` inside a bounded repeat (`.{0,30}`, `[^\\n]{0,30}`,
`\\W{0,30}`), every position of the repeat may hold a restarted match, and the automaton is
exponential in the bound: `.{0,16}` took 6.5 s to compile and each further count doubles it, so
`.{0,40}` never finished and held the compile thread. No real token spells a marker, so taking
them out of every class changes nothing the model can write, and a restarted match dies at once.
"""

from __future__ import annotations

import re

_WIDE_ESCAPES = frozenset("WSDpP")  # outside a class: sets that may hold private-use characters


def exclude_chars(regex: str, chars: str) -> str:
    """`regex` (Rust syntax) with `chars` taken out of every class, `.` and negated escape.
    Left as it is where the rewrite could change its language: under a verbose flag (x: a
    '[' may be in a comment) or, for `.`, under any flag group naming s (then `.` may or may
    not match a line break), and when a class does not end (the regex's own error then)."""
    if _flag_set(regex, "x"):
        return regex
    excluded = "".join(f"\\x{{{ord(c):x}}}" for c in chars)
    dot = "." if _flag_set(regex, "s") else f"[^\\n{excluded}]"
    try:
        return _rewritten(regex, excluded, dot)
    except ValueError:
        return regex


_FLAG_GROUP = re.compile(
    r"(?<!\\)(?:\\\\)*\(\?([a-zA-Z-]*)[:)]"
)  # an unescaped (?flags) or (?flags:


def _flag_set(regex: str, flag: str) -> bool:
    """Whether a flag group of `regex` names `flag` (on or off)."""
    return any(flag in m.group(1) for m in _FLAG_GROUP.finditer(regex))


def _rewritten(regex: str, excluded: str, dot: str) -> str:
    out, i, n = [], 0, len(regex)
    while i < n:
        c = regex[i]
        if c == "\\":
            end = escape_end(regex, i)
            escape = regex[i:end]
            out.append(f"[{escape}&&[^{excluded}]]" if escape[1:2] in _WIDE_ESCAPES else escape)
            i = end
        elif c == "[":
            end = _class_end(regex, i)
            out.append(f"[{regex[i:end]}&&[^{excluded}]]")
            i = end
        else:
            out.append(dot if c == "." else c)
            i += 1
    return "".join(out)


def escape_end(regex: str, i: int) -> int:
    """The end of the escape starting at `regex[i]` (a backslash)."""
    kind = regex[i + 1 : i + 2]
    if kind in ("p", "P", "x", "u", "U") and regex.startswith("{", i + 2):
        return regex.index("}", i + 2) + 1
    if kind == "x":
        return i + 4
    return i + 2


def _class_end(regex: str, i: int) -> int:
    """The end of the bracketed class starting at `regex[i]` (nested classes included)."""
    depth, j = 0, i
    while j < len(regex):
        c = regex[j]
        if c == "\\":
            j = escape_end(regex, j)
            continue
        if c == "[":
            if depth and regex.startswith("[:", j) and ":]" in regex[j:]:  # [:alpha:]
                j = regex.index(":]", j) + 2
                continue
            depth += 1
            j += 1
            if regex.startswith("^", j):
                j += 1
            if regex.startswith("]", j):  # a leading ] is a literal
                j += 1
            continue
        if c == "]":
            depth -= 1
            j += 1
            if depth == 0:
                return j
            continue
        j += 1
    raise ValueError(f"unterminated class in {regex!r}")

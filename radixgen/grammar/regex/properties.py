"""Unicode property escapes in JSON Schema patterns (`\\p{L}`, `\\P{C}`), narrowed to ASCII.

ECMA-262 patterns (AWS writes tag values as `^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$`) may name a Unicode
general category, Java and PCRE ones a POSIX class (`\\p{Graph}`, `\\p{ASCII}`). Python's `re` has no
such escapes and Rust's tables follow another Unicode version, so, like the shorthand classes, a
property becomes the printable ASCII characters of that category (minus `"` and `\\`, which JSON
strings escape): a subset of what it names in every Unicode version, so every output validates.
Inside a negated class a subset would widen the negation, so there it is refused.
"""

from __future__ import annotations

import re
import unicodedata
import warnings

PROPERTY = re.compile(r"\\([pP])(?:\{([^}]*)\}|([A-Za-z]))")
_CATEGORIES = {
    "L",
    "Lu",
    "Ll",
    "Lt",
    "Lm",
    "Lo",
    "LC",
    "L&",
    "M",
    "Mn",
    "Mc",
    "Me",
    "N",
    "Nd",
    "Nl",
    "No",
    "P",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "S",
    "Sm",
    "Sc",
    "Sk",
    "So",
    "Z",
    "Zs",
    "Zl",
    "Zp",
    "C",
    "Cc",
    "Cf",
    "Cs",
    "Co",
    "Cn",
}
_ASCII = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\']
# the POSIX names Java and PCRE patterns use (CloudFormation's `^[\p{Graph}\x20]*$`,
# `^\p{ASCII}+$`): their printable ASCII members are the same under Java's ASCII reading and a
# Unicode one (`Punct` is not: Java's includes `$+<=>^|~`, Unicode's P category does not)
_POSIX = {
    "ASCII": lambda ch: True,
    "Print": lambda ch: True,
    "Graph": lambda ch: ch != " ",
    "Alpha": str.isalpha,
    "Digit": str.isdigit,
    "Alnum": str.isalnum,
    "Upper": str.isupper,
    "Lower": str.islower,
    "XDigit": lambda ch: ch in "0123456789abcdefABCDEF",
    "Space": lambda ch: ch == " ",
    "Blank": lambda ch: ch == " ",
}


def property_members(kind: str, name: str) -> list[str] | None:
    """The JSON-safe printable ASCII characters of `\\p{name}` (kind "p") or `\\P{name}` (kind
    "P"), in order; None where `name` is no general category or POSIX name."""
    if name in _POSIX:
        return [ch for ch in _ASCII if _POSIX[name](ch) == (kind == "p")]
    if name not in _CATEGORIES:
        return None
    cased = ("Lu", "Ll", "Lt")

    def named(ch: str) -> bool:
        cat = unicodedata.category(ch)
        return cat in cased if name in ("LC", "L&") else cat.startswith(name)

    return [ch for ch in _ASCII if named(ch) == (kind == "p")]


def class_text(members: list[str]) -> str:
    """Members (ASCII, in order) as the inside of a Rust or Python class: hex escapes, runs of
    consecutive characters as ranges."""
    runs: list[list[int]] = []
    for code in map(ord, members):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\x{a:02x}" if a == b else f"\\x{a:02x}-\\x{b:02x}" for a, b in runs)


def members_text(members: list[str], in_class: bool) -> str:
    """A property's members as regex text: inside a class, or a class of their own."""
    return class_text(members) if in_class else f"[{class_text(members)}]"


# `[^\p{X}]` is `\P{X}` (and the other way round): the one negated class with a property in it
# that keeps its exact meaning once narrowed
SINGLE_NEGATED = re.compile(r"(?<!\\)\[\^\\([pP])(\{[A-Za-z&]+\}|[A-Za-z])\]")


def without_single_negations(pattern: str) -> str:
    return SINGLE_NEGATED.sub(lambda m: "\\" + ("P" if m[1] == "p" else "p") + m[2], pattern)


def pattern_tokens(pattern: str):
    """(index, text, inside a class) of each token of a pattern: an escape (a property escape
    whole), a class opening with its leading literal "]" (`[]` or `[^]`), or one character."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            m = PROPERTY.match(pattern, i)
            n = m.end() - i if m else 2
        elif not in_class and c == "[":
            n = 2 if pattern.startswith("[]", i) else 3 if pattern.startswith("[^]", i) else 1
        else:
            n = 1
        yield i, pattern[i : i + n], in_class
        if c != "\\":
            in_class = c != "]" if in_class else c == "["
        i += n


def group_end(body: str) -> int | None:
    """Index of the `)` closing the group that opens `body` (None when it does not close)."""
    depth = 0
    for i, text, in_class in pattern_tokens(body):
        if not in_class:
            depth += (text == "(") - (text == ")")
            if depth == 0:
                return i
    return None


def unwrapped(body: str) -> str:
    """`(X)` or `(?:X)` around the whole rest as X (`^(?!aws:)([a-z\\d_.:/=+@-]+)$`)."""
    prefix = (
        3
        if body.startswith("(?:")
        else 1
        if body.startswith("(") and not body.startswith("(?")
        else 0
    )
    if not prefix or not body.endswith(")"):
        return body
    return body[prefix:-1] if group_end(body) == len(body) - 1 else body


def python_view(pattern: str) -> str:
    """`pattern` with each property escape as its ASCII members (a class outside classes; an
    unknown property as `\\d`), for Python's parser: the same widths and, on ASCII, the same
    characters as the translation."""
    out = []
    for _, text, in_class in pattern_tokens(pattern):
        m = PROPERTY.fullmatch(text)
        if m:
            members = property_members(m[1], m[2] or m[3])
            text = members_text(members, in_class) if members else ("\\d" if in_class else "[\\d]")
        out.append(text)
    return "".join(out)


def python_parsed(pattern: str):
    """re's parse tree of python_view(pattern), without re's FutureWarning for a doubled `|`, `&`,
    `~` or a `[` in a class (characters in ECMA-262 without the v flag, and in re)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return re._parser.parse(python_view(pattern))


def python_compiled(pattern: str) -> re.Pattern:
    """re.compile(python_view(pattern)), without that warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(python_view(pattern))

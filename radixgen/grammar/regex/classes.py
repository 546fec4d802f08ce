"""Escapes and character classes of JSON Schema patterns, in outlines-core's (Rust) regex syntax,
without the characters JSON strings must escape (see `regex.leaves.string_pattern_regex`).

- `escape_piece`: one escape. Shorthand classes (`\\d \\w \\s \\D \\W \\S`) and Unicode properties
  (`\\p{L}`, regex.properties) are narrowed to printable ASCII; `\\u`/`\\x` escapes are code points;
  control characters, quotes and backslashes are refused alone and dropped inside classes.
- `char_class`: a class minus what JSON strings must escape. A negated class with a shorthand is
  narrowed to ASCII as a whole (`[^\\s]`: narrowing `\\s` alone would widen the negation); lone
  surrogates listed in a class are dropped (no string holds one).
"""

from __future__ import annotations

import re

from radixgen.grammar.regex.properties import (
    PROPERTY,
    members_text,
    pattern_tokens,
    property_members,
    python_compiled,
)

_JSON_UNSAFE = r'["\\\x00-\x1f]'  # chars a raw JSON string may not contain unescaped
# "." (ECMA-262's leaves out the line terminators \u2028 and \u2029, Python's does not: neither)
ANY_SAFE = r'[^"\\\x00-\x1f\u2028\u2029]'
_JSON_BACKSLASH = (
    r"(?:\\\\)"  # a backslash in a string's value, as JSON text writes it: \\ (one atom)
)
# ASCII subsets of Python's shorthand classes (printable; without '"' and '\\', which JSON escapes)
_SHORTHAND = {
    "d": "0-9",
    "w": "0-9A-Za-z_",
    "s": " ",
    "D": r"\x20\x21\x23-\x2f\x3a-\x5b\x5d-\x7e",
    "S": r"\x21\x23-\x5b\x5d-\x7e",
    "W": r"\x20\x21\x23-\x2f\x3a-\x40\x5b\x5d\x5e\x60\x7b-\x7e",
}
_CONTROL_ESCAPES = set("ntrfv0")
_SAFE_PUNCT = set(".^$*+?()[]{}|-/,:;=<>!@#%&~`' _")
_CONTROLS = {"\\t", "\\n", "\\r", "\\f", "\\v"}  # (without_optional_controls)
_ZERO_OR_MORE = re.compile(r"(?:\*|\?|\{0(?:,\d*)?\})[?+]?")


def escape_piece(
    body: str, i: int, refuse, in_class: bool, negated: bool = False
) -> tuple[str, int]:
    if i + 1 >= len(body):
        raise refuse("trailing backslash")
    c = body[i + 1]
    if c in _SHORTHAND:
        inner = _SHORTHAND[c]
        return (inner if in_class else f"[{inner}]"), i + 2
    if c in "pP":  # a Unicode property, narrowed to ASCII (regex.properties)
        m = PROPERTY.match(body, i)
        members = property_members(m[1], m[2] or m[3]) if m else None
        if members is None:
            raise refuse(
                f"unsupported property escape {body[i : i + 12]!r} (general categories and POSIX names only)"
            )
        if negated:
            raise refuse("a Unicode property inside a negated class is not supported")
        if (
            not members and not in_class
        ):  # (in a class it adds nothing; an empty class is refused there)
            raise refuse(
                f"{m[0]} has no printable ASCII character (properties are narrowed to ASCII)"
            )
        return members_text(members, in_class), m.end()
    if c in "xu":
        width = 2 if c == "x" else 4
        code = _hex_escape(body, i)
        if code is None:
            raise refuse(f"malformed \\{c} escape")
        if 0xD800 <= code <= 0xDFFF:
            raise refuse("a surrogate code point matches no character")
        if (code < 0x20 or chr(code) in '"\\') and not negated:
            if in_class:  # dropped from the class, as \t is below (CloudFormation's [\u0009\u000A\u0020-\u00FF])
                return "", i + 2 + width
            raise refuse("it matches characters that JSON strings must escape")
        # (in a negated class it stays, so `[^\u0000-\u001F]` works: char_class takes the
        # characters JSON strings must escape out of every class afterwards)
        return f"\\x{{{code:x}}}", i + 2 + width
    if c == "\\" and not in_class:
        return _JSON_BACKSLASH, i + 2
    if c in _CONTROL_ESCAPES and not in_class:
        raise refuse("it matches control characters that JSON strings must escape")
    if c == '"' and not in_class:  # (ECMA-262 without the u flag and Python read `\"` as `"`)
        raise refuse("it matches characters that JSON strings must escape")
    if c in _CONTROL_ESCAPES or c in '\\"':
        # removed from a class (see char_class: JSON-unsafe characters are taken out of every
        # class afterwards, so a negated class does not gain it back)
        return "", i + 2
    if c in _SAFE_PUNCT:
        return (c if c in "/,:;=<>!@#%`' _" else "\\" + c), i + 2
    raise refuse(f"escape \\{c} is not supported")


_ESCAPED_CODES = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "0": 0}


def _class_atom(body: str, i: int) -> tuple[int, int] | None:
    """(code point, index after) of one class member at i that names a single character (a
    literal, `\\t`-style, `\\xHH`, `\\uHHHH` or a punctuation escape), else None."""
    c = body[i : i + 1]
    if not c or c == "]":
        return None
    if c != "\\":
        return ord(c), i + 1
    e = body[i + 1 : i + 2]
    if e in _ESCAPED_CODES:
        return _ESCAPED_CODES[e], i + 2
    if e in ("x", "u"):
        code = _hex_escape(body, i)
        return None if code is None else (code, i + (4 if e == "x" else 6))
    return (ord(e), i + 2) if e and not e.isalnum() else None


def _hex_escape(body: str, i: int) -> int | None:
    """The code point of the `\\xHH` or `\\uHHHH` escape at i, None where it is malformed."""
    width = 2 if body[i + 1] == "x" else 4
    digits = body[i + 2 : i + 2 + width]
    if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
        return None
    return int(digits, 16)


def _unsafe_range(body: str, i: int) -> tuple[int, int, int] | None:
    """A range `a-b` at i with an end JSON strings escape (a control character, '"' or '\\'):
    (a, b, index after), else None (and for ranges whose ends are both safe: the usual path)."""
    start = _class_atom(body, i)
    if start is None or not body.startswith("-", start[1]) or body.startswith("-]", start[1]):
        return None
    end = _class_atom(body, start[1] + 1)
    if end is None or end[0] < start[0]:
        return None
    unsafe = [code for code in (start[0], end[0]) if code < 0x20 or chr(code) in '"\\']
    return (start[0], end[0], end[1]) if unsafe else None


def _has_safe(lo: int, hi: int) -> bool:
    """Whether lo..hi, a range with an unsafe end (so lo < 0x80), holds a character JSON strings
    need not escape: U+0080 is one wherever hi reaches it."""
    return hi >= 0x80 or any(code >= 0x20 and chr(code) not in '"\\' for code in range(lo, hi + 1))


_SURROGATES = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}(?:-\\u[dD][89a-fA-F][0-9a-fA-F]{2})?")


def _shorthand_class_end(body: str, i: int) -> int | None:
    """The index of the "]" closing the class opened at i when the class lists a shorthand
    (`\\s`, `\\d`, ...), else None (also when it is not closed)."""
    shorthand = False
    for k, text, in_class in pattern_tokens(body[i:]):
        if in_class and text == "]":
            return i + k if shorthand else None
        shorthand |= in_class and text[0] == "\\" and text[1:2] in _SHORTHAND
    return None


def _negated_as_ascii(body: str, i: int, end: int, refuse) -> tuple[str, int]:
    """A negated class listing a shorthand ([^\\s], [^\\d,]) as the printable ASCII characters it
    matches, a subset: narrowing the shorthand alone would widen the negation (ASCII \\s misses
    U+00A0, so [^\\s] would take it), but on ASCII ECMA-262 and Python read every shorthand
    alike, so the whole class narrowed to ASCII is exact there."""
    try:
        test = python_compiled(body[i : end + 1])
    except re.error:
        raise refuse("a shorthand class inside a negated class is not supported") from None
    members = [c for c in map(chr, range(0x20, 0x7F)) if c not in '"\\' and test.fullmatch(c)]
    if not members:
        raise refuse("it matches no printable ASCII character but the quote and the backslash")
    return "[" + "".join(c if c.isalnum() else f"\\x{ord(c):02x}" for c in members) + "]", end + 1


def char_class(body: str, i: int, refuse) -> tuple[str, int]:
    """[...] -> a Rust class minus the characters JSON strings must escape."""
    j, parts = i + 1, ["["]
    negated = body.startswith("^", j)
    if negated:
        parts.append("^")
        j += 1
    end = _shorthand_class_end(body, i) if negated else None
    if end is not None:
        return _negated_as_ascii(body, i, end, refuse)
    first, backslash = True, False  # backslash: listed in a class that is not negated
    while j < len(body) and (body[j] != "]" or first):
        c = body[j]
        ends_a_range = parts[-1] == "-" and parts[-2] not in (
            "[",
            "[^",
        )  # (`9` of `0-9`: not a start)
        ranged = _unsafe_range(body, j) if not (negated or ends_a_range) else None
        if ranged is not None:  # (`[\x09-\x0D\x20-\x7E]`, `[\u0001-\uFFFF]`, `[@\\-_]`)
            lo, hi, j = ranged
            if _has_safe(lo, hi):  # kept as a range: the difference below takes the unsafe ones out
                parts.append(f"\\x{{{lo:x}}}-\\x{{{hi:x}}}")
            first = False
            continue
        surrogates = _SURROGATES.match(body, j)
        if surrogates:  # no string holds a lone surrogate (AWS's [...\uD800\uDBFF-\uDC00\uDFFF]):
            if parts[-1] == "-":  # nothing to generate, unless a range runs into them
                raise refuse("a range to a surrogate code point is not supported")
            j, first = surrogates.end(), False
            continue
        if c == "\\":
            start = j
            piece, j = escape_piece(body, j, refuse, in_class=True, negated=negated)
            shorthand = (
                body[start + 1] in _SHORTHAND or body[start + 1] in "pP"
            )  # (a set, not one character)
            if shorthand and body.startswith("-", j) and not body.startswith("-]", j):
                raise refuse("a range next to a shorthand class is ambiguous")
            if not piece and (
                parts[-1] == "-" or body.startswith("-", j) and not body.startswith("-]", j)
            ):
                raise refuse(
                    "a range from or to a character JSON strings must escape is not supported"
                )
            backslash |= body[j - 2 : j] == "\\\\" and not negated
            parts.append(piece)
        elif body.startswith("--", j) or c == "[" and body[j - 2 : j] == "&&":
            raise refuse("nested classes and class set operations are not supported")
        # (`[`, `&&`, `~~` and `||` are characters in ECMA-262 without the v flag and in Python's
        # re, and each is escaped below or not special in Rust: AWS's `[\p{L}||\p{M}||\p{N}]`,
        # `[...,@[\]+=...]`, where Rust would open a nested class; but `&&[` is Java's class
        # intersection, `[\p{Print}&&[^|:/]]`, whose author meant another set)
        else:  # (^ & ~ escaped: next to a removed member they would turn into syntax)
            parts.append(
                "\\]"
                if c == "]"
                else ("\\-" if c == "-" and first else ("\\" + c if c in "^&~[" else c))
            )
            j += 1
        first = False
    if j >= len(body):
        raise refuse("unterminated character class")
    if "".join(parts) in ("[", "[^"):  # only characters JSON strings must escape were listed
        if negated:
            return ANY_SAFE, j + 1
        if backslash:
            return _JSON_BACKSLASH, j + 1
        raise refuse(
            "it matches only characters that JSON strings must escape (or lone surrogates)"
        )
    inner = "".join(parts) + "]"
    if backslash:
        return f"(?:[{inner}--{_JSON_UNSAFE}]|{_JSON_BACKSLASH})", j + 1
    return f"[{inner}--{_JSON_UNSAFE}]", j + 1


def without_optional_controls(body: str) -> str:
    """`body` without the control escapes outside classes that may repeat zero times (`\\t*`,
    `\\r?`, a phone number's `x \\t*(\\d+)`): no string generated holds a control character (JSON
    escapes them), and on such strings they match only the empty string."""
    out, skip = [], 0
    for i, text, in_class in pattern_tokens(body):
        if i < skip:
            continue
        optional = _ZERO_OR_MORE.match(body, i + 2) if not in_class and text in _CONTROLS else None
        if optional:
            skip = optional.end()
            continue
        out.append(text)
    return "".join(out)

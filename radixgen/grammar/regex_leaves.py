"""Exact regexes for JSON Schema leaves that outlines-core would not enforce exactly.

Each function returns Rust-regex text for the *inside* of a JSON value (string contents without
the quotes, or a number) whose language is a subset of what the schema allows, so every output
validates. Unsupported input raises GrammarError.

- `string_pattern_regex`: a JSON Schema `pattern` (ECMA/Python syntax, unanchored search) turned
  into a fullmatch regex over raw JSON string contents: no `"`, `\\` or control characters are
  ever generated (the raw text then equals the decoded string), `^`/`$` at the ends are dropped
  (fullmatch implies the anchored search; so are those at the ends of top-level alternatives),
  shorthand classes (`\\d \\w \\s \\D \\W \\S`) are narrowed to printable ASCII (Python's and
  Rust's Unicode tables differ), and constructs whose meaning differs between the two engines
  (lookaround, backreferences, inline flags, word boundaries, `\\p{..}`) are refused.
- `format_regex`: exact regexes for the string formats radixgen supports.
- `number_range_regex`: integers and numbers between integer bounds, exactly.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .matcher import GrammarError

_JSON_UNSAFE = r'["\\\x00-\x1f]'  # chars a raw JSON string may not contain unescaped
_ANY_SAFE = r'[^"\\\x00-\x1f]'
# ASCII subsets of Python's shorthand classes (printable; without '"' and '\\', which JSON escapes)
_SHORTHAND = {"d": "0-9", "w": "0-9A-Za-z_", "s": " ",
              "D": r"\x20\x21\x23-\x2f\x3a-\x5b\x5d-\x7e", "S": r"\x21\x23-\x5b\x5d-\x7e",
              "W": r"\x20\x21\x23-\x2f\x3a-\x40\x5b\x5d\x5e\x60\x7b-\x7e"}
_CONTROL_ESCAPES = set("ntrfv0")
_SAFE_PUNCT = set(".^$*+?()[]{}|-/,:;=<>!@#%&~`' _")

_YEAR = r"(?:0(?:0(?:0[1-9]|[1-9][0-9])|[1-9][0-9]{2})|[1-9][0-9]{3})"  # 0001-9999
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_DIGITS = "[0-9]{1,6}"
_DUR_TIME = rf"T(?:{_DIGITS}H(?:{_DIGITS}M(?:{_DIGITS}S)?)?|{_DIGITS}M(?:{_DIGITS}S)?|{_DIGITS}S)"
_DUR_DATE = rf"(?:{_DIGITS}D|{_DIGITS}M(?:{_DIGITS}D)?|{_DIGITS}Y(?:{_DIGITS}M(?:{_DIGITS}D)?)?)"
_H16 = "[0-9a-f]{1,4}"
_IPV6_TAILS = [f"(?:{_H16}:){{3}}{_H16}:{_H16}", f"(?:{_H16}:){{2}}{_H16}:{_H16}", f"{_H16}:{_H16}:{_H16}",
               f"{_H16}:{_H16}", _H16, ""]
_LABEL = "[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?"  # <= 48 characters, no "-" at either end
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}T{_TIME}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    # unbounded repetitions: bounded ones multiply automaton states (and compile time)
    "email": r"[a-z0-9._+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+",
    "ipv4": rf"(?:{_OCTET}\.){{3}}{_OCTET}",
    "uri": r"https?://[a-z0-9-]+(?:\.[a-z0-9-]+)*(?:/[A-Za-z0-9._~-]*)*",
    # RFC 3339 appendix A (what JSON Schema means): weeks alone, a year then optional month then
    # optional day, no fractions; 6 digits per number keeps the automaton small
    "duration": rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_DIGITS}W)",
    # RFC 4291's text forms in lower case, "::" anywhere; an embedded IPv4 tail is not generated
    "ipv6": "(?:" + "|".join([f"(?:{_H16}:){{6}}{_H16}:{_H16}", f"::(?:{_H16}:){{5}}{_H16}:{_H16}",
                              f"(?:{_H16})?::(?:{_H16}:){{4}}{_H16}:{_H16}"]
                             + [f"(?:(?:{_H16}:){{0,{k}}}{_H16})?::{tail}"
                                for k, tail in enumerate(_IPV6_TAILS, start=1)]) + ")",
    # RFC 1123 labels in lower case: up to 5 labels of up to 48 characters (<= 244 < 253)
    "hostname": rf"{_LABEL}(?:\.{_LABEL}){{0,4}}",
}


# Formats with minLength/maxLength: the format's regex narrowed by `_fit_length`, from a flat form
# where the structured one nests repeats (the automaton of nested bounded repeats is the product
# of their bounds), and at most FORMAT_MAX_LENGTH long: outlines-core's compile time grows with
# the bound (pydantic's HttpUrl says maxLength 2083: 18 s for that flat uri, 2 s at 512, 1 s at
# 256), and no URL a model writes into a tool call needs more. Both are subsets, so exact.
_FLAT_FORMS = {"uri": r"https?://[a-z0-9][A-Za-z0-9._~/-]*"}  # unreserved characters and "/" only
FORMAT_MAX_LENGTH = 256


def format_length_regex(fmt: str, path: str, min_length: int, max_length: int | None) -> str:
    """The regex of supported format `fmt` for strings of min_length..max_length characters."""
    most = max(min_length, FORMAT_MAX_LENGTH)
    most = most if max_length is None else min(max_length, most)
    return string_pattern_regex(_FLAT_FORMS.get(fmt, FORMATS[fmt]), path, min_length, most,
                                keyword="format", name=fmt)


# formats that JSON Schema validators check (jsonschema's FormatChecker, every draft): one of
# these that FORMATS lacks is refused; any other name (OpenAPI's int32, password, binary, ...)
# is an annotation that validators ignore, so it constrains nothing
CHECKED_FORMATS = frozenset("""date time date-time duration email idn-email hostname idn-hostname ipv4
ipv6 uri uri-reference iri iri-reference uri-template json-pointer relative-json-pointer regex uuid
color""".split())


def format_regex(fmt: str, path: str) -> str | None:
    """The exact regex of a supported format; None for a format validators do not check."""
    if fmt in FORMATS:
        return FORMATS[fmt]
    if fmt in CHECKED_FORMATS:
        raise GrammarError(f"unsupported string format {fmt!r} at {path}.format "
                           f"(supported: {', '.join(sorted(FORMATS))})")
    return None


def escape_literal(text: str) -> str:
    """`text` as a regex matching itself (Rust accepts escaping every char escaped here)."""
    return "".join("\\" + ch if ch in ".^$*+?()[]{}|\\-&~#" else ch for ch in text)


def increasing_subsequence_regex(items: list[str], separator: str, nonempty: bool) -> str:
    """Regex for items[i1] sep items[i2] sep ... with i1 < i2 < ...: every item at most once, in
    the given order (how `uniqueItems` over a finite set is generated). One alternative per last
    item: O(n^2) text, an automaton of O(n) states."""
    alternatives = ["".join(f"(?:{item}{separator})?" for item in items[:k]) + items[k]
                    for k in range(len(items))]
    body = "(?:" + "|".join(alternatives) + ")"
    return body if nonempty else f"{body}?"


# ---------------------------------------------------------------- string patterns


def string_pattern_regex(pattern: str, path: str, min_length: int = 0, max_length: int | None = None,
                         keyword: str = "pattern", name: str | None = None) -> str:
    """Translate a JSON Schema `pattern` into a safe fullmatch regex over raw string contents,
    whose strings are `min_length`..`max_length` characters long (see `_fit_length`). A format's
    regex goes through here too when the format has length bounds (keyword "format", name: the
    format's name, for error messages)."""
    def refuse(why: str) -> GrammarError:
        return GrammarError(f"unsupported {keyword} {name or pattern!r} at {path}.{keyword}: {why}")

    try:
        re.compile(pattern)
    except re.error as exc:
        raise refuse(f"not a valid regular expression ({exc})") from None
    body = pattern
    if body.startswith("^"):
        body = body[1:]
    if body.endswith("$") and not _escaped_at(body, len(body) - 1):
        body = body[:-1]
    out, unbounded, i, depth = [], [], 0, 0
    while i < len(body):
        at_edge = depth == 0 and (body[i] == "^" and out[-1:] == ["|"]
                                  or body[i] == "$" and body[i + 1:i + 2] in ("", "|"))
        if at_edge:  # an anchor at the ends of a top-level alternative: fullmatch implies it
            i += 1
            continue
        if body[i] == "+" and out and (out[-1] in ("*", "+", "?", "}") or out[-1].startswith("{")):
            # after a quantifier (a literal brace is "\\}" here): Python 3.11's possessive form
            raise refuse("possessive quantifiers are not supported")
        quantifier = _UNBOUNDED.match(body, i)
        if quantifier:  # the scan consumes escapes and classes whole: this is a real quantifier
            least = 1 if quantifier[0] == "+" else int(quantifier[1] or 0)
            unbounded.append((len(out), quantifier.start(), quantifier.end(), least))
            out.append(quantifier[0])
            i = quantifier.end()
            continue
        piece, i = _pattern_piece(body, i, refuse)
        depth += piece.startswith("(") - (piece == ")")
        out.append(piece)
    if min_length or max_length is not None:
        _fit_length(body, out, unbounded, min_length, max_length, refuse)
    return "(?:" + "".join(out) + ")"


_QUANTIFIER = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_UNBOUNDED = re.compile(r"[*+]|\{([0-9]+),\}")
_UNBOUNDED_WIDTH = int(re._constants.MAXREPEAT)


def _width(body: str) -> tuple[int, int | None]:
    """Fewest and most characters a fullmatch of `body` spans (None: no most)."""
    lo, hi = re._parser.parse(body).getwidth()
    return lo, (None if hi >= _UNBOUNDED_WIDTH else hi)


def _fit_length(body: str, out: list, unbounded: list, min_length: int, max_length: int | None, refuse) -> None:
    """Make every string of the translated pattern `out` (in place) min_length..max_length long.

    Widths are counted on the pattern itself (each translated piece matches one character where
    the pattern's does, or nothing), so they bound the translation's strings too. A pattern whose
    widths already fit is left alone; otherwise every unbounded repeat (`*`, `+`, `{n,}`) gets the
    same least count a and most count b: the smallest a and then the largest b for which the
    pattern's widths fit. The result is exact for the common shape, one repeat of a fixed-width
    piece among fixed-width pieces (`^[a-z0-9_]+$` with maxLength 32 is `[a-z0-9_]{1,32}`), and a
    subset of the strings allowed otherwise, so every output validates; a pattern that cannot
    fit at all is refused."""
    def fits(width: tuple[int, int | None]) -> bool:
        lo, hi = width
        return lo >= min_length and (max_length is None or (hi is not None and hi <= max_length))

    def bounded(least: int, most: int | None) -> list[str]:
        return [f"{{{max(n, least)},{'' if most is None else max(n, least, most)}}}" for *_, n in unbounded]

    def width(least: int, most: int | None) -> tuple[int, int | None]:
        text, end = [], 0
        for (_, start, stop, _), count in zip(unbounded, bounded(least, most)):
            text += [body[end:start], count]
            end = stop
        return _width("".join(text) + body[end:])

    span = _width(body)
    if fits(span):
        return
    if not unbounded:
        raise refuse(f"its strings are {span[0]}..{span[1]} characters long, outside "
                     f"minLength {min_length} / maxLength {max_length}")
    least = _smallest(lambda a: width(a, None)[0] >= min_length, 0, max(min_length, 1))
    most = None
    if least is not None and max_length is not None:
        most = _smallest(lambda b: width(least, b + 1)[1] > max_length, least, max_length)
        most = max_length if most is None else most  # repeats of empty strings never grow
    if least is None or not fits(width(least, most)):
        raise refuse(f"no repeat count gives strings of length {min_length}..{max_length}")
    for (index, *_), count in zip(unbounded, bounded(least, most)):
        out[index] = count


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


def _literal_brace(body: str, i: int) -> bool:
    """Whether the brace at i is a literal: no quantifier ({n}, {n,} or {n,m}) starts or ends there."""
    if body[i] == "{":
        return not _QUANTIFIER.match(body, i)
    j = body.rfind("{", 0, i)
    return j < 0 or not _QUANTIFIER.fullmatch(body, j, i + 1)


def _escaped_at(text: str, pos: int) -> bool:
    backslashes = len(text[:pos]) - len(text[:pos].rstrip("\\"))
    return backslashes % 2 == 1


def _pattern_piece(body: str, i: int, refuse) -> tuple[str, int]:
    """One translated token of `body` starting at i, and the index after it."""
    c = body[i]
    if c == "\\":
        return _escape(body, i, refuse, in_class=False)
    if c == "[":
        return _char_class(body, i, refuse)
    if c == ".":
        return _ANY_SAFE, i + 1
    if c in "^$":
        raise refuse(f"anchor {c!r} inside the pattern")
    if c == "(" and body.startswith("(?", i):
        if body.startswith("(?:", i):
            return "(?:", i + 3
        if body.startswith("(?P<", i):
            return "(?P<", i + 4
        raise refuse("lookaround and inline flags are not supported")
    if c == "{" and body.startswith("{,", i):
        raise refuse("'{,n}' quantifiers are not supported")
    if c in "{}" and _literal_brace(body, i):
        return "\\" + c, i + 1  # a literal brace (ECMA and Python), which Rust's regex wants escaped
    if c == '"' or ord(c) < 0x20:
        raise refuse("it matches characters that JSON strings must escape")
    return c, i + 1


def _escape(body: str, i: int, refuse, in_class: bool) -> tuple[str, int]:
    if i + 1 >= len(body):
        raise refuse("trailing backslash")
    c = body[i + 1]
    if c in _SHORTHAND:
        inner = _SHORTHAND[c]
        return (inner if in_class else f"[{inner}]"), i + 2
    if c in "xu":
        width = 2 if c == "x" else 4
        digits = body[i + 2:i + 2 + width]
        if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise refuse(f"malformed \\{c} escape")
        code = int(digits, 16)
        if 0xD800 <= code <= 0xDFFF:
            raise refuse("a surrogate code point matches no character")
        if code < 0x20 or chr(code) in '"\\':
            raise refuse("it matches characters that JSON strings must escape")
        return f"\\x{{{code:x}}}", i + 2 + width
    if c in _CONTROL_ESCAPES and not in_class:
        raise refuse("it matches control characters that JSON strings must escape")
    if c in _CONTROL_ESCAPES:
        return "", i + 2  # removed from a class: the class is narrowed, never widened
    if c in _SAFE_PUNCT:
        return (c if c in "/,:;=<>!@#%`' _" else "\\" + c), i + 2
    raise refuse(f"escape \\{c} is not supported")


def _char_class(body: str, i: int, refuse) -> tuple[str, int]:
    """[...] -> a Rust class minus the characters JSON strings must escape."""
    j, parts = i + 1, ["["]
    negated = body.startswith("^", j)
    if negated:
        parts.append("^")
        j += 1
    first = True
    while j < len(body) and (body[j] != "]" or first):
        c = body[j]
        if c == "\\":
            if negated and body[j + 1:j + 2] in _SHORTHAND:
                # narrowed to ASCII, it would widen the negation (\s misses U+00A0, so [^\s] gets it)
                raise refuse("a shorthand class inside a negated class is not supported")
            piece, j = _escape(body, j, refuse, in_class=True)
            if body[j - 1] in _SHORTHAND and body.startswith("-", j) and not body.startswith("-]", j):
                raise refuse("a range next to a shorthand class is ambiguous")
            parts.append(piece)
        elif c == "[" or body.startswith(("&&", "--", "~~", "||"), j):
            raise refuse("nested classes and class set operations are not supported")
        else:
            parts.append("\\]" if c == "]" else ("\\-" if c == "-" and first else c))
            j += 1
        first = False
    if j >= len(body):
        raise refuse("unterminated character class")
    inner = "".join(parts) + "]"
    return f"[{inner}--{_JSON_UNSAFE}]", j + 1


# ---------------------------------------------------------------- numbers


def number_range_regex(lo, hi, lo_excl: bool, hi_excl: bool, integer: bool) -> str:
    """Numbers (integer=True: integers) in the interval given by integer bounds lo/hi (None:
    unbounded). No exponents; integers without fraction; never "-0"."""
    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):
        a, a_excl = (lo, lo_excl) if lo is not None and lo >= 0 else (0, False)
        parts.append(_magnitude(a, hi, a_excl, hi_excl, integer))
    if lo is None or lo < 0:
        a, a_excl = (-hi, hi_excl) if hi is not None and hi < 0 else (0, True)
        b = None if lo is None else -lo
        mag = _magnitude(a, b, a_excl, lo_excl, integer)
        if mag:
            parts.append("-" + mag)
    parts = [p for p in parts if p]
    if not parts:
        raise GrammarError(f"no {'integer' if integer else 'number'} lies within the bounds")
    return "(?:" + "|".join(parts) + ")"


def _magnitude(a, b, a_excl: bool, b_excl: bool, integer: bool) -> str:
    """Unsigned decimals m with a <(=) m <(=) b (b None: unbounded), a and b >= 0: integers,
    or Decimals for numbers."""
    if not integer and (a != int(a) or (b is not None and b != int(b))):
        return _decimal_magnitude(Decimal(a), None if b is None else Decimal(b), a_excl, b_excl)
    a, b = int(a), (None if b is None else int(b))
    frac = "" if integer else r"(?:\.[0-9]+)?"
    alts = []
    first_full = a + 1 if a_excl else a
    last_full = None if b is None else (b - 1 if (b_excl or not integer) else b)
    if last_full is None or first_full <= last_full:
        alts.append(_int_range(first_full, last_full) + frac)
    if not integer and a_excl and (b is None or a < b):
        alts.append(rf"{a}\.[0-9]*[1-9][0-9]*")
    if not integer and b is not None and not b_excl and (b > a or not a_excl):
        alts.append(rf"{b}(?:\.0+)?")
    return "(?:" + "|".join(alts) + ")" if alts else ""


def _decimal_magnitude(a: Decimal, b: Decimal | None, a_excl: bool, b_excl: bool) -> str:
    """Unsigned decimal numbers m with a <(=) m <(=) b, bounds with fractions. Integer parts
    strictly between the bounds' take any fraction; at a bound's integer part the fraction is
    compared digit by digit. When both bounds share their integer part, only fractions with
    exactly as many digits as the longer bound's are generated (a subset)."""
    ia, ib = int(a), (None if b is None else int(b))
    fa, fb = _fraction_digits(a), ("" if b is None else _fraction_digits(b))
    if ib == ia:  # fractions of 1 .. w digits between the two, w the longer bound's digits
        alts = [] if fa or a_excl else [str(ia)]
        low, high = a - ia, b - ia
        for width in range(1, max(len(fa), len(fb)) + 1):
            scale = 10 ** width
            lo, hi = math.ceil(low * scale), math.floor(high * scale)
            lo, hi = lo + (a_excl and lo == low * scale), hi - (b_excl and hi == high * scale)
            if lo <= hi:
                alts.append(rf"{ia}\.{_same_width(str(lo).zfill(width), str(hi).zfill(width))}")
        return "(?:" + "|".join(alts) + ")" if alts else ""
    alts = []
    if ib is None or ia + 1 <= ib - 1:
        alts.append(_int_range(ia + 1, None if ib is None else ib - 1) + r"(?:\.[0-9]+)?")
    if fa:  # at a's integer part: fractions above a's
        alts.append(rf"{ia}\.{_fraction_at_least(fa, a_excl)}")
    else:
        alts.append(rf"{ia}\.[0-9]*[1-9][0-9]*" if a_excl else rf"{ia}(?:\.[0-9]+)?")
    if ib is not None and fb:  # at b's integer part: ib itself, or fractions below b's
        alts.append(rf"{ib}(?:\.{_fraction_at_most(fb, b_excl)})?")
    elif ib is not None and not b_excl:  # b is an integer
        alts.append(rf"{ib}(?:\.0+)?")
    return "(?:" + "|".join(alts) + ")"


def _fraction_digits(value: Decimal) -> str:
    """The digits after the point of `value` (>= 0), without trailing zeros."""
    text = format(value, "f")
    return text.partition(".")[2].rstrip("0")


def _fraction_at_least(d: str, strict: bool) -> str:
    """Fraction digit strings F (non-empty) with 0.F >= 0.d (> when strict); d without trailing
    zeros."""
    alts = [d[:i] + f"[{int(c) + 1}-9][0-9]*" for i, c in enumerate(d) if c != "9"]
    alts.append(d + ("[0-9]*[1-9][0-9]*" if strict else "[0-9]*"))
    return "(?:" + "|".join(alts) + ")"


def _fraction_at_most(d: str, strict: bool) -> str:
    """Fraction digit strings F (non-empty) with 0.F <= 0.d (< when strict); d without trailing
    zeros, so every proper prefix of d followed by zeros is below it."""
    alts = [d[:i] + f"[0-{int(c) - 1}][0-9]*" for i, c in enumerate(d) if c != "0"]
    alts += [d[:j] + "0*" for j in range(1, len(d))]
    if not strict:
        alts.append(d + "0*")
    return "(?:" + "|".join(alts) + ")"


def _int_range(lo: int, hi) -> str:
    """Canonical decimal integers in [lo, hi] (hi None: unbounded), lo >= 0. The regex grows
    with the square of the digit count at most (a bound of 10^300 gives ~13 KB)."""
    if hi is None:
        width = len(str(lo))
        return f"(?:{_int_range(lo, 10 ** width - 1)}|[1-9][0-9]{{{width},}})"
    alts = []
    while lo <= hi:
        width = len(str(lo))
        if lo == 10 ** (width - 1) and hi >= 10 ** width - 1 and width > 1:
            # every integer of widths width .. last: one term
            last = len(str(hi)) - (hi != 10 ** len(str(hi)) - 1)
            alts.append(f"[1-9][0-9]{{{width - 1},{last - 1}}}")
            lo = 10 ** last
            continue
        top = min(hi, 10 ** width - 1)
        alts.append(_same_width(str(lo), str(top)))
        lo = top + 1
    return "(?:" + "|".join(alts) + ")"


def _same_width(x: str, y: str) -> str:
    """Digit strings between x and y (same length, x <= y). Each level adds a fixed number of
    terms and recurses once per side: full ranges (0...0 to 9...9) are one class term."""
    n = len(x)
    if x == y:
        return x
    if x == "0" * n and y == "9" * n:
        return f"[0-9]{{{n}}}" if n > 1 else "[0-9]"
    if n == 1:
        return f"[{x}-{y}]"
    if x[0] == y[0]:
        return x[0] + _same_width(x[1:], y[1:])
    n -= 1
    alts = [x[0] + _same_width(x[1:], "9" * n)]
    if int(y[0]) - int(x[0]) > 1:
        alts.append(f"[{int(x[0]) + 1}-{int(y[0]) - 1}][0-9]{{{n}}}")
    alts.append(y[0] + _same_width("0" * n, y[1:]))
    return "(?:" + "|".join(alts) + ")"


def integer_bound(value, path: str, keyword: str, integer: bool):
    """Validate a numeric bound: the value for integers (rounded later), its exact decimal
    (`Decimal(repr(float))`, the number the JSON text wrote) for numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GrammarError(f"{keyword} at {path} must be a finite number")
    return value if integer else Decimal(repr(value))

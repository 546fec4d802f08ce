"""Exact regexes for the string formats radixgen supports (`format_regex`), and for a format
under minLength / maxLength (`format_length_regex`, through `regex.leaves.string_pattern_regex`).
Each is a subset of what the format's validators accept, in plain syntax that ECMA-262 and
Python read alike; a format validators check that is not here is refused."""

from __future__ import annotations

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import string_pattern_regex

_YEAR = r"(?:0(?:0(?:0[1-9]|[1-9][0-9])|[1-9][0-9]{2})|[1-9][0-9]{3})"  # 0001-9999
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_DIGITS = "[0-9]{1,6}"
_DUR_TIME = rf"T(?:{_DIGITS}H(?:{_DIGITS}M(?:{_DIGITS}S)?)?|{_DIGITS}M(?:{_DIGITS}S)?|{_DIGITS}S)"
_DUR_DATE = rf"(?:{_DIGITS}D|{_DIGITS}M(?:{_DIGITS}D)?|{_DIGITS}Y(?:{_DIGITS}M(?:{_DIGITS}D)?)?)"
_H16 = "[0-9a-f]{1,4}"
_IPV6_TAILS = [
    f"(?:{_H16}:){{3}}{_H16}:{_H16}",
    f"(?:{_H16}:){{2}}{_H16}:{_H16}",
    f"{_H16}:{_H16}:{_H16}",
    f"{_H16}:{_H16}",
    _H16,
    "",
]
_LABEL = "[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?"  # <= 48 characters, no "-" at either end
_SEGMENT = "[A-Za-z0-9._~-]"  # one unreserved character of a path segment (RFC 3986)
_HOST = r"https?://[a-z0-9-]+(?:\.[a-z0-9-]+)*"  # a scheme and a lower-case host name
_URI = rf"{_HOST}(?:/{_SEGMENT}*)*"
_REGEX_SIMPLE = r"(?:[A-Za-z0-9 _-]|\.|\[\^?[A-Za-z0-9_]+\])[*+?]?"
_REGEX_BRANCH = rf"(?:{_REGEX_SIMPLE}|\((?:{_REGEX_SIMPLE})+(?:\|(?:{_REGEX_SIMPLE})+)*\)[*+?]?)+"
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}T{_TIME}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    # unbounded repetitions: bounded ones multiply automaton states (and compile time)
    # a dot-atom local part (no dot at either end or twice), host labels with no "-" at either end
    "email": r"[a-z0-9_+-]+(?:\.[a-z0-9_+-]+)*@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+",
    "ipv4": rf"(?:{_OCTET}\.){{3}}{_OCTET}",
    "uri": _URI,
    # RFC 3339 appendix A (what JSON Schema means): weeks alone, a year then optional month then
    # optional day, no fractions; 6 digits per number keeps the automaton small
    "duration": rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_DIGITS}W)",
    # RFC 4291's text forms in lower case, "::" anywhere; an embedded IPv4 tail is not generated
    "ipv6": "(?:"
    + "|".join(
        [
            f"(?:{_H16}:){{6}}{_H16}:{_H16}",
            f"::(?:{_H16}:){{5}}{_H16}:{_H16}",
            f"(?:{_H16})?::(?:{_H16}:){{4}}{_H16}:{_H16}",
        ]
        + [
            f"(?:(?:{_H16}:){{0,{k}}}{_H16})?::{tail}"
            for k, tail in enumerate(_IPV6_TAILS, start=1)
        ]
    )
    + ")",
    # RFC 1123 labels in lower case: up to 5 labels of up to 48 characters (<= 244 < 253)
    "hostname": rf"{_LABEL}(?:\.{_LABEL}){{0,4}}",
    # RFC 3986: a uri as above, or a relative path of unreserved characters (no ":", so its first
    # segment is never read as a scheme; no leading "//", which would start an authority)
    "uri-reference": rf"(?:{_URI}|/?{_SEGMENT}+(?:/{_SEGMENT}*)*)",
    # RFC 6570: a uri whose path segments may be simple expressions ({name})
    "uri-template": rf"{_HOST}(?:/(?:{_SEGMENT}*|\{{[A-Za-z_][A-Za-z0-9_]*\}}))*",
    # RFC 6901: "/"-separated tokens, "~" only as ~0 or ~1
    "json-pointer": r"(?:/(?:[A-Za-z0-9._-]|~[01])*)*",
    # one digit (jsonschema's checker refuses a digit after a 0, as in 10) and "#" or a token at
    # least (it refuses a bare number, which RFC draft-handrews allows)
    "relative-json-pointer": r"[0-9](?:#|(?:/(?:[A-Za-z0-9._-]|~[01])*)+)",
    # a regular expression that both ECMA-262 and Python's re compile: literal characters, ".",
    # classes of letters and digits, one quantifier per atom, alternation and one level of groups,
    # anchors at the ends; no backslash, so its JSON text is the value
    "regex": rf"\^?{_REGEX_BRANCH}(?:\|{_REGEX_BRANCH})*\$?",
    # draft 3's CSS 2.1 color: a hex code or one of its 17 names
    "color": "(?:#[0-9a-f]{6}|#[0-9a-f]{3}|aqua|black|blue|fuchsia|gray|green|lime|maroon|navy|olive|orange|"
    "purple|red|silver|teal|white|yellow)",
}
FORMATS["iri"] = FORMATS["uri"]  # ASCII URIs are IRIs
FORMATS["iri-reference"] = FORMATS["uri-reference"]


# Formats with minLength/maxLength: the format's regex narrowed by `fit_length`, from a flat form
# where the structured one nests repeats (the automaton of nested bounded repeats is the product
# of their bounds), and at most FORMAT_MAX_LENGTH long: outlines-core's compile time grows with
# the bound (pydantic's HttpUrl says maxLength 2083: 18 s for that flat uri, 2 s at 512, 1 s at
# 256), and no URL a model writes into a tool call needs more. Both are subsets, so exact.
_FLAT_URI = r"https?://[a-z0-9][A-Za-z0-9._~/-]*"  # unreserved characters and "/" only
_FLAT_RELATIVE = r"/?[A-Za-z0-9._~-][A-Za-z0-9._~/-]*"
_FLAT_FORMS = {
    "uri": _FLAT_URI,
    "iri": _FLAT_URI,
    "uri-reference": f"(?:{_FLAT_URI}|{_FLAT_RELATIVE})",
    "iri-reference": f"(?:{_FLAT_URI}|{_FLAT_RELATIVE})",
}
_RELATIVE_FORMS = dict.fromkeys(("uri-reference", "iri-reference"), _FLAT_RELATIVE)
_FLAT_FORMS["relative-json-pointer"] = r"0/[A-Za-z0-9._/-]*"  # this element's own members
_FLAT_FORMS["regex"] = r"[A-Za-z0-9 _.-]+"  # literal characters and "."
FORMAT_MAX_LENGTH = 256


def format_length_regex(fmt: str, path: str, min_length: int, max_length: int | None) -> str:
    """The regex of supported format `fmt` for strings of min_length..max_length characters."""
    most = max(min_length, FORMAT_MAX_LENGTH)
    most = most if max_length is None else min(max_length, most)
    try:
        return string_pattern_regex(
            _FLAT_FORMS.get(fmt, FORMATS[fmt]), path, min_length, most, keyword="format", name=fmt
        )
    except GrammarError:  # both branches get one repeat count: too short for "https://..."
        if fmt not in _RELATIVE_FORMS:
            raise
        return string_pattern_regex(
            _RELATIVE_FORMS[fmt], path, min_length, most, keyword="format", name=fmt
        )


# formats that JSON Schema validators check (jsonschema's FormatChecker, every draft): one of
# these that FORMATS lacks is refused; any other name (OpenAPI's int32, password, binary, ...)
# is an annotation that validators ignore, so it constrains nothing
CHECKED_FORMATS = frozenset(
    """date time date-time duration email idn-email hostname idn-hostname ipv4
ipv6 uri uri-reference iri iri-reference uri-template json-pointer relative-json-pointer regex uuid
color""".split()
)


def format_regex(fmt: str, path: str) -> str | None:
    """The exact regex of a supported format; None for a format validators do not check."""
    if fmt in FORMATS:
        return FORMATS[fmt]
    if fmt in CHECKED_FORMATS:
        raise GrammarError(
            f"unsupported string format {fmt!r} at {path}.format "
            f"(supported: {', '.join(sorted(FORMATS))})"
        )
    return None

"""Which enum/const values meet the keywords beside them (rewrite.branches' `rewrite_enum`): string
keywords apply to strings, numeric ones to numbers, each read so that a kept value is valid
for every validator: a `pattern` must match in Python's Unicode and ASCII modes and under
radixgen's own ECMA-262 translation of it (what it generates), a `format` must match radixgen's
own regex for it (each such value is valid) or, for the URI formats, whose generated form is a
narrow subset (http(s) and a host), RFC 3986's grammar as a whole: a given value such as
"https://avatars.githubusercontent.com/u/9919?v=4" is emitted as written, not generated."""

from __future__ import annotations

import json
import math
import re

from radixgen.grammar.matcher import refuse
from radixgen.grammar.regex.dialects import neutral
from radixgen.grammar.regex.formats import format_regex
from radixgen.grammar.regex.leaves import string_pattern_regex
from radixgen.grammar.regex.multiples import is_multiple
from radixgen.grammar.regex.open_ends import searched_translation
from radixgen.grammar.regex.properties import python_view
from radixgen.grammar.schema.rules import searches, value_key
from radixgen.grammar.unique.values import fullmatches

# one character of a JSON string as json.dumps writes it
_JSON_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
# RFC 3986 appendix A, ASCII (an IRI that is not ASCII is refused here), without IP-literal
# hosts ("[::1]"): a subset of what the URI checkers accept, which is what a kept value needs
_PCT = r"%[0-9A-Fa-f]{2}"
_PLAIN = "A-Za-z0-9._~" + re.escape(
    "!$&'()*+,;="
)  # unreserved and sub-delims, as class members ("-" last)
_PCHAR = rf"(?:[{_PLAIN}:@-]|{_PCT})"
_SEGMENTS = rf"(?:/{_PCHAR}*)*"
_AUTHORITY = rf"(?:(?:[{_PLAIN}:-]|{_PCT})*@)?(?:[{_PLAIN}-]|{_PCT})*(?::[0-9]*)?"
_QUERY_AND_FRAGMENT = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = rf"[A-Za-z][A-Za-z0-9+.-]*:(?://{_AUTHORITY}{_SEGMENTS}|/(?:{_PCHAR}+{_SEGMENTS})?|{_PCHAR}+{_SEGMENTS}|)"
_NO_COLON = rf"(?:[{_PLAIN}@-]|{_PCT})"  # a relative path's first segment
_RELATIVE = rf"(?://{_AUTHORITY}{_SEGMENTS}|/(?:{_PCHAR}+{_SEGMENTS})?|{_NO_COLON}+{_SEGMENTS}|)"
_URI_VALUES = {
    "uri": re.compile(_URI + _QUERY_AND_FRAGMENT),
    "uri-reference": re.compile(f"(?:{_URI}|{_RELATIVE}){_QUERY_AND_FRAGMENT}"),
}
_URI_VALUES["iri"], _URI_VALUES["iri-reference"] = _URI_VALUES["uri"], _URI_VALUES["uri-reference"]

VALUE_KEYWORDS = frozenset(
    """type enum const minLength maxLength pattern format minimum maximum
exclusiveMinimum exclusiveMaximum multipleOf""".split()
)


def values_meeting(values: list, node: dict, key: str, draft_4: bool, path: str) -> list:
    """The enum/const `values` (already of the node's `type`) that meet the other VALUE_KEYWORDS
    of `node` (`key`: the keyword they come from). `draft_4`: exclusiveMinimum / exclusiveMaximum
    are flags (under a URI every validator reads as draft 4)."""
    others = [
        node["enum"] if other == "enum" else [node["const"]]
        for other in ("enum", "const")
        if other != key and other in node
    ]
    if any(not isinstance(allowed, list) for allowed in others):
        return []
    allowed = [{value_key(v) for v in listed} for listed in others]
    return [
        v
        for v in values
        if all(value_key(v) in keys for keys in allowed) and _value_meets(v, node, draft_4, path)
    ]


def _value_meets(value, node: dict, draft_4: bool, path: str) -> bool:
    """Whether `value` meets the string or numeric keywords of `node`."""
    if isinstance(value, str):
        if not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
            return False
        if "pattern" in node and not _pattern_matches(node["pattern"], value, path):
            return False
        fmt = format_regex(node["format"], path) if "format" in node else None
        if fmt is None or fullmatches(f'"{fmt}"', json.dumps(value, ensure_ascii=False).encode()):
            return True
        uri = _URI_VALUES.get(node["format"])
        return uri is not None and uri.fullmatch(value) is not None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_meets(value, node, draft_4, path)
    return True


def _pattern_matches(pattern, value: str, path: str) -> bool:
    """`pattern` finds `value` in Python's Unicode and ASCII modes (ECMA-262's \\d and \\w are
    ASCII), and `value`'s JSON text is one radixgen's ECMA-262 translation of the pattern
    generates (anywhere in the value when the pattern has no anchor; else the whole value: a
    subset), so line terminators, astral characters and Python-only escapes do not slip through."""
    readings = _READINGS.get(pattern) if isinstance(pattern, str) else None
    if readings is None:
        translated = searched_translation(
            pattern, lambda searched: string_pattern_regex(searched, path, name=pattern)
        )
        read = neutral(
            pattern
        )  # (Python's \\A and \\Z, Java's inline (?i), as the translation reads them)
        if not {"^", "$"} & set(read):  # no anchor anywhere: found anywhere in the value
            translated = f"{_JSON_CHAR}*(?:{translated}){_JSON_CHAR}*"
        readings = (
            python_view(read),
            f'"{translated}"',
        )  # (property escapes as their ASCII members: Python has none)
        if isinstance(pattern, str):
            if len(_READINGS) >= 4096:
                _READINGS.clear()
            _READINGS[pattern] = readings
    python, translated = readings
    if not (
        searches(python, value, path, "pattern")
        and searches(python, value, path, "pattern", re.ASCII)
    ):
        return False
    return fullmatches(translated, json.dumps(value, ensure_ascii=False).encode())


# pattern -> (Python's reading, the fullmatch regex of its values' JSON texts): an enum of
# thousands of values is checked against one pattern (translating it took ~1 ms a value)
_READINGS: dict[str, tuple[str, str]] = {}


def _number_meets(value, node: dict, draft_4: bool, path: str) -> bool:
    lows, highs = [], []
    for name, flag, keep in (
        ("minimum", "exclusiveMinimum", lows),
        ("maximum", "exclusiveMaximum", highs),
    ):
        if name in node:
            exclusive = node.get(flag)
            if exclusive is not None and draft_4 != isinstance(exclusive, bool):
                refuse(flag, path, "it is a flag under draft 4 only, and a number otherwise")
            keep.append((_bound(node[name], name, path), exclusive is True))
    for name, keep in (("exclusiveMinimum", lows), ("exclusiveMaximum", highs)):
        if not draft_4 and name in node:
            keep.append((_bound(node[name], name, path), True))
    if any(value < b or (excl and value == b) for b, excl in lows) or any(
        value > b or (excl and value == b) for b, excl in highs
    ):
        return False
    step = node.get("multipleOf")
    if step is None:
        return True
    if (
        isinstance(step, bool)
        or not isinstance(step, (int, float))
        or not math.isfinite(step)
        or step <= 0
    ):
        refuse("multipleOf", path, "it must be a number above 0")
    return is_multiple(value, step)


def _bound(bound, name: str, path: str):
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
        refuse(name, path, "it must be a finite number")
    return bound

"""The handler of `type` (`rewrite_type`) and the rewrite of each type, by the table
`TYPE_HANDLERS`: strings (a pattern or format as an exact placeholder regex, a long maxLength left
to `UniqueGuard`), integers and numbers (their bounds as an exact range regex), arrays (a long
maxItems left to the guard, the node marked COUNTED: rewrite.guarded; uniqueItems:
rewrite.unique_items), objects (rewrite.objects)."""

from __future__ import annotations

import math

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.regex.dialects import neutral
from radixgen.grammar.regex.formats import format_length_regex, format_regex
from radixgen.grammar.regex.leaves import string_pattern_regex
from radixgen.grammar.regex.multiples import multiple_of_regex
from radixgen.grammar.regex.number_ranges import integer_bound, number_range_regex
from radixgen.grammar.regex.open_ends import searched_translation
from radixgen.grammar.rewrite.guarded import FREE_STRING, STRING_CHAR, counted
from radixgen.grammar.rewrite.objects import rewrite_object
from radixgen.grammar.rewrite.state import RewriteState
from radixgen.grammar.rewrite.unique_items import rewrite_unique_items
from radixgen.grammar.rewrite.walk import first_enforceable, rewrite
from radixgen.grammar.schema.rules import only_asserting, tightest
from radixgen.grammar.unique import tables as guard_tables
from radixgen.grammar.unique.values import length_guard_start

_BY_TYPE = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    # `format` on a number is an annotation (format checkers look at strings only): dropped
    "integer": {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "format",
    },
    "number": {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "format",
    },
    "array": {"items", "minItems", "maxItems", "uniqueItems"},
    "object": {
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "required",
        "patternProperties",
        "propertyNames",
        "dependentRequired",
        "dependencies",
    },
    "boolean": set(),
    "null": set(),
}


def rewrite_type(state: RewriteState, node: dict, path: str) -> dict:
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    unknown = [t for t in types if t not in _BY_TYPE]
    if unknown or not types:
        refuse("type", path, f"unknown type(s) {unknown}")
    only_asserting(node, path, {"type"}.union(*(_BY_TYPE[t] for t in types)))
    if len(types) == 1:
        return TYPE_HANDLERS[types[0]](state, node, path)
    if node.get("multipleOf", 1) != 1 and "number" in types:
        refuse("multipleOf", path, "with several types, only multipleOf 1 on integers is supported")
    parts = [TYPE_HANDLERS[t](state, node, path) for t in types]
    leaf = [
        k
        for k in node
        if k in _BY_TYPE["string"] | _BY_TYPE["number"] | _BY_TYPE["integer"]
        and k not in ("minLength", "maxLength")
    ]
    if leaf or any("const" in part for part in parts):
        # one alternative per type, each with the keywords that constrain it (a keyword lets
        # every other type pass): {"type": ["string", "null"], "format": "date-time"}
        return {"anyOf": parts}
    new = {"type": list(types)}
    for part in parts:
        new.update(part)
    new["type"] = list(types)
    return new


def rewrite_string(state: RewriteState, node: dict, path: str) -> dict:
    fmt = format_regex(node["format"], path) if "format" in node else None  # None: an annotation
    lengths = node.get("minLength", 0), node.get("maxLength")
    guarded = lengths[1] is not None and lengths[1] >= guard_tables.LENGTH_GUARD_MIN
    if "pattern" in node and fmt is not None:
        # the strings of both (`"format": "uri", "pattern": "^https://"`): the format's regex
        # (radixgen's subset of it, plain syntax that ECMA-262 and Python read alike) as a
        # lookahead over the whole string, then the pattern searched, which the lookaround
        # automaton writes out (regex.lookaround); refused where it cannot
        both = f"(?=^(?:{fmt})$)[\\s\\S]*(?:{neutral(node['pattern'])})"
        try:
            return _pattern_strings(state, both, path, lengths, guarded, name=node["pattern"])
        except GrammarError as exc:
            refuse("format", path, f"it cannot be combined with pattern here ({exc})")
    if "pattern" in node:  # (one end anchored: the other is open)
        return searched_translation(
            node["pattern"],
            lambda pattern: _pattern_strings(
                state, pattern, path, lengths, guarded, name=node["pattern"]
            ),
        )
    if fmt is not None and lengths != (0, None):
        fmt = format_length_regex(node["format"], path, *lengths)
    if fmt is not None:
        return state.placeholder(fmt, quoted=True)
    if guarded:
        return _length_guarded(
            state, FREE_STRING, lengths, f'"{STRING_CHAR}{{{lengths[0]},{lengths[1]}}}"'
        )
    return {"type": "string", **{k: node[k] for k in ("minLength", "maxLength") if k in node}}


def _pattern_strings(
    state: RewriteState,
    pattern: str,
    path: str,
    lengths: tuple,
    guarded: bool,
    name: str | None = None,
) -> dict:
    """A placeholder for the strings of `pattern` of `lengths` (name: the pattern errors
    show)."""
    exact = string_pattern_regex(pattern, path, *lengths, name=name)
    free = (
        string_pattern_regex(pattern, path, open_from=lengths[1], name=name) if guarded else exact
    )
    # the pattern's own regex with the guard keeping the length (exact, and one state per
    # piece), where no state past its first few characters needs more characters to close
    first = (
        length_guard_start(f'"{free}"', guard_tables.LENGTH_GUARD_MIN) if free != exact else None
    )
    if first is not None and first <= lengths[1]:
        return _length_guarded(state, free, lengths, f'"{exact}"')
    return state.placeholder(exact, quoted=True)


def _length_guarded(state: RewriteState, free: str, lengths: tuple, exact: str) -> dict:
    """A placeholder for strings of regex `free` (any length) whose length the guard keeps:
    a counted repeat costs the automaton a state per character. json_schema falls back to
    the counted regex `exact` (with its quotes) where another string can appear at the same
    place, rewrite.guarded where the strings are unique items."""
    placeholder = state.placeholder(free, quoted=True)
    state.length_strings[f'"{placeholder["const"]}"'] = (lengths[0], lengths[1], exact)
    return placeholder


def rewrite_integer(state: RewriteState, node: dict, path: str) -> dict:
    return _numeric(state, node, path, integer=True)


def rewrite_number(state: RewriteState, node: dict, path: str) -> dict:
    return _numeric(state, node, path, integer=False)


def _numeric(state: RewriteState, node: dict, path: str, integer: bool) -> dict:
    name = "integer" if integer else "number"
    keys = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
    if state.draft_4:  # exclusiveMinimum/Maximum are flags on minimum/maximum
        node = _draft4_bounds(node, path)
    b = {k: integer_bound(node[k], path, k, integer) for k in keys if k in node}
    step = node.get("multipleOf")
    step = None if step == 1 and isinstance(step, int) and integer else step  # (every integer)
    if not b and step is None:
        return {"type": name}
    lo, lo_excl = tightest(b, "minimum", "exclusiveMinimum", max, integer)
    hi, hi_excl = tightest(b, "maximum", "exclusiveMaximum", min, integer)
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
        refuse("minimum", path, "the bounds leave no value")
    if step is not None:  # (bounds as given: integer ones are inclusive integers already)
        return state.placeholder(
            multiple_of_regex(step, lo, hi, lo_excl, hi_excl, integer, path), quoted=False
        )
    return state.placeholder(number_range_regex(lo, hi, lo_excl, hi_excl, integer), quoted=False)


def rewrite_boolean(state: RewriteState, node: dict, path: str) -> dict:
    return {"type": "boolean"}


def rewrite_null(state: RewriteState, node: dict, path: str) -> dict:
    return {"type": "null"}


def rewrite_array(state: RewriteState, node: dict, path: str) -> dict:
    if node.get("minItems", 0) > node.get("maxItems", math.inf):
        refuse("minItems", path, "it exceeds maxItems: no array is valid")
    if node.get("uniqueItems") is True and node.get("maxItems", 2) > 1:
        if node.get("minItems", 0) > 1:
            return rewrite_unique_items(state, node, path)
        # items radixgen cannot keep unique (objects with no key property, bounded integers,
        # numbers, arrays): arrays of at most one item, which are unique (a subset)
        return first_enforceable(
            state,
            lambda: rewrite_unique_items(state, node, path),
            lambda: rewrite_array(state, {**node, "maxItems": 1}, path),
        )
    new = {"type": "array", **{k: node[k] for k in ("minItems", "maxItems") if k in node}}
    if "items" in node:
        if not isinstance(node["items"], (dict, bool)):
            refuse("items", path, "the array (tuple) form is not supported; use prefixItems")
        if node["items"] is False:
            new["maxItems"] = 0
            return new
        new["items"] = rewrite(state, node["items"], f"{path}.items")
    return counted(state, new)


TYPE_HANDLERS = {
    "string": rewrite_string,
    "integer": rewrite_integer,
    "number": rewrite_number,
    "boolean": rewrite_boolean,
    "null": rewrite_null,
    "array": rewrite_array,
    "object": rewrite_object,
}


def _draft4_bounds(node: dict, path: str) -> dict:
    """`node`'s bounds as draft 4 reads them: a true exclusiveMinimum/Maximum makes the
    minimum/maximum beside it exclusive, and alone it means nothing. A number there is refused: the
    draft's metaschema forbids it, and its validators read it as a flag ({"maximum": 2,
    "exclusiveMaximum": 3} excludes 2), where 2019+ reads a bound."""
    new = {k: v for k, v in node.items() if k not in ("exclusiveMinimum", "exclusiveMaximum")}
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if flag in node and not isinstance(node[flag], bool):
            refuse(flag, path, "draft 4 takes a boolean here (a flag on the bound beside it)")
        if node.get(flag) and bound in node:
            new[flag] = new.pop(bound)
    return new

"""The handlers of the keywords outlines-core picks before `type` (its order: allOf, anyOf, oneOf,
prefixItems, enum, const, $ref; `properties` is rewrite.objects', `type` rewrite.type_keyword'):
module functions of the rewrite's state (rewrite.state), listed in rewrite.rewriter.HANDLERS."""

from __future__ import annotations

import json
import math
from functools import partial

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import json_literal
from radixgen.grammar.rewrite.state import RewriteState, readings, resolve, resolved
from radixgen.grammar.rewrite.walk import rewrite, unless_empty
from radixgen.grammar.schema.merge import normalize
from radixgen.grammar.schema.one_of import excludes, exclusive
from radixgen.grammar.schema.rules import (
    ASSERTIONS,
    NothingValid,
    accepts_nothing,
    asserts,
    is_type,
    need_type,
    only_asserting,
    refuse,
)
from radixgen.grammar.schema.values import VALUE_KEYWORDS, values_meeting


def rewrite_all_of(state: RewriteState, node: dict, path: str) -> dict:
    only_asserting(node, path, {"allOf"})
    if not isinstance(node["allOf"], list) or len(node["allOf"]) != 1:
        refuse("allOf", path, "only a single-schema allOf can be enforced exactly")
    return {"allOf": [rewrite(state, node["allOf"][0], f"{path}.allOf[0]")]}


def rewrite_any_of(state: RewriteState, node: dict, path: str) -> dict:
    # alternatives that differ only in keywords JSON Schema does not define are one
    # (CloudFormation's items `{"type": "string", "pattern": ..., "anyOf": [{"relationshipRef":
    # ...}, ...]}` distribute into two copies of the pattern: strings, as uniqueItems can then
    # see)
    alternatives = list(
        {
            json.dumps(_defined(option), sort_keys=True): option
            for option in _alternatives_of(node, path, "anyOf")
        }.values()
    )
    options = _options(state, _unsubsumed(state, alternatives, path), f"{path}.anyOf")
    # alternatives that rewrite alike are one
    distinct = list({json.dumps(option, sort_keys=True): option for option in options}.values())
    return distinct[0] if len(distinct) == 1 else {"anyOf": distinct}


def rewrite_one_of(state: RewriteState, node: dict, path: str) -> dict:
    options = [_all_of_merged(state, option) for option in _alternatives_of(node, path, "oneOf")]
    narrowed = exclusive(
        options,
        readings(state),
    )
    if narrowed is None:
        _options(state, options, f"{path}.oneOf")  # an alternative's own error comes first
        refuse(
            "oneOf",
            path,
            "its alternatives may overlap (radixgen enforces oneOf only when "
            "they declare disjoint types, differ in enum/const values, or are objects that "
            "differ in a required property or in a const property's value; an alternative "
            'without "type" accepts every type its keywords do not constrain, e.g. '
            '{"properties": ...} accepts any string)',
        )
    return {"oneOf": _options(state, options, f"{path}.oneOf", narrowed)}


def _unsubsumed(state: RewriteState, options: list, path: str) -> list:
    """anyOf `options` without those whose every value another option accepts (the union is
    the same): a value list or a type another option takes whole (`anyOf: [{"type": "string",
    "minLength": 1}, {"enum": ["ajax", "build"]}]` is the first; `[{"type": "string"},
    {"type": "string", "pattern": ...}]` the first), so uniqueItems sees plain strings."""
    readings_of = [resolved(state, option) for option in options]
    kept: list = []
    for i, narrow in enumerate(readings_of):
        wider = [
            j
            for j, wide in enumerate(readings_of)
            if j != i and _subsumes(wide, narrow, state.draft_4, path)
        ]
        # (of two that accept the same values, the first stays)
        if not any(
            j < i or not _subsumes(narrow, readings_of[j], state.draft_4, path) for j in wider
        ):
            kept.append(options[i])
    return kept


def _all_of_merged(state: RewriteState, option):
    """A oneOf alternative whose `allOf` merges exactly into one schema (GitHub's rulesets:
    `allOf: [shared conditions, one target]`), as that schema, which is what it generates
    and what validators accept; else as written. Not under drafts 3-7, where a member's
    `$ref` with keywords beside it has a second reading."""
    if state.draft_3_to_7 or not (
        isinstance(option, dict) and isinstance(option.get("allOf"), list)
    ):
        return option
    merged, _ = normalize(option, partial(resolved, state), tuple(state.inlining))
    return merged if isinstance(merged, dict) and "allOf" not in merged else option


def _options(state: RewriteState, options: list, path: str, narrowed: list | None = None) -> list:
    """The alternatives rewritten; one no value satisfies is left out (not all of them)."""
    out, empty = [], None
    for i, option in enumerate(options):
        chosen = option if not narrowed or narrowed[i] is None else narrowed[i]
        if chosen is False:  # narrowed to nothing (schema.one_of)
            empty = NothingValid(
                f"the alternative at {path}[{i}] has no value valid under it alone"
            )
            continue
        new = unless_empty(state, chosen, f"{path}[{i}]")
        if isinstance(new, NothingValid):
            empty = new
        else:
            out.append(new)
    if not out:
        raise empty
    return out


def rewrite_prefix_items(state: RewriteState, node: dict, path: str) -> dict:
    only_asserting(
        node,
        path,
        {
            "prefixItems",
            "type",
            "items",
            "minItems",
            "maxItems",
            "uniqueItems",
            "additionalItems",
            "unevaluatedItems",
        },
    )
    items = node["prefixItems"]
    need_type(node, path, "array")
    if node.get("minItems", 0) > len(items):
        refuse(
            "minItems",
            path,
            "it exceeds the number of prefixItems (exactly those are generated)",
        )
    if node.get("maxItems", math.inf) < len(items):
        refuse("maxItems", path, "it is below the number of prefixItems")
    if node.get("uniqueItems") is True and not _distinct_prefix(state, items, node):
        refuse(
            "uniqueItems",
            path,
            "uniqueness cannot be enforced by a regular language (only where "
            "maxItems keeps to the prefixItems and no value of one is valid under another)",
        )
    return {
        "prefixItems": [rewrite(state, s, f"{path}.prefixItems[{i}]") for i, s in enumerate(items)]
    }


def _distinct_prefix(state: RewriteState, items: list, node: dict) -> bool:
    """Whether the arrays generated from prefixItems `items` hold distinct items anyway: none
    past the prefix (maxItems), and no value one prefix schema generates is valid under
    another (DynamoDB's KeySchema: a HASH element, then a RANGE one)."""
    reading = readings(state)
    return node.get("maxItems", math.inf) <= len(items) and all(
        excludes(a, b, reading) for i, a in enumerate(items) for j, b in enumerate(items) if i != j
    )


def rewrite_enum(state: RewriteState, node: dict, path: str, key: str = "enum") -> dict:
    only_asserting(node, path, VALUE_KEYWORDS)
    values = node[key] if key == "enum" else [node[key]]
    if key == "enum" and (not isinstance(values, list) or not values):
        raise GrammarError(f"enum at {path} must be a non-empty array")
    if "type" in node:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        # (draft 4 validators take no float as an integer, not even 1.0)
        values = [
            v
            for v in values
            if any(
                is_type(v, t)
                and not (state.const_unknown and t == "integer" and isinstance(v, float))
                for t in types
            )
        ]
        if not values:
            refuse(key, path, "no value matches the sibling type")
    if set(node) & VALUE_KEYWORDS - {key, "type"}:  # the values that meet them
        values = values_meeting(values, node, key, state.draft_4, path)
        if not values:
            refuse(key, path, "no value meets the keywords beside it")
    for v in values:
        try:
            json.dumps(v, allow_nan=False)
        except ValueError:
            refuse(
                key,
                path,
                f"{v!r} holds a number beyond floating point (e.g. 1e400), which "
                "has no exact JSON text to generate",
            )
    if any(isinstance(v, (dict, list)) for v in values):
        # objects and arrays as their compact JSON text (equal values in other key orders or
        # spacing are valid too, but never generated)
        placeholder = state.placeholder(
            "(?:" + "|".join(map(json_literal, values)) + ")", quoted=False
        )
        state.literal_arrays[f'"{placeholder["const"]}"'] = values
        return placeholder
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
            refuse(key, path, f"{v} is beyond the integers outlines-core keeps exact")
    return {"enum": values}


def rewrite_const(state: RewriteState, node: dict, path: str) -> dict:
    return rewrite_enum(state, node, path, "const")


def rewrite_ref(state: RewriteState, node: dict, path: str) -> dict:
    only_asserting(node, path, {"$ref"})
    ref = node["$ref"]
    if not isinstance(ref, str) or "~" in ref or "%" in ref:
        refuse("$ref", path, "only plain local references (#/...) are supported")
    if accepts_nothing(
        resolve(state, ref, path)
    ):  # (its definition is not kept: rewrite.rewriter._with_defs)
        refuse("$ref", path, f"{ref!r} is a schema no value meets", NothingValid)
    return {"$ref": ref}


def _subsumes(wide, narrow, draft_4: bool, path: str) -> bool:
    """Whether `wide` (a `type` with value keywords only) accepts every value `narrow` does:
    narrow's values (enum / const) each meet wide, or wide takes its types whole and narrow
    accepts those types only. (Dropping an option from an anyOf only narrows what is generated,
    so a wrong True could cost values, never validity.)"""
    if (
        not (isinstance(wide, dict) and isinstance(narrow, dict) and "type" in wide)
        or asserts(wide, tuple(VALUE_KEYWORDS))
        or not isinstance(wide["type"], (str, list))
    ):
        return False
    types = {wide["type"]} if isinstance(wide["type"], str) else set(wide["type"])
    values = [narrow["const"]] if "const" in narrow else narrow.get("enum")
    if isinstance(values, list) and values:
        if not all(any(is_type(v, t) for t in types) for v in values):
            return False
        try:
            return len(values_meeting(values, wide, "enum", draft_4, path)) == len(values)
        except GrammarError:
            return False
    if asserts(wide, ("type",)) or not isinstance(narrow.get("type"), (str, list)):
        return False
    kinds = {narrow["type"]} if isinstance(narrow["type"], str) else set(narrow["type"])
    return kinds <= types | ({"integer"} if "number" in types else set())


# what a schema's meaning can depend on besides its assertions: where its references lead
_REFERENCE_KEYWORDS = frozenset(
    ("$id", "id", "$anchor", "$dynamicAnchor", "$defs", "definitions", "$schema")
)


def _defined(option):
    """An anyOf alternative less the keywords no JSON Schema draft defines (annotations and
    vendor keywords such as CloudFormation's `relationshipRef`), which no validator reads."""
    if not isinstance(option, dict):
        return option
    return {k: v for k, v in option.items() if k in ASSERTIONS or k in _REFERENCE_KEYWORDS}


def _alternatives_of(node: dict, path: str, key: str) -> list:
    """`node[key]` (anyOf / oneOf), checked: a non-empty list, nothing else asserted beside it."""
    only_asserting(node, path, {key})
    if not isinstance(node[key], list) or not node[key]:
        raise GrammarError(f"{key} at {path} must be a non-empty array")
    return node[key]

"""The handler of `properties` (`rewrite_properties`: required ones, one optional one demanded by
minProperties, sets of them under a maxProperties) and the rewrite of objects without listed
properties (`rewrite_object`, for rewrite.type_keyword; names that follow rules:
rewrite.keyed_objects)."""

from __future__ import annotations

import itertools
import math
from functools import partial

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.keyed_objects import rewrite_keyed_object
from radixgen.grammar.rewrite.state import RewriteState, resolved
from radixgen.grammar.rewrite.walk import rewrite, unless_empty
from radixgen.grammar.schema.exclusions import dependent_names_excluded
from radixgen.grammar.schema.merge import EMPTY, merge
from radixgen.grammar.schema.rules import (
    NothingValid,
    asserts_nothing,
    listed_name_rules,
    need_type,
    only_asserting,
    only_objects,
    refuse,
    searches,
)

_PROPERTY_SETS = 64  # alternatives for an object with a maxProperties below its listed properties


def rewrite_properties(state: RewriteState, node: dict, path: str) -> dict:
    only_asserting(
        node,
        path,
        {
            "properties",
            "required",
            "type",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "patternProperties",
            "propertyNames",
            "dependentRequired",
            "dependencies",
        },
    )
    props = node["properties"]
    if not isinstance(props, dict):
        raise GrammarError(f"properties at {path} must be an object")
    extra = node.get("additionalProperties", True)
    if extra is not False and isinstance(node.get("required"), list):
        # a required name that properties does not list is an additional property: it is
        # generated with additionalProperties' schema (name rules are checked on it too)
        props = {
            **props,
            **{
                name: extra
                for name in node["required"]
                if isinstance(name, str) and name not in props
            },
        }
    props, node = _with_pattern_schemas(state, node, props, path)
    required = listed_name_rules(node, props, path)
    banned = [name for name, schema in props.items() if schema is False]  # no value: never there
    if set(banned) & set(required):
        refuse(
            "required",
            path,
            f"{sorted(set(banned) & set(required))} can have no value (false)",
            NothingValid if only_objects(node) else GrammarError,
        )  # (other types pass required)
    props = {name: schema for name, schema in props.items() if schema is not False}
    need_type(node, path, "object")
    for name in props:
        if any(c in name for c in '"\\') or any(ord(c) < 0x20 for c in name):
            refuse("properties", path, f"property name {name!r} needs JSON escaping")
    missing = [r for r in required if r not in props]
    if missing:
        refuse(
            "required",
            path,
            f"{missing} are not listed in properties (only listed properties are generated)",
        )
    new_props = {}
    for name, schema in props.items():
        new = unless_empty(state, schema, f"{path}.properties.{name}")
        if isinstance(new, NothingValid) and name in required:
            raise new
        if not isinstance(new, NothingValid):  # (no value is valid there: never generated)
            new_props[name] = new
    optional = [name for name in new_props if name not in required]
    least = node.get("minProperties", 0)
    if node.get("maxProperties", math.inf) < len(new_props):
        return _few_properties(
            state, node, path, new_props, list(dict.fromkeys(required)), optional
        )
    if least > len(set(required)) + (1 if optional else 0):
        refuse(
            "minProperties",
            path,
            "only one property more than the required ones can be "
            "demanded (only listed properties are generated)",
        )
    if least <= len(set(required)):
        return {"type": "object", "properties": new_props, "required": list(required)}
    # one optional property must be there: one alternative per first present optional one
    return {
        "anyOf": [
            {
                "type": "object",
                "required": [*required, first],
                "properties": {k: v for k, v in new_props.items() if k not in optional[:i]},
            }
            for i, first in enumerate(optional)
        ]
    }


def _with_pattern_schemas(
    state: RewriteState, node: dict, props: dict, path: str
) -> tuple[dict, dict]:
    """(props, node) with each patternProperties schema merged into the listed properties
    whose names it searches (only listed names are generated, so patternProperties then has
    nothing left to do and is dropped); as they were when a merge is not exact (refused by
    name in listed_name_rules)."""
    patterns = node.get("patternProperties")
    if not isinstance(patterns, dict) or not patterns:
        return props, node
    folded = dict(props)
    for pattern, schema in patterns.items():
        for name in () if asserts_nothing(schema) else props:
            if searches(pattern, name, path, "patternProperties"):
                listed, matched = resolved(state, folded[name]), resolved(state, schema)
                if listed is None or matched is None:
                    return props, node
                empty = listed is EMPTY or matched is EMPTY
                both = EMPTY if empty else merge(listed, matched, partial(resolved, state))
                if both is None:
                    return props, node
                folded[name] = False if both is EMPTY else both
    return folded, {k: v for k, v in node.items() if k != "patternProperties"}


def _few_properties(
    state: RewriteState, node: dict, path: str, props: dict, required: list, optional: list
) -> dict:
    """An object with a maxProperties below its listed properties (and maybe a
    minProperties): one alternative per set of optional properties whose size fits, each
    with exactly those (only listed properties are generated)."""
    least, most = node.get("minProperties", 0), node["maxProperties"]
    sizes = range(max(least - len(required), 0), min(most - len(required), len(optional)) + 1)
    if not sizes:
        refuse(
            "maxProperties",
            path,
            "no number of listed properties fits it and the required ones",
            NothingValid if only_objects(node) else GrammarError,
        )
    if sum(math.comb(len(optional), k) for k in sizes) > _PROPERTY_SETS:
        refuse(
            "maxProperties",
            path,
            f"more than {_PROPERTY_SETS} sets of the listed properties fit "
            "between minProperties and maxProperties",
        )
    alternatives = [
        {
            "type": "object",
            "required": [*required, *chosen],
            "properties": {k: v for k, v in props.items() if k in required or k in chosen},
        }
        for k in sizes
        for chosen in itertools.combinations(optional, k)
    ]
    return alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}


def rewrite_object(state: RewriteState, node: dict, path: str) -> dict:
    node = dependent_names_excluded(node, path)
    if "patternProperties" in node or "propertyNames" in node:
        return rewrite_keyed_object(state, node, path)
    if node.get("required"):  # the required names, generated with additionalProperties' schema
        return rewrite_properties(state, {**node, "properties": {}}, path)
    if node.get("minProperties", 0) > node.get("maxProperties", math.inf):
        refuse("minProperties", path, "it exceeds maxProperties: no object is valid", NothingValid)
    if node.get("minProperties", 0) > 1:
        refuse("minProperties", path, "values above 1 need properties (keys could repeat)")
    if node.get("maxProperties", 0) > 0 and node.get("additionalProperties", True) is not False:
        # any names, at most that many: a keyed object whose names are any string
        return rewrite_keyed_object(state, {**node, "propertyNames": {"type": "string"}}, path)
    new = {
        "type": "object",
        **{k: node[k] for k in ("minProperties", "maxProperties") if k in node},
    }
    extra = node.get("additionalProperties", True)
    if extra is False:
        new["maxProperties"] = 0
        if node.get("minProperties", 0) > 0:
            refuse("minProperties", path, "no property is allowed")
    elif extra is not True:
        new["additionalProperties"] = rewrite(state, extra, f"{path}.additionalProperties")
    return new

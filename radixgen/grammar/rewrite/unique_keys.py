"""uniqueItems over objects, kept unique by one property (`unique_by_key`, for
rewrite.unique_items): the guard (`unique.guard.UniqueGuard`) keeps the key's values unique across
the array's objects, which makes the objects distinct. The key's values are string items as
rewrite.guarded keeps them."""

from __future__ import annotations

import json
import re

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import json_literal
from radixgen.grammar.rewrite.guarded import counted, counted_items, string_item, string_placeholder
from radixgen.grammar.rewrite.state import RewriteState, resolved
from radixgen.grammar.rewrite.walk import rewrite

# marks an array of objects the guard keeps unique by one property: [its name (or the path of two
# names into an object property), its item kind]
UNIQUE_KEY = "x-radixgen-unique-key"
# property names the guard compares as text: outlines-core writes them unescaped (a "/" could be
# written "\/" in JSON, but the regex never generates that)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_$@.:/ -]+")


def unique_by_key(state: RewriteState, new: dict, node: dict, path: str) -> dict | None:
    """uniqueItems over objects (OpenAPI's `tags`, lists of named things): objects whose values
    of one required property differ are distinct, so the guard keeps the first required
    string property it can keep unique (its rewritten schema, as merged: a free string, a
    pattern, format or maxLength, as for string items in rewrite.guarded) unique across the
    array's objects: a subset (objects that share that value but differ elsewhere are never
    generated). Where no required property qualifies, the first optional one that does is
    generated always, and kept unique (a subset too: CloudFormation's lists of settings
    objects require nothing). Items that are an anyOf / oneOf of such objects (CloudFormation's
    `oneOf: [{"required": ["VariationName", "StringValue"]}, ...]`) are kept unique by a
    property every alternative has with the same schema (where none has, the first alternative
    that has one is generated alone). Where no property of the object
    qualifies, one of an object property does (`{"CustomPlugin": {"CustomPluginArn": ...}}`,
    both then always generated). None when no property qualifies.
    (Integer properties are not used: a token that closes the name and ends the value,
    `":5,`, would need the guard's look-ahead from inside a name.)"""
    combiner = next((k for k in ("anyOf", "oneOf") if set(new) == {k}), None)
    objects = new[combiner] if combiner else [new]
    found = _key_of_objects(state, objects, node, path)
    for alone in objects if found is None and combiner and all(map(_plain_object, objects)) else ():
        # no property every alternative holds (CloudFormation's tags, `{Key, Value}` or
        # `{TagKey, TagValue}`): the first alternative that has one, alone (a subset)
        found = _key_of_objects(state, [alone], node, path) or _keyed_inside(
            state, alone, node, path
        )
        if found is not None:
            combiner = None
            break
    if found is None and combiner is None and _plain_object(new):
        found = _keyed_inside(state, new, node, path)
    if found is None:
        return None
    node, kind, key, keyed = found
    array = {
        "type": "array",
        "items": {combiner: keyed} if combiner else keyed[0],
        UNIQUE_KEY: [key, kind],
        **{k: node[k] for k in ("minItems", "maxItems") if k in node},
    }
    state.unique_key_nodes += 1
    return counted(state, array)


def _key_of_objects(state: RewriteState, objects: list, node: dict, path: str) -> tuple | None:
    """(array node, item kind, key, the objects with the key required and its value a
    placeholder the guard keeps) for the first property every object holds with one schema
    that the guard can keep unique (see unique_by_key), else None."""
    if not objects or not all(_plain_object(o) for o in objects):
        return None
    for key in _candidates(objects[0]):
        subs = [_key_schema(state, o, key, path) for o in objects]
        if subs[0] is None or len({_spelling(state, sub) for sub in subs}) > 1:
            continue  # (every alternative must hold the name, with one schema)
        sub = subs[0]
        names = _string_enum(sub)
        try:
            strings = (
                counted_items(names, node, path)
                if names is not None
                else string_item(state, {"type": "string"}, sub, node, path)
            )
        except GrammarError:  # (too many items for its values, ...): the next name may do
            continue
        if strings is not None:
            node, kind, item = strings
            value = state.placeholder(item, quoted=False)
            return node, kind, key, [_with_required(o, key, value) for o in objects]
    return None


def _keyed_inside(state: RewriteState, obj: dict, node: dict, path: str) -> tuple | None:
    """_key_of_objects' result for a key one object property inside `obj` (the required ones
    first, then the optional), its key the path of the two names."""
    for outer in _candidates(obj):
        inner = _property_schema(state, obj, outer, path)
        if not (
            _PLAIN_NAME.fullmatch(outer) and _plain_object(inner) and inner.get("type") == "object"
        ):
            continue
        found = _key_of_objects(state, [inner], node, path)
        if found is not None:
            node, kind, key, keyed = found
            return node, kind, [outer, key], [_with_required(obj, outer, keyed[0])]
    return None


def _spelling(state: RewriteState, sub) -> str:
    """What a rewritten schema generates, as text: a placeholder's regex (alternatives get
    placeholders of their own for one pattern), else the schema itself."""
    name = (
        f'"{sub["const"]}"' if isinstance(sub, dict) and isinstance(sub.get("const"), str) else None
    )
    if name in state.placeholders or name in state.length_strings:
        return repr((state.placeholders.get(name), state.length_strings.get(name)))
    return json.dumps(sub, sort_keys=True)


def _key_schema(state: RewriteState, obj: dict, key: str, path: str):
    """The rewritten schema of `obj`'s property `key` when it could keep the objects unique
    (a string, or a string placeholder: a pattern, format or set of strings; a `$ref` to one
    followed), else None."""
    if key not in obj.get("properties", {}) or not _PLAIN_NAME.fullmatch(key):
        return None  # the guard compares the name's JSON text: one spelling
    sub = _property_schema(state, obj, key, path)
    if _string_enum(sub) is None and not (
        isinstance(sub, dict) and (sub.get("type") == "string" or string_placeholder(state, sub))
    ):
        return None
    return sub


def _property_schema(state: RewriteState, obj: dict, name: str, path: str):
    """The rewritten schema of `obj`'s property `name`, as merged (an allOf beside it may
    narrow it), a `$ref` followed and rewritten (CloudFormation's Key: {"$ref": TagKey});
    None where it leads nowhere."""
    sub = obj["properties"].get(name)  # (a required name may be unlisted)
    if isinstance(sub, dict) and "$ref" in sub:
        target = resolved(state, sub)
        sub = (
            rewrite(state, target, f"{path}.items.properties.{name}")
            if isinstance(target, dict)
            else None
        )
    return sub


def _candidates(obj: dict) -> list:
    """The property names of a rewritten object that may keep it unique, in the order tried:
    the required ones, then the optional ones."""
    required = list(obj.get("required", ()))
    return required + [name for name in obj.get("properties", {}) if name not in required]


def _plain_object(schema) -> bool:
    """Whether a rewritten schema is an object with properties and nothing that adds names."""
    return (
        isinstance(schema, dict)
        and isinstance(schema.get("properties"), dict)
        and not set(schema) - {"type", "properties", "required", "additionalProperties"}
    )


def _with_required(obj: dict, key: str, value) -> dict:
    """`obj` with property `key` of schema `value`, required."""
    required = list(obj.get("required", ()))
    return {
        **obj,
        "properties": {**obj["properties"], key: value},
        "required": required if key in required else [*required, key],
    }


def _string_enum(new) -> str | None:
    """The item regex of a rewritten schema that is a set of strings (an enum of strings only:
    CloudFormation's `Day`, `Action`), else None."""
    if (
        not isinstance(new, dict)
        or set(new) - {"type", "enum"}
        or new.get("type", "string") != "string"
    ):
        return None
    values = new.get("enum")
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return "(?:" + "|".join(json_literal(v) for v in dict.fromkeys(values)) + ")"

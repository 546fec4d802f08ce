"""Schemas that combine keywords the rewriter takes one branch at a time, made into one branch.

`normalize` runs on every schema node before `rewrite.rewriter.SchemaRewriter` picks its branch:

- keywords that only apply to other types than the node's `type` allows are dropped (validators
  skip them: `minimum` beside `"type": "array"`);
- `allOf` members, and a 2020-12 `$ref` with assertions beside it, are merged into one schema;
- `anyOf` / `oneOf` with assertions beside them (`type`, `properties`, `required`) are distributed:
  `{A, anyOf: [B, C]}` becomes `anyOf: [A and B, A and C]`.

A merge is syntactic and exact (`required` unions, `properties` merge name by name, `type`s
intersect, `min*` / `max*` tighten, equal values agree); two schemas it cannot merge exactly are
left as they were, so the rewriter refuses them by name as before. One rule is a subset rather than
exact: a member with `additionalProperties: false` forbids the other members' optional properties,
which are then not generated.
"""

from __future__ import annotations

import re

from radixgen.grammar.schema.rules import ASSERTIONS, asserts, may_search, value_key

_APPLIES_TO = {
    **dict.fromkeys(
        ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
        {"integer", "number"},
    ),
    **dict.fromkeys(("minLength", "maxLength", "pattern", "format"), {"string"}),
    **dict.fromkeys(
        (
            "items",
            "prefixItems",
            "additionalItems",
            "unevaluatedItems",
            "contains",
            "minContains",
            "maxContains",
            "minItems",
            "maxItems",
            "uniqueItems",
        ),
        {"array"},
    ),
    **dict.fromkeys(
        (
            "properties",
            "patternProperties",
            "additionalProperties",
            "unevaluatedProperties",
            "propertyNames",
            "required",
            "dependentRequired",
            "dependencies",
            "dependentSchemas",
            "minProperties",
            "maxProperties",
        ),
        {"object"},
    ),
}
_TYPES = {"string", "integer", "number", "boolean", "null", "array", "object"}
_NOT_MERGED = ("$defs", "definitions", "$schema", "$id")


def normalize(node: dict, resolve, inlining: tuple = (), one_of_option=None) -> tuple[dict, tuple]:
    """`node` with the rewrites above applied (a new dict when anything changed; EMPTY when its
    allOf members and `$ref` meet in no value with the keywords beside them, or no anyOf/oneOf
    alternative does), and the `$ref`s it inlined. `resolve`
    follows a `$ref` chain; `inlining`: references being inlined further
    up, not inlined again (a schema can contain its own reference: that would never end);
    `one_of_option` resolves a oneOf option to distribute into (default `resolve`; None: not)."""
    node = _drop_inapplicable(node)
    members = list(node["allOf"]) if isinstance(node.get("allOf"), list) else []
    if "$ref" in node and asserts(node, ("$ref", "allOf")):
        members.append({"$ref": node["$ref"]})
    inlined = tuple(
        m["$ref"] for m in members if isinstance(m, dict) and isinstance(m.get("$ref"), str)
    )
    merged_refs: tuple = ()
    if (
        members
        and (len(members) > 1 or asserts(node, ("$ref", "allOf")))
        and not set(inlined) & set(inlining)
    ):
        merged = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
        flat = _flat_members(members, resolve) or [None]
        if any(_scoped_unevaluated(m) for m in flat):
            flat = [None]  # (a member's unevaluated* sees only its own annotations: not merged)
        for member in flat:
            merged = merge(merged, member, resolve) if isinstance(merged, dict) else merged
        if merged is _EMPTY:  # (a `$ref` beside a type its target cannot meet: no value is valid)
            return _EMPTY, inlined
        if isinstance(merged, dict):  # (then an anyOf/oneOf a member brought is distributed; the
            # type a member brought drops the keywords beside it that no longer apply: a `$ref` to
            # an object with `maxItems` beside it, as CloudFormation writes its Tags' items)
            node, merged_refs = _drop_inapplicable({**merged, **_kept(node)}), inlined
    for key in ("anyOf", "oneOf"):
        if (
            isinstance(node.get(key), list)
            and asserts(node, (key,))
            and ({"anyOf", "oneOf"} - {key}).isdisjoint(node)
        ):
            inlined = tuple(
                o["$ref"]
                for o in node[key]
                if isinstance(o, dict) and isinstance(o.get("$ref"), str)
            )
            if set(inlined) & set(inlining):
                return node, merged_refs
            base = {k: v for k, v in node.items() if k != key and k not in _NOT_MERGED}
            option_of = one_of_option if key == "oneOf" and one_of_option else resolve
            options = [merge(base, option_of(option), resolve) for option in node[key]]
            if options and all(o is _EMPTY for o in options):
                return _EMPTY, merged_refs  # no alternative meets the keywords beside it
            options = [o for o in options if o is not _EMPTY]
            if options and None not in options:
                return {key: options, **_kept(node)}, merged_refs + inlined
    return node, merged_refs


def implied_type(node: dict) -> str | None:
    """The one type the keywords of an untyped node constrain (`additionalProperties` alone:
    object; `pattern`: string; `minimum`: number), None when they constrain several or none.
    Values of other types pass those keywords, so generating that type only is a valid subset."""
    kinds = set().union(*(_APPLIES_TO[k] for k in typed_keywords(node)))
    if kinds == {"integer", "number"}:
        return "number"
    return next(iter(kinds)) if len(kinds) == 1 else None


def split_by_type(node: dict) -> dict | None:
    """A node whose type list has keywords for a container type and for another type
    ({"type": ["string", "object"], "minLength": 1, "properties": {...}}) as one anyOf
    alternative per type with that type's keywords (a keyword lets values of other types pass,
    so this is exact); also an object's name rules beside other types ({"type": ["object",
    "string"], "patternProperties": ...}); None for any other node, or when a keyword applies to
    every type."""
    types = node.get("type")
    if not (isinstance(types, list) and len(types) > 1 and set(types) <= _TYPES):
        return None
    if any(k in ASSERTIONS and k != "type" and k not in _APPLIES_TO for k in node):
        return None  # enum, allOf, not, ...: they apply to every alternative
    kinds = {
        "number" if kind == "integer" else kind
        for kind in set().union(*(_APPLIES_TO[k] for k in typed_keywords(node))) & set(types)
    }
    keyed = {"patternProperties", "propertyNames"} & set(
        node
    )  # (a keyed object takes one type only)
    if (len(kinds) < 2 and not keyed) or not kinds & {"object", "array"}:
        return None
    parts = [
        {"type": t, **{k: node[k] for k in typed_keywords(node) if t in _APPLIES_TO[k]}}
        for t in types
    ]
    return {**{k: v for k, v in node.items() if k not in ASSERTIONS}, "anyOf": parts}


def typed_keywords(node: dict) -> list:
    """The keywords of `node` that apply to values of some types only."""
    return [k for k in node if k in _APPLIES_TO]


def resolve_merged(node, target_of, siblings_optional: bool, depth: int = 0):
    """`node` with its `$ref` chain followed (`target_of(ref)` gives a reference's schema), the
    keywords beside each `$ref` merged into its target; None when a merge is not exact or the
    chain is too long, _EMPTY when nothing is valid. `siblings_optional` (drafts 3-7, which
    ignore keywords beside a `$ref`): a merge that is not exact or empty gives the target alone."""
    if not (isinstance(node, dict) and "$ref" in node):
        return node
    if depth > _MAX_DEPTH:
        return None
    target = resolve_merged(target_of(node["$ref"]), target_of, siblings_optional, depth + 1)
    if not asserts(node, ("$ref",)) or not isinstance(target, dict):
        return target
    siblings = {k: v for k, v in node.items() if k != "$ref" and k not in _NOT_MERGED}
    merged = merge(
        siblings,
        target,
        lambda n: resolve_merged(n, target_of, siblings_optional, depth + 1),
        depth + 1,
    )
    return target if siblings_optional and (merged is None or merged is _EMPTY) else merged


def _flat_members(members: list, resolve, depth: int = 0) -> list | None:
    """allOf members with their references resolved and nested allOfs flattened into the list
    (a member's own keywords stay one member); None past _MAX_DEPTH levels."""
    flat = []
    for member in members:
        member = resolve(member)
        if isinstance(member, dict) and isinstance(member.get("allOf"), list):
            inner = (
                _flat_members(member["allOf"], resolve, depth + 1) if depth < _MAX_DEPTH else None
            )
            if inner is None:
                return None
            flat += [{k: v for k, v in member.items() if k != "allOf"}, *inner]
        else:
            flat.append(member)
    return flat


def merge(a, b, resolve, depth: int = 0):
    """The schema `a and b`, or None when it cannot be written as one schema exactly; _EMPTY when
    nothing satisfies both (types that do not meet)."""
    if a is True or b is True:
        return b if a is True else a
    if a is False or b is False:
        return _EMPTY
    if "$ref" not in a and _same(a, b):  # A and A is A (GitHub's webhook schemas restate whole
        return a  # properties); JSON equality: a const 1 is not a const true
    if not (isinstance(a, dict) and isinstance(b, dict)) or {
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
    } & set(a) & set(b):
        return None
    if _scoped_unevaluated(b) and asserts(a):
        return None  # b (the member, option, target or branch merged in) sees no annotation of a
    if (
        depth > _MAX_DEPTH
        or ("prefixItems" in a) != ("prefixItems" in b)
        and "items" in (b if "prefixItems" in a else a)
    ):
        return None  # too deep (recursive properties), or an `items` that would move past a prefix
    a, b = _const_as_enum(a, b), _const_as_enum(b, a)
    out = dict(a)
    for key, value in b.items():
        if key in _NOT_MERGED or (key not in ASSERTIONS and key in out):
            continue
        if key not in out:
            out[key] = value
        elif key == "type":
            both = _meet(_types(out[key]), _types(value))
            if not both:
                return _EMPTY
            out[key] = both[0] if len(both) == 1 else both
        elif key == "required":
            if not (isinstance(out[key], list) and isinstance(value, list)):
                return None
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "enum" and isinstance(value, list) and isinstance(out[key], list):
            theirs = {value_key(w) for w in value}
            out[key] = [v for v in out[key] if value_key(v) in theirs]
            if not out[key]:
                return _EMPTY
        elif (
            key == "pattern"
            and isinstance(value, str)
            and isinstance(out[key], str)
            and value != out[key]
        ):
            out[key] = all_of_patterns(out[key], value)
        elif key == "not" and isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = {
                "anyOf": _disjuncts(out[key]) + _disjuncts(value)
            }  # not A and not B: not (A or B)
        elif key.startswith(("min", "max", "exclusiveM")) and _number(value) and _number(out[key]):
            tighter = max if key.startswith(("min", "exclusiveMin")) else min
            out[key] = tighter(out[key], value)
        elif (
            key == "items"
            and all(isinstance(x, (dict, bool)) for x in (out[key], value))
            and not _same(out[key], value)
        ):  # one schema for every item (past equal prefixes)
            both = merge(resolve(out[key]), resolve(value), resolve, depth + 1)
            if both is None:
                return None
            out[key] = False if both is _EMPTY else both  # no item fits: only as many as the prefix
        elif key not in ("properties", "additionalProperties") and not _same(out[key], value):
            return None
    return _merge_objects(a, b, out, resolve, depth)


_LOOKAROUND = re.compile(r"\(\?<?[=!]|\\[bB]")
_PATTERN_PARTS: dict = {}  # a pattern all_of_patterns wrote -> the patterns it holds


def all_of_patterns(a: str, b: str) -> str:
    """One pattern searching for both: each but one as a lookahead from the start, then that
    one (one with lookarounds of its own, which may not sit inside a lookahead; the pattern
    translation writes lookaheads out and refuses a second such)."""
    parts = _PATTERN_PARTS.get(a, (a,)) + _PATTERN_PARTS.get(b, (b,))
    at = next((i for i, p in enumerate(parts) if _LOOKAROUND.search(p)), len(parts) - 1)
    ahead = "".join(f"(?=[\\s\\S]*?(?:{p}))" for i, p in enumerate(parts) if i != at)
    merged = f"^{ahead}[\\s\\S]*?(?:{parts[at]})"
    if len(_PATTERN_PARTS) > 10_000:
        _PATTERN_PARTS.clear()
    _PATTERN_PARTS[merged] = parts
    return merged


def _disjuncts(schema: dict) -> list:
    """The options of a schema that is only an anyOf, else the schema itself as one."""
    return (
        list(schema["anyOf"])
        if set(schema) == {"anyOf"} and isinstance(schema["anyOf"], list)
        else [schema]
    )


def _merge_objects(a: dict, b: dict, out: dict, resolve, depth: int):
    """`properties` merged name by name; each side's additionalProperties applied to the names
    only the other side lists."""
    props_a, props_b = a.get("properties", {}), b.get("properties", {})
    if not (isinstance(props_a, dict) and isinstance(props_b, dict)):
        return None
    if "properties" in a or "properties" in b:
        props = dict(props_a)
        for name, schema in props_b.items():
            if name in props and _scoped_unevaluated(resolve(props[name])):
                return None  # (the two are cousins: see _scoped_unevaluated)
            props[name] = (
                schema
                if name not in props
                else merge(resolve(props[name]), resolve(schema), resolve, depth + 1)
            )
            if props[name] is None:
                return None
            if props[name] is _EMPTY:  # no value fits: the property can only be absent (false,
                props[name] = False  # which a later merge keeps; deleting it would free the name)
        for side, others in ((a, set(props_b) - set(props_a)), (b, set(props_a) - set(props_b))):
            extra = side.get("additionalProperties", True)
            if not others or extra is True or extra == {}:
                continue
            # names this side's patternProperties take stay (those schemas stay on them: the
            # merged patternProperties apply to listed names too)
            allowed = _pattern_named(side.get("patternProperties", {}), others)
            if (
                allowed is None
                or extra is not False
                or (others - allowed) & set(out.get("required", []))
            ):
                return None
            for name in others - allowed:
                props[name] = False  # forbidden by this side, optional: never generated
        if any(props.get(name) is False for name in out.get("required", [])):
            # a required name with no value: nothing valid, unless other types than objects pass
            return _EMPTY if _types(out.get("type", [])) == {"object"} else None
        out["properties"] = props
    extras = [
        s["additionalProperties"]
        for s in (a, b)
        if s.get("additionalProperties", True) not in (True, {})
    ]
    if extras:
        if any(x is not False and not _same(x, extras[0]) for x in extras):
            return None
        out["additionalProperties"] = False if False in extras else extras[0]
    return out


def _pattern_named(patterns, names: set) -> set | None:
    """The names among `names` that some pattern of patternProperties `patterns` searches (as
    Python's re, the validator's reading), None when a pattern cannot be read."""
    if not isinstance(patterns, dict):
        return None
    found = {name: [may_search(p, name) for p in patterns] for name in names}
    if any(None in each for each in found.values()):
        return None
    return {name for name, each in found.items() if any(each)}


def _scoped_unevaluated(node) -> bool:
    """Whether `node` has an unevaluatedItems / unevaluatedProperties that asserts something. It
    sees the annotations of its own schema object and what that applies in place, never those of
    a cousin: merged with an allOf sibling, the parent's keywords or a `$ref`'s siblings, it would
    wrongly see theirs ({"allOf": [{"prefixItems": [true]}, {"unevaluatedItems": false}]} allows
    no item at all)."""
    return isinstance(node, dict) and any(
        node.get(k, True) not in (True, {}) for k in ("unevaluatedItems", "unevaluatedProperties")
    )


def _drop_inapplicable(node: dict) -> dict:
    types = node.get("type")
    types = _types(types) if isinstance(types, (str, list)) else None
    if not types or not types <= _TYPES:
        return node
    drop = [k for k in node if k in _APPLIES_TO and not _APPLIES_TO[k] & types]
    return {k: v for k, v in node.items() if k not in drop} if drop else node


def _const_as_enum(x: dict, other: dict) -> dict:
    """`const` as a one-value `enum` when the other schema has an enum (they then intersect)."""
    if "const" in x and "enum" in other and "enum" not in x:
        return {**{k: v for k, v in x.items() if k != "const"}, "enum": [x["const"]]}
    return x


def _kept(node: dict) -> dict:
    return {k: node[k] for k in _NOT_MERGED if k in node}


def _meet(x: set, y: set) -> list:
    """Types both allow (an integer is a number)."""
    both = x & y
    if {"integer", "number"} & x and {"integer", "number"} & y and "integer" in x | y:
        both.add("integer")
    return sorted(both)


def _types(value) -> set:
    return {value} if isinstance(value, str) else {t for t in value if isinstance(t, str)}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(x, y) -> bool:
    return value_key(x) == value_key(y)


_EMPTY = object()  # a merge nothing satisfies
EMPTY = _EMPTY
_MAX_DEPTH = 32  # $ref chains and nested property merges followed at most

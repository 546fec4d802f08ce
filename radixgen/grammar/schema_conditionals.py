"""`if` / `then` / `else` on a tag property, made into alternatives the rewriter can enforce.

The common shape (SchemaStore, OpenAPI-style configs) tests one property against a finite set of
values and applies `then` when it matches, `else` when it does not:

    {"properties": {"kind": {"enum": ["a", "b", "c"]}, ...},
     "allOf": [{"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}}, ...]}

`expand_conditionals` turns a node with such conditionals (its own `if`, or `allOf` members that
are only a conditional) into `anyOf` alternatives, each the node merged (schema_merge.merge, exact)
with one outcome per conditional:

- the test holds: the property takes one of the tested values (or, when the test does not
  require it, is absent), merged with `then`;
- the test fails: the property is present with one of its other values, merged with `else`. This
  needs the property's own values to be a finite set; when they are not, only the first outcome is
  generated, which is a valid subset.

Outcomes that cannot hold together (the property fixed to two different values) merge to nothing
and are dropped. A conditional of another shape, or a merge that is not exact, leaves the node as
it was, for the rewriter to refuse by name.
"""

from __future__ import annotations

from .schema_merge import EMPTY, merge
from .schema_rules import asserts, is_type, value_key

MAX_ALTERNATIVES = 32
_CONDITIONAL = frozenset(("if", "then", "else"))


def expand_conditionals(node: dict, resolve) -> dict:
    members = node.get("allOf") if isinstance(node.get("allOf"), list) else []
    tests = [m for m in members if _is_conditional(m)]
    if "if" in node:
        tests.append({k: node[k] for k in _CONDITIONAL if k in node})
    if not tests or node.get("type", "object") not in ("object", ["object"]):
        return node  # (a test on properties holds for every value that is not an object)
    rest = [m for m in members if not _is_conditional(m)]
    base = {k: v for k, v in node.items() if k not in _CONDITIONAL and k != "allOf"}
    if rest:
        base["allOf"] = rest
    alternatives = [base]
    for test in tests:
        tag = _tag(test.get("if"), resolve)
        if tag is None:
            return node
        alternatives = _outcomes(alternatives, tag, resolve(test.get("then", True)), resolve(test.get("else", True)),
                                 resolve)
        if alternatives is None or not alternatives or len(alternatives) > MAX_ALTERNATIVES:
            return node
    return {"anyOf": alternatives, **{k: node[k] for k in ("$defs", "definitions") if k in node}}


def _is_conditional(member) -> bool:
    return isinstance(member, dict) and "if" in member and not asserts(member, tuple(_CONDITIONAL))


def _tag(test, resolve):
    """(property, the values that pass, whether the test requires the property) for a test
    `{"properties": {p: C}}` (optionally `"type": "object"`, `"required": [p]`) whose C accepts
    a finite set of values only; None for any other test."""
    test = resolve(test)
    if not isinstance(test, dict) or asserts(test, ("properties", "required", "type")):
        return None
    props = test.get("properties")
    if not (isinstance(props, dict) and len(props) == 1) or test.get("type", "object") != "object":
        return None
    name = next(iter(props))
    if test.get("required", []) not in ([], [name]):
        return None
    values = finite_values(props[name], resolve)
    return None if values is None else (name, values, bool(test.get("required")))


def _outcomes(alternatives: list, tag: tuple, then, otherwise, resolve) -> list | None:
    name, passing, required = tag
    out = []
    for alt in alternatives:
        holds = {"properties": {name: {"enum": passing}}, **({"required": [name]} if required else {})}
        outcomes = [(holds, then)]
        own = alt.get("properties", {}).get(name) if isinstance(alt.get("properties"), dict) else None
        others = finite_values(own, resolve) if own is not None else None
        passing_keys = {value_key(v) for v in passing}
        failing = [v for v in others or [] if value_key(v) not in passing_keys]
        if failing:
            outcomes.append(({"properties": {name: {"enum": failing}}, "required": [name]}, otherwise))
        for extra, branch in outcomes:
            if branch is False:
                continue  # nothing valid in that outcome
            merged = merge(alt, extra, resolve)
            merged = merge(merged, branch, resolve) if isinstance(merged, dict) else merged
            if merged is None:
                return None
            if merged is not EMPTY:
                out.append(merged)
    return out


def finite_values(schema, resolve) -> list | None:
    """The values `schema` accepts when they are a finite set it spells out (const, enum,
    boolean, null, anyOf/oneOf of those), else None."""
    schema = resolve(schema)
    if not isinstance(schema, dict) or asserts(schema, ("const", "enum", "type", "anyOf", "oneOf")):
        return None
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list) or {"anyOf", "oneOf"} & set(schema):
            return None
    elif len([k for k in ("anyOf", "oneOf") if k in schema]) == 1:
        options = schema.get("anyOf", schema.get("oneOf"))
        parts = [finite_values(o, resolve) for o in options] if isinstance(options, list) else [None]
        if None in parts:
            return None
        values = [v for part in parts for v in part]
    elif types and set(types) <= {"boolean", "null"}:
        values = [v for t, vs in (("boolean", [True, False]), ("null", [None])) if t in types for v in vs]
    else:
        return None
    if isinstance(types, list):
        values = [v for v in values if any(is_type(v, t) for t in types if isinstance(t, str))]
    return values

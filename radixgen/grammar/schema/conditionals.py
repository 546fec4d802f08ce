"""`if` / `then` / `else` on a tag property, made into alternatives the rewriter can enforce.

The common shape (SchemaStore, OpenAPI-style configs) tests one property against a finite set of
values and applies `then` when it matches, `else` when it does not:

    {"properties": {"kind": {"enum": ["a", "b", "c"]}, ...},
     "allOf": [{"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}}, ...]}

`expand_conditionals` turns a node with such conditionals (its own `if`, or `allOf` members that
are only a conditional; also `dependentSchemas`, whose test is a name's presence) into `anyOf`
alternatives, each the node merged (schema.merge.merge, exact)
with one outcome per conditional:

- the test holds: the property takes one of the tested values (or, when the test does not
  require it, is absent), merged with `then`;
- the test fails: the property is present with one of its other values, merged with `else`. This
  needs the property's own values to be a finite set; when they are not, only the first outcome is
  generated, which is a valid subset.

Tests of presence take the same two outcomes (`_presence_outcomes`): `{"required": [names]}` holds
with every name present and fails with one absent (`{"not": {"required": [...]}}` the other way
round); a test that also checks a required property against a schema that is no finite set
(`{"properties": {"p": {"minItems": 1}}, "required": ["p"]}`, DynamoDB's tables) holds with p
present and meeting it, fails with p absent (p present against the rest is not generated: a
subset). A conditional with neither `then` nor `else` asserts nothing and is dropped.

Tests combine: the `not` of a tag test swaps its outcomes (`{"not": {"properties": {"webpack":
{"enum": [false]}}}}` holds with webpack present and not false); an `anyOf` of tag tests on one
property holds with its values' union (`{"anyOf": [{... "const": "mysql"}, {... "const":
"postgresql"}]}`); an `anyOf` of presence tests holds with one member's names present and fails
with a name of every member absent; a tag test on a property of a property (GitHub Actions'
`{"properties": {"runs": {"properties": {"using": {"const": "composite"}}}}}`) holds where the
outer property is absent, no object, or holds the value, and fails with it an object holding
another value (its values found through the outer property's anyOf / oneOf).

Outcomes that cannot hold together (the property fixed to two different values) merge to nothing
and are dropped; so are outcomes whose merge is not exact (a subset again). A conditional of
another shape, or no outcome left, leaves the node as it was, for the rewriter to refuse by name.
"""

from __future__ import annotations

import math
from itertools import product

from radixgen.grammar.schema.merge import merge
from radixgen.grammar.schema.rules import asserts, is_type, value_key

MAX_ALTERNATIVES = 32
_CONDITIONAL = frozenset(("if", "then", "else"))
_ANNOTATIONS = frozenset(("$comment", "description", "title"))


def expand_conditionals(node: dict, resolve, read_test=None) -> dict:
    """`node` with its conditionals as `anyOf` alternatives (see the module docstring), or as it
    was. `resolve` follows a `$ref` chain as the node is generated; `read_test` as validators
    read a test (drafts 3-7 ignore keywords beside a `$ref`; None: cannot tell), default `resolve`."""
    node = _without_inert_conditionals(node)
    members = node.get("allOf") if isinstance(node.get("allOf"), list) else []
    tests = [m for m in members if _is_conditional(m)]
    if "if" in node:
        tests.append({k: node[k] for k in _CONDITIONAL if k in node})
    depends = _dependent_schemas(node)
    if not (tests or depends) or node.get("type", "object") not in ("object", ["object"]):
        return node  # (a test on properties holds for every value that is not an object)
    tags = [
        _tag(test.get("if"), read_test or resolve)
        or _presence_outcomes(test.get("if"), read_test or resolve)
        for test in tests
    ]
    if None in tags or depends is None:
        return node
    known: dict = {}  # every value the tests name, per property
    for name, values, *_ in (tag for tag in tags if len(tag) == 4):
        known.setdefault(name, []).extend(values)
    rest = [m for m in members if not _is_conditional(m)]
    base = {k: v for k, v in node.items() if k not in _CONDITIONAL | {"allOf", "dependentSchemas"}}
    if rest:
        base["allOf"] = rest
    if isinstance(node.get("dependencies"), dict):  # the name lists stay (dependentRequired)
        base["dependencies"] = {
            k: v for k, v in node["dependencies"].items() if isinstance(v, list)
        }
    alternatives = [base]
    for test, tag in zip(tests, tags):
        branches = resolve(test.get("then", True)), resolve(test.get("else", True))
        if len(tag) == 2:  # (holds, fails) of a presence test
            alternatives = [
                m for alt in alternatives for m in _merged(alt, *tag, branches, resolve)
            ]
        else:
            alternatives = _outcomes(alternatives, tag, branches, known[tag[0]], resolve)
        if not alternatives or len(alternatives) > MAX_ALTERNATIVES:
            return node
    for name, schema in depends:  # present with the schema, or absent
        present = merge({"type": "object", "required": [name]}, resolve(schema), resolve)
        absent = {"type": "object", "properties": {name: False}}
        alternatives = [
            merged
            for alt in alternatives
            for extra in (present, absent)
            if isinstance(extra, dict)
            for merged in [merge(alt, extra, resolve)]
            if isinstance(merged, dict)
        ]
        if not alternatives or len(alternatives) > MAX_ALTERNATIVES:
            return node
    return {"anyOf": alternatives, **{k: node[k] for k in ("$defs", "definitions") if k in node}}


def _without_inert_conditionals(node: dict) -> dict:
    """`node` without the conditionals that have neither `then` nor `else` (they assert nothing;
    an `allOf` left empty goes too)."""

    def inert(member) -> bool:
        return _is_conditional(member) and "then" not in member and "else" not in member

    members = node.get("allOf")
    kept = [m for m in members if not inert(m)] if isinstance(members, list) else members
    own = "if" in node and "then" not in node and "else" not in node
    if not (own or kept != members):
        return node
    out = {k: v for k, v in node.items() if k != "if" or not own}
    if kept != members:
        del out["allOf"]
        out.update({"allOf": kept} if kept else {})
    return out


def _presence_outcomes(test, resolve) -> tuple | None:
    """(holds, fails) for a presence test (see the module docstring): the schemas each outcome
    adds, or None for another test. An `anyOf` of presence tests holds with the names of one
    member present and fails with a name of every member absent."""
    test = resolve(test)
    negated = isinstance(test, dict) and set(test) - _ANNOTATIONS == {"not"}
    inner = resolve(test["not"]) if negated else test
    if (
        isinstance(inner, dict)
        and set(inner) - _ANNOTATIONS == {"anyOf"}
        and isinstance(inner["anyOf"], list)
    ):
        members = [_names_present(resolve(m)) for m in inner["anyOf"]]
        if (
            not members
            or None in members
            or any(props for _, props in members)
            or math.prod(len(names) for names, _ in members) > 8 * MAX_ALTERNATIVES
        ):
            return None
        holds = [{"type": "object", "required": names} for names, _ in members]
        fails = [
            {"type": "object", "properties": {name: False for name in choice}}
            for choice in dict.fromkeys(
                frozenset(c) for c in product(*(names for names, _ in members))
            )
        ]
        if len(fails) > MAX_ALTERNATIVES:
            return None
    else:
        found = _names_present(inner)
        if found is None or (negated and found[1]):
            return None  # (negated: a property checked but not required holds when absent)
        names, props = found
        holds = [{"type": "object", "required": names, **({"properties": props} if props else {})}]
        fails = [{"type": "object", "properties": {name: False}} for name in names]
    return (fails, holds) if negated else (holds, fails)


def _names_present(inner) -> tuple[list, dict] | None:
    """(names, the properties checked among them) for a test that names must be present, None
    for another test (a property checked but not required holds when absent: not a presence)."""
    if (
        not isinstance(inner, dict)
        or asserts(inner, ("properties", "required", "type"))
        or inner.get("type", "object") != "object"
    ):
        return None
    names, props = inner.get("required", []), inner.get("properties", {})
    if not (
        isinstance(names, list)
        and names
        and all(isinstance(n, str) for n in names)
        and isinstance(props, dict)
        and set(props) <= set(names)
    ):
        return None
    return names, props


def _merged(alt: dict, holds: list, fails: list, branches: tuple, resolve) -> list:
    """`alt` merged with each schema of an outcome and its branch (then, else): the merges that
    hold (an outcome that does not merge exactly, or leaves nothing, is not generated)."""
    out = []
    for extras, branch in ((holds, branches[0]), (fails, branches[1])):
        if branch is False:
            continue  # nothing valid in that outcome
        for extra in extras:
            merged = merge(alt, extra, resolve)
            merged = merge(merged, branch, resolve) if isinstance(merged, dict) else merged
            if isinstance(merged, dict) and merged not in out:
                out.append(merged)
    return out


def _dependent_schemas(node: dict) -> list | None:
    """(name, schema) for each `dependentSchemas` entry and `dependencies` entry with a schema
    (drafts 4-7): the schema applies when the name is present. None when malformed."""
    pairs = []
    for key in ("dependentSchemas", "dependencies"):
        entries = node.get(key, {})
        if not isinstance(entries, dict):
            return None
        pairs += [
            (name, schema) for name, schema in entries.items() if isinstance(schema, (dict, bool))
        ]
    return pairs


def _is_conditional(member) -> bool:
    return isinstance(member, dict) and "if" in member and not asserts(member, tuple(_CONDITIONAL))


def _tag(test, resolve):
    """(path, values, negated, required) for a test `{"properties": {p: C}}` (optionally
    `"type": "object"`, `"required": [p]`) where C accepts a finite set of values only, or all
    values but those (`{"not": {"enum": [...]}}`, negated): path (p,); where C is itself such a
    test on q (p not required by the test), path (p, q), and so on. Also the `not` of a
    one-level test (its outcomes swapped: not of a nested one, which holds where p is absent or
    no object either way) and an `anyOf` of tests on one path; None for any other test."""
    test = resolve(test)
    keys = set(test) - _ANNOTATIONS if isinstance(test, dict) else set()
    if keys == {"not"}:  # absent or in the values <-> present and not in them
        inner = _tag(test["not"], resolve)
        return (
            None
            if inner is None or len(inner[0]) > 1
            else (inner[0], inner[1], not inner[2], not inner[3])
        )
    if keys == {"anyOf"}:
        return _any_tag(test["anyOf"], resolve)
    if not isinstance(test, dict) or asserts(test, ("properties", "required", "type")):
        return None
    props = test.get("properties")
    if not (isinstance(props, dict) and len(props) == 1) or test.get("type", "object") != "object":
        return None
    name = next(iter(props))
    if test.get("required", []) not in ([], [name]):
        return None
    check = resolve(props[name])
    negated = isinstance(check, dict) and set(check) - _ANNOTATIONS == {"not"}
    values = finite_values(check["not"] if negated else check, resolve)
    if values is None:  # a test on a property of p: holds where p is absent or no object
        inner = None if test.get("required") else _tag(check, resolve)
        return None if inner is None else ((name, *inner[0]), *inner[1:])
    return (name,), values, negated, bool(test.get("required"))


def _any_tag(members, resolve):
    """The tag of an `anyOf` of tag tests on one property, all negated or none: the union of
    their values (negated: the values outside every member's, their intersection); required
    only where every member requires it."""
    tags = [_tag(m, resolve) for m in members] if isinstance(members, list) and members else [None]
    if None in tags or len({(name, negated) for name, _, negated, _ in tags}) != 1:
        return None
    name, negated = tags[0][0], tags[0][2]
    sets = [{value_key(v): v for v in values} for _, values, _, _ in tags]
    if negated:
        values = [v for k, v in sets[0].items() if all(k in other for other in sets[1:])]
    else:
        values = list({k: v for one in sets for k, v in one.items()}.values())
    return (name, values, negated, all(required for *_, required in tags)) if values else None


def _outcomes(alternatives: list, tag: tuple, branches: tuple, known: list, resolve) -> list:
    """Each alternative merged with each outcome of one test: the test holds (with `then`), or
    it fails (with `else`). The tested property's other values are its own when they are a finite
    set, else the values the other tests name (a subset: every output still validates). A test
    on a property of p (path (p, q)) holds where p is absent, no object, or holds the outcome; it
    fails with p present, an object, and failing it."""
    path, values, negated, required = tag
    *outer, name = path
    tested = {value_key(v) for v in values}
    absent = {"type": "object", "properties": {name: False}}  # the property never generated
    out = []
    for alt in alternatives:
        universe = _path_values(alt, path, resolve)
        others = [
            v for v in (known if universe is None else universe) if value_key(v) not in tested
        ]
        # (objects only: a test on properties holds for any other value, and `then` may not fit it)
        inside = {"type": "object", "properties": {name: {"enum": values}}, "required": [name]}
        outside = [{**inside, "properties": {name: {"enum": others}}}] if others else []
        matched = [
            inside if required else {"type": "object", "properties": {name: {"enum": values}}}
        ]
        if negated:  # C is `not` the values: inside them it fails
            holds, fails = (
                outside + ([] if required else [absent]),
                [inside] + ([absent] if required else []),
            )
        else:
            holds, fails = matched, outside + ([absent] if required else [])
        holds, fails = (
            [_within(outer, h, True) for h in holds],
            [_within(outer, f, False) for f in fails],
        )
        out.extend(m for m in _merged(alt, holds, fails, branches, resolve) if m not in out)
    return out


def _within(outer: list, schema: dict, holds: bool) -> dict:
    """An outcome for the object at the end of `outer` (a properties path), for the whole:
    where the test holds, also with any of those properties absent or no object; where it
    fails, with each present and an object."""
    for name in reversed(outer):
        if holds:
            schema = {
                "type": "object",
                "properties": {name: {k: v for k, v in schema.items() if k != "type"}},
            }
        else:
            schema = {"type": "object", "required": [name], "properties": {name: schema}}
    return schema


def _path_values(node, path: tuple, resolve) -> list | None:
    """The values the property at `path` (a properties path from `node`) may take when they are
    a finite set: through anyOf / oneOf alternatives, the union of theirs. None otherwise."""
    node = resolve(node)
    if not path:
        return finite_values(node, resolve)
    if not isinstance(node, dict):
        return None
    if "properties" not in node and len([k for k in ("anyOf", "oneOf") if k in node]) == 1:
        options = node.get("anyOf", node.get("oneOf"))
        parts = (
            [_path_values(o, path, resolve) for o in options]
            if isinstance(options, list)
            else [None]
        )
        return (
            None
            if None in parts
            else list({value_key(v): v for part in parts for v in part}.values())
        )
    props = node.get("properties")
    return (
        _path_values(props[path[0]], path[1:], resolve)
        if isinstance(props, dict) and path[0] in props
        else None
    )


def finite_values(schema, resolve) -> list | None:
    """The values `schema` accepts when they are a finite set it spells out (const, enum,
    boolean, null, anyOf/oneOf of those), else None."""
    schema = resolve(schema)
    if not isinstance(schema, dict) or asserts(schema, ("const", "enum", "type", "anyOf", "oneOf")):
        return None
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if "const" in schema or "enum" in schema:
        if {"anyOf", "oneOf"} & set(schema) or not isinstance(schema.get("enum", []), list):
            return None
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if "const" in schema and "enum" in schema:  # both apply
            values = [v for v in values if value_key(v) in {value_key(e) for e in schema["enum"]}]
    elif len([k for k in ("anyOf", "oneOf") if k in schema]) == 1:
        options = schema.get("anyOf", schema.get("oneOf"))
        parts = (
            [finite_values(o, resolve) for o in options] if isinstance(options, list) else [None]
        )
        if None in parts:
            return None
        counts: dict = {}
        for v in (v for part in parts for v in {value_key(x): x for x in part}.values()):
            counts.setdefault(value_key(v), [v, 0])[1] += 1
        # anyOf: a value of any option; oneOf: of exactly one
        values = [v for v, n in counts.values() if "anyOf" in schema or n == 1]
    elif types and set(types) <= {"boolean", "null"}:
        values = [
            v for t, vs in (("boolean", [True, False]), ("null", [None])) if t in types for v in vs
        ]
    else:
        return None
    if isinstance(types, list):
        values = [v for v in values if any(is_type(v, t) for t in types if isinstance(t, str))]
    return values

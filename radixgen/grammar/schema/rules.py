"""Small JSON Schema rules used by `rewrite.rewriter`: numeric bounds, types, and the keywords about
property names beside `properties` (oneOf's exclusion is `schema.one_of`)."""

from __future__ import annotations

import math
import re

from radixgen.grammar.matcher import GrammarError, refuse

_PY_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")


ASSERTIONS = frozenset(
    """type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum
maxLength minLength pattern format maxItems minItems uniqueItems maxContains minContains contains
maxProperties minProperties required dependentRequired dependencies properties patternProperties
additionalProperties propertyNames items prefixItems additionalItems unevaluatedItems
unevaluatedProperties allOf anyOf oneOf not if then else dependentSchemas $ref $dynamicRef
$recursiveRef""".split()
)
_STRING_KEYS = ("pattern", "format", "$ref")
_LIST_OF_STRINGS = ("required",)


def check_keyword_types(node: dict, path: str) -> None:
    """Keywords whose values must be strings (or lists of them) are, so a malformed schema gets
    a GrammarError naming the keyword instead of a crash deeper in the rewrite."""
    for key in _STRING_KEYS:
        if key in node and not isinstance(node[key], str):
            raise GrammarError(
                f"invalid JSON Schema: {key!r} at {path} must be a string, got {node[key]!r}"
            )
    for key in _LIST_OF_STRINGS:
        if key in node and not (
            isinstance(node[key], list) and all(isinstance(x, str) for x in node[key])
        ):
            raise GrammarError(
                f"invalid JSON Schema: {key!r} at {path} must be an array of strings"
            )
    types = node.get("type", "string")
    if not (
        isinstance(types, str)
        or (isinstance(types, list) and all(isinstance(t, str) for t in types))
    ):
        raise GrammarError(
            f"invalid JSON Schema: 'type' at {path} must be a string or an array of strings"
        )


def check_counts(node: dict, path: str) -> None:
    """Length/size keywords must be integers >= 0 (outlines-core reads others as absent)."""
    for key in _COUNTS:
        value = node.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise GrammarError(
                f"unsupported JSON Schema keyword {key!r} at {path}: "
                f"{value!r} is not an integer >= 0"
            )


def value_key(value):
    """(JSON type name, ...): equal under JSON Schema equality: 1 and 1.0 are the same value
    (inside arrays and objects too), true is not 1. Numbers compare exactly (Python's int/float equality and hash are
    exact: 2**53 + 1 is not 2.0**53)."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(value_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, value_key(v)) for k, v in value.items()))
    return ("string" if isinstance(value, str) else "null", value)


def tightest(bounds: dict, incl: str, excl: str, pick, integer: bool):
    """(bound, exclusive) from minimum/exclusiveMinimum (or the maximum pair); integer bounds
    of integers are made inclusive."""
    cands = [(bounds[incl], False)] if incl in bounds else []
    if excl in bounds:
        cands.append((bounds[excl], True))
    if not cands:
        return None, False
    value, exclusive = pick(cands, key=lambda c: (c[0], c[1] if pick is max else not c[1]))
    if integer:
        up = pick is max
        value = (
            (math.floor(value) + 1 if exclusive else math.ceil(value))
            if up
            else (math.ceil(value) - 1 if exclusive else math.floor(value))
        )
        return int(value), False
    return value, exclusive  # numbers: as JSON parsed them


def is_type(value, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    if t == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _PY_TYPES.get(t, ()))


def listed_name_rules(node: dict, props: dict, path: str) -> list:
    """Keywords about property names beside `properties`, checked statically: only the listed
    properties are ever generated. Returns the required names, plus those dependentRequired
    needs (a dependency's names are always generated, so it holds whenever its key is present).

    - patternProperties applies to the listed names that match a pattern (`re.search`, as
      validators do): refused when its schema there asserts anything, ignored otherwise;
    - propertyNames: every listed name must satisfy it (pattern, length, enum/const);
    - dependentRequired (and draft 7 `dependencies` with name lists)."""

    def refuse(keyword: str, why: str):
        raise GrammarError(f"unsupported JSON Schema keyword {keyword!r} at {path}: {why}")

    required = list(node.get("required", []))
    patterns = node.get("patternProperties", {})
    if not isinstance(patterns, dict):
        raise GrammarError(f"invalid JSON Schema: 'patternProperties' at {path} must be an object")
    for pattern, schema in patterns.items():
        for name in props:
            if searches(pattern, name, path, "patternProperties") and not asserts_nothing(schema):
                refuse(
                    "patternProperties",
                    f"{pattern!r} also applies to property {name!r} "
                    "(radixgen does not combine the two schemas)",
                )
    if "propertyNames" in node:
        for name in props:
            if not _name_allowed(node["propertyNames"], name, path, refuse):
                refuse("propertyNames", f"listed property {name!r} does not satisfy it")
    for key, names in dependent_names(node, path).items():
        if key in props:
            missing = [n for n in names if n not in props]
            if missing:
                refuse(
                    "dependentRequired",
                    f"{missing} are not listed in properties (only listed "
                    "properties are generated)",
                )
            required += [n for n in names if n not in required]
    return required


def dependent_names(node: dict, path: str) -> dict:
    """name -> the names it needs, from dependentRequired and draft 7's `dependencies` with name
    lists; a GrammarError for `dependencies` with a schema (dependentSchemas' form, which
    schema.conditionals expands where it can) or a malformed entry."""
    depends = {**(node.get("dependentRequired") or {})}
    for key, value in (node.get("dependencies") or {}).items():
        if not isinstance(value, list):
            refuse(
                "dependencies",
                path,
                "only the dependentRequired form (lists of names) is supported",
            )
        depends[key] = value
    for names in depends.values():
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise GrammarError(
                f"invalid JSON Schema: dependentRequired at {path} must map names to lists"
            )
    return depends


def asserts(node: dict, besides: tuple = ()) -> bool:
    """Whether `node` has an assertion keyword other than those in `besides`."""
    return any(k in ASSERTIONS and k not in besides for k in node)


class NothingValid(GrammarError):
    """A schema no value satisfies: refused alone, dropped as one alternative of several."""


def only_objects(node: dict) -> bool:
    """Whether `node`'s type admits objects only."""
    return node.get("type") in ("object", ["object"])


def required_names(node) -> set:
    """The names `node`'s `required` lists (none when it is not a list)."""
    names = node.get("required") if isinstance(node, dict) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def always_generated(node: dict) -> set:
    """Names an object with `properties` is always generated with: the required ones and those a
    listed name's dependentRequired needs (see listed_name_rules)."""
    names = required_names(node)
    for key in ("dependentRequired", "dependencies"):
        for name, needed in (node.get(key) or {}).items():
            if name in node.get("properties", {}) and isinstance(needed, list):
                names |= {n for n in needed if isinstance(n, str)}
    return names


def forbidden_names_dropped(node: dict, path: str) -> dict:
    """`node` without its `not`, when that only forbids combinations of names: `not: {required:
    [a, b]}` (a and b not both present; other keywords beside `required` only make the negated
    schema harder to meet), or `not: {anyOf: [...]}` of such. One name of each combination that
    is not always generated leaves `properties` (only listed names are generated), so it is never
    present and the negated schema never holds. Other `not`s are left for the rewriter to refuse."""
    combos = forbidden_combinations(node.get("not"))
    if combos is None or not isinstance(node.get("properties"), dict):
        return node
    keep, drop = always_generated(node), set()
    for names in combos:
        if not set(names) & drop:
            free = [n for n in names if n not in keep]
            if not free:
                # nothing valid only when they are all required of an object (a dependency's
                # names are generated, not required; other types pass `required`)
                empty = set(names) <= required_names(node) and only_objects(node)
                refuse(
                    "not",
                    path,
                    f"it forbids {names}, which are always generated here"
                    + (" (nothing would be valid)" if empty else ""),
                    NothingValid if empty else GrammarError,
                )
            drop.add(free[0])
    props = {k: v for k, v in node["properties"].items() if k not in drop}
    return {**{k: v for k, v in node.items() if k != "not"}, "properties": props}


def forbidden_combinations(inner) -> list[list[str]] | None:
    """The name lists a `not` forbids together, where that is all it does: `{required: [a, b]}`
    (a and b not both present; keywords beside `required` only make the negated schema harder to
    meet) or `{anyOf: [...]}` of such; None for any other `not`."""
    options = inner.get("anyOf") if isinstance(inner, dict) and set(inner) == {"anyOf"} else [inner]
    combos = (
        [o.get("required") for o in options if isinstance(o, dict) and "$ref" not in o]
        if isinstance(options, list) and not (isinstance(inner, dict) and "$ref" in inner)
        else []
    )
    # (a $ref in the negated schema: drafts 3-7 would ignore the `required` beside it)
    if not (
        combos
        and len(combos) == len(options)
        and all(isinstance(c, list) and c and all(isinstance(n, str) for n in c) for c in combos)
    ):
        return None
    return combos


def asserts_nothing(schema) -> bool:
    return schema is True or (isinstance(schema, dict) and not asserts(schema))


def accepts_nothing(schema) -> bool:
    """Whether `schema` is false or negates a schema that asserts nothing (`not: {}`: ansible-lint's
    removed modules): no value is valid under it."""
    return schema is False or (
        isinstance(schema, dict) and "not" in schema and asserts_nothing(schema["not"])
    )


def searches(pattern, name: str, path: str, keyword: str, flags: int = 0) -> bool:
    """Whether `pattern` finds something in `name`, as Python's re (the validator's reading);
    an invalid schema where re cannot read the pattern."""
    found = may_search(pattern, name, flags)
    if found is None:
        raise GrammarError(
            f"invalid JSON Schema: {keyword} pattern {pattern!r} at {path} is not a "
            "valid regular expression"
        )
    return found


def may_search(pattern, name: str, flags: int = 0) -> bool | None:
    """searches() where an unreadable pattern is None (unknown), not an error."""
    try:
        return re.search(pattern, name, flags) is not None
    except (re.error, TypeError):
        return None


def _name_allowed(schema, name: str, path: str, refuse) -> bool:
    """Whether property name `name` is valid under propertyNames' `schema`."""
    if asserts_nothing(schema):
        return True
    if schema is False or not isinstance(schema, dict):
        return False
    checked = {"type", "pattern", "minLength", "maxLength", "enum", "const"}
    if not (schema.keys() & ASSERTIONS) <= checked or schema.get("type", "string") != "string":
        refuse("propertyNames", "only pattern, minLength, maxLength, enum and const are checked")
    return (
        ("pattern" not in schema or searches(schema["pattern"], name, path, "propertyNames"))
        and schema.get("minLength", 0) <= len(name) <= schema.get("maxLength", len(name))
        and name in schema.get("enum", [name])
        and name == schema.get("const", name)
    )


def need_type(node: dict, path: str, wanted: str) -> None:
    """A GrammarError when `node` has a type that is not `wanted`, the type its keywords need."""
    types = node.get("type", wanted)
    if wanted not in (types if isinstance(types, list) else [types]):
        refuse("type", path, f"it conflicts with the {wanted} keywords beside it")


def only_asserting(node: dict, path: str, allowed: set) -> None:
    """A GrammarError naming the first assertion of `node` outside `allowed`."""
    for key in node:
        if key in ASSERTIONS and key not in allowed:
            refuse(key, path, "outlines-core would ignore it here")

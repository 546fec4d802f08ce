"""What a schema's types and values are, as oneOf's exactness needs them (schema.one_of): the
types a schema accepts as written (`listed_kinds`) and those its rewrite generates
(`generated_kinds`, a subset), the only values it accepts (`only_values`), the types it accepts
whole (`whole_kinds`) and a type list less some (`without_kinds`). Integers are numbers
(`widened`)."""

from __future__ import annotations

from radixgen.grammar.schema.merge import split_by_type
from radixgen.grammar.schema.rules import asserts, is_type, value_key

MAX_DEPTH = 8  # nested schemas followed (options of options; in schema.one_of, nested properties)


def listed_kinds(node):
    """The JSON types a schema as written accepts; None: any (keywords like `properties` or
    `minLength` constrain one type and let every other type pass)."""
    if node is False:
        return []
    if isinstance(node, dict) and "type" in node:
        return node["type"] if isinstance(node["type"], list) else [node["type"]]
    return None


def generated_kinds(node):
    """The JSON types the rewrite of a schema generates (a subset of what it accepts); None:
    not known. `properties` alone generates objects; beside a `type` without object it is
    dropped, and beside a combination without a `type` the combination decides (with one, what
    is generated is valid, so of that type)."""
    values = only_values(node)
    if values is not None:
        return sorted({value_kind(v) for v in values})
    kinds = listed_kinds(node)
    if isinstance(node, dict) and split_by_type(node) is not None:
        return kinds  # one alternative per type: every type of the list is generated
    if isinstance(node, dict) and "properties" in node:
        if {"anyOf", "oneOf", "allOf", "$ref"} & set(node):
            return kinds
        if kinds is None or "object" in kinds:
            return ["object"]
    return kinds


def only_values(node, const_ignored: bool = False):
    """The only values a schema accepts (enum / const, of its `type` when it has one), None if it
    is not so restricted."""
    has_const = "const" in node and not const_ignored if isinstance(node, dict) else False
    if not isinstance(node, dict) or not (has_const or isinstance(node.get("enum"), list)):
        return None
    values = [node["const"]] if has_const else node["enum"]
    types = node.get("type")
    types = [types] if isinstance(types, str) else types
    if isinstance(types, list):
        values = [v for v in values if any(is_type(v, t) for t in types if isinstance(t, str))]
    return [value_key(v) for v in values]


def value_kind(key: tuple) -> str:
    return key[0]  # (value_key's first part is the JSON type's name)


def widened(kinds) -> set:
    """Integers are numbers: either kind overlaps the other."""
    kinds = set(kinds)
    return kinds | ({"integer", "number"} if kinds & {"integer", "number"} else set())


def only_options(node) -> list | None:
    """The options (a list) of a node that asserts nothing but one anyOf or oneOf, else None."""
    if (
        not isinstance(node, dict)
        or len({"anyOf", "oneOf"} & set(node)) != 1
        or asserts(node, ("anyOf", "oneOf"))
    ):
        return None
    options = node.get("anyOf", node.get("oneOf"))
    return options if isinstance(options, list) else None


def whole_kinds(node) -> set:
    """The types every value of which `node` accepts: its type list where it asserts nothing
    else; for a node that is only an anyOf or oneOf, the types of its options that assert only
    a type (under a oneOf, types no other option may accept: one with another type list)."""
    if isinstance(node, dict) and not asserts(node, ("type",)) and listed_kinds(node):
        return set(listed_kinds(node))
    options = only_options(node)
    if not options or not all(isinstance(o, dict) for o in options):
        return set()
    kinds: set = set()
    for i, option in enumerate(options):
        if asserts(option, ("type",)) or not listed_kinds(option):
            continue
        others = [o for j, o in enumerate(options) if j != i]
        if "anyOf" in node or all(listed_kinds(o) is not None for o in others):
            taken = (
                set().union(*(widened(listed_kinds(o)) for o in others))
                if "oneOf" in node
                else set()
            )
            kinds |= (
                set(listed_kinds(option)) - taken - ({"integer"} if "number" in taken else set())
            )
    return kinds


def without_kinds(node, shared: set):
    """`node` (a schema with a `type`) generating none of the types in `shared`: its type list
    less those, False when none is left; None when that cannot be said (no type; its integers
    shared but not its other numbers, which no type list can say)."""
    generated = generated_kinds(node) if isinstance(node, dict) else None
    if generated is not None and not widened(generated) & shared:
        return node
    listed = listed_kinds(node) if isinstance(node, dict) else None
    if listed is None or "integer" in shared and "number" in listed and "number" not in shared:
        return None
    kept = [kind for kind in listed if kind not in shared]
    return {**node, "type": kept} if kept else False


def option_kinds(node, readings, kinds_of, depth: int = 0):
    """The types of a node that is only an anyOf or a oneOf: its options' together (None when
    one is not known)."""
    options = only_options(node)
    if depth > MAX_DEPTH or options is None:
        return None
    kinds: set = set()
    for option in options:
        option = readings.loose(option)
        known = kinds_of(option) or option_kinds(option, readings, kinds_of, depth + 1)
        if known is None:
            return None
        kinds |= set(known)
    return sorted(kinds)

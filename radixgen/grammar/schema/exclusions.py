"""`not` of a value list (`"not": {"enum": [...]}` or `{"const": v}`: Angular's builders other than
the listed ones, installer success codes other than 0), rewritten without the `not`, exactly:

- beside an `enum` / `const`: the values left;
- on strings (nothing else asserted but `type`): a pattern that takes any string but those,
  `^(?!(?:v1|v2)$).*$`, which `regex.lookaround` writes out; with nothing else asserted at all
  (any value but those), the same strings (a subset);
- on integers or numbers: one alternative per interval between the excluded values, bounds
  exclusive at each (`minimum: 0` without 0 is `exclusiveMinimum: 0`).

Other `not`s, and strings with lengths, a pattern or a format beside such a `not`, are left for
the rewriter to refuse by name.

Names are excluded too: an object of free names whose `not` forbids names together, or whose
dependentRequired makes a name need others, never generates those names (a subset:
`forbidden_names_excluded`, `dependent_names_excluded`).
"""

from __future__ import annotations

import math

from radixgen.grammar.matcher import refuse
from radixgen.grammar.schema.rules import (
    asserts,
    dependent_names,
    forbidden_combinations,
    is_type,
    tightest,
    value_key,
)

_PATTERN_SPECIAL = frozenset("\\^$.|?*+()[]{}/-")
_NUMERIC_BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


def excluded_values_rewritten(node: dict, draft_4: bool, const_unknown: bool) -> dict:
    """`node` without a `not` of a value list where that can be written exactly, else as it was.
    `draft_4`: bounds are draft 4's (flags); `const_unknown`: validators ignore `const` (draft 4:
    `not: {const: v}` is `not: {}` there, so such nodes are left alone)."""
    excluded = _excluded(node.get("not"))
    if excluded is None or const_unknown and ("const" in node or "const" in node["not"]):
        return node
    rest = {k: v for k, v in node.items() if k != "not"}
    keys = {value_key(v) for v in excluded}
    if "enum" in rest or "const" in rest:
        if "enum" in rest and isinstance(rest["enum"], list):
            rest["enum"] = [v for v in rest["enum"] if value_key(v) not in keys]
            return rest if rest["enum"] else node  # (nothing left: refused as it was)
        return rest if "enum" not in rest and value_key(rest["const"]) not in keys else node
    if not asserts(
        rest
    ):  # any value but those (nbformat's unrecognized cell_type): strings but those, a subset
        written = excluded_values_rewritten({**node, "type": "string"}, draft_4, const_unknown)
        return node if "not" in written else written
    if rest.get("type") == "string" and not asserts(rest, ("type",)):
        strings = [v for v in excluded if isinstance(v, str)]
        if not all(plain_string(v) for v in strings):
            return node
        if not strings:
            return rest
        body = "|".join(map(literal_pattern, strings))
        return {**rest, "pattern": f"^(?!(?:{body})$).*$"}
    if (
        rest.get("type") in ("integer", "number")
        and not draft_4
        and not asserts(rest, ("type", "multipleOf", *_NUMERIC_BOUNDS))
    ):
        return _intervals(rest, excluded) or node
    return node


def _excluded(negated) -> list | None:
    """The values of a `not` that is only an enum or a const, else None."""
    if (
        not isinstance(negated, dict)
        or asserts(negated, ("enum", "const"))
        or ("enum" in negated) == ("const" in negated)
    ):
        return None
    values = negated["enum"] if "enum" in negated else [negated["const"]]
    return values if isinstance(values, list) else None


def literal_pattern(text: str) -> str:
    """A pattern that matches `text` literally (a plain_string)."""
    return "".join("\\" + c if c in _PATTERN_SPECIAL else c for c in text)


def plain_string(text: str) -> bool:
    """Whether a string can go into the pattern as literal characters (none JSON escapes)."""
    return all(c not in '"\\' and ord(c) >= 0x20 and not 0xD800 <= ord(c) <= 0xDFFF for c in text)


def _intervals(node: dict, excluded: list) -> dict | None:
    """`node` (an integer or number type with bounds) as an anyOf of the intervals between the
    excluded values within its bounds; None when a bound is no finite number."""
    integer = node["type"] == "integer"
    bounds = {k: node[k] for k in _NUMERIC_BOUNDS if k in node}
    if not all(
        isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b)
        for b in bounds.values()
    ):
        return None
    lo, lo_excl = tightest(bounds, "minimum", "exclusiveMinimum", max, False)
    hi, hi_excl = tightest(bounds, "maximum", "exclusiveMaximum", min, False)
    cuts = sorted(
        {
            v
            for v in excluded
            if is_type(v, node["type"])
            and isinstance(v, (int, float))
            and (lo is None or v > lo or (v == lo and not lo_excl))
            and (hi is None or v < hi or (v == hi and not hi_excl))
        }
    )
    if not cuts:  # (none within the bounds: `node`, without its `not` already)
        return node
    base = {k: v for k, v in node.items() if k not in _NUMERIC_BOUNDS}
    edges = [(lo, lo_excl)] + [(cut, True) for cut in cuts] + [(hi, hi_excl)]
    parts = []
    for (a, a_excl), (b, b_excl) in zip(edges, edges[1:]):
        if a is not None and b is not None and (a > b or (a == b and (a_excl or b_excl))):
            continue
        if (
            integer
            and a is not None
            and b is not None
            and (math.floor(a) + 1 if a_excl else math.ceil(a))
            > (math.ceil(b) - 1 if b_excl else math.floor(b))
        ):
            continue  # (no integer between two neighbouring excluded integers)
        part = dict(base)
        if a is not None:
            part["exclusiveMinimum" if a_excl else "minimum"] = a
        if b is not None:
            part["exclusiveMaximum" if b_excl else "maximum"] = b
        parts.append(part)
    if not parts:
        return None
    return (
        parts[0]
        if len(parts) == 1
        else {
            k: v
            for k, v in node.items()
            if k not in _NUMERIC_BOUNDS and k != "type" and k != "multipleOf"
        }
        | {"anyOf": parts}
    )


def dependent_names_excluded(node: dict, path: str) -> dict:
    """An object without `properties` whose dependentRequired (draft 7: `dependencies` with name
    lists) makes a name need others (CloudFormation's `KmsEncryptionContext`, a dictionary of any
    names: `{"dependencies": {"KmsEncryptionContext": ["KmsKeyId"]}}`): those names are never
    generated, so the rule always holds (a subset): its free names become `propertyNames: {"not":
    {"enum": [...]}}`, and a patternProperties pattern P, whose matches are the names generated,
    `^(?!(?:K1|K2)$)(?:P)`. Required names go to rewrite.objects' `rewrite_properties`
    (listed_name_rules)."""
    if node.get("required"):
        return node
    depends = dependent_names(node, path)
    if not depends:
        return node
    rest = {k: v for k, v in node.items() if k not in ("dependentRequired", "dependencies")}
    needing = sorted(k for k, v in depends.items() if v)
    keyword = next(k for k in ("dependentRequired", "dependencies") if k in node)
    return _names_never_generated(rest, needing, keyword, "a name that needs others", path)


def forbidden_names_excluded(node: dict, path: str) -> dict:
    """An object without `properties` or `required` whose `not` forbids names together
    (`not: {required: [...]}`, or an anyOf of such: Bitbucket Pipelines' caches, any cache name
    but "docker"): the first name of each combination is never generated, so no combination is
    ever whole (a subset), as dependent_names_excluded writes it. Objects with `properties` drop
    the name from them (schema.rules.forbidden_names_dropped)."""
    combos = forbidden_combinations(node.get("not"))
    if (
        combos is None
        or "properties" in node
        or node.get("required")
        or node.get("type", "object") not in ("object", ["object"])
    ):
        return node
    rest = {k: v for k, v in node.items() if k != "not"}
    return _names_never_generated(
        rest, sorted({names[0] for names in combos}), "not", "a name it forbids", path
    )


def _names_never_generated(node: dict, names: list, keyword: str, what: str, path: str) -> dict:
    """`node` (an object of free or pattern names) never generating any of `names`: its free names
    as `propertyNames: {"not": {"enum": names}}`; with patternProperties, whose first pattern P
    gives the names generated, that pattern as `^(?!(?:N1|N2)$)(?:P)`; as it is where no name
    is generated (maxProperties 0, additionalProperties false and no patterns) or none is given."""
    patterns = node.get("patternProperties")
    if (
        not names
        or node.get("maxProperties") == 0
        or (node.get("additionalProperties") is False and not patterns)
    ):
        return node
    if not all(plain_string(name) for name in names):
        refuse(keyword, path, f"{what} has characters JSON or a pattern would escape")
    if "propertyNames" in node:
        refuse(keyword, path, "it is not supported beside propertyNames")
    if not patterns:
        return {**node, "propertyNames": {"not": {"enum": names}}}
    if not isinstance(patterns, dict):
        return node  # (refused as malformed by the keyed object)
    first, *others = patterns.items()
    body = "|".join(map(literal_pattern, names))
    return {
        **node,
        "patternProperties": dict([(f"^(?!(?:{body})$)(?:{first[0]})", first[1]), *others]),
    }

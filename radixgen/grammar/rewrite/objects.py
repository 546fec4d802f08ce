"""The object rewrites of `rewrite.rewriter.SchemaRewriter`: listed properties (required ones, one
optional one demanded by minProperties, sets of them under a maxProperties) and objects without
listed properties. A mixin: the methods use the rewriter's `rewrite`, `_unless_empty` and
`_keyed_object` (rewrite.containers)."""

from __future__ import annotations

import itertools
import math

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema.exclusions import literal_pattern, plain_string
from radixgen.grammar.schema.merge import EMPTY, merge
from radixgen.grammar.schema.rules import (
    NothingValid,
    asserts_nothing,
    dependent_names,
    forbidden_combinations,
    listed_name_rules,
    need_type,
    only_asserting,
    only_objects,
    refuse,
    searches,
)

_PROPERTY_SETS = 64  # alternatives for an object with a maxProperties below its listed properties


class ObjectRewrites:
    def _properties(self, node: dict, path: str) -> dict:
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
        props, node = self._with_pattern_schemas(node, props, path)
        required = listed_name_rules(node, props, path)
        banned = [
            name for name, schema in props.items() if schema is False
        ]  # no value: never there
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
            new = self._unless_empty(schema, f"{path}.properties.{name}")
            if isinstance(new, NothingValid) and name in required:
                raise new
            if not isinstance(new, NothingValid):  # (no value is valid there: never generated)
                new_props[name] = new
        optional = [name for name in new_props if name not in required]
        least = node.get("minProperties", 0)
        if node.get("maxProperties", math.inf) < len(new_props):
            return self._few_properties(
                node, path, new_props, list(dict.fromkeys(required)), optional
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

    def _with_pattern_schemas(self, node: dict, props: dict, path: str) -> tuple[dict, dict]:
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
                    listed, matched = self._resolved(folded[name]), self._resolved(schema)
                    if listed is None or matched is None:
                        return props, node
                    empty = listed is EMPTY or matched is EMPTY
                    both = EMPTY if empty else merge(listed, matched, self._resolved)
                    if both is None:
                        return props, node
                    folded[name] = False if both is EMPTY else both
        return folded, {k: v for k, v in node.items() if k != "patternProperties"}

    def _few_properties(
        self, node: dict, path: str, props: dict, required: list, optional: list
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

    def _type_object(self, node: dict, path: str) -> dict:
        node = _dependent_names_excluded(node, path)
        if "patternProperties" in node or "propertyNames" in node:
            return self._keyed_object(node, path)
        if node.get("required"):  # the required names, generated with additionalProperties' schema
            return self._properties({**node, "properties": {}}, path)
        if node.get("minProperties", 0) > node.get("maxProperties", math.inf):
            refuse(
                "minProperties", path, "it exceeds maxProperties: no object is valid", NothingValid
            )
        if node.get("minProperties", 0) > 1:
            refuse("minProperties", path, "values above 1 need properties (keys could repeat)")
        if node.get("maxProperties", 0) > 0 and node.get("additionalProperties", True) is not False:
            # any names, at most that many: a keyed object whose names are any string
            return self._keyed_object({**node, "propertyNames": {"type": "string"}}, path)
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
            new["additionalProperties"] = self.rewrite(extra, f"{path}.additionalProperties")
        return new


def _dependent_names_excluded(node: dict, path: str) -> dict:
    """An object without `properties` whose dependentRequired (draft 7: `dependencies` with name
    lists) makes a name need others (CloudFormation's `KmsEncryptionContext`, a dictionary of any
    names: `{"dependencies": {"KmsEncryptionContext": ["KmsKeyId"]}}`): those names are never
    generated, so the rule always holds (a subset): its free names become `propertyNames: {"not":
    {"enum": [...]}}`, and a patternProperties pattern P, whose matches are the names generated,
    `^(?!(?:K1|K2)$)(?:P)`. Required names go to `_properties` (listed_name_rules)."""
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
    ever whole (a subset), as _dependent_names_excluded writes it. Objects with `properties` drop
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

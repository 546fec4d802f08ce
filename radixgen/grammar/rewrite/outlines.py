"""The rewritten schema (rewrite.rewriter's output) as outlines-core takes it: the schema a local
`$ref` names (`ref_target`), unconstrained containers kept shallow (`bound_any_depth`), and its
regex (`outlines_regex`, refused first when too large)."""

from __future__ import annotations

import json

from outlines_core.json_schema import build_regex_from_schema

from radixgen.grammar.index.size_budget import SchemaRegexSize, check_regex_size
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema.refs import MISSING, follow_pointer, pointer_parts

OUTLINES_REF_DEPTH = 64  # the $ref nesting outlines-core is told to expand; deeper nesting is unrolled (rewrite.unroll)
ANY_VALUE_DEPTH = 1  # nesting allowed inside objects/arrays whose contents are unconstrained
NODE_BUDGET = 200_000  # schema nodes one walk of a rewritten schema visits at most


def outlines_regex(schema: dict, whitespace: str) -> str:
    """outlines-core's regex of a rewritten schema, refused first when its estimated size passes
    REGEX_BUDGET: outlines-core copies a subschema into every place that uses it (an object
    without required properties repeats each property's regex once per later property), and on
    sizes of hundreds of megabytes its allocation fails by aborting the process."""
    check_regex_size(SchemaRegexSize(schema, ref_target, OUTLINES_REF_DEPTH).of(schema))
    try:
        return build_regex_from_schema(json.dumps(schema), whitespace, OUTLINES_REF_DEPTH)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise GrammarError(f"cannot compile json_schema: {exc}") from None


def bound_any_depth(node) -> None:
    """Give unconstrained objects/arrays outlines-core's `depth` (its default, 2, makes the
    automaton of a plain {"type": "object"} take seconds to build)."""
    if isinstance(node, dict):
        types = node.get("type")
        if types in ("object", "array") and not (
            {"properties", "items", "additionalProperties"} & set(node)
        ):
            node["depth"] = ANY_VALUE_DEPTH
        for value in node.values():
            bound_any_depth(value)
    elif isinstance(node, list):
        for value in node:
            bound_any_depth(value)


def ref_target(root, ref: str):
    """The rewritten schema at `ref`: the root or a $defs / definitions member, the only places
    hoist_deep_refs leaves references to (the rewriter keeps them where they were)."""
    parts = pointer_parts(ref)
    if (
        parts is None
        or len(parts) not in (0, 2)
        or (parts and parts[0] not in ("$defs", "definitions"))
    ):
        raise GrammarError(f"$ref {ref!r} is not supported here (only the root and $defs members)")
    node = follow_pointer(root, parts)
    if node is MISSING:
        raise GrammarError(f"$ref {ref!r} does not resolve in the rewritten schema")
    return node

"""The walk of a schema rewrite: each node checked, normalized (schema.merge, conditionals,
exclusions) and handed to the handler of its first keyword in `state.handlers`'s order
(rewrite.rewriter.HANDLERS); the handlers call `rewrite` on their subschemas. Attempts that may
fail (`first_enforceable`, `unless_empty`) undo what they recorded."""

from __future__ import annotations

import copy
from functools import partial

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.state import RewriteState, as_validators_read, resolved
from radixgen.grammar.schema.conditionals import expand_conditionals
from radixgen.grammar.schema.exclusions import excluded_values_rewritten, forbidden_names_excluded
from radixgen.grammar.schema.merge import (
    EMPTY,
    implied_type,
    normalize,
    split_by_type,
    typed_keywords,
)
from radixgen.grammar.schema.rules import (
    ASSERTIONS,
    NothingValid,
    accepts_nothing,
    asserts,
    check_counts,
    check_keyword_types,
    forbidden_names_dropped,
    refuse,
)

# schema nodes one rewrite visits at most: a draft 3-7 `$ref` with keywords beside it is rewritten
# twice when the first reading cannot be enforced, which nested could take exponential work
REWRITE_BUDGET = 100_000
# any JSON value, with unconstrained containers kept shallow (outlines-core's own expansion of
# {} nests them 2 deep, which makes the automaton take seconds to build); `depth` is its keyword
ANY_VALUE = {
    "anyOf": [
        {"type": "boolean"},
        {"type": "null"},
        {"type": "number"},
        {"type": "string"},
        {"type": "array", "depth": 1},
        {"type": "object", "depth": 1},
    ]
}


def rewrite(state: RewriteState, node, path: str = "$"):
    """The rewrite of schema `node` at instance path `path` (GrammarError naming what cannot be
    enforced; NothingValid where no value is valid)."""
    if node is True:
        return copy.deepcopy(ANY_VALUE)
    if node is False:
        raise NothingValid(f"the schema at {path} is false: no value is valid")
    if accepts_nothing(node):
        refuse(
            "not", path, "it negates a schema every value meets: no value is valid", NothingValid
        )
    if not isinstance(node, dict):
        raise GrammarError(f"schema at {path} must be an object or true, got {node!r}")
    state.rewrites += 1
    if state.rewrites > REWRITE_BUDGET:
        raise GrammarError(
            f"json_schema expands to too large a grammar (more than {REWRITE_BUDGET} "
            "schema nodes to rewrite)"
        )
    if state.draft_3_to_7 and isinstance(node.get("items"), list):
        node = _as_prefix_items(node)
    if state.ref_fallback and "$ref" in node and asserts(node, ("$ref",)):
        # drafts 3-7 ignore the keywords beside a $ref; a validator that does not know the
        # $schema URI (jsonschema reads https://json-schema.org/draft-07/schema as 2020-12)
        # applies them. Output valid under both readings where they can be enforced:
        alone = {k: v for k, v in node.items() if k in ("$ref", "$defs", "definitions")}
        return first_enforceable(
            state,
            lambda: _rewrite_node(state, node, path),
            lambda: _rewrite_node(state, alone, path),
        )
    return _rewrite_node(state, node, path)


def _as_prefix_items(node: dict) -> dict:
    """A drafts 3-7 node whose items array is 2020-12's prefixItems (additionalItems its
    items)."""
    tuple_form = {
        "prefixItems": node["items"],
        **({"items": node["additionalItems"]} if "additionalItems" in node else {}),
    }
    return {
        **{k: v for k, v in node.items() if k not in ("items", "additionalItems")},
        **tuple_form,
    }


def _rewrite_node(state: RewriteState, node: dict, path: str) -> dict:
    node, inlined = _normalized(state, node, path)
    present = [k for k in node if k in ASSERTIONS]
    branch = next((keyword for keyword in state.handlers if keyword in node), None)
    if branch is None and present and implied_type(node):
        node, branch = {**node, "type": implied_type(node)}, "type"  # its keywords' one type
    if branch is None:
        if present:
            several = (
                " (its keywords constrain values of several types)" if typed_keywords(node) else ""
            )
            refuse(
                present[0],
                path,
                f"it needs a type, properties, enum, const or $ref beside it{several}",
            )
        return with_defs(state, node, copy.deepcopy(ANY_VALUE), path)
    check_counts(node, path)
    state.inlining.extend(inlined)
    try:
        return with_defs(state, node, state.handlers[branch](state, node, path), path)
    finally:
        del state.inlining[len(state.inlining) - len(inlined) :]


def _normalized(state: RewriteState, node: dict, path: str) -> tuple[dict, list]:
    """(node checked, its conditionals expanded, its branches merged, names and values it
    excludes rewritten; the $refs the merge inlined)."""
    check_keyword_types(node, path)
    node = expand_conditionals(node, partial(resolved, state), partial(as_validators_read, state))
    written = node
    node, inlined = normalize(
        node, partial(resolved, state), tuple(state.inlining), partial(as_validators_read, state)
    )
    if node is EMPTY:
        _refuse_empty(written, path)
    if node is not written:
        check_keyword_types(node, path)  # merged members were not checked
    node = forbidden_names_excluded(
        forbidden_names_dropped(_without_idle_keywords(node), path), path
    )
    node = excluded_values_rewritten(node, state.draft_4, state.const_unknown)
    return split_by_type(node) or node, inlined


def _refuse_empty(written: dict, path: str) -> None:
    """Refuse node `written`, whose branches merged into nothing, naming them."""
    keys = [k for k in ("anyOf", "oneOf", "allOf", "$ref") if k in written]
    what = "no alternative meets" if keys[0] in ("anyOf", "oneOf") else "it does not meet"
    if len(keys) > 1:  # (which of them leaves nothing is not told apart here)
        what = f"{' and '.join(keys)} together do not meet each other or"
    refuse(
        keys[0],
        path,
        f"{what} the keywords beside it (e.g. their types do not meet): no value is valid",
        NothingValid,
    )


def first_enforceable(state: RewriteState, *attempts):
    """The result of the first attempt that raises no GrammarError, with what the failed ones
    recorded undone; the last attempt's error when all fail."""
    for attempt in attempts[:-1]:
        saved = state.snapshot()
        try:
            return attempt()
        except GrammarError:
            state.restore(saved)
    return attempts[-1]()


def unless_empty(state: RewriteState, schema, path: str):
    """The rewrite of `schema`, or the NothingValid it raised with what it recorded undone."""
    saved = state.snapshot()
    try:
        return rewrite(state, schema, path)
    except NothingValid as exc:
        state.restore(saved)
        return exc


def with_defs(state: RewriteState, node: dict, new: dict, path: str) -> dict:
    """Keep (rewritten) $defs/definitions where they were, so $ref paths stay valid."""
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            # a definition no value meets (false, `not: {}`): its references are empty where
            # they are (branches.rewrite_ref), so it is never used; any value stands in for it
            new[key] = {
                k: copy.deepcopy(ANY_VALUE)
                if accepts_nothing(v)
                else rewrite(state, v, f"{path}.{key}.{k}")
                for k, v in node[key].items()
            }
    return new


# patterns every name matches (a search: "^.*$" fails on a name with a line break in it)
_MATCH_ALL = ("", ".*", "^.*", ".*$")


def _without_idle_keywords(node: dict) -> dict:
    """`node` without keywords that constrain nothing here, in outlines-core's terms:
    `additionalItems` where `items` is not an array (it applies to nothing then), propertyNames
    every string satisfies, and a sole match-all patternProperties entry on an object without
    properties (every additional property follows its schema: it is additionalProperties)."""
    drop = set()
    if "additionalItems" in node and not isinstance(node.get("items"), list):
        drop.add("additionalItems")
    if node.get("propertyNames") in (True, {}, {"type": "string"}):
        drop.add("propertyNames")
    patterns = node.get("patternProperties")
    if patterns == {}:
        drop.add("patternProperties")
    elif (
        isinstance(patterns, dict)
        and len(patterns) == 1
        and next(iter(patterns)) in _MATCH_ALL
        and "properties" not in node
    ):
        return {
            **{k: v for k, v in node.items() if k not in drop | {"patternProperties"}},
            "additionalProperties": next(iter(patterns.values())),
        }
    return {k: v for k, v in node.items() if k not in drop} if drop else node

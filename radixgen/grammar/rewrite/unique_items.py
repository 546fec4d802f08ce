"""uniqueItems (`rewrite_unique_items`, for rewrite.type_keyword's arrays): items from a finite set
as one regex (each value at most once, in the set's order), or items `UniqueGuard` keeps unique
beside the regex (strings and integers, spelt one way per value: rewrite.guarded; objects by one
property: rewrite.unique_keys)."""

from __future__ import annotations

from collections import Counter

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.regex.leaves import increasing_subsequence_regex, json_literal
from radixgen.grammar.rewrite.guarded import (
    ITEMS_GUARD_MIN,
    counted_items,
    placeholder_item,
    placeholder_key,
    string_item,
)
from radixgen.grammar.rewrite.state import RewriteState, resolve_chain, resolved
from radixgen.grammar.rewrite.unique_keys import unique_by_key
from radixgen.grammar.rewrite.walk import first_enforceable, rewrite
from radixgen.grammar.schema.kinds import listed_kinds, only_options
from radixgen.grammar.schema.rules import asserts, value_key
from radixgen.grammar.unique.values import CANONICAL_INTEGER, integer_grows

# uniqueItems over a finite set: distinct values x their characters at most (the automaton of
# its increasing-subsequence regex builds in ~2 s per 100,000; 865 values took over 25 minutes)
UNIQUE_SET_BUDGET = 300_000


def rewrite_unique_items(state: RewriteState, node: dict, path: str) -> dict:
    """uniqueItems over items from a finite set of scalars (enum, const, boolean, null:
    pydantic's set[Literal[...]] or set[SomeEnum]): each value at most once, in the set's
    order, which is a regular language. Free strings and integers go to `_unique_guarded`."""
    items = node.get("items", True)
    ref = (
        items.get("$ref")
        if isinstance(items, dict) and isinstance(items.get("$ref"), str)
        else None
    )
    if ref in state.inlining:  # (the items are inlined: they would be again, without end)
        refuse(
            "uniqueItems",
            path,
            f"its items ({ref}) hold such an array again (a recursive schema)",
        )
    state.inlining.extend([ref] if ref else [])
    try:
        if state.ref_fallback and ref:  # as in rewrite: both readings
            return first_enforceable(
                state,
                lambda: _unique_items_of(state, resolved(state, items), node, path),
                lambda: _unique_items_of(state, resolve_chain(state, items), node, path),
            )
        return _unique_items_of(state, resolved(state, items), node, path)
    finally:
        del state.inlining[len(state.inlining) - bool(ref) :]


def _unique_items_of(state: RewriteState, items, node: dict, path: str) -> dict:
    if items is True or isinstance(items, dict) and not asserts(items):
        # items of any type (`{"type": "array", "uniqueItems": true}`): unique strings, a
        # subset spelt one way per value (objects are not: their names can come in any order)
        items = {"type": "string"}
    if (
        isinstance(items, dict)
        and items.get("type") == "number"
        and not {"enum", "const"} & set(items)
    ):
        # numbers (pydantic's set[float]) kept unique as integers where they can be: a subset,
        # spelt one way per value (decimals are not: 0.1 and 0.10000000000000001 are one float)
        return first_enforceable(
            state,
            lambda: _unique_values(state, items | {"type": "integer"}, node, path),
            lambda: _unique_values(state, items, node, path),
        )
    if not _may_be_strings(items):
        return _unique_values(state, items, node, path)
    try:  # items of several types (`["string", "object"]`, a oneOf of a string and an object):
        # where they cannot be kept unique as they are, their strings alone (a subset)
        strings = {"type": "string", "allOf": [items]}
        return first_enforceable(
            state,
            lambda: _unique_values(state, items, node, path),
            lambda: _unique_values(state, strings, node, path),
        )
    except GrammarError:
        return _unique_values(state, items, node, path)  # (refused: the items' own reason)


def _unique_values(state: RewriteState, items, node: dict, path: str) -> dict:
    new = (
        _one_alternative(rewrite(state, items, f"{path}.items"))
        if isinstance(items, dict)
        else None
    )
    kind = new.get("type") if new else None
    strings = string_item(state, items, new, node, path)
    if strings is not None:
        return _unique_guarded(state, *strings)
    if kind == "integer" and set(new) == {"type"}:
        return _unique_guarded(state, node, "integer", CANONICAL_INTEGER)
    item = placeholder_item(state, items, new, "integer")
    if item is not None and integer_grows(item):  # integers from a bound >= 0 up
        return _unique_guarded(state, node, "integer", item)
    if isinstance(items, dict) and new and (kind == "object" or set(new) in ({"anyOf"}, {"oneOf"})):
        keyed = unique_by_key(state, new, node, path)
        if keyed is not None:
            return keyed
    values = {"boolean": [True, False], "null": [None]}.get(kind) if isinstance(kind, str) else None
    values = new.get("enum", values) if new else None
    if values is None:
        values = _option_values(
            new, state.placeholders
        )  # `oneOf: [{"enum": ["require"]}, {"enum": ...}]`
    if values is None:
        refuse(
            "uniqueItems",
            path,
            "uniqueness is only enforced over items from a finite set (enum, const, "
            "boolean), over strings (free, with a maxLength, a pattern or a format), over "
            "integers (and numbers, generated as integers) with no upper bound (from 0 or "
            "more up), or over objects with a required string property; not over other "
            "integers, numbers, arrays or other objects (those with minItems 0 or 1 are "
            "generated with at most one item)",
        )
    distinct = list({value_key(v): v for v in reversed(values)}.values())[::-1]
    least, most = node.get("minItems", 0), node.get("maxItems", len(distinct))
    literals = [json_literal(v) for v in distinct]
    too_large = len(literals) * sum(map(len, literals)) > UNIQUE_SET_BUDGET
    if (least > 1 or most < len(distinct) or too_large) and all(
        isinstance(v, str) for v in distinct
    ):
        # strings from a set: the guard keeps them unique (and counts what is left)
        return _unique_guarded(state, *counted_items(f"(?:{'|'.join(literals)})", node, path))
    if too_large:
        refuse(
            "uniqueItems",
            path,
            f"a set of {len(literals)} distinct values is too large to enforce "
            f"(values x their characters must stay within {UNIQUE_SET_BUDGET:,}: its automaton "
            "takes seconds to build per 100,000)",
        )
    if least > 1 or most < len(distinct):
        refuse(
            "uniqueItems",
            path,
            "with uniqueItems, only minItems 0 or 1 and no maxItems "
            "below the number of distinct values are supported (or a set of strings only)",
        )
    ws = state.whitespace
    body = increasing_subsequence_regex(literals, f"{ws},{ws}", nonempty=least == 1)
    placeholder = state.placeholder(rf"\[{ws}{body}{ws}\]", quoted=False)
    state.literal_arrays[f'"{placeholder["const"]}"'] = [distinct]
    return placeholder


def _unique_guarded(state: RewriteState, node: dict, kind, item: str) -> dict:
    """uniqueItems kept by `UniqueGuard` (strings, bounded strings, integers, objects by a
    property): the regex spells each item one way (`item`) and counts them; the guard bans
    repeats."""
    ws = state.whitespace

    def regex(least: int, most) -> str:
        if most == 0:
            return rf"\[{ws}{ws}\]"
        upper = "" if most is None else most - 1
        body = f"{item}(?:{ws},{ws}{item}){{{max(least - 1, 0)},{upper}}}"
        return rf"\[{ws}{body if least > 0 else f'(?:{body})?'}{ws}\]"

    least, most = node.get("minItems", 0), node.get("maxItems")
    if most is None or most < ITEMS_GUARD_MIN:
        placeholder = state.placeholder(regex(least, most), quoted=False)
    else:  # as in type_keyword.rewrite_array: the guard counts the items
        placeholder = state.placeholder(regex(least, None), quoted=False)
        state.counted_arrays[f'"{placeholder["const"]}"'] = (most, regex(least, most))
    state.unique_arrays[f'"{placeholder["const"]}"'] = kind
    return placeholder


# ------------------------------------------------------------ helpers


def _one_alternative(new):
    """Rewritten schema `new`, or its one alternative where it is an anyOf or oneOf of one."""
    while (options := only_options(new)) is not None and len(options) == 1:
        new = options[0]
    return new


def _option_values(new, placeholders: dict) -> list | None:
    """The values of rewritten schema `new` when it is an anyOf / oneOf of enum or const options
    only (not placeholders: their consts stand for regexes; under a oneOf, a value two options
    list is valid under neither), else None."""
    options = only_options(new)
    if options is None:
        return None
    lists = []
    for option in options:
        if (
            not (
                isinstance(option, dict)
                and set(option) in ({"enum"}, {"const"})
                and isinstance(option.get("enum", []), list)
            )
            or placeholder_key(option) in placeholders
        ):
            return None
        lists.append(option["enum"] if "enum" in option else [option["const"]])
    if "anyOf" in new:
        return [value for listed in lists for value in listed]
    listed_by = Counter(k for listed in lists for k in {value_key(value) for value in listed})
    return [value for listed in lists for value in listed if listed_by[value_key(value)] == 1]


def _may_be_strings(items) -> bool:
    """Whether item schema `items` may take strings and other values too (no type, or a list of
    types with "string" in it)."""
    kinds = listed_kinds(items)
    return kinds is None or "string" in kinds and len(kinds) > 1

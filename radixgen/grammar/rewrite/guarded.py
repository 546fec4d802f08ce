"""What a rewrite leaves to `UniqueGuard` beside the regex: arrays whose long maxItems the guard
counts (`counted`, marked COUNTED) and unique string items (`string_item`, `counted_items`: free
strings, strings with a maxLength, patterns and formats, each spelt one way per value)."""

from __future__ import annotations

from radixgen.grammar.matcher import refuse
from radixgen.grammar.rewrite.state import RewriteState
from radixgen.grammar.unique.values import (
    BOUNDED_ITEM_MAX,
    bounded_string_regex,
    canonical_string_regex,
    grows_wherever_it_closes,
    item_counts,
)

ITEMS_GUARD_MIN = 16  # arrays with a maxItems from here on are counted by the guard
COUNTED = "x-radixgen-counted"  # marks an array whose maxItems (the value) the guard keeps
STRING_CHAR = r'(?:[^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])'  # one character of a JSON string
FREE_STRING = f"{STRING_CHAR}*"  # the regex of a length-guarded string without a pattern
# unique bounded strings: fewer distinct values than this cap the array's maxItems (more items
# than this never fit a context window)
BOUNDED_VALUES_CAP = 10**7


def counted(state: RewriteState, new: dict) -> dict:
    """Array `new` with a maxItems of ITEMS_GUARD_MIN or more left to the guard: a counted
    repeat costs the automaton a copy of the item per count (json_schema restores maxItems
    where another array can appear at the same place). minItems stays in the regex: with
    whitespace allowed after an item only ']' follows it, so a guard could not refuse ']'."""
    most = new.get("maxItems")
    if most is not None and most >= ITEMS_GUARD_MIN:
        del new["maxItems"]
        new[COUNTED] = most
        state.counted_nodes += 1
    return new


def string_item(state: RewriteState, items, new, node: dict, path: str) -> tuple | None:
    """(array node, item kind, item regex) of unique string items the guard can keep, else
    None. Each value is spelt one way, so two items are equal exactly when their texts are:
    - free strings (pydantic's set[str]) and patterns or formats that can take another
      character wherever they can close: kind "string", any prefix can still become a new value;
    - strings with a maxLength (generated in printable ASCII, a subset), and patterns or
      formats that can run out of values: kind ("bounded", item regex), the guard counts
      what each prefix can still become (`ItemCounts`)."""
    if not isinstance(new, dict):
        return None
    if new.get("type") == "string" and set(new) <= {"type", "minLength"}:
        return node, "string", canonical_string_regex(new.get("minLength", 0))
    key = placeholder_key(new)
    if _guarded_pattern(state, key):
        # a pattern under a length guard: back to its counted regex everywhere, which the
        # guard counts as the item (the guard keeps no length inside a unique item)
        state.placeholders[key] = state.length_strings.pop(key)[2]
    bounds = _string_bounds(state, new)
    if bounds is not None:
        least, most = bounds[0], min(bounds[1], BOUNDED_ITEM_MAX)
        if most < least:
            refuse(
                "uniqueItems",
                path,
                f"items of at most {BOUNDED_ITEM_MAX} characters are generated "
                "and minLength is above that",
            )
        return counted_items(bounded_string_regex(least, most), node, path)
    item = placeholder_item(state, items, new, "string")
    if item is None or not item.startswith('"'):
        return None
    if grows_wherever_it_closes(item):
        return node, "string", item
    return counted_items(item, node, path)


def counted_items(item: str, node: dict, path: str) -> tuple:
    """(array node, ("bounded", item), item) for unique strings of item regex `item`: the
    array's maxItems capped at how many values there are, when they are few enough to run
    out of (fewer than BOUNDED_VALUES_CAP: more items never fit a context window)."""
    total = item_counts(item).total
    if total is not None:
        if node.get("minItems", 0) > total:
            refuse(
                "uniqueItems",
                path,
                f"minItems asks for more than the {total} distinct values generated",
            )
        if total < BOUNDED_VALUES_CAP and node.get("maxItems", total + 1) > total:
            node = {**node, "maxItems": total}  # so an array never runs out of new values
    return node, ("bounded", item), item


def string_placeholder(state: RewriteState, new: dict) -> bool:
    """Whether rewritten schema `new` is a placeholder for a string (a pattern, a format)."""
    key = placeholder_key(new)
    return key in state.placeholders and state.placeholders[key].startswith('"')


def _string_bounds(state: RewriteState, new: dict | None) -> tuple[int, int] | None:
    """(minLength, maxLength) of a rewritten string schema with a maxLength and nothing else
    (a counted regex, or a length-guarded placeholder), else None."""
    if not isinstance(new, dict):
        return None
    if (
        new.get("type") == "string"
        and "maxLength" in new
        and set(new) <= {"type", "minLength", "maxLength"}
    ):
        return new.get("minLength", 0), new["maxLength"]
    key = placeholder_key(new)
    plain = key in state.length_strings and not _guarded_pattern(state, key)
    return state.length_strings[key][:2] if plain else None


def _guarded_pattern(state: RewriteState, key: str | None) -> bool:
    """Whether placeholder `key` is a pattern whose length the guard keeps (not a free
    string)."""
    return key in state.length_strings and state.placeholders[key] != f'"{FREE_STRING}"'


def placeholder_item(state: RewriteState, items, new: dict, kind: str) -> str | None:
    """The item regex of an item of type `kind` the rewrite made a placeholder for (a string
    pattern or format, with its quotes; numeric bounds), else None."""
    key = placeholder_key(new)
    if (
        not (isinstance(items, dict) and items.get("type") == kind and key in state.placeholders)
        or key in state.length_strings
    ):
        return None
    return state.placeholders[key]


def placeholder_key(new) -> str | None:
    """The `placeholders` key of rewritten schema `new` when it is a placeholder const, else
    None."""
    return f'"{new["const"]}"' if isinstance(new, dict) and set(new) == {"const"} else None

"""The collection rewrites of `rewrite.rewriter.SchemaRewriter`: free-form objects whose names
follow rules (keyed objects) and uniqueItems (a finite set as a regex, or items `UniqueGuard`
keeps unique; objects kept unique by one property: rewrite.unique_keys). A mixin: the methods use
the rewriter's `_unique_by_key` (rewrite.unique_keys), `rewrite`, `_placeholder`, `_resolved`,
`_resolve_chain`, `_first_enforceable` and its records (`placeholders`, `keyed_objects`,
`unique_arrays`, `counted_arrays`, `literal_arrays`, `length_strings`)."""

from __future__ import annotations

import math
import re
from collections import Counter

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.regex.leaves import increasing_subsequence_regex, json_literal
from radixgen.grammar.schema.kinds import listed_kinds, only_options
from radixgen.grammar.schema.rules import NothingValid, asserts, value_key
from radixgen.grammar.unique.values import (
    BOUNDED_ITEM_MAX,
    CANONICAL_INTEGER,
    bounded_string_regex,
    canonical_string_regex,
    grows_wherever_it_closes,
    integer_grows,
    item_counts,
)

ITEMS_GUARD_MIN = 16  # arrays with a maxItems from here on are counted by the guard
COUNTED = "x-radixgen-counted"  # marks an array whose maxItems (the value) the guard keeps
KEYED = "x-radixgen-keyed"  # marks the carrier of a keyed object (CollectionRewrites._keyed_object)
STRING_CHAR = r'(?:[^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])'  # one character of a JSON string
FREE_STRING = f"{STRING_CHAR}*"  # the regex of a length-guarded string without a pattern
# uniqueItems over a finite set: distinct values x their characters at most (the automaton of
# its increasing-subsequence regex builds in ~2 s per 100,000; 865 values took over 25 minutes)
UNIQUE_SET_BUDGET = 300_000
# unique bounded strings: fewer distinct values than this cap the array's maxItems (more items
# than this never fit a context window)
BOUNDED_VALUES_CAP = 10**7


class CollectionRewrites:
    def _keyed_object(self, node: dict, path: str) -> dict:
        """A free-form object whose names follow `propertyNames` (pydantic's dict[Literal[...], X]
        or dict[constr(pattern=...), X]) or the first `patternProperties` pattern (its names match
        it; other names are never generated; values meet every pattern's schema). Returned as a carrier, {"type": "object",
        "additionalProperties": <values>, KEYED: <placeholder>}, so references and recursion in
        the values are handled as elsewhere; json_schema then writes the object's regex."""
        patterns = node.get("patternProperties", {})
        if "propertyNames" in node and patterns:
            refuse("patternProperties", path, "it is not supported together with propertyNames")
        if not isinstance(patterns, dict):
            refuse("patternProperties", path, "it must be an object")
        if isinstance(node.get("type"), list) and len(node["type"]) > 1:
            refuse(
                next(k for k in ("propertyNames", "patternProperties") if k in node),
                path,
                "it is only supported with the single type object",
            )
        if node.get("required"):
            refuse(
                "required", path, "it is not supported on an object whose names follow a pattern"
            )
        if node.get("minProperties", 0) > node.get("maxProperties", math.inf):
            refuse(
                "minProperties", path, "it exceeds maxProperties: no object is valid", NothingValid
            )
        if node.get("minProperties", 0) > 1:
            refuse("minProperties", path, "values above 1 need properties (keys could repeat)")
        if patterns:
            # names follow the first pattern; a name may match the others too, so its value meets
            # every pattern's schema (SageMaker's Environment: `[\S\s]*` and `[a-zA-Z_]\w*`): a
            # subset where a name matches fewer of them
            pattern, values = next(iter(patterns.items()))
            if len(patterns) > 1:
                values = {"allOf": list(patterns.values())}
            names = self._name_schema({"pattern": pattern}, f"{path}.patternProperties")
        else:
            values = node.get("additionalProperties", True)
            names = self._name_schema(node["propertyNames"], f"{path}.propertyNames")
        if (
            values is False or node.get("maxProperties") == 0
        ):  # no name may be there: the empty object
            if node.get("minProperties"):
                refuse("minProperties", path, "no property is allowed")
            return {"type": "object", "maxProperties": 0}
        try:
            values = self.rewrite(values, f"{path}.additionalProperties")
        except GrammarError as exc:
            if len(patterns) < 2:
                raise
            refuse(
                "patternProperties",
                path,
                "several patterns may apply to one name, and its value "
                f"would have to meet all their schemas, which cannot be enforced here ({exc})",
            )
        # after the values' placeholders, which its regex holds (json_schema replaces it first)
        carrier = self._placeholder("", quoted=False)["const"]  # its regex: rewrite.keyed_objects
        # (a name written twice counts once after parsing: maxProperties bounds the pairs written)
        self.keyed_objects[f'"{carrier}"'] = (
            self._string_regex(names, path),
            node.get("minProperties", 0) == 1,
            node.get("maxProperties"),
        )
        return {"type": "object", "additionalProperties": values, KEYED: carrier}

    def _name_schema(self, schema, path: str) -> dict:
        """propertyNames' schema, rewritten as a string schema (names are strings)."""
        if isinstance(schema, dict) and "$ref" in schema:  # pydantic's dict[SomeEnum, X]
            schema = self._resolved(schema)
        if not isinstance(schema, dict) or schema.get("type", "string") != "string":
            refuse("propertyNames", path, "only a string schema is supported")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not re.search(r"(?<!\\)(?:\\\\)*\$$", pattern):
            # a pattern matches names that contain a match: one open at its end takes any rest
            # (a name is not one match repeated: {"x-": 1, "x-": 2} is no use); where that cannot
            # be written (an alternative anchored at its end), the matches alone
            return self._first_enforceable(
                lambda: self.rewrite(
                    {**schema, "type": "string", "pattern": f"{pattern}(?:.*)"}, path
                ),
                lambda: self._name_strings(schema, path),
            )
        return self._name_strings(schema, path)

    def _name_strings(self, schema: dict, path: str) -> dict:
        names = self.rewrite({**schema, "type": "string"}, path)
        if "enum" in names:
            names["enum"] = [v for v in names["enum"] if isinstance(v, str)]
            if not names["enum"]:
                refuse("propertyNames", path, "no value is a string")
        self._string_regex(names, path)  # refuses what it cannot write
        return names

    def _string_regex(self, rewritten: dict, path: str) -> str:
        """The regex of a rewritten string schema (with its quotes): an enum, a const (or the
        placeholder of a pattern or format), length bounds, or anyOf over those."""
        if len(rewritten) == 1 and next(iter(rewritten)) in ("anyOf", "oneOf"):  # (oneOf: disjoint)
            branches = next(iter(rewritten.values()))
            return "(?:" + "|".join(self._string_regex(b, path) for b in branches) + ")"
        if "enum" in rewritten:
            return "(?:" + "|".join(json_literal(v) for v in rewritten["enum"]) + ")"
        if "const" in rewritten:
            name = f'"{rewritten["const"]}"'
            if name in self.length_strings:  # names are not guarded: the counted regex
                return self.length_strings[name][2]
            return self.placeholders.get(name, json_literal(rewritten["const"]))
        if rewritten.get("type") != "string" or set(rewritten) - {"type", "minLength", "maxLength"}:
            refuse(
                "propertyNames",
                path,
                "only enum, const, pattern, format, minLength and maxLength "
                "(or anyOf/oneOf over such schemas) are supported for property names",
            )
        least, most = rewritten.get("minLength", 0), rewritten.get("maxLength", "")
        return f'"{STRING_CHAR}{{{least},{most}}}"'

    def _unique_items(self, node: dict, path: str) -> dict:
        """uniqueItems over items from a finite set of scalars (enum, const, boolean, null:
        pydantic's set[Literal[...]] or set[SomeEnum]): each value at most once, in the set's
        order, which is a regular language. Free strings and integers go to `_unique_guarded`."""
        items = node.get("items", True)
        ref = (
            items.get("$ref")
            if isinstance(items, dict) and isinstance(items.get("$ref"), str)
            else None
        )
        if ref in self._inlining:  # (the items are inlined: they would be again, without end)
            refuse(
                "uniqueItems",
                path,
                f"its items ({ref}) hold such an array again (a recursive schema)",
            )
        self._inlining.extend([ref] if ref else [])
        try:
            if self.ref_fallback and ref:  # as in rewrite: both readings
                return self._first_enforceable(
                    lambda: self._unique_items_of(self._resolved(items), node, path),
                    lambda: self._unique_items_of(self._resolve_chain(items), node, path),
                )
            return self._unique_items_of(self._resolved(items), node, path)
        finally:
            del self._inlining[len(self._inlining) - bool(ref) :]

    def _unique_items_of(self, items, node: dict, path: str) -> dict:
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
            return self._first_enforceable(
                lambda: self._unique_values(items | {"type": "integer"}, node, path),
                lambda: self._unique_values(items, node, path),
            )
        if not _may_be_strings(items):
            return self._unique_values(items, node, path)
        try:  # items of several types (`["string", "object"]`, a oneOf of a string and an object):
            # where they cannot be kept unique as they are, their strings alone (a subset)
            strings = {"type": "string", "allOf": [items]}
            return self._first_enforceable(
                lambda: self._unique_values(items, node, path),
                lambda: self._unique_values(strings, node, path),
            )
        except GrammarError:
            return self._unique_values(items, node, path)  # (refused: the items' own reason)

    def _unique_values(self, items, node: dict, path: str) -> dict:
        new = (
            _one_alternative(self.rewrite(items, f"{path}.items"))
            if isinstance(items, dict)
            else None
        )
        kind = new.get("type") if new else None
        strings = self._string_item(items, new, node, path)
        if strings is not None:
            return self._unique_guarded(*strings)
        if kind == "integer" and set(new) == {"type"}:
            return self._unique_guarded(node, "integer", CANONICAL_INTEGER)
        item = self._placeholder_item(items, new, "integer")
        if item is not None and integer_grows(item):  # integers from a bound >= 0 up
            return self._unique_guarded(node, "integer", item)
        if (
            isinstance(items, dict)
            and new
            and (kind == "object" or set(new) in ({"anyOf"}, {"oneOf"}))
        ):
            keyed = self._unique_by_key(new, node, path)
            if keyed is not None:
                return keyed
        values = (
            {"boolean": [True, False], "null": [None]}.get(kind) if isinstance(kind, str) else None
        )
        values = new.get("enum", values) if new else None
        if values is None:
            values = _option_values(
                new, self.placeholders
            )  # `oneOf: [{"enum": ["require"]}, {"enum": ...}]`
        if values is None:
            refuse(
                "uniqueItems",
                path,
                "uniqueness is only enforced over items from a finite set "
                "(enum, const, boolean), over strings (free, with a maxLength, a pattern or a "
                "format), over integers (and numbers, generated as integers) with no upper bound (from 0 "
                "or more up), or over objects "
                "with a required string property; not over other integers, numbers, arrays or "
                "other objects (those with minItems 0 or 1 are generated with at most one item)",
            )
        distinct = list({value_key(v): v for v in reversed(values)}.values())[::-1]
        least, most = node.get("minItems", 0), node.get("maxItems", len(distinct))
        literals = [json_literal(v) for v in distinct]
        too_large = len(literals) * sum(map(len, literals)) > UNIQUE_SET_BUDGET
        if (least > 1 or most < len(distinct) or too_large) and all(
            isinstance(v, str) for v in distinct
        ):
            # strings from a set: the guard keeps them unique (and counts what is left)
            return self._unique_guarded(
                *self._counted_items(f"(?:{'|'.join(literals)})", node, path)
            )
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
        ws = self.whitespace
        body = increasing_subsequence_regex(literals, f"{ws},{ws}", nonempty=least == 1)
        placeholder = self._placeholder(rf"\[{ws}{body}{ws}\]", quoted=False)
        self.literal_arrays[f'"{placeholder["const"]}"'] = [distinct]
        return placeholder

    def _string_item(self, items, new, node: dict, path: str) -> tuple | None:
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
        key = _placeholder_key(new)
        if self._guarded_pattern(key):
            # a pattern under a length guard: back to its counted regex everywhere, which the
            # guard counts as the item (the guard keeps no length inside a unique item)
            self.placeholders[key] = self.length_strings.pop(key)[2]
        bounds = self._string_bounds(new)
        if bounds is not None:
            least, most = bounds[0], min(bounds[1], BOUNDED_ITEM_MAX)
            if most < least:
                refuse(
                    "uniqueItems",
                    path,
                    f"items of at most {BOUNDED_ITEM_MAX} characters are generated "
                    "and minLength is above that",
                )
            return self._counted_items(bounded_string_regex(least, most), node, path)
        item = self._placeholder_item(items, new, "string")
        if item is None or not item.startswith('"'):
            return None
        if grows_wherever_it_closes(item):
            return node, "string", item
        return self._counted_items(item, node, path)

    @staticmethod
    def _counted_items(item: str, node: dict, path: str) -> tuple:
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

    def _string_placeholder(self, new: dict) -> bool:
        """Whether rewritten schema `new` is a placeholder for a string (a pattern, a format)."""
        key = _placeholder_key(new)
        return key in self.placeholders and self.placeholders[key].startswith('"')

    def _string_bounds(self, new: dict | None) -> tuple[int, int] | None:
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
        key = _placeholder_key(new)
        plain = key in self.length_strings and not self._guarded_pattern(key)
        return self.length_strings[key][:2] if plain else None

    def _guarded_pattern(self, key: str | None) -> bool:
        """Whether placeholder `key` is a pattern whose length the guard keeps (not a free string)."""
        return key in self.length_strings and self.placeholders[key] != f'"{FREE_STRING}"'

    def _placeholder_item(self, items, new: dict, kind: str) -> str | None:
        """The item regex of an item of type `kind` the rewrite made a placeholder for (a string
        pattern or format, with its quotes; numeric bounds), else None."""
        key = _placeholder_key(new)
        if (
            not (isinstance(items, dict) and items.get("type") == kind and key in self.placeholders)
            or key in self.length_strings
        ):
            return None
        return self.placeholders[key]

    def _unique_guarded(self, node: dict, kind, item: str) -> dict:
        """uniqueItems kept by `UniqueGuard` (strings, bounded strings, integers, objects by a
        property): the regex spells each item one way (`item`) and counts them; the guard bans
        repeats."""
        ws = self.whitespace

        def regex(least: int, most) -> str:
            if most == 0:
                return rf"\[{ws}{ws}\]"
            upper = "" if most is None else most - 1
            body = f"{item}(?:{ws},{ws}{item}){{{max(least - 1, 0)},{upper}}}"
            return rf"\[{ws}{body if least > 0 else f'(?:{body})?'}{ws}\]"

        least, most = node.get("minItems", 0), node.get("maxItems")
        if most is None or most < ITEMS_GUARD_MIN:
            placeholder = self._placeholder(regex(least, most), quoted=False)
        else:  # as in _type_array: the guard counts the items
            placeholder = self._placeholder(regex(least, None), quoted=False)
            self.counted_arrays[f'"{placeholder["const"]}"'] = (most, regex(least, most))
        self.unique_arrays[f'"{placeholder["const"]}"'] = kind
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
            or _placeholder_key(option) in placeholders
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


def _placeholder_key(new) -> str | None:
    """The `placeholders` key of rewritten schema `new` when it is a placeholder const, else None."""
    return f'"{new["const"]}"' if isinstance(new, dict) and set(new) == {"const"} else None

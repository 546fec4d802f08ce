"""The collection rewrites of `schema_check.SchemaRewriter`: free-form objects whose names
follow rules (keyed objects) and uniqueItems (a finite set as a regex, or items `UniqueGuard`
keeps unique). A mixin: the methods use the rewriter's `rewrite`, `_placeholder`, `_resolved`,
`_resolve_chain`, `_first_enforceable` and its records (`placeholders`, `keyed_objects`,
`unique_arrays`, `counted_arrays`, `literal_arrays`, `length_strings`)."""

from __future__ import annotations

import re

from .regex_leaves import increasing_subsequence_regex, json_literal
from .schema_rules import refuse, value_key
from .unique_items import CANONICAL_INTEGER, canonical_string_regex, grows_wherever_it_closes, integer_grows

ITEMS_GUARD_MIN = 16  # arrays with a maxItems from here on are counted by the guard
KEYED = "x-radixgen-keyed"  # marks the carrier of a keyed object (CollectionRewrites._keyed_object)
STRING_CHAR = r'(?:[^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])'  # one character of a JSON string
# uniqueItems over a finite set: distinct values x their characters at most (the automaton of
# its increasing-subsequence regex builds in ~2 s per 100,000; 865 values took over 25 minutes)
UNIQUE_SET_BUDGET = 300_000


class CollectionRewrites:
    def _keyed_object(self, node: dict, path: str) -> dict:
        """A free-form object whose names follow `propertyNames` (pydantic's dict[Literal[...], X]
        or dict[constr(pattern=...), X]) or one `patternProperties` pattern (its names match it;
        other names are never generated). Returned as a carrier, {"type": "object",
        "additionalProperties": <values>, KEYED: <placeholder>}, so references and recursion in
        the values are handled as elsewhere; json_schema then writes the object's regex."""
        patterns = node.get("patternProperties", {})
        if "propertyNames" in node and patterns:
            refuse("patternProperties", path, "it is not supported together with propertyNames")
        if not isinstance(patterns, dict) or len(patterns) > 1:
            refuse("patternProperties", path, "only one pattern is supported on an object without "
                    "properties (several could apply to one name)")
        if isinstance(node.get("type"), list) and len(node["type"]) > 1:
            refuse(next(k for k in ("propertyNames", "patternProperties") if k in node), path,
                    "it is only supported with the single type object")
        for key in ("required", "maxProperties"):
            if node.get(key):
                refuse(key, path, "it is not supported on an object whose names follow a pattern")
        if node.get("minProperties", 0) > 1:
            refuse("minProperties", path, "values above 1 need properties (keys could repeat)")
        if patterns:
            (pattern, values), = patterns.items()
            names = self._name_schema({"pattern": pattern}, f"{path}.patternProperties")
        else:
            values = node.get("additionalProperties", True)
            names = self._name_schema(node["propertyNames"], f"{path}.propertyNames")
        if values is False:  # no name may be there: the empty object
            if node.get("minProperties"):
                refuse("minProperties", path, "no property is allowed")
            return {"type": "object", "maxProperties": 0}
        values = self.rewrite(values, f"{path}.additionalProperties")
        # after the values' placeholders, which its regex holds (json_schema replaces it first)
        carrier = self._placeholder("", quoted=False)["const"]  # its regex: json_schema._KeyedObjects
        self.keyed_objects[f'"{carrier}"'] = (self._string_regex(names, path), node.get("minProperties", 0) == 1)
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
                lambda: self.rewrite({**schema, "type": "string", "pattern": f"{pattern}(?:.*)"}, path),
                lambda: self._name_strings(schema, path))
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
            refuse("propertyNames", path, "only enum, const, pattern, format, minLength and maxLength "
                    "(or anyOf/oneOf over such schemas) are supported for property names")
        least, most = rewritten.get("minLength", 0), rewritten.get("maxLength", "")
        return f'"{STRING_CHAR}{{{least},{most}}}"'

    def _unique_items(self, node: dict, path: str) -> dict:
        """uniqueItems over items from a finite set of scalars (enum, const, boolean, null:
        pydantic's set[Literal[...]] or set[SomeEnum]): each value at most once, in the set's
        order, which is a regular language. Free strings and integers go to `_unique_guarded`."""
        items = node.get("items", True)
        if self.ref_fallback and isinstance(items, dict) and "$ref" in items:  # as in rewrite: both
            return self._first_enforceable(lambda: self._unique_items_of(self._resolved(items), node, path),
                                           lambda: self._unique_items_of(self._resolve_chain(items), node, path))
        return self._unique_items_of(self._resolved(items), node, path)

    def _unique_items_of(self, items, node: dict, path: str) -> dict:
        new = self.rewrite(items, f"{path}.items") if isinstance(items, dict) else None
        kind = new.get("type") if new else None
        if kind == "string" and set(new) <= {"type", "minLength"}:
            return self._unique_guarded(node, "string", canonical_string_regex(new.get("minLength", 0)))
        if kind == "integer" and set(new) == {"type"}:
            return self._unique_guarded(node, "integer", CANONICAL_INTEGER)
        item = self._placeholder_item(items, new, "string")
        if item is not None and item.startswith('"') and grows_wherever_it_closes(item):
            return self._unique_guarded(node, "string", item)  # a pattern or format, spelt one way
        item = self._placeholder_item(items, new, "integer")
        if item is not None and integer_grows(item):  # integers from a bound >= 0 up
            return self._unique_guarded(node, "integer", item)
        values = {"boolean": [True, False], "null": [None]}.get(kind) if isinstance(kind, str) else None
        values = new.get("enum", values) if new else None
        if values is None:
            refuse("uniqueItems", path, "uniqueness is only enforced over items from a finite set "
                    "(enum, const, boolean), over free strings, over patterns and formats that can "
                    "always grow, or over integers with no upper bound (from 0 or more up), not over "
                    "strings with a maxLength, other integers, numbers or containers")
        distinct = list({value_key(v): v for v in reversed(values)}.values())[::-1]
        least, most = node.get("minItems", 0), node.get("maxItems", len(distinct))
        if least > 1 or most < len(distinct):
            refuse("uniqueItems", path, "with uniqueItems, only minItems 0 or 1 and no maxItems "
                    "below the number of distinct values are supported")
        literals = [json_literal(v) for v in distinct]
        if len(literals) * sum(map(len, literals)) > UNIQUE_SET_BUDGET:
            refuse("uniqueItems", path, f"a set of {len(literals)} distinct values is too large to enforce "
                    f"(values x their characters must stay within {UNIQUE_SET_BUDGET:,}: its automaton "
                    "takes seconds to build per 100,000)")
        ws = self.whitespace
        body = increasing_subsequence_regex(literals, f"{ws},{ws}", nonempty=least == 1)
        placeholder = self._placeholder(rf"\[{ws}{body}{ws}\]", quoted=False)
        self.literal_arrays[f'"{placeholder["const"]}"'] = [distinct]
        return placeholder

    def _placeholder_item(self, items, new: dict, kind: str) -> str | None:
        """The item regex of an item of type `kind` the rewrite made a placeholder for (a string
        pattern or format, with its quotes; numeric bounds), else None."""
        key = f'"{new.get("const")}"' if isinstance(new, dict) and set(new) == {"const"} else None
        if not (isinstance(items, dict) and items.get("type") == kind and key in self.placeholders) \
                or key in self.length_strings:
            return None
        return self.placeholders[key]

    def _unique_guarded(self, node: dict, kind: str, item: str) -> dict:
        """uniqueItems over free strings or unbounded integers (pydantic's set[str], set[int]):
        the regex spells each item one way (`item`) and counts them; `UniqueGuard` bans repeats."""
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

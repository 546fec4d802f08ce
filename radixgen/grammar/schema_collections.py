"""The collection rewrites of `schema_check.SchemaRewriter`: free-form objects whose names
follow rules (keyed objects) and uniqueItems (a finite set as a regex, or items `UniqueGuard`
keeps unique). A mixin: the methods use the rewriter's `rewrite`, `_placeholder`, `_resolved`,
`_resolve_chain`, `_first_enforceable` and its records (`placeholders`, `keyed_objects`,
`unique_arrays`, `counted_arrays`, `literal_arrays`, `length_strings`)."""

from __future__ import annotations

import json
import math
import re

from .matcher import GrammarError
from .regex_leaves import increasing_subsequence_regex, json_literal
from .schema_rules import NothingValid, refuse, value_key
from .unique_values import (BOUNDED_ITEM_MAX, CANONICAL_INTEGER, bounded_string_regex, canonical_string_regex,
                           grows_wherever_it_closes, integer_grows, item_counts)

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
BOUNDED_VALUES_CAP = 10 ** 7
# marks an array of objects the guard keeps unique by one property: [its name, its item kind]
UNIQUE_KEY = "x-radixgen-unique-key"
# property names the guard compares as text: outlines-core writes them unescaped (a "/" could be
# written "\/" in JSON, but the regex never generates that)
_PLAIN_NAME = re.compile(r'[A-Za-z0-9_$@.:/ -]+')


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
            refuse(next(k for k in ("propertyNames", "patternProperties") if k in node), path,
                    "it is only supported with the single type object")
        if node.get("required"):
            refuse("required", path, "it is not supported on an object whose names follow a pattern")
        if node.get("minProperties", 0) > node.get("maxProperties", math.inf):
            refuse("minProperties", path, "it exceeds maxProperties: no object is valid", NothingValid)
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
        if values is False or node.get("maxProperties") == 0:  # no name may be there: the empty object
            if node.get("minProperties"):
                refuse("minProperties", path, "no property is allowed")
            return {"type": "object", "maxProperties": 0}
        try:
            values = self.rewrite(values, f"{path}.additionalProperties")
        except GrammarError as exc:
            if len(patterns) < 2:
                raise
            refuse("patternProperties", path, "several patterns may apply to one name, and its value "
                    f"would have to meet all their schemas, which cannot be enforced here ({exc})")
        # after the values' placeholders, which its regex holds (json_schema replaces it first)
        carrier = self._placeholder("", quoted=False)["const"]  # its regex: schema_keyed_objects
        # (a name written twice counts once after parsing: maxProperties bounds the pairs written)
        self.keyed_objects[f'"{carrier}"'] = (self._string_regex(names, path), node.get("minProperties", 0) == 1,
                                               node.get("maxProperties"))
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
        ref = items.get("$ref") if isinstance(items, dict) and isinstance(items.get("$ref"), str) else None
        if ref in self._inlining:  # (the items are inlined: they would be again, without end)
            refuse("uniqueItems", path, f"its items ({ref}) hold such an array again (a recursive schema)")
        self._inlining.extend([ref] if ref else [])
        try:
            if self.ref_fallback and ref:  # as in rewrite: both readings
                return self._first_enforceable(lambda: self._unique_items_of(self._resolved(items), node, path),
                                               lambda: self._unique_items_of(self._resolve_chain(items), node, path))
            return self._unique_items_of(self._resolved(items), node, path)
        finally:
            del self._inlining[len(self._inlining) - bool(ref):]

    def _unique_items_of(self, items, node: dict, path: str) -> dict:
        new = self.rewrite(items, f"{path}.items") if isinstance(items, dict) else None
        kind = new.get("type") if new else None
        strings = self._string_item(items, new, node, path)
        if strings is not None:
            return self._unique_guarded(*strings)
        if kind == "integer" and set(new) == {"type"}:
            return self._unique_guarded(node, "integer", CANONICAL_INTEGER)
        item = self._placeholder_item(items, new, "integer")
        if item is not None and integer_grows(item):  # integers from a bound >= 0 up
            return self._unique_guarded(node, "integer", item)
        if isinstance(items, dict) and new and (kind == "object" or set(new) in ({"anyOf"}, {"oneOf"})):
            keyed = self._unique_by_key(new, node, path)
            if keyed is not None:
                return keyed
        values = {"boolean": [True, False], "null": [None]}.get(kind) if isinstance(kind, str) else None
        values = new.get("enum", values) if new else None
        if values is None:
            refuse("uniqueItems", path, "uniqueness is only enforced over items from a finite set "
                    "(enum, const, boolean), over strings (free, with a maxLength, a pattern or a "
                    "format), over integers with no upper bound (from 0 or more up), or over objects "
                    "with a required string property; not over other integers, numbers, arrays or "
                    "other objects")
        distinct = list({value_key(v): v for v in reversed(values)}.values())[::-1]
        least, most = node.get("minItems", 0), node.get("maxItems", len(distinct))
        literals = [json_literal(v) for v in distinct]
        too_large = len(literals) * sum(map(len, literals)) > UNIQUE_SET_BUDGET
        if (least > 1 or most < len(distinct) or too_large) and all(isinstance(v, str) for v in distinct):
            # strings from a set: the guard keeps them unique (and counts what is left)
            return self._unique_guarded(*self._counted_items(f"(?:{'|'.join(literals)})", node, path))
        if least > 1 or most < len(distinct):
            refuse("uniqueItems", path, "with uniqueItems, only minItems 0 or 1 and no maxItems "
                    "below the number of distinct values are supported (or a set of strings only)")
        if too_large:
            refuse("uniqueItems", path, f"a set of {len(literals)} distinct values is too large to enforce "
                    f"(values x their characters must stay within {UNIQUE_SET_BUDGET:,}: its automaton "
                    "takes seconds to build per 100,000)")
        ws = self.whitespace
        body = increasing_subsequence_regex(literals, f"{ws},{ws}", nonempty=least == 1)
        placeholder = self._placeholder(rf"\[{ws}{body}{ws}\]", quoted=False)
        self.literal_arrays[f'"{placeholder["const"]}"'] = [distinct]
        return placeholder

    def _unique_by_key(self, new: dict, node: dict, path: str) -> dict | None:
        """uniqueItems over objects (OpenAPI's `tags`, lists of named things): objects whose values
        of one required property differ are distinct, so the guard keeps the first required
        string property it can keep unique (its rewritten schema, as merged: a free string, a
        pattern, format or maxLength, as for string items above) unique across the array's
        objects: a subset (objects that share that value but differ elsewhere are never
        generated). Where no required property qualifies, the first optional one that does is
        generated always, and kept unique (a subset too: CloudFormation's lists of settings
        objects require nothing). Items that are an anyOf / oneOf of such objects (CloudFormation's
        `oneOf: [{"required": ["VariationName", "StringValue"]}, ...]`) are kept unique by a
        property every alternative has with the same schema. Where no property of the object
        qualifies, one of an object property does (`{"CustomPlugin": {"CustomPluginArn": ...}}`,
        both then always generated). None when no property qualifies.
        (Integer properties are not used: a token that closes the name and ends the value,
        `":5,`, would need the guard's look-ahead from inside a name.)"""
        combiner = next((k for k in ("anyOf", "oneOf") if set(new) == {k}), None)
        objects = new[combiner] if combiner else [new]
        found = self._keyed_objects(objects, node, path)
        if found is None and combiner is None and _plain_object(new):
            found = self._keyed_inside(new, node, path)
        if found is None:
            return None
        node, kind, key, keyed = found
        array = {"type": "array", "items": {combiner: keyed} if combiner else keyed[0],
                 UNIQUE_KEY: [key, kind], **{k: node[k] for k in ("minItems", "maxItems") if k in node}}
        self.unique_key_nodes += 1
        return self._counted(array)

    def _keyed_objects(self, objects: list, node: dict, path: str) -> tuple | None:
        """(array node, item kind, key, the objects with the key's value a placeholder the guard
        keeps, required) for the first property every object holds with one schema that the
        guard can keep unique (see _unique_by_key), else None."""
        if not objects or not all(_plain_object(o) for o in objects):
            return None
        first = objects[0]
        required = list(first.get("required", ()))
        for key in required + [name for name in first.get("properties", {}) if name not in required]:
            subs = [self._key_schema(o, key, path) for o in objects]
            if subs[0] is None or len({self._spelling(sub) for sub in subs}) > 1:
                continue  # (every alternative must hold the name, with one schema)
            sub = subs[0]
            names = _string_enum(sub)
            try:
                strings = (self._counted_items(names, node, path) if names is not None
                           else self._string_item({"type": "string"}, sub, node, path))
            except GrammarError:  # (too many items for its values, ...): the next name may do
                continue
            if strings is not None:
                node, kind, item = strings
                value = self._placeholder(item, quoted=False)
                return node, kind, key, [_with_required(o, key, value) for o in objects]
        return None

    def _keyed_inside(self, obj: dict, node: dict, path: str) -> tuple | None:
        """_keyed_objects' result for a key one object property inside `obj` (the required ones
        first, then the optional), its key the path of the two names."""
        required = list(obj.get("required", ()))
        for outer in required + [name for name in obj.get("properties", {}) if name not in required]:
            inner = obj["properties"][outer]
            if isinstance(inner, dict) and "$ref" in inner:
                target = self._resolved(inner)
                inner = self.rewrite(target, f"{path}.items.properties.{outer}") if isinstance(target, dict) else None
            if not (_PLAIN_NAME.fullmatch(outer) and _plain_object(inner) and inner.get("type") == "object"):
                continue
            found = self._keyed_objects([inner], node, path)
            if found is not None:
                node, kind, key, keyed = found
                return node, kind, [outer, key], [_with_required(obj, outer, keyed[0])]
        return None

    def _spelling(self, sub) -> str:
        """What a rewritten schema generates, as text: a placeholder's regex (alternatives get
        placeholders of their own for one pattern), else the schema itself."""
        name = f'"{sub["const"]}"' if isinstance(sub, dict) and isinstance(sub.get("const"), str) else None
        if name in self.placeholders or name in self.length_strings:
            return repr((self.placeholders.get(name), self.length_strings.get(name)))
        return json.dumps(sub, sort_keys=True)

    def _key_schema(self, obj: dict, key: str, path: str):
        """The rewritten schema of `obj`'s property `key` when it could keep the objects unique
        (a string, or a string placeholder: a pattern, format or set of strings; a `$ref` to one
        followed), else None."""
        if key not in obj.get("properties", {}) or not _PLAIN_NAME.fullmatch(key):
            return None  # the guard compares the name's JSON text: one spelling
        sub = obj["properties"][key]  # as merged (an allOf beside it may narrow it)
        if isinstance(sub, dict) and "$ref" in sub:  # (CloudFormation's Key: {"$ref": TagKey})
            target = self._resolved(sub)
            sub = self.rewrite(target, f"{path}.items.properties.{key}") if isinstance(target, dict) else None
        if _string_enum(sub) is None and not (isinstance(sub, dict) and (sub.get("type") == "string"
                                                                         or self._string_placeholder(sub))):
            return None
        return sub

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
                refuse("uniqueItems", path, f"items of at most {BOUNDED_ITEM_MAX} characters are generated "
                        "and minLength is above that")
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
                refuse("uniqueItems", path, f"minItems asks for more than the {total} distinct values "
                        "generated")
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
        if new.get("type") == "string" and "maxLength" in new and set(new) <= {"type", "minLength", "maxLength"}:
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
        if not (isinstance(items, dict) and items.get("type") == kind and key in self.placeholders) \
                or key in self.length_strings:
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


def _plain_object(schema) -> bool:
    """Whether a rewritten schema is an object with properties and nothing that adds names."""
    return isinstance(schema, dict) and isinstance(schema.get("properties"), dict) \
        and not set(schema) - {"type", "properties", "required", "additionalProperties"}


def _with_required(obj: dict, key: str, value) -> dict:
    """`obj` with property `key` of schema `value`, required."""
    required = list(obj.get("required", ()))
    return {**obj, "properties": {**obj["properties"], key: value},
            "required": required if key in required else [*required, key]}


def _string_enum(new) -> str | None:
    """The item regex of a rewritten schema that is a set of strings (an enum of strings only:
    CloudFormation's `Day`, `Action`), else None."""
    if not isinstance(new, dict) or set(new) - {"type", "enum"} or new.get("type", "string") != "string":
        return None
    values = new.get("enum")
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return "(?:" + "|".join(json_literal(v) for v in dict.fromkeys(values)) + ")"


def _placeholder_key(new) -> str | None:
    """The `placeholders` key of rewritten schema `new` when it is a placeholder const, else None."""
    return f'"{new["const"]}"' if isinstance(new, dict) and set(new) == {"const"} else None

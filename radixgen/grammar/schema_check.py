"""Check a JSON Schema against what outlines-core enforces exactly, and rewrite it for it.

outlines-core turns a schema into a regex by looking at ONE keyword per node, in this order:
properties, allOf, anyOf, oneOf, prefixItems, enum, const, $ref, type. Every other assertion
keyword on that node is silently ignored, and some of the chosen ones are approximations
(allOf concatenates regexes, oneOf is a plain alternation, `required` outside `properties` and
numeric bounds are ignored, `pattern` is spliced unescaped). An ignored assertion would let the
model produce output that violates the schema, so `SchemaRewriter` refuses (GrammarError naming
the keyword and its JSON path) anything it cannot make exact, and rewrites the rest:

- leaves outlines-core gets wrong (string `pattern`/`format`, numeric bounds) become placeholder
  consts, replaced afterwards by exact regexes from `regex_leaves`;
- objects with `properties` are closed (only the listed properties are generated; always valid);
- annotations and unknown keywords (ignored by validators too) are dropped.
"""

from __future__ import annotations

import copy
import json
import math

from . import guard_tables
from .matcher import GrammarError
from .regex_leaves import format_length_regex, format_regex, json_literal, string_pattern_regex
from .regex_numbers import integer_bound, number_range_regex
from .schema_collections import FREE_STRING, ITEMS_GUARD_MIN, STRING_CHAR, CollectionRewrites
from .schema_conditionals import expand_conditionals
from .schema_merge import EMPTY, implied_type, normalize, split_by_type, typed_keywords
from .schema_objects import ObjectRewrites
from .schema_one_of import Readings, exclusive
from .schema_rules import (ASSERTIONS, NothingValid, asserts, check_counts, check_keyword_types,
                           forbidden_names_dropped, is_type, need_type, only_asserting, refuse, tightest)
from .schema_values import VALUE_KEYWORDS, values_meeting
from .unique_values import length_guard_start
from .schema_ref_reading import ReferenceReading
from .schema_refs import declared_draft, names_draft_unambiguously

# schema nodes one rewrite visits at most: a draft 3-7 `$ref` with keywords beside it is rewritten
# twice when the first reading cannot be enforced, which nested could take exponential work
REWRITE_BUDGET = 100_000
_BRANCHES = ("properties", "allOf", "anyOf", "oneOf", "prefixItems", "enum", "const", "$ref", "type")
_BY_TYPE = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    # `format` on a number is an annotation (format checkers look at strings only): dropped
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format"},
    "array": {"items", "minItems", "maxItems", "uniqueItems"},
    "object": {"additionalProperties", "minProperties", "maxProperties", "required", "patternProperties",
               "propertyNames"},
    "boolean": set(), "null": set(),
}
# any JSON value, with unconstrained containers kept shallow (outlines-core's own expansion of
# {} nests them 2 deep, which makes the automaton take seconds to build); `depth` is its keyword
ANY_VALUE = {"anyOf": [{"type": "boolean"}, {"type": "null"}, {"type": "number"}, {"type": "string"},
                       {"type": "array", "depth": 1}, {"type": "object", "depth": 1}]}


# what a SchemaRewriter records while it rewrites, undone when an attempt is abandoned
_RECORDS = ("placeholders", "unique_arrays", "literal_arrays", "keyed_objects", "length_strings", "counted_arrays",
            "counted_nodes", "unique_key_nodes")


class SchemaRewriter(ObjectRewrites, CollectionRewrites, ReferenceReading):
    """One use: `rewrite(schema)` returns the schema for outlines-core; `placeholders` maps each
    placeholder const it introduced to the exact regex that replaces it."""

    def __init__(self, root, nonce: str, whitespace: str = "") -> None:
        self.root = root
        self.nonce = nonce
        self.whitespace = whitespace  # the regex between JSON tokens, for placeholder containers
        self._inlining: list[str] = []  # $refs schema_merge inlined into the nodes being rewritten
        self._merge_follows = 0  # references schema_merge followed (see _merge_target)
        self.placeholders: dict[str, str] = {}
        # placeholders that are arrays, for json_schema's check of where uniqueness is guarded:
        # uniqueItems kept by UniqueGuard: -> item kind ("string", "integer", ("bounded", item regex))
        self.unique_arrays: dict[str, str | tuple] = {}
        self.literal_arrays: dict[str, list] = {}  # enum/const values holding arrays, and finite sets
        # free-form objects whose names follow a regex: placeholder -> (name regex, nonempty);
        # json_schema builds their regex once their values' regex is known (see KEYED)
        self.keyed_objects: dict[str, tuple[str, bool, int | None]] = {}  # names, nonempty, maxProperties
        # strings whose maxLength UniqueGuard keeps: placeholder -> (minLength, maxLength, the
        # exact counted regex, for json_schema's fallback)
        self.length_strings: dict[str, tuple[int, int, str]] = {}
        # unique arrays whose maxItems UniqueGuard keeps: placeholder -> (maxItems, the exact
        # counted regex); other such arrays are marked in place (COUNTED)
        self.counted_arrays: dict[str, tuple] = {}
        self.counted_nodes = 0
        self.unique_key_nodes = 0  # arrays of objects kept unique by one property (UNIQUE_KEY)
        self._rewrites = 0  # schema nodes rewritten, against REWRITE_BUDGET
        draft = declared_draft(root)
        if draft == 3:
            raise GrammarError("JSON Schema draft 3 is not supported (its extends, disallow, divisibleBy "
                               "and boolean required would be ignored)")
        self.draft_3_to_7 = draft is not None  # an items array is a tuple; keywords beside a $ref
        # are ignored by the draft, applied by validators reading the $schema as 2020-12: where
        # they cannot be enforced, the draft's reading is taken only when its URI is unambiguous
        self.ref_fallback = self.draft_3_to_7 and names_draft_unambiguously(root)
        self.const_unknown = draft == 4  # draft 4 validators do not know `const`
        # exclusiveM* are flags: only under a URI every validator reads as draft 4 (jsonschema
        # reads "https://json-schema.org/draft-04/schema#" as 2020-12); elsewhere a flag is refused
        self.draft_4 = draft == 4 and self.ref_fallback

    def rewrite(self, node, path: str = "$"):
        if node is True:
            return copy.deepcopy(ANY_VALUE)
        if not isinstance(node, dict):
            raise GrammarError(f"schema at {path} must be an object or true, got {node!r}")
        self._rewrites += 1
        if self._rewrites > REWRITE_BUDGET:
            raise GrammarError(f"json_schema expands to too large a grammar (more than {REWRITE_BUDGET} "
                               "schema nodes to rewrite)")
        if self.draft_3_to_7 and isinstance(node.get("items"), list):
            # an items array there is 2020-12's prefixItems, and additionalItems its items
            tuple_form = {"prefixItems": node["items"], **({"items": node["additionalItems"]}
                                                           if "additionalItems" in node else {})}
            node = {**{k: v for k, v in node.items() if k not in ("items", "additionalItems")}, **tuple_form}
        if self.ref_fallback and "$ref" in node and asserts(node, ("$ref",)):
            # drafts 3-7 ignore the keywords beside a $ref; a validator that does not know the
            # $schema URI (jsonschema reads https://json-schema.org/draft-07/schema as 2020-12)
            # applies them. Output valid under both readings where they can be enforced:
            alone = {k: v for k, v in node.items() if k in ("$ref", "$defs", "definitions")}
            return self._first_enforceable(lambda: self._rewrite_node(node, path),
                                           lambda: self._rewrite_node(alone, path))
        return self._rewrite_node(node, path)

    def _rewrite_node(self, node: dict, path: str) -> dict:
        check_keyword_types(node, path)
        node = expand_conditionals(node, self._resolved, self._as_validators_read)
        written = node
        node, inlined = normalize(node, self._resolved, tuple(self._inlining), self._as_validators_read)
        if node is EMPTY:
            key = "anyOf" if "anyOf" in written else "oneOf"
            refuse(key, path, "no alternative meets the keywords beside it (e.g. their types do not meet): "
                   "no value is valid", NothingValid)
        if node is not written:
            check_keyword_types(node, path)  # merged members were not checked
        node = forbidden_names_dropped(_without_idle_keywords(node), path)
        node = split_by_type(node) or node
        present = [k for k in node if k in ASSERTIONS]
        branch = next((b for b in _BRANCHES if b in node), None)
        if branch is None and present and implied_type(node):
            node, branch = {**node, "type": implied_type(node)}, "type"  # its keywords' one type
        if branch is None:
            if present:
                several = " (its keywords constrain values of several types)" if typed_keywords(node) else ""
                refuse(present[0], path, f"it needs a type, properties, enum, const or $ref beside it{several}")
            return self._with_defs(node, copy.deepcopy(ANY_VALUE), path)
        check_counts(node, path)
        handler = getattr(self, "_" + branch.lstrip("$"))
        self._inlining.extend(inlined)
        try:
            return self._with_defs(node, handler(node, path), path)
        finally:
            del self._inlining[len(self._inlining) - len(inlined):]

    def _first_enforceable(self, *attempts):
        """The result of the first attempt that raises no GrammarError, with what the failed ones
        recorded undone; the last attempt's error when all fail."""
        for attempt in attempts[:-1]:
            saved = self._snapshot()
            try:
                return attempt()
            except GrammarError:
                self._restore(saved)
        return attempts[-1]()

    def _unless_empty(self, schema, path: str):
        """The rewrite of `schema`, or the NothingValid it raised with what it recorded undone."""
        saved = self._snapshot()
        try:
            return self.rewrite(schema, path)
        except NothingValid as exc:
            self._restore(saved)
            return exc

    def _snapshot(self) -> dict:
        return {key: copy.copy(getattr(self, key)) for key in _RECORDS}

    def _restore(self, saved: dict) -> None:
        for key, value in saved.items():
            setattr(self, key, value)

    def _with_defs(self, node: dict, new: dict, path: str) -> dict:
        """Keep (rewritten) $defs/definitions where they were, so $ref paths stay valid."""
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                new[key] = {k: self.rewrite(v, f"{path}.{key}.{k}") for k, v in node[key].items()}
        return new

    # ------------------------------------------------------------ branches (outlines' order)

    def _allOf(self, node: dict, path: str) -> dict:
        only_asserting(node, path, {"allOf"})
        if not isinstance(node["allOf"], list) or len(node["allOf"]) != 1:
            refuse("allOf", path, "only a single-schema allOf can be enforced exactly")
        return {"allOf": [self.rewrite(node["allOf"][0], f"{path}.allOf[0]")]}

    def _anyOf(self, node: dict, path: str) -> dict:
        return {"anyOf": self._options(_alternatives_of(node, path, "anyOf"), f"{path}.anyOf")}

    def _oneOf(self, node: dict, path: str) -> dict:
        options = _alternatives_of(node, path, "oneOf")
        narrowed = exclusive(options, Readings(self._resolved, self._resolve_chain, self.draft_3_to_7,
                                               self.const_unknown))
        if narrowed is None:
            self._options(options, f"{path}.oneOf")  # an alternative's own error comes first
            refuse("oneOf", path, "its alternatives may overlap (radixgen enforces oneOf only when "
                    "they declare disjoint types, differ in enum/const values, or are objects that "
                    "differ in a required property or in a const property's value; an alternative "
                    "without \"type\" accepts every type its keywords do not constrain, e.g. "
                    "{\"properties\": ...} accepts any string)")
        return {"oneOf": self._options(options, f"{path}.oneOf", narrowed)}

    def _options(self, options: list, path: str, narrowed: list | None = None) -> list:
        """The alternatives rewritten; one no value satisfies is left out (not all of them)."""
        out, empty = [], None
        for i, option in enumerate(options):
            chosen = option if not narrowed or narrowed[i] is None else narrowed[i]
            if chosen is False:  # narrowed to nothing (schema_one_of)
                empty = NothingValid(f"the alternative at {path}[{i}] has no value valid under it alone")
                continue
            new = self._unless_empty(chosen, f"{path}[{i}]")
            if isinstance(new, NothingValid):
                empty = new
            else:
                out.append(new)
        if not out:
            raise empty
        return out

    def _prefixItems(self, node: dict, path: str) -> dict:
        only_asserting(node, path, {"prefixItems", "type", "items", "minItems", "maxItems", "uniqueItems",
                                    "additionalItems", "unevaluatedItems"})
        items = node["prefixItems"]
        need_type(node, path, "array")
        if node.get("minItems", 0) > len(items):
            refuse("minItems", path, "it exceeds the number of prefixItems (exactly those are generated)")
        if node.get("maxItems", math.inf) < len(items):
            refuse("maxItems", path, "it is below the number of prefixItems")
        if node.get("uniqueItems") is True:
            refuse("uniqueItems", path, "uniqueness cannot be enforced by a regular language")
        return {"prefixItems": [self.rewrite(s, f"{path}.prefixItems[{i}]") for i, s in enumerate(items)]}

    def _enum(self, node: dict, path: str, key: str = "enum") -> dict:
        only_asserting(node, path, VALUE_KEYWORDS)
        values = node[key] if key == "enum" else [node[key]]
        if key == "enum" and (not isinstance(values, list) or not values):
            raise GrammarError(f"enum at {path} must be a non-empty array")
        if "type" in node:
            types = node["type"] if isinstance(node["type"], list) else [node["type"]]
            # (draft 4 validators take no float as an integer, not even 1.0)
            values = [v for v in values if any(is_type(v, t) and not (self.const_unknown and t == "integer"
                                                                       and isinstance(v, float)) for t in types)]
            if not values:
                refuse(key, path, "no value matches the sibling type")
        if set(node) & VALUE_KEYWORDS - {key, "type"}:  # the values that meet them
            values = values_meeting(values, node, key, self.draft_4, path)
            if not values:
                refuse(key, path, "no value meets the keywords beside it")
        for v in values:
            try:
                json.dumps(v, allow_nan=False)
            except ValueError:
                refuse(key, path, f"{v!r} holds a number beyond floating point (e.g. 1e400), which "
                        "has no exact JSON text to generate")
        if any(isinstance(v, (dict, list)) for v in values):
            # objects and arrays as their compact JSON text (equal values in other key orders or
            # spacing are valid too, but never generated)
            placeholder = self._placeholder("(?:" + "|".join(map(json_literal, values)) + ")", quoted=False)
            self.literal_arrays[f'"{placeholder["const"]}"'] = values
            return placeholder
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2 ** 53:
                refuse(key, path, f"{v} is beyond the integers outlines-core keeps exact")
        return {"enum": values}

    def _const(self, node: dict, path: str) -> dict:
        return self._enum(node, path, "const")

    def _ref(self, node: dict, path: str) -> dict:
        only_asserting(node, path, {"$ref"})
        ref = node["$ref"]
        if not isinstance(ref, str) or "~" in ref or "%" in ref:
            refuse("$ref", path, "only plain local references (#/...) are supported")
        self._resolve(ref, path)
        return {"$ref": ref}

    def _type(self, node: dict, path: str) -> dict:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        unknown = [t for t in types if t not in _BY_TYPE]
        if unknown or not types:
            refuse("type", path, f"unknown type(s) {unknown}")
        only_asserting(node, path, {"type"}.union(*(_BY_TYPE[t] for t in types)))
        if len(types) == 1:
            return getattr(self, "_type_" + types[0])(node, path)
        if "multipleOf" in node and "number" in types:  # (_type_integer refuses other values)
            refuse("multipleOf", path, "only multipleOf 1 on integers is supported")
        parts = [getattr(self, "_type_" + t)(node, path) for t in types]
        leaf = [k for k in node if k in _BY_TYPE["string"] | _BY_TYPE["number"] | _BY_TYPE["integer"]
                and k not in ("minLength", "maxLength")]
        if leaf or any("const" in part for part in parts):
            # one alternative per type, each with the keywords that constrain it (a keyword lets
            # every other type pass): {"type": ["string", "null"], "format": "date-time"}
            return {"anyOf": parts}
        new = {"type": list(types)}
        for part in parts:
            new.update(part)
        new["type"] = list(types)
        return new

    # ------------------------------------------------------------ one type

    def _type_string(self, node: dict, path: str) -> dict:
        fmt = format_regex(node["format"], path) if "format" in node else None  # None: an annotation
        if "pattern" in node and fmt is not None:
            refuse("format", path, "it cannot be combined with pattern")
        lengths = node.get("minLength", 0), node.get("maxLength")
        guarded = lengths[1] is not None and lengths[1] >= guard_tables.LENGTH_GUARD_MIN
        if "pattern" in node:
            exact = string_pattern_regex(node["pattern"], path, *lengths)
            free = string_pattern_regex(node["pattern"], path, open_from=lengths[1]) if guarded else exact
            # the pattern's own regex with the guard keeping the length (exact, and one state per
            # piece), where no state past its first few characters needs more characters to close
            first = length_guard_start(f'"{free}"', guard_tables.LENGTH_GUARD_MIN) if free != exact else None
            if first is not None and first <= lengths[1]:
                return self._length_guarded(free, lengths, f'"{exact}"')
            return self._placeholder(exact, quoted=True)
        if fmt is not None and lengths != (0, None):
            fmt = format_length_regex(node["format"], path, *lengths)
        if fmt is not None:
            return self._placeholder(fmt, quoted=True)
        if guarded:
            return self._length_guarded(FREE_STRING, lengths, f'"{STRING_CHAR}{{{lengths[0]},{lengths[1]}}}"')
        return {"type": "string", **{k: node[k] for k in ("minLength", "maxLength") if k in node}}

    def _length_guarded(self, free: str, lengths: tuple, exact: str) -> dict:
        """A placeholder for strings of regex `free` (any length) whose length the guard keeps:
        a counted repeat costs the automaton a state per character. json_schema falls back to
        the counted regex `exact` (with its quotes) where another string can appear at the same
        place, schema_collections where the strings are unique items."""
        placeholder = self._placeholder(free, quoted=True)
        self.length_strings[f'"{placeholder["const"]}"'] = (lengths[0], lengths[1], exact)
        return placeholder

    def _type_integer(self, node: dict, path: str) -> dict:
        if node.get("multipleOf", 1) != 1:
            refuse("multipleOf", path, "only multipleOf 1 is supported")
        return self._numeric(node, path, integer=True)

    def _type_number(self, node: dict, path: str) -> dict:
        return self._numeric(node, path, integer=False)

    def _numeric(self, node: dict, path: str, integer: bool) -> dict:
        name = "integer" if integer else "number"
        keys = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
        if self.draft_4:  # exclusiveMinimum/Maximum are flags on minimum/maximum
            node = _draft4_bounds(node, path)
        b = {k: integer_bound(node[k], path, k, integer) for k in keys if k in node}
        if not b:
            return {"type": name}
        lo, lo_excl = tightest(b, "minimum", "exclusiveMinimum", max, integer)
        hi, hi_excl = tightest(b, "maximum", "exclusiveMaximum", min, integer)
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
            refuse("minimum", path, "the bounds leave no value")
        return self._placeholder(number_range_regex(lo, hi, lo_excl, hi_excl, integer), quoted=False)

    def _type_boolean(self, node: dict, path: str) -> dict:
        return {"type": "boolean"}

    def _type_null(self, node: dict, path: str) -> dict:
        return {"type": "null"}

    def _type_array(self, node: dict, path: str) -> dict:
        if node.get("minItems", 0) > node.get("maxItems", math.inf):
            refuse("minItems", path, "it exceeds maxItems: no array is valid")
        if node.get("uniqueItems") is True and node.get("maxItems", 2) > 1:
            return self._unique_items(node, path)
        new = {"type": "array", **{k: node[k] for k in ("minItems", "maxItems") if k in node}}
        if "items" in node:
            if not isinstance(node["items"], (dict, bool)):
                refuse("items", path, "the array (tuple) form is not supported; use prefixItems")
            if node["items"] is False:
                new["maxItems"] = 0
                return new
            new["items"] = self.rewrite(node["items"], f"{path}.items")
        return self._counted(new)

    def _counted(self, new: dict) -> dict:
        """Array `new` with a maxItems of ITEMS_GUARD_MIN or more left to the guard: a counted
        repeat costs the automaton a copy of the item per count (json_schema restores maxItems
        where another array can appear at the same place). minItems stays in the regex: with
        whitespace allowed after an item only ']' follows it, so a guard could not refuse ']'."""
        most = new.get("maxItems")
        if most is not None and most >= ITEMS_GUARD_MIN:
            del new["maxItems"]
            new[COUNTED] = most
            self.counted_nodes += 1
        return new

    def _placeholder(self, regex: str, quoted: bool) -> dict:
        name = f"RGPH{self.nonce}x{len(self.placeholders)}"
        self.placeholders[f'"{name}"'] = f'"{regex}"' if quoted else regex
        return {"const": name}


# patterns every name matches (a search: "^.*$" fails on a name with a line break in it)
_MATCH_ALL = ("", ".*", "^.*", ".*$")
COUNTED = "x-radixgen-counted"  # marks an array whose maxItems (the value) the guard keeps


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
    elif (isinstance(patterns, dict) and len(patterns) == 1 and next(iter(patterns)) in _MATCH_ALL
          and "properties" not in node):
        return {**{k: v for k, v in node.items() if k not in drop | {"patternProperties"}},
                "additionalProperties": next(iter(patterns.values()))}
    return {k: v for k, v in node.items() if k not in drop} if drop else node


def _draft4_bounds(node: dict, path: str) -> dict:
    """`node`'s bounds as draft 4 reads them: a true exclusiveMinimum/Maximum makes the
    minimum/maximum beside it exclusive, and alone it means nothing. A number there is refused: the
    draft's metaschema forbids it, and its validators read it as a flag ({"maximum": 2,
    "exclusiveMaximum": 3} excludes 2), where 2019+ reads a bound."""
    new = {k: v for k, v in node.items() if k not in ("exclusiveMinimum", "exclusiveMaximum")}
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if flag in node and not isinstance(node[flag], bool):
            refuse(flag, path, "draft 4 takes a boolean here (a flag on the bound beside it)")
        if node.get(flag) and bound in node:
            new[flag] = new.pop(bound)
    return new


def _alternatives_of(node: dict, path: str, key: str) -> list:
    """`node[key]` (anyOf / oneOf), checked: a non-empty list, nothing else asserted beside it."""
    only_asserting(node, path, {key})
    if not isinstance(node[key], list) or not node[key]:
        raise GrammarError(f"{key} at {path} must be a non-empty array")
    return node[key]

"""Check a JSON Schema against what outlines-core enforces exactly, and rewrite it for it.

outlines-core turns a schema into a regex by looking at ONE keyword per node, in this order:
properties, allOf, anyOf, oneOf, prefixItems, enum, const, $ref, type. Every other assertion
keyword on that node is silently ignored, and some of the chosen ones are approximations
(allOf concatenates regexes, oneOf is a plain alternation, `required` outside `properties` and
numeric bounds are ignored, `pattern` is spliced unescaped). An ignored assertion would let the
model produce output that violates the schema, so `SchemaRewriter` refuses (GrammarError naming
the keyword and its JSON path) anything it cannot make exact, and rewrites the rest:

- leaves outlines-core gets wrong (string `pattern`/`format`, numeric bounds) become placeholder
  consts, replaced afterwards by exact regexes from `regex.leaves`;
- objects with `properties` are closed (only the listed properties are generated; always valid);
- annotations and unknown keywords (ignored by validators too) are dropped.

The rewriter here walks the schema and keeps its records; its rewrites are mixins, one module per
concern: rewrite.branches (allOf, anyOf, oneOf, prefixItems, enum/const, $ref), rewrite.type_keyword (each
type), rewrite.objects, rewrite.containers and rewrite.ref_reading.
"""

from __future__ import annotations

import copy

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.branches import BranchRewrites
from radixgen.grammar.rewrite.containers import CollectionRewrites
from radixgen.grammar.rewrite.objects import ObjectRewrites, forbidden_names_excluded
from radixgen.grammar.rewrite.ref_reading import ReferenceReading
from radixgen.grammar.rewrite.type_keyword import TypeRewrites
from radixgen.grammar.rewrite.unique_keys import UniqueKeyRewrites
from radixgen.grammar.schema.conditionals import expand_conditionals
from radixgen.grammar.schema.exclusions import excluded_values_rewritten
from radixgen.grammar.schema.merge import (
    EMPTY,
    implied_type,
    normalize,
    split_by_type,
    typed_keywords,
)
from radixgen.grammar.schema.refs import declared_draft, names_draft_unambiguously
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
_BRANCHES = (
    "properties",
    "allOf",
    "anyOf",
    "oneOf",
    "prefixItems",
    "enum",
    "const",
    "$ref",
    "type",
)
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


# what a SchemaRewriter records while it rewrites, undone when an attempt is abandoned
_RECORDS = (
    "placeholders",
    "unique_arrays",
    "literal_arrays",
    "keyed_objects",
    "length_strings",
    "counted_arrays",
    "counted_nodes",
    "unique_key_nodes",
)


class SchemaRewriter(
    BranchRewrites,
    TypeRewrites,
    ObjectRewrites,
    CollectionRewrites,
    UniqueKeyRewrites,
    ReferenceReading,
):
    """One use: `rewrite(schema)` returns the schema for outlines-core; `placeholders` maps each
    placeholder const it introduced to the exact regex that replaces it."""

    def __init__(self, root, nonce: str, whitespace: str = "") -> None:
        self.root = root
        self.nonce = nonce
        self.whitespace = whitespace  # the regex between JSON tokens, for placeholder containers
        self._inlining: list[str] = []  # $refs schema.merge inlined into the nodes being rewritten
        self._merge_follows = 0  # references schema.merge followed (see _merge_target)
        self.placeholders: dict[str, str] = {}
        # placeholders that are arrays, for json_schema's check of where uniqueness is guarded:
        # uniqueItems kept by UniqueGuard: -> item kind ("string", "integer", ("bounded", item regex))
        self.unique_arrays: dict[str, str | tuple] = {}
        self.literal_arrays: dict[
            str, list
        ] = {}  # enum/const values holding arrays, and finite sets
        # free-form objects whose names follow a regex: placeholder -> (name regex, nonempty);
        # json_schema builds their regex once their values' regex is known (see KEYED)
        self.keyed_objects: dict[
            str, tuple[str, bool, int | None]
        ] = {}  # names, nonempty, maxProperties
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
            raise GrammarError(
                "JSON Schema draft 3 is not supported (its extends, disallow, divisibleBy "
                "and boolean required would be ignored)"
            )
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
        if node is False:
            raise NothingValid(f"the schema at {path} is false: no value is valid")
        if accepts_nothing(node):
            refuse(
                "not",
                path,
                "it negates a schema every value meets: no value is valid",
                NothingValid,
            )
        if not isinstance(node, dict):
            raise GrammarError(f"schema at {path} must be an object or true, got {node!r}")
        self._rewrites += 1
        if self._rewrites > REWRITE_BUDGET:
            raise GrammarError(
                f"json_schema expands to too large a grammar (more than {REWRITE_BUDGET} "
                "schema nodes to rewrite)"
            )
        if self.draft_3_to_7 and isinstance(node.get("items"), list):
            # an items array there is 2020-12's prefixItems, and additionalItems its items
            tuple_form = {
                "prefixItems": node["items"],
                **({"items": node["additionalItems"]} if "additionalItems" in node else {}),
            }
            node = {
                **{k: v for k, v in node.items() if k not in ("items", "additionalItems")},
                **tuple_form,
            }
        if self.ref_fallback and "$ref" in node and asserts(node, ("$ref",)):
            # drafts 3-7 ignore the keywords beside a $ref; a validator that does not know the
            # $schema URI (jsonschema reads https://json-schema.org/draft-07/schema as 2020-12)
            # applies them. Output valid under both readings where they can be enforced:
            alone = {k: v for k, v in node.items() if k in ("$ref", "$defs", "definitions")}
            return self._first_enforceable(
                lambda: self._rewrite_node(node, path), lambda: self._rewrite_node(alone, path)
            )
        return self._rewrite_node(node, path)

    def _rewrite_node(self, node: dict, path: str) -> dict:
        check_keyword_types(node, path)
        node = expand_conditionals(node, self._resolved, self._as_validators_read)
        written = node
        node, inlined = normalize(
            node, self._resolved, tuple(self._inlining), self._as_validators_read
        )
        if node is EMPTY:
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
        if node is not written:
            check_keyword_types(node, path)  # merged members were not checked
        node = forbidden_names_excluded(
            forbidden_names_dropped(_without_idle_keywords(node), path), path
        )
        node = excluded_values_rewritten(node, self.draft_4, self.const_unknown)
        node = split_by_type(node) or node
        present = [k for k in node if k in ASSERTIONS]
        branch = next((b for b in _BRANCHES if b in node), None)
        if branch is None and present and implied_type(node):
            node, branch = {**node, "type": implied_type(node)}, "type"  # its keywords' one type
        if branch is None:
            if present:
                several = (
                    " (its keywords constrain values of several types)"
                    if typed_keywords(node)
                    else ""
                )
                refuse(
                    present[0],
                    path,
                    f"it needs a type, properties, enum, const or $ref beside it{several}",
                )
            return self._with_defs(node, copy.deepcopy(ANY_VALUE), path)
        check_counts(node, path)
        handler = getattr(self, "_" + branch.lstrip("$"))
        self._inlining.extend(inlined)
        try:
            return self._with_defs(node, handler(node, path), path)
        finally:
            del self._inlining[len(self._inlining) - len(inlined) :]

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
                # a definition no value meets (false, `not: {}`): its references are empty where
                # they are (`_ref`), so it is never used; any value stands in for it
                new[key] = {
                    k: copy.deepcopy(ANY_VALUE)
                    if accepts_nothing(v)
                    else self.rewrite(v, f"{path}.{key}.{k}")
                    for k, v in node[key].items()
                }
        return new

    def _placeholder(self, regex: str, quoted: bool) -> dict:
        name = f"RGPH{self.nonce}x{len(self.placeholders)}"
        self.placeholders[f'"{name}"'] = f'"{regex}"' if quoted else regex
        return {"const": name}


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

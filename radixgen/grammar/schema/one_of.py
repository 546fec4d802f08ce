"""oneOf made exact: every generated value must be valid under exactly one alternative.

outlines-core writes oneOf as a plain alternation, so `rewrite.rewriter` enforces it only when no
value generated from one alternative is valid under another. What an alternative generates is its
rewrite, which only narrows it; what an alternative accepts is its schema as written, where an
untyped node accepts every type its keywords do not constrain (`{"properties": ...}` accepts any
string). An alternative is proved to exclude another by:

- types or enum/const values that do not meet;
- objects: the other alternative requires a name this one never generates (an object with
  `properties` is generated with listed and required names only; or each option of its anyOf
  requires one), forbids a name this one
  requires (`additionalProperties: false`), or rejects the value of a name both hold (a tag);
- arrays: a non-empty one whose items the other's items reject;
- and, failing those, by narrowing: an alternative that generates objects stops generating the
  optional properties the overlapping alternatives require (`{"required": ["a"]}` /
  `{"required": ["b"]}` over shared properties: the first never writes "b"; `{"required":
  ["Eq"]}` / `{"anyOf": [{"required": ["Gte"]}, {"required": ["Lte"]}]}`: the first never writes
  Gte or Lte); an alternative that
  generates arrays stops generating `[]` (valid under every array alternative, so under none); an
  alternative that generates strings, where each overlapping one accepts only strings of a
  pattern, from a list or of a length range, stops generating those (its enum loses the values they accept, as
  Python's `re` searches; a pattern or free string gets negative lookaheads, which the pattern
  translation writes out: `oneOf: [{"enum": ["any", ""]}, {"pattern": "^\\^\\d+"}, {"pattern":
  "^[<>]=?\\d+"}]`), or generates no strings where an overlapping one may accept every string
  (`{"type": "string", "format": "date-time"}`: validators need not assert a format). Its outputs
  are a subset of what it accepted, so they stay valid;
- and, failing those, by dropping: an alternative no narrowing sets apart, or whose narrowing
  still leaves values another accepts, generates nothing, so the others' outputs are valid under
  exactly one (a subset), unless two such alternatives accept each other's values.

References: `Readings.merged(node)` is the schema a node is generated from, with the keywords
beside each `$ref` merged (the most property names it can generate). Under drafts 3-7 a node may
also be generated from its `$ref` chain alone (the rewrite's fallback), which is also how those
drafts read it, so there types, values, required names and acceptance come from the chain alone
(`Readings.loose`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from radixgen.grammar.regex.leaves import escape_literal
from radixgen.grammar.schema.kinds import (
    MAX_DEPTH,
    generated_kinds,
    listed_kinds,
    only_options,
    only_values,
    option_kinds,
    value_kind,
    whole_kinds,
    widened,
    without_kinds,
)
from radixgen.grammar.schema.rules import always_generated, asserts, may_search, required_names

_OPEN = frozenset(
    (
        "allOf",
        "anyOf",
        "oneOf",
        "$ref",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "unevaluatedProperties",
    )
)  # keywords that may add generated names


@dataclass(frozen=True)
class Readings:
    merged: Callable  # node -> the schema it is generated from (None: not one schema)
    widest: Callable  # node -> its $ref chain followed, the keywords beside each dropped
    fallback: bool  # drafts 3-7: a node may also be generated from `widest` (see rewrite.rewriter)
    const_ignored: bool = False  # draft 4: validators do not know `const` (it narrows output only)

    def loose(self, node):
        """The reading with the fewest assertions a node may be generated from or read by a
        validator under: the merged one, or under drafts 3-7 the chain alone."""
        return self.widest(node) if self.fallback else self.merged(node)


def exclusive(options: list, readings: Readings) -> list | None:
    """For each alternative, None (exclusive as written) or the narrowed schema to generate it
    from; None when exclusion cannot be shown."""
    narrowed = _without_shared_types(options, readings)
    if narrowed is None:
        return None
    pairs = _overlaps(options, narrowed, readings)
    exact: set = set()  # alternatives narrowed by what the others accept: excluded by construction
    dropped: set = set()  # alternatives no narrowing sets apart: generated from no more
    for i in sorted({i for i, _ in pairs}):
        if narrowed[i] is not None:
            return None  # (one narrowing per alternative)
        gen = readings.merged(options[i])
        if readings.fallback and gen != readings.widest(options[i]):
            dropped.add(i)  # it may be generated from another reading: not narrowed
            continue
        if _plain_array(gen) and not gen.get("minItems"):
            narrowed[i] = {**gen, "minItems": 1}  # [] is valid under both: under none (oneOf)
            continue
        overlapping = [readings.loose(options[j]) for k, j in pairs if k == i]
        strings = _strings_narrowed(gen, overlapping, readings.const_ignored)
        if strings is not None:
            narrowed[i] = strings
            exact.add(i)
            continue
        if _names_generated(gen) is None:
            dropped.add(i)
            continue
        others = set().union(*(required_names(acc) | _one_of_required(acc) for acc in overlapping))
        drop = (others - always_generated(gen)) & set(gen["properties"])
        if drop:
            narrowed[i] = {
                **gen,
                "properties": {k: v for k, v in gen["properties"].items() if k not in drop},
            }
            continue
        own = _own_names(gen, overlapping)
        if not own:
            dropped.add(i)
            continue
        # nothing required sets them apart (each accepts {}): each generated object holds one of
        # its names that the overlapping alternatives forbid
        narrowed[i] = {"anyOf": [{**gen, "required": [*required_names(gen), name]} for name in own]}
    # an alternative whose values another may accept, where this one's may not be accepted there
    # (a resource, or an untyped resource schema's arrays of them: each array is valid under
    # both), generates nothing: the other one's values stay valid under exactly one. Not where
    # two such alternatives overlap each other (nothing of either would be generated)
    for i in dropped:
        narrowed[i] = False
    # (and one whose narrowing left values another accepts: [] left out, a non-empty array still)
    left = {i for i, _ in _overlaps(options, narrowed, readings) if i not in exact}
    for i in left:
        narrowed[i] = False
    if any((i, j) in pairs for i in dropped | left for j in dropped | left):
        return None
    return narrowed


def _strings_narrowed(gen, overlapping: list, const_ignored: bool = False):
    """`gen`, a schema generating strings only, narrowed to the strings no schema in
    `overlapping` accepts, where each of those accepts only strings matching its pattern (as
    searched), from its enum/const, or of its minLength..maxLength: gen's enum less the values
    they accept, or gen with a pattern of
    negative lookaheads (its own pattern searched after them); False (no string) where one of
    them may accept every string. None where that cannot be said (another kind of overlapping
    schema, combinations in gen, a pattern Python cannot read)."""
    if (
        not isinstance(gen, dict)
        or generated_kinds(gen) != ["string"]
        or _OPEN & set(gen)
        or "not" in gen
    ):
        return None
    patterns, listed, lengths = [], set(), []
    for acc in overlapping:
        if (
            isinstance(acc, dict)
            and "type" in acc
            and "string" not in widened(listed_kinds(acc) or ["string"])
        ):
            continue  # (no string is valid under it)
        if (
            acc is True
            or isinstance(acc, dict)
            and not asserts(acc, ("type", "format"))
            and not _OPEN & set(acc)
        ):
            return False  # it may accept every string (a format need not be asserted): gen none of them
        if not isinstance(acc, dict) or _OPEN & set(acc) or "not" in acc:
            return None
        if isinstance(acc.get("pattern"), str):
            patterns.append(acc["pattern"])
        elif (values := only_values(acc, const_ignored)) is not None:  # (draft 4 reads no const)
            listed |= {v[1] for v in values if v[0] == "string"}
        elif {"minLength", "maxLength"} & set(acc):
            least, most = acc.get("minLength", 0), acc.get("maxLength", "")
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in (least, most or 0)):
                return None
            lengths.append((least, most))
        else:
            return None
    try:
        compiled = [re.compile(p) for p in patterns]
    except re.error:
        return None
    values = only_values(gen)
    if values is not None:  # the values none of them accepts (a validator's reading: exact)
        kept = [
            v[1]
            for v in values
            if v[1] not in listed
            and not any(c.search(v[1]) for c in compiled)
            and not any(
                least <= len(v[1]) <= (most if most != "" else math.inf) for least, most in lengths
            )
        ]
        rest = {k: v for k, v in gen.items() if k != "const"}
        return {**rest, "enum": kept} if kept else False
    own = gen.get("pattern")
    if own is not None and not isinstance(own, str):
        return None
    ahead = [f"(?![\\s\\S]*?(?:{p}))" for p in patterns]
    ahead += [f"(?![\\s\\S]{{{least},{most}}}$)" for least, most in lengths]
    if listed:
        ahead.append(f"(?!(?:{'|'.join(escape_literal(value) for value in sorted(listed))})$)")
    if {"minLength", "maxLength"} & set(gen):  # its own lengths, in the automaton too
        ahead.insert(0, f"(?=[\\s\\S]{{{gen.get('minLength', 0)},{gen.get('maxLength', '')}}}$)")
        gen = {k: v for k, v in gen.items() if k not in ("minLength", "maxLength")}
    # (its own pattern searched after them, not inside a lookahead: it may hold lookarounds)
    return {
        **gen,
        "pattern": "^" + "".join(ahead) + ("" if own is None else f"[\\s\\S]*?(?:{own})"),
    }


def _without_shared_types(options: list, readings: Readings) -> list | None:
    """Alternatives narrowed by the types two of them accept whole (only `type` asserted, e.g.
    Kubernetes' {"type": ["string", "null"]} / {"type": ["number", "null"]}, or such an option of
    an anyOf / oneOf: `{"oneOf": [{"type": "string"}, {"type": "array", ...}]}` / `{"anyOf":
    [{"type": "string"}, {"type": "number"}]}`): every value of such a type is valid under both,
    so under none, and no alternative generates it (one left with no type is False, an option
    left with none is dropped). None where an alternative might still generate such a value."""
    whole: dict = {}
    for option in options:
        readings_of = [readings.merged(option), readings.loose(option)]
        for kind in set.intersection(*map(whole_kinds, readings_of)):
            whole[kind] = whole.get(kind, 0) + 1
    shared = {kind for kind, n in whole.items() if n >= 2}
    if "number" in shared:
        shared.add("integer")  # integers are numbers
    narrowed: list = [None] * len(options)
    if not shared:
        return narrowed
    for i, option in enumerate(options):
        gen = readings.merged(option)
        kinds = generated_kinds(gen) if isinstance(gen, dict) else None
        if kinds is not None and not set(widened(kinds)) & shared:
            continue
        if readings.fallback and gen != readings.widest(option):
            return None  # it may generate such a value some other way
        subs = only_options(gen)
        if (
            subs is not None
        ):  # an anyOf / oneOf: each option narrowed, those left with no type dropped
            if any(not isinstance(sub, dict) or "$ref" in sub for sub in subs):
                return None
            kept_subs = [without_kinds(sub, shared) for sub in subs]
            if None in kept_subs:
                return None
            kept_subs = [sub for sub in kept_subs if sub is not False]
            key = "anyOf" if "anyOf" in gen else "oneOf"
            narrowed[i] = {**gen, key: kept_subs} if kept_subs else False
            continue
        narrowed[i] = without_kinds(gen, shared)
        if narrowed[i] is None:
            return None
    return narrowed


def _own_names(gen: dict, overlapping: list) -> list:
    """The names `gen` may generate that every overlapping alternative forbids
    (`additionalProperties: false`, the name not listed), in gen's order."""
    if not all(
        isinstance(acc, dict)
        and acc.get("additionalProperties") is False
        and not acc.get("patternProperties")
        and isinstance(acc.get("properties", {}), dict)
        for acc in overlapping
    ):
        return []
    allowed = set().union(*(acc.get("properties", {}) for acc in overlapping))
    return [
        name
        for name, schema in gen["properties"].items()
        if name not in allowed and schema is not False
    ]


def _overlaps(options: list, narrowed: list, readings: Readings) -> list:
    return [
        (i, j)
        for i, gen in enumerate(options)
        for j, acc in enumerate(options)
        if i != j
        and narrowed[i] is not False
        and not excludes(gen if narrowed[i] is None else narrowed[i], acc, readings)
    ]


def excludes(gen, acc, readings: Readings, depth: int = 0) -> bool:
    """No value that `gen` (as written) generates is valid under `acc` (as written); False when
    this cannot be shown."""
    if (
        isinstance(gen, dict) and set(gen) == {"anyOf"} and isinstance(gen["anyOf"], list)
    ):  # (a narrowing)
        return all(excludes(branch, acc, readings, depth) for branch in gen["anyOf"])
    wide, acc = readings.loose(gen), readings.loose(acc)
    if depth < MAX_DEPTH and (
        options := only_options(wide)
    ):  # what it generates comes from its options
        return all(excludes(option, acc, readings, depth + 1) for option in options)
    if depth < MAX_DEPTH and (
        options := only_options(acc)
    ):  # a value no option accepts, acc does not
        return all(excludes(wide, option, readings, depth + 1) for option in options)
    gen_kinds = generated_kinds(wide) or option_kinds(wide, readings, generated_kinds)
    acc_kinds = listed_kinds(acc) or option_kinds(acc, readings, listed_kinds)
    if (
        gen_kinds is not None
        and acc_kinds is not None
        and not (widened(gen_kinds) & widened(acc_kinds))
    ):
        return True
    acc_values = only_values(acc, readings.const_ignored)  # acc accepts those values at most
    if (
        gen_kinds is not None
        and acc_values is not None
        and not {value_kind(v) for v in acc_values} & widened(gen_kinds)
    ):
        return True
    values = None if isinstance(wide, dict) and "properties" in wide else only_values(wide)
    if values is not None:  # (what gen generates: a const narrows output under every draft)
        if acc_values is not None and not set(values) & set(acc_values):
            return True
        if acc_kinds is not None and not {value_kind(v) for v in values} & widened(acc_kinds):
            return True
        if acc_kinds == ["string"] and _misses_pattern(values, acc):
            return True
    if acc_values is not None and gen_kinds == ["string"] and _misses_pattern(acc_values, wide):
        return True  # gen's strings all match its pattern, which none of acc's values does
    if (
        gen_kinds == ["array"]
        and _plain_array(wide)
        and _plain_array(acc)
        and wide.get("minItems", 0) >= 1
        and depth < MAX_DEPTH
    ):  # a non-empty array whose items acc's items reject
        return excludes(wide.get("items", True), acc.get("items", True), readings, depth + 1)
    return (
        gen_kinds == ["object"]
        and isinstance(acc, dict)
        and _object_excludes(gen, acc, readings, depth)
    )


def _plain_array(node) -> bool:
    """An array schema with one `items` schema for every item (no tuple, no contains)."""
    return (
        isinstance(node, dict)
        and node.get("type") in ("array", ["array"])
        and isinstance(node.get("items", True), (dict, bool))
        and not {
            "prefixItems",
            "additionalItems",
            "contains",
            "unevaluatedItems",
            "$ref",
            "allOf",
            "anyOf",
            "oneOf",
        }
        & set(node)
    )


def _object_excludes(gen, acc: dict, readings: Readings, depth: int) -> bool:
    """gen generates objects only; acc (resolved) requires a name gen never generates, forbids
    a name gen always has, or rejects the value gen gives a name both hold."""
    wide, merged = readings.loose(gen), readings.merged(gen)
    # the names it may generate: under drafts 3-7 a $ref chain may be generated from any mix of
    # merged and dropped siblings, so only a chain without any counts
    wide_names, merged_names = _names_generated(wide), _names_generated(merged)
    one_reading = not readings.fallback or merged == readings.widest(gen)
    if wide_names is not None and merged_names is not None and one_reading:
        names = wide_names | merged_names
        if required_names(acc) - names:
            return True
        for options in (
            acc.get("anyOf"),
            acc.get("oneOf"),
        ):  # each option requires a name gen never generates
            needed = _option_names(options)
            if needed and not needed & names:
                return True
    acc_props = acc.get("properties") if isinstance(acc.get("properties"), dict) else {}
    patterns = (
        acc.get("patternProperties") if isinstance(acc.get("patternProperties"), dict) else {}
    )
    held = required_names(wide)
    negated = acc.get("not")
    if (
        isinstance(negated, dict)
        and set(negated) == {"required"}
        and required_names(negated) <= held
    ):
        return True  # acc forbids a combination of names gen always has
    if acc.get(
        "additionalProperties"
    ) is False and any(  # (a pattern re cannot read may take the name)
        name not in acc_props and all(may_search(p, name) is False for p in patterns)
        for name in held
    ):
        return True
    gen_props = wide.get("properties") if isinstance(wide.get("properties"), dict) else {}
    return depth < MAX_DEPTH and any(
        excludes(gen_props[name], acc_props[name], readings, depth + 1)
        for name in held & set(gen_props) & set(acc_props)
    )


def _misses_pattern(values: list, node) -> bool:
    """Whether no string among `values` (value keys) matches `node`'s pattern, as validators
    search it (Python's re, as jsonschema does); False when there is no pattern."""
    pattern = node.get("pattern") if isinstance(node, dict) else None
    return isinstance(pattern, str) and all(
        v[0] != "string" or may_search(pattern, v[1]) is False for v in values
    )


def _names_generated(node) -> set | None:
    """The names an object schema generates: its listed and required names, where nothing else
    adds any (no combination, but anyOf/oneOf options that only require names: `oneOf: [{"required":
    ["Eq"]}, {"anyOf": [{"required": ["Gte"]}, {"required": ["Lte"]}]}]` distributed); None else."""
    if not (
        isinstance(node, dict)
        and isinstance(node.get("properties"), dict)
        and generated_kinds(node) == ["object"]
    ):
        return None
    names = set(node["properties"]) | required_names(node)
    for key in _OPEN & set(node):
        options = node[key] if key in ("anyOf", "oneOf") else None
        if not (
            isinstance(options, list)
            and all(isinstance(o, dict) and not asserts(o, ("required",)) for o in options)
        ):
            return None
        names |= set().union(*(required_names(o) for o in options))
    return names


def _option_names(options) -> set:
    """Names of which every value valid under one of `options` (an anyOf or oneOf) holds one,
    where each option requires some (`[{"required": ["Gte"]}, {"required": ["Lte"]}]`: Gte or
    Lte); empty where an option requires none."""
    if not (isinstance(options, list) and options and all(required_names(o) for o in options)):
        return set()
    return set().union(*(required_names(o) for o in options))


def _one_of_required(node) -> set:
    """_option_names of `node`'s anyOf and oneOf together (names to leave out of another
    alternative: a superset is safe, exclusion is checked after)."""
    return (
        _option_names(node.get("anyOf")) | _option_names(node.get("oneOf"))
        if isinstance(node, dict)
        else set()
    )

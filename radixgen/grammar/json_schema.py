"""JSON Schema -> regex: checked and rewritten by `schema_check`, converted by outlines-core.

Recursive schemas: outlines-core expands `$ref` to a fixed depth and, past it, silently drops the
property that contains the reference, even a required one. So a schema whose references form a
cycle is unrolled here first (`_Unroll`): every recurring reference is copied RECURSIVE_REF_DEPTH
levels deep, and at the limit the recursion takes its exit, which the schema must offer (a `null`
alternative, an empty array, an optional property). The result has no references left; its
outputs are a subset of the schema's, so they validate. Schemas without cycles go to outlines-core
with a depth limit large enough that nothing is dropped.
"""

from __future__ import annotations

import json
import secrets

from outlines_core.json_schema import build_regex_from_schema

from .matcher import GrammarError
from .schema_check import COUNTED, SchemaRewriter
from .schema_collections import KEYED, UNIQUE_KEY
from .schema_bundles import localize_embedded_refs
from .schema_refs import MISSING, follow_pointer, hoist_deep_refs, pointer_parts, restore_paths
from .size_budget import SchemaRegexSize, check_regex_size

WHITESPACE = {
    "compact": "",  # no whitespace at all: {"a":1,"b":[1,2]}
    "flexible": r"[ \t\n]{0,32}",  # bounded, so a model cannot emit whitespace forever
}
RECURSIVE_REF_DEPTH = 3  # levels a reference cycle is unrolled (outlines-core's default too)
OUTLINES_REF_DEPTH = 64  # the $ref nesting outlines-core is told to expand; deeper nesting is unrolled here
ANY_VALUE_DEPTH = 1  # nesting allowed inside objects/arrays whose contents are unconstrained
_NODE_BUDGET = 200_000
MAX_NESTING = 64  # JSON containers in a schema (outlines-core parses the rewrite with a 128-level limit)


def whitespace_pattern(whitespace: str) -> str:
    """"compact", "flexible", or a custom regex for the whitespace between JSON tokens."""
    return WHITESPACE.get(whitespace, whitespace)


def schema_to_regex(schema_json: str, whitespace: str = "compact") -> str:
    """The regex (Rust syntax) whose matches are exactly-valid JSON instances of the schema.
    Raises GrammarError for invalid or unsupported schemas, and for those that need a
    `UniqueGuard` beside the regex (see `schema_to_guarded_regex`)."""
    regex, unique_paths = schema_to_guarded_regex(schema_json, whitespace)
    if unique_paths:
        raise GrammarError("this schema needs a guard beside its regex (uniqueItems over free strings or "
                           "integers, a maxLength or minItems / maxItems of 16 or more), which only a "
                           "compiled json_schema or tool_calls constraint has")
    return regex


def schema_to_guarded_regex(schema_json: str, whitespace: str = "compact") -> tuple[str, tuple]:
    """(regex, unique_paths): the schema's regex, and (instance path, item kind) of the arrays
    whose items `UniqueGuard` must keep unique (paths: tuples of property names, None for any key
    or index; kinds "string" or "integer"); the regex's matches that the guard lets through are
    exactly-valid instances."""
    try:
        return _schema_to_regex(schema_json, whitespace)
    except RecursionError:  # reference chains thousands deep: the walks recurse per level
        raise GrammarError("json_schema nests its references too deeply") from None


def _schema_to_regex(schema_json: str, whitespace: str) -> tuple[str, tuple]:
    try:
        schema = json.loads(schema_json)
    except json.JSONDecodeError as exc:
        raise GrammarError(f"json_schema is not valid JSON: {exc}") from None
    if _depth(schema) > MAX_NESTING:
        raise GrammarError(f"json_schema nests deeper than {MAX_NESTING} levels")
    origins: dict[str, str] = {}
    try:
        return _rewritten_regex(schema, whitespace, origins)
    except GrammarError as exc:  # name the places the user wrote, not the copies hoisted from them
        exc.args = (restore_paths(str(exc), origins),)
        raise


def _rewritten_regex(schema, whitespace: str, origins: dict[str, str]) -> tuple[str, tuple]:
    try:
        schema = hoist_deep_refs(localize_embedded_refs(schema), origins)
        rewriter = SchemaRewriter(schema if isinstance(schema, dict) else {}, secrets.token_hex(4),
                                  whitespace_pattern(whitespace))
        rewritten = rewriter.rewrite(schema)
    except GrammarError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        # a malformed schema the checks above did not name: still the client's error
        raise GrammarError(f"invalid JSON Schema ({type(exc).__name__}: {exc})") from None
    _bound_any_depth(rewritten)
    if _RefWalk(rewritten).needs_unrolling():
        rewritten = _Unroll(rewritten).run()
    guarded = rewriter.unique_arrays or rewriter.length_strings or rewriter.counted_nodes or rewriter.unique_key_nodes
    unique_paths = _GuardSites(rewritten, rewriter).guard_paths() if guarded else ()
    if rewriter.keyed_objects:
        rewritten = _KeyedObjects(rewritten, rewriter, whitespace_pattern(whitespace)).run()
    regex = _outlines_regex(rewritten, whitespace_pattern(whitespace))
    for name, leaf in rewriter.placeholders.items():
        regex = regex.replace(name, f"(?:{leaf})")
    check_regex_size(len(regex))
    return regex, unique_paths


def _outlines_regex(schema: dict, whitespace: str) -> str:
    """outlines-core's regex of a rewritten schema, refused first when its estimated size passes
    REGEX_BUDGET: outlines-core copies a subschema into every place that uses it (an object
    without required properties repeats each property's regex once per later property), and on
    sizes of hundreds of megabytes its allocation fails by aborting the process."""
    check_regex_size(SchemaRegexSize(schema, _target, OUTLINES_REF_DEPTH).of(schema))
    try:
        return build_regex_from_schema(json.dumps(schema), whitespace, OUTLINES_REF_DEPTH)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise GrammarError(f"cannot compile json_schema: {exc}") from None


def _depth(node, level: int = 0) -> int:
    """How deeply JSON containers nest in node (stops counting past MAX_NESTING)."""
    if level > MAX_NESTING or not isinstance(node, (dict, list)):
        return level
    children = node.values() if isinstance(node, dict) else node
    return max((_depth(c, level + 1) for c in children), default=level + 1)


def _bound_any_depth(node) -> None:
    """Give unconstrained objects/arrays outlines-core's `depth` (its default, 2, makes the
    automaton of a plain {"type": "object"} take seconds to build)."""
    if isinstance(node, dict):
        types = node.get("type")
        if types in ("object", "array") and not ({"properties", "items", "additionalProperties"} & set(node)):
            node["depth"] = ANY_VALUE_DEPTH
        for value in node.values():
            _bound_any_depth(value)
    elif isinstance(node, list):
        for value in node:
            _bound_any_depth(value)


def _target(root, ref: str):
    """The rewritten schema at `ref`: the root or a $defs / definitions member, the only places
    hoist_deep_refs leaves references to (the rewriter keeps them where they were)."""
    parts = pointer_parts(ref)
    if parts is None or len(parts) not in (0, 2) or (parts and parts[0] not in ("$defs", "definitions")):
        raise GrammarError(f"$ref {ref!r} is not supported here (only the root and $defs members)")
    node = follow_pointer(root, parts)
    if node is MISSING:
        raise GrammarError(f"$ref {ref!r} does not resolve in the rewritten schema")
    return node


class _RefWalk:
    """Walks a rewritten schema the way outlines-core expands it, references followed."""

    def __init__(self, root) -> None:
        self.root = root
        self.nodes = 0

    def needs_unrolling(self) -> bool:
        """True when a `$ref` leads back to itself, or references nest as deep as outlines-core's
        expansion limit (past which it drops the property); raises GrammarError when the
        expansion of a schema without cycles is too large (references shared many times over)."""
        self.deepest = 0
        try:
            self._walk(self.root, ())
        except _Cycle:
            return True
        return self.deepest >= OUTLINES_REF_DEPTH

    def _walk(self, node, refs: tuple) -> None:
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")
        if isinstance(node, list):
            for sub in node:
                self._walk(sub, refs)
        elif isinstance(node, dict) and "$ref" in node:
            if node["$ref"] in refs:
                raise _Cycle
            self.deepest = max(self.deepest, len(refs) + 1)
            self._walk(_target(self.root, node["$ref"]), refs + (node["$ref"],))
        elif isinstance(node, dict):
            self._walk(list(node.get("properties", {}).values()), refs)
            for key in ("allOf", "anyOf", "oneOf", "prefixItems", "items", "additionalProperties"):
                self._walk(node.get(key), refs)


class _Cycle(Exception):
    pass


class _GuardSites:
    """Where arrays and strings can appear in a rewritten schema, as instance paths (property
    names, None for any key or index; references followed, none cyclic by now). `UniqueGuard`
    tells places apart only by path:
    - a unique array's path must not be shared with another array, whose items it would then
      wrongly keep unique (a bounded string item could leave no way out): refused;
    - a length-guarded string's path must not be shared with another string (of other bounds, a
      pattern, a literal), nor a counted array's with an array of other counts: there they keep
      their counted regex instead (`rewriter.placeholders`, the COUNTED node's own counts)."""

    def __init__(self, root, rewriter: SchemaRewriter) -> None:
        self.root = root
        self.rewriter = rewriter
        self.guarded: list[tuple] = []  # (path, item kind) of unique arrays
        self.arrays: list[tuple] = []  # (path, counts the guard keeps or None, the counted node or placeholder)
        self.lengths: list[tuple] = []  # (path, placeholder) of length-guarded strings
        self.strings: list[tuple] = []  # paths of other strings
        self.nodes = 0

    def guard_paths(self) -> tuple:
        """(path, kind) for UniqueGuard: kind "string" / "integer" (a unique array's items),
        ("bounded", item regex) (a unique array of strings that can run out of values), ("key",
        name, one of those string kinds) (a unique array of objects, by their property `name`),
        ("length", minLength, maxLength) (a string value) or ("items", maxItems) (an array's
        item count)."""
        self._walk(self.root, ())
        others = [p for p, _, where in self.arrays
                  if not (isinstance(where, str) and where in self.rewriter.unique_arrays
                          or isinstance(where, dict) and UNIQUE_KEY in where)]
        for guarded, kind in self.guarded:  # guarded arrays of another item kind count as others
            for other in others + [p for p, k in self.guarded if k != kind]:
                if _overlap(guarded, other):
                    shown = "$" + "".join("[*]" if p is None else f".{p}" for p in guarded)
                    raise GrammarError("unsupported JSON Schema keyword 'uniqueItems' at "
                                       f"{shown}: another array of the schema can appear at the "
                                       "same place (uniqueness over free strings or integers is "
                                       "only enforced where no other array can be)")
        return tuple(dict.fromkeys(self.guarded + self._lengths() + self._counts()))

    def _lengths(self) -> list:
        bounds = {name: info[:2] for name, info in self.rewriter.length_strings.items()}
        shared = {name for path, name in self.lengths
                  if any(_overlap(path, other) for other in self.strings)
                  or any(_overlap(path, p) and bounds[n] != bounds[name] for p, n in self.lengths)}
        for name in shared:
            self.rewriter.placeholders[name] = self.rewriter.length_strings[name][2]
        return [(path, ("length", *bounds[name])) for path, name in self.lengths if name not in shared]

    def _counts(self) -> list:
        counted = [(path, counts, where) for path, counts, where in self.arrays if counts is not None]
        shared = {_identity(where) for path, counts, where in counted
                  if any(_overlap(path, p) and c != counts for p, c, _ in self.arrays)}
        kept = []
        for path, counts, where in counted:
            if _identity(where) in shared:  # back to the counted regex
                if isinstance(where, dict):
                    if COUNTED in where:
                        where["maxItems"] = where.pop(COUNTED)
                else:
                    self.rewriter.placeholders[where] = self.rewriter.counted_arrays[where][1]
            else:
                kept.append((path, ("items", counts)))
        return kept

    def _walk(self, node, path: tuple) -> None:
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            self._walk(_target(self.root, node["$ref"]), path)
            return
        name = f'"{node["const"]}"' if isinstance(node.get("const"), str) else None
        if name in self.rewriter.unique_arrays:
            self.guarded.append((path, self.rewriter.unique_arrays[name]))
            counts = self.rewriter.counted_arrays.get(name)
            self.arrays.append((path, None if counts is None else counts[0], name))
        elif UNIQUE_KEY in node:  # an array of objects kept unique by one property
            key, kind = node[UNIQUE_KEY]
            self.guarded.append((path, ("key", key, kind)))
        elif name in self.rewriter.length_strings:
            self.lengths.append((path, name))
        elif name is not None and name not in self.rewriter.keyed_objects:  # any other placeholder
            self.strings.append(path)
        for value in self.rewriter.literal_arrays.get(name, ()):
            _literal_leaves(value, path, self.arrays, self.strings)
        if "const" in node and name is None:
            _literal_leaves(node["const"], path, self.arrays, self.strings)
        for value in node.get("enum", []):
            _literal_leaves(value, path, self.arrays, self.strings)
        types = node.get("type")
        types = types if isinstance(types, list) else [types]
        if "string" in types:
            self.strings.append(path)
        if "items" in node or "prefixItems" in node or "array" in types:
            self.arrays.append((path, node.get(COUNTED), node))
        for key, sub in node.get("properties", {}).items():
            self._walk(sub, path + (key,))
        for sub in node.get("allOf", []) + node.get("anyOf", []) + node.get("oneOf", []):
            self._walk(sub, path)
        for sub in node.get("prefixItems", []) + [node.get("items"), node.get("additionalProperties")]:
            self._walk(sub, path + (None,))


def _identity(where):
    """A counted array's key: its placeholder's name, or its node's identity."""
    return where if isinstance(where, str) else id(where)


def _overlap(path: tuple, other: tuple) -> bool:
    """Whether two instance paths (None: any key or index) can name the same place."""
    return len(path) == len(other) and all(a is None or b is None or a == b for a, b in zip(path, other))


class _KeyedObjects:
    """Replaces every keyed-object carrier (schema_check's `_keyed_object`) by its placeholder,
    whose regex is written here: names from the carrier's name regex, values from the regex
    outlines-core builds for its additionalProperties schema alone (references inlined, inner
    carriers replaced, and the placeholders in it filled in)."""

    def __init__(self, root, rewriter: SchemaRewriter, whitespace: str) -> None:
        self.root = root
        self.rewriter = rewriter
        self.ws = whitespace
        self.nodes = 0

    def run(self):
        return self._node(self.root)

    def _node(self, node):
        self._count()
        if isinstance(node, list):
            return [self._node(sub) for sub in node]
        if not isinstance(node, dict):
            return node
        if KEYED not in node:
            return {k: self._node(v) for k, v in node.items()}
        name = f'"{node[KEYED]}"'
        keys, nonempty, most = self.rewriter.keyed_objects[name]
        ws = self.ws
        if "additionalProperties" not in node:  # the recursion was cut there: the empty object
            if nonempty:
                raise GrammarError("recursive $ref without an exit: an object needing a property "
                                   "recurses at every level")
            self.rewriter.placeholders[name] = rf"\{{{ws}\}}"
            return {"const": node[KEYED]}
        values = self._node(self._inlined(node["additionalProperties"]))
        _bound_any_depth(values)
        value = _outlines_regex(values, ws)
        for placeholder, leaf in self.rewriter.placeholders.items():
            value = value.replace(placeholder, f"(?:{leaf})")
        pair = f"{keys}{ws}:{ws}(?:{value})"
        body = f"{pair}(?:{ws},{ws}{pair})" + ("*" if most is None else f"{{0,{most - 1}}}")
        self.rewriter.placeholders[name] = rf"\{{{ws}{body if nonempty else f'(?:{body})?'}{ws}\}}"
        return {"const": node[KEYED]}

    def _inlined(self, node):
        """`node` with every (acyclic, by now) reference replaced by its target."""
        self._count()
        if isinstance(node, list):
            return [self._inlined(sub) for sub in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return self._inlined(_target(self.root, node["$ref"]))
        return {k: self._inlined(v) for k, v in node.items() if k not in ("$defs", "definitions")}

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")


def _literal_leaves(value, path: tuple, arrays: list, strings: list) -> None:
    """The arrays (path, None, value) and the paths of the strings inside a JSON value (an
    enum/const literal)."""
    if isinstance(value, list):
        arrays.append((path, None, value))
        for item in value:
            _literal_leaves(item, path + (None,), arrays, strings)
    elif isinstance(value, dict):
        for key, item in value.items():
            _literal_leaves(item, path + (key,), arrays, strings)
    elif isinstance(value, str):
        strings.append(path)


class _Unroll:
    """A rewritten schema with every `$ref` inlined, a recurring one up to RECURSIVE_REF_DEPTH
    times on any path. Past that the recursion is cut, and the cut takes the schema's exit: an
    anyOf/oneOf drops the alternative, an array without minItems is empty, an optional property
    is left out. A cut with no exit (a required property, an allOf, a prefixItems entry)
    propagates to the parent; reaching the root, the schema is refused."""

    def __init__(self, root) -> None:
        self.root = root
        self.nodes = 0

    def run(self) -> dict:
        out = self._node(self.root, ())
        if out is _CUT:
            raise GrammarError("recursive $ref without an exit: it is required at every level (cut "
                               f"{RECURSIVE_REF_DEPTH} levels deep, it needs a null alternative, an "
                               "empty array or an optional property to stop)")
        return out

    def _node(self, node, refs: tuple):
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            if refs.count(ref) >= RECURSIVE_REF_DEPTH:
                return _CUT
            return self._node(_target(self.root, ref), refs + (ref,))
        new = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        if "properties" in node:
            new["properties"] = {}
            for name, sub in node["properties"].items():
                sub = self._node(sub, refs)
                if sub is _CUT and name in node.get("required", ()):
                    return _CUT
                if sub is not _CUT:
                    new["properties"][name] = sub
        for key in ("anyOf", "oneOf"):
            if key in node:
                new[key] = [s for s in (self._node(sub, refs) for sub in node[key]) if s is not _CUT]
                if not new[key]:
                    return _CUT
        for key in ("allOf", "prefixItems"):
            if key in node:
                new[key] = [self._node(sub, refs) for sub in node[key]]
                if _CUT in new[key]:
                    return _CUT
        for key, count in (("items", "Items"), ("additionalProperties", "Properties")):
            if isinstance(node.get(key), dict):
                new[key] = self._node(node[key], refs)
                if new[key] is _CUT:
                    if node.get("min" + count, 0) > 0:
                        return _CUT
                    del new[key]
                    new["max" + count] = 0
        return new


_CUT = object()  # a recursion cut at its depth limit

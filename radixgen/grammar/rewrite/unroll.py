"""Reference cycles in a rewritten schema, unrolled to their exits before outlines-core sees them.

Recursive schemas: outlines-core expands `$ref` to a fixed depth and, past it, silently drops the
property that contains the reference, even a required one. So a schema whose references form a
cycle is unrolled first (`Unroll`): every recurring reference is copied RECURSIVE_REF_DEPTH
levels deep, and at the limit the recursion takes its exit, which the schema must offer (a `null`
alternative, an empty array, an optional property). The result has no references left; its
outputs are a subset of the schema's, so they validate. Schemas without cycles go to outlines-core
with a depth limit large enough that nothing is dropped.
"""

from __future__ import annotations

from radixgen.grammar.matcher import GrammarError, RegexTooLarge
from radixgen.grammar.rewrite.outlines import NODE_BUDGET, OUTLINES_REF_DEPTH, ref_target

RECURSIVE_REF_DEPTH = 3  # levels a reference cycle is unrolled (outlines-core's default too)


class RefWalk:
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
        if self.nodes > NODE_BUDGET:
            raise RegexTooLarge("json_schema expands to too large a grammar")
        if isinstance(node, list):
            for sub in node:
                self._walk(sub, refs)
        elif isinstance(node, dict) and "$ref" in node:
            if node["$ref"] in refs:
                raise _Cycle
            self.deepest = max(self.deepest, len(refs) + 1)
            self._walk(ref_target(self.root, node["$ref"]), refs + (node["$ref"],))
        elif isinstance(node, dict):
            self._walk(list(node.get("properties", {}).values()), refs)
            for key in ("allOf", "anyOf", "oneOf", "prefixItems", "items", "additionalProperties"):
                self._walk(node.get(key), refs)


class _Cycle(Exception):
    pass


class Unroll:
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
            raise GrammarError(
                "recursive $ref without an exit: it is required at every level (cut "
                f"{RECURSIVE_REF_DEPTH} levels deep, it needs a null alternative, an "
                "empty array or an optional property to stop)"
            )
        return out

    def _node(self, node, refs: tuple):
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise RegexTooLarge("json_schema expands to too large a grammar")
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            if refs.count(ref) >= RECURSIVE_REF_DEPTH:
                return _CUT
            return self._node(ref_target(self.root, ref), refs + (ref,))
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
                new[key] = [
                    s for s in (self._node(sub, refs) for sub in node[key]) if s is not _CUT
                ]
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

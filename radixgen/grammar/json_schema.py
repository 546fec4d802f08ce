"""JSON Schema -> regex: checked and rewritten by `schema_check`, converted by outlines-core.

Recursive schemas: outlines-core expands `$ref` to a fixed depth and, past it, silently drops the
property that contains the reference. `_RefDepthCheck` replays that expansion and refuses a schema
where the dropped property would be a required one (the output would then miss it). Schemas
without reference cycles get a depth limit large enough that nothing is dropped.
"""

from __future__ import annotations

import json
import secrets

from outlines_core.json_schema import build_regex_from_schema

from .matcher import GrammarError
from .schema_check import SchemaRewriter

WHITESPACE = {
    "compact": "",  # no whitespace at all: {"a":1,"b":[1,2]}
    "flexible": r"[ \t\n]{0,32}",  # bounded, so a model cannot emit whitespace forever
}
RECURSIVE_REF_DEPTH = 3  # outlines-core's default expansion depth for reference cycles
ANY_VALUE_DEPTH = 1  # nesting allowed inside objects/arrays whose contents are unconstrained
_NODE_BUDGET = 200_000
MAX_NESTING = 64  # JSON containers in a schema (outlines-core parses the rewrite with a 128-level limit)


def whitespace_pattern(whitespace: str) -> str:
    """"compact", "flexible", or a custom regex for the whitespace between JSON tokens."""
    return WHITESPACE.get(whitespace, whitespace)


def schema_to_regex(schema_json: str, whitespace: str = "compact") -> str:
    """The regex (Rust syntax) whose matches are exactly-valid JSON instances of the schema.
    Raises GrammarError for invalid or unsupported schemas."""
    try:
        schema = json.loads(schema_json)
    except json.JSONDecodeError as exc:
        raise GrammarError(f"json_schema is not valid JSON: {exc}") from None
    if _depth(schema) > MAX_NESTING:
        raise GrammarError(f"json_schema nests deeper than {MAX_NESTING} levels")
    rewriter = SchemaRewriter(schema if isinstance(schema, dict) else {}, secrets.token_hex(4),
                              whitespace_pattern(whitespace))
    try:
        rewritten = rewriter.rewrite(schema)
    except GrammarError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        # a malformed schema the checks above did not name: still the client's error
        raise GrammarError(f"invalid JSON Schema ({type(exc).__name__}: {exc})") from None
    _bound_any_depth(rewritten)
    depth = _RefDepthCheck(rewritten).max_depth()
    try:
        regex = build_regex_from_schema(json.dumps(rewritten), whitespace_pattern(whitespace), depth)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise GrammarError(f"cannot compile json_schema: {exc}") from None
    for name, leaf in rewriter.placeholders.items():
        regex = regex.replace(name, f"(?:{leaf})")
    return regex


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


class _DepthLimit(Exception):
    pass


class _RefDepthCheck:
    """Replays outlines-core's traversal of a rewritten schema, counting `$ref` nesting."""

    def __init__(self, root) -> None:
        self.root = root
        self.limit = 0
        self.nodes = 0

    def max_depth(self) -> int:
        """The `max_recursion_depth` to give outlines-core; raises GrammarError if a required
        property would be dropped."""
        self.limit = 10_000
        try:
            self._walk(self.root, 0, ())
            return 64
        except _Cycle:
            self.limit = RECURSIVE_REF_DEPTH
        try:
            self._walk(self.root, 0, ())
        except _DepthLimit:
            raise GrammarError("recursive $ref: cannot be bounded without dropping required content") from None
        return RECURSIVE_REF_DEPTH

    def _walk(self, node, depth: int, refs: tuple) -> None:
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")
        if not isinstance(node, dict):
            return
        if "properties" in node:
            return self._properties(node, depth, refs)
        for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if key in node:
                for sub in node[key]:
                    self._walk(sub, depth, refs)
                return None
        if "enum" in node or "const" in node:
            return None
        if "$ref" in node:
            return self._ref(node["$ref"], depth, refs)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                self._walk(node[key], depth, refs)
        return None

    def _properties(self, node: dict, depth: int, refs: tuple) -> None:
        required = set(node.get("required", []))
        for name, sub in node["properties"].items():
            try:
                self._walk(sub, depth, refs)
            except _DepthLimit:
                if name in required:
                    raise GrammarError(f"recursive $ref under required property {name!r}: outlines-core "
                                       f"expands cycles {RECURSIVE_REF_DEPTH} levels deep and would drop it") from None

    def _ref(self, ref: str, depth: int, refs: tuple) -> None:
        if depth > self.limit:
            raise _DepthLimit
        if self.limit > RECURSIVE_REF_DEPTH and ref in refs:
            raise _Cycle
        node = self.root
        for part in (p for p in ref.split("#", 1)[-1].split("/") if p):
            node = node[part]
        self._walk(node, depth + 1, refs + (ref,))


class _Cycle(Exception):
    pass

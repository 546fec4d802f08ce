"""Local `$ref`s of a JSON Schema: rewriting them (`map_refs`) and pointing every reference into
the inside of a schema at a copy of its target in the root's $defs (`hoist_deep_refs`).

The schema rewriter (schema_check) changes the shape of what it rewrites: a guarded array becomes
a placeholder const, an object with minProperties an anyOf, a keyed object a carrier. A reference
such as "#/properties/a/items" would then lead nowhere. References to the root and to members of
$defs / definitions keep their meaning, because the rewriter keeps those places; every other
target is copied into $defs first, so after hoisting only those two kinds remain."""

from __future__ import annotations

import copy
from typing import Any, Callable
from urllib.parse import unquote

# keywords whose value maps names to schemas (a name there may be "enum" or "$ref")
NAMED_SCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LITERALS = ("enum", "const", "default", "examples")  # JSON values: a "$ref" in them is data
_GROUPS = ("$defs", "definitions")


def map_refs(node: Any, moved: Callable[[str], str]) -> Any:
    """A copy of the schema `node` with each local reference ("#...") replaced by moved(ref)."""
    if isinstance(node, list):
        return [map_refs(v, moved) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for name, value in node.items():
        if name == "$ref" and isinstance(value, str) and value.startswith("#"):
            out[name] = moved(value)
        elif name in _LITERALS:
            out[name] = copy.deepcopy(value)
        elif name in NAMED_SCHEMAS and isinstance(value, dict):
            out[name] = {n: map_refs(sub, moved) for n, sub in value.items()}
        else:
            out[name] = map_refs(value, moved)
    return out


def hoist_deep_refs(root: Any) -> Any:
    """`root` with each reference to a place other than the root or a member of $defs /
    definitions (written without escapes) pointed at a copy of the target, added to root's $defs
    as "radixgen-ref<n>". References that do not resolve are left for the rewriter to refuse."""
    if not isinstance(root, dict) or not isinstance(root.get("$defs", {}), dict):
        return root
    names: dict[tuple, str] = {}
    pending: list[tuple[str, Any]] = []

    def moved(ref: str) -> str:
        parts = _pointer(ref)
        if parts is None or not parts or (len(parts) == 2 and parts[0] in _GROUPS and ref == f"#/{parts[0]}/{parts[1]}"):
            return ref
        target = _follow(root, parts)
        if target is _MISSING:
            return ref
        if parts not in names:
            names[parts] = _fresh_name(root, set(names.values()))
            pending.append((names[parts], target))
        return f"#/$defs/{names[parts]}"

    out = map_refs(root, moved)
    added = {}
    while pending:
        name, target = pending.pop()
        added[name] = map_refs(target, moved)
    if added:
        out["$defs"] = {**out.get("$defs", {}), **added}
    return out


def _pointer(ref: str) -> tuple[str, ...] | None:
    """The decoded JSON pointer of a fragment reference "#/a/b", () for "#"; None for others
    (an anchor "#name")."""
    fragment = unquote(ref[1:])
    if not fragment:
        return ()
    if not fragment.startswith("/"):
        return None
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in fragment[1:].split("/"))


_MISSING = object()


def _follow(root: Any, parts: tuple[str, ...]) -> Any:
    node = root
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _fresh_name(root: dict, used: set) -> str:
    n = len(used)
    while f"radixgen-ref{n}" in used or f"radixgen-ref{n}" in root.get("$defs", {}):
        n += 1
    return f"radixgen-ref{n}"

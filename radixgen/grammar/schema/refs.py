"""Local `$ref`s of a JSON Schema: rewriting them (`map_refs`), resolving JSON pointers
(`pointer_parts`, `follow_pointer`), and pointing every reference into the inside of a schema at
a copy of its target in the root's $defs (`hoist_deep_refs`).

The schema rewriter (rewrite.rewriter) changes the shape of what it rewrites: a guarded array becomes
a placeholder const, an object with minProperties an anyOf, a keyed object a carrier. A reference
such as "#/properties/a/items" would then lead nowhere, or somewhere else. References to the root
and to members of $defs / definitions keep their meaning, because the rewriter keeps those
places; every other target is copied into $defs first, so after hoisting only those two kinds
remain (json_schema's walks refuse anything else)."""

from __future__ import annotations

import copy
import re
from typing import Any, Callable
from urllib.parse import unquote

from radixgen.grammar.matcher import GrammarError

# keywords whose value maps names to schemas (a name there may be "enum" or "$ref")
NAMED_SCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
LITERAL_KEYWORDS = ("enum", "const", "default", "examples")  # JSON values: a "$ref" in them is data
_GROUPS = ("$defs", "definitions")
MISSING = object()  # follow_pointer's answer for a pointer that leads nowhere
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")  # an array index, spelt one way


def map_refs(node: Any, moved: Callable[[str], str]) -> Any:
    """A copy of the schema `node` with each reference replaced by moved(ref)."""
    if isinstance(node, list):
        return [map_refs(v, moved) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for name, value in node.items():
        if name == "$ref" and isinstance(value, str):
            out[name] = moved(value)
        elif name in LITERAL_KEYWORDS:
            out[name] = copy.deepcopy(value)
        elif name in NAMED_SCHEMAS and isinstance(value, dict):
            out[name] = {n: map_refs(sub, moved) for n, sub in value.items()}
        else:
            out[name] = map_refs(value, moved)
    return out


def hoist_deep_refs(root: Any, origins: dict[str, str] | None = None) -> Any:
    """`root` with each reference to a place other than the root or a member of $defs /
    definitions (written without escapes) pointed at a copy of the target, added to root's $defs
    as "radixgen-ref<n>"; references qualified by the root's own $id lose the qualifier.
    References that do not resolve are left for the rewriter to refuse. Raises GrammarError when
    $defs is not an object, or a subschema below the root sets its own base ($id, draft-04 id)
    for references inside it. `origins`, if given, receives each copy's name -> the path of
    the place it copies, as error messages write paths (`restore_paths`)."""
    if not isinstance(root, dict):
        return root
    if not isinstance(root.get("$defs", {}), dict):
        raise GrammarError("json_schema $defs must be an object")
    _refuse_nested_bases(root, "$", declares_draft_3_to_7(root), base_keywords(root), at_root=True)
    base = root_base(root)
    names: dict[tuple, str] = {}
    pending: list[tuple[str, Any]] = []

    def moved(ref: str) -> str:
        if base and ref.startswith(base + "#"):
            ref = ref[len(base) :]
        parts = pointer_parts(ref)
        if (
            parts is None
            or not parts
            or (len(parts) == 2 and parts[0] in _GROUPS and ref == f"#/{parts[0]}/{parts[1]}")
        ):
            return ref
        target = follow_pointer(root, parts)
        if target is MISSING:
            return ref
        if parts not in names:
            names[parts] = _fresh_name(root, set(names.values()))
            pending.append((names[parts], target))
            if origins is not None:
                origins[names[parts]] = _message_path(root, parts)
        return f"#/$defs/{names[parts]}"

    out = map_refs(root, moved)
    added = {}
    while pending:
        name, target = pending.pop()
        added[name] = map_refs(target, moved)
    if added:
        out["$defs"] = {**out.get("$defs", {}), **added}
    return out


def _message_path(root: Any, parts: tuple[str, ...]) -> str:
    """`parts` (a pointer that resolves in root) as error messages write paths: $.a.b[0]."""
    path, node = "$", root
    for part in parts:
        if isinstance(node, list):
            path, node = f"{path}[{part}]", node[int(part)]
        else:
            path, node = f"{path}.{part}", node[part]
    return path


_HOISTED_PATH = re.compile(r"\$\.\$defs\.(radixgen-ref\d+)")


def restore_paths(message: str, origins: dict[str, str]) -> str:
    """An error message with the paths into hoisted copies ($.$defs.radixgen-ref3.minimum)
    written as the paths of the places they copy ($.properties.a.items.minimum)."""
    return _HOISTED_PATH.sub(lambda m: origins.get(m.group(1), m.group(0)), message)


def pointer_parts(ref: str) -> tuple[str, ...] | None:
    """The decoded JSON-pointer segments of a fragment reference "#/a/b" (empty segments kept:
    "" is a valid key), () for "#"; None for anything else (an anchor "#name", another document)."""
    if not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if not fragment:
        return ()
    if not fragment.startswith("/"):
        return None
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in fragment[1:].split("/"))


def follow_pointer(root: Any, parts: tuple[str, ...]) -> Any:
    """The value at `parts` inside root, or MISSING (array indexes: canonical ASCII decimals)."""
    node = root
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and _INDEX.fullmatch(part) and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def declared_draft(root) -> int | None:
    """The JSON Schema draft 3, 4, 6 or 7 `root` declares in its `$schema`, else None."""
    uri = str(root.get("$schema", "")) if isinstance(root, dict) else ""
    return next((n for n in (3, 4, 6, 7) if f"draft-0{n}/" in uri), None)


def declares_draft_3_to_7(root) -> bool:
    return declared_draft(root) is not None


def names_draft_unambiguously(root) -> bool:
    """Whether `root`'s `$schema` is a draft 3-7 URI every validator knows (jsonschema reads any
    other, e.g. https://json-schema.org/draft-07/schema, as 2020-12)."""
    return isinstance(root, dict) and _DRAFT_URI.fullmatch(str(root.get("$schema", ""))) is not None


_DRAFT_URI = re.compile(r"http://json-schema\.org/draft-0[3467]/schema#?")


def base_keywords(root) -> tuple:
    """The keywords that set a base URI as validators read `root`: drafts 3-4 `id`, drafts 6-7
    `$id` (each ignores the other) under a URI every validator knows; both where the URI is read
    differently by different validators (or as 2020-12, which knows only `$id`)."""
    if names_draft_unambiguously(root):
        return ("id",) if declared_draft(root) in (3, 4) else ("$id",)
    return ("$id", "id")


def root_base(root) -> str | None:
    """The root's own base URI (its `$id`, or a draft 3-4 `id`, without an empty fragment),
    which may qualify references."""
    key = base_keywords(root)[0] if isinstance(root, dict) else "$id"
    base = root.get(key) if isinstance(root, dict) and isinstance(root.get(key), str) else None
    if base is not None and "#" in base.rstrip("#"):
        return None  # a non-empty fragment: no base validators resolve references against
    return base[:-1] if base is not None and base.endswith("#") else base


def _refuse_nested_bases(
    node: Any, path: str, old_draft: bool, keywords: tuple, at_root: bool = False
) -> None:
    """GrammarError when a subschema below the root has an $id (or draft-04 id) and a reference
    inside it: that reference would resolve against the subschema's base, not the root. Drafts
    3-7 read an id that is only a fragment ("#/properties/x", "#name") as a name for the
    subschema, not a base: references inside it resolve against the root. Only `keywords` set
    bases (a draft-04 schema's `$id` is an unknown keyword there). Absolute references do not
    depend on the base (those into the root's own URI resolve; any other is refused later)."""
    if isinstance(node, list):
        for i, value in enumerate(node):
            _refuse_nested_bases(value, f"{path}[{i}]", old_draft, keywords)
        return
    if not isinstance(node, dict):
        return
    bases = [node[k] for k in keywords if isinstance(node.get(k), str)]
    if old_draft:
        bases = [b for b in bases if not b.startswith("#")]
    if not at_root and bases and _has_relative_ref(node):
        raise GrammarError(
            f"unsupported JSON Schema keyword '$id' at {path}: relative references "
            "inside a subschema with its own base URI are not supported (they would "
            "resolve against it, not the root)"
        )
    for name, value in node.items():
        if name in LITERAL_KEYWORDS:
            continue
        if name in NAMED_SCHEMAS and isinstance(value, dict):
            for key, sub in value.items():
                _refuse_nested_bases(sub, f"{path}.{name}.{key}", old_draft, keywords)
        else:
            _refuse_nested_bases(value, f"{path}.{name}", old_draft, keywords)


def _has_relative_ref(node: Any) -> bool:
    """Whether a reference inside `node` is relative (no scheme: "#/...", "other.json#x"): an
    absolute one ("https://host/schema.json#/...") means the same under any base."""
    found: list[str] = []
    map_refs(node, lambda ref: found.append(ref) or ref)
    return any(not _SCHEME.match(ref) for ref in found)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _fresh_name(root: dict, used: set) -> str:
    n = len(used)
    while f"radixgen-ref{n}" in used or f"radixgen-ref{n}" in root.get("$defs", {}):
        n += 1
    return f"radixgen-ref{n}"

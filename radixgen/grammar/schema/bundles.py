"""Bundled schemas: subschemas that carry their own base URI (`$id`, or a draft 3-4 `id`) and
the references that reach them by it.

A bundler (AsyncAPI's published schemas, 2020-12 compound documents) puts several schema
documents into one: each keeps its `$id` ("http://asyncapi.com/definitions/3.0.0/server.json"),
and references name those URIs, or are relative to the subschema they sit in. Validators resolve
them inside the document. `localize_embedded_refs` rewrites every such reference to the JSON
pointer of its target in the root ("#/definitions/http:~1~1asyncapi.com~1...~1server.json"),
and drops the bases it resolved (and, under a draft 3-7 URI every validator reads so, ids beside
a `$ref`, which those drafts ignore), so the rest of radixgen sees only local references. A
reference into no embedded resource is left as it was (refused later as not local), as is one
to an anchor ("#name")."""

from __future__ import annotations

from typing import Any
from urllib.parse import urldefrag, urljoin

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema.refs import (
    LITERAL_KEYWORDS,
    MISSING,
    base_keywords,
    declared_draft,
    declares_draft_3_to_7,
    follow_pointer,
    names_draft_unambiguously,
    pointer_parts,
)

# Where validators look for embedded resources (the `referencing` library's subresources of each
# draft): a subschema anywhere else is none, whatever its id. Keywords that hold one schema, an
# array of them, or a map of names to them.
_DRAFT_4 = (
    frozenset(("additionalItems", "additionalProperties", "not", "items")),
    frozenset(("allOf", "anyOf", "oneOf", "items")),
    frozenset(("definitions", "patternProperties", "properties")),
)
_DRAFT_6 = (_DRAFT_4[0] | {"contains", "propertyNames"}, *_DRAFT_4[1:])
_DRAFT_7 = (_DRAFT_6[0] | {"if", "then", "else"}, *_DRAFT_6[1:])
# a URI some validators read as draft 7 and others as 2020-12 (or none, read as 2020-12): what
# both take ($defs where nothing is declared)
_EITHER = (_DRAFT_7[0] - {"additionalItems"}, frozenset(("allOf", "anyOf", "oneOf")), _DRAFT_7[2])


def localize_embedded_refs(root: Any) -> Any:
    """A copy of `root` with references to embedded resources made local (see the module doc)."""
    if not isinstance(root, dict):
        return root
    keywords = base_keywords(root)
    draft = declared_draft(root) if names_draft_unambiguously(root) else None
    places = {3: _DRAFT_4, 4: _DRAFT_4, 6: _DRAFT_6, 7: _DRAFT_7}.get(draft, _EITHER)
    if not declares_draft_3_to_7(root):  # 2019-09 on, or no $schema (read as 2020-12)
        places = (places[0], places[1], places[2] | {"$defs"})
    walk = _Bundle(
        root,
        keywords[0] if len(keywords) == 1 else "$id",  # (ambiguous: 2020-12's reading)
        draft,
        declares_draft_3_to_7(root),
        places,
    )
    walk.find(root, (), "", at_root=True)
    return walk.rewrite(root, "", at_root=True)


class _Bundle:
    def __init__(
        self, root: dict, key: str, draft: int | None, old_uri: bool, places: tuple
    ) -> None:
        self.root = root
        self.key = key  # the keyword that sets a base
        self.draft = draft  # 3-7 under a URI every validator reads so, else None
        self.old_uri = old_uri  # a draft 3-7 URI, perhaps one that some validators read as 2020-12
        self.in_value, self.in_array, self.in_values = places
        self.resources: dict[str, tuple] = {}  # base URI -> pointer parts from the root

    def base_of(self, node: dict, base: str) -> str | None:
        """The base URI `node` sets (absolute against `base`, without an empty fragment), or
        None. Drafts 3-7 ignore an id beside a `$ref`, and read one that is only a fragment as a
        name."""
        value = node.get(self.key)
        if not isinstance(value, str):
            return None
        if self.old_uri and ("$ref" in node or value.startswith("#")):
            if self.draft is None and "$ref" in node:
                raise GrammarError(
                    f"unsupported JSON Schema keyword '$id' {value!r} beside a $ref: the "
                    "$schema URI is read as draft 7 (where it is ignored) by some validators "
                    "and as 2020-12 (where it sets the base) by others"
                )
            return None
        uri, fragment = urldefrag(_join(base, value))
        return uri if not fragment else None

    def subresources(self, node: dict):
        """(pointer parts, subschema) of the places validators look for resources in `node`."""
        for name, value in node.items():
            if name in self.in_values and isinstance(value, dict):
                yield from (((name, k), v) for k, v in value.items() if isinstance(v, dict))
            elif name in self.in_array and isinstance(value, list):
                yield from (((name, str(i)), v) for i, v in enumerate(value) if isinstance(v, dict))
            elif name in self.in_value and isinstance(value, dict):
                yield (name,), value

    def find(self, node: dict, path: tuple, base: str, at_root: bool = False) -> None:
        own = self.base_of(node, base)
        if own is not None or at_root:
            base = own if own is not None else base
            if self.resources.setdefault(base, path) != path:  # (which one validators take varies)
                raise GrammarError(
                    f"unsupported JSON Schema keyword '$id': two subschemas have the base URI "
                    f"{base!r}"
                )
        for parts, child in self.subresources(node):
            self.find(child, path + parts, base)

    def rewrite(self, node: dict, base: str, at_root: bool = False) -> dict:
        """A copy of the resource `node` (the root, or a subschema where validators look for
        one) with its references localized and its own base, if it sets one, dropped."""
        own = self.base_of(node, base)
        base = own if own is not None else base
        out = self._entries(node, base, {id(child) for _, child in self.subresources(node)})
        ignored = self.draft is not None and "$ref" in node  # (every validator ignores it)
        if not at_root and self.key in out and (own is not None or ignored):
            del out[self.key]  # the subschema is reached by pointer now, or the id meant nothing
        return out

    def _entries(self, node: dict, base: str, inside: set) -> dict:
        """A copy of `node`'s entries: its resources (`inside`) rewritten as such; anything
        else keeps its ids, and the references in it resolve against `base`."""
        out = {}
        for name, value in node.items():
            if id(value) in inside:
                out[name] = self.rewrite(value, base)
            elif (
                name == "$schema"
                and isinstance(value, str)
                and node is not self.root
                and _dialect(value) != _dialect(self.root.get("$schema"))
            ):
                raise GrammarError(
                    f"unsupported JSON Schema keyword '$schema' {value!r} below the root: "
                    "validators read that subschema in another draft (radixgen reads the "
                    "whole schema in the root's)"
                )
            elif name == "$ref" and isinstance(value, str):
                out[name] = self._local(value, base)
            elif name in LITERAL_KEYWORDS:
                out[name] = value
            elif isinstance(value, dict):
                out[name] = self._entries(value, base, inside)
            elif isinstance(value, list):
                out[name] = [
                    self.rewrite(v, base)
                    if id(v) in inside
                    else self._entries(v, base, inside)
                    if isinstance(v, dict)
                    else v
                    for v in value
                ]
            else:
                out[name] = value
        return out

    def _local(self, ref: str, base: str) -> str:
        """`ref` as a pointer from the root, when it resolves into an embedded resource."""
        uri, fragment = urldefrag(_join(base, ref))
        inner = pointer_parts("#" + fragment)
        if uri not in self.resources or inner is None:
            return ref
        parts = self.resources[uri] + inner
        if self.resources[uri] and follow_pointer(self.root, parts) is MISSING:
            raise GrammarError(
                f"unsupported JSON Schema keyword '$ref': {ref!r} does not resolve inside "
                f"{uri!r}, the subschema with that base URI it sits in or names"
            )
        return "#" + "".join(
            "/" + p.replace("%", "%25").replace("~", "~0").replace("/", "~1") for p in parts
        )


def _join(base: str, ref: str) -> str:
    """`ref` resolved against `base` (RFC 3986; urljoin leaves a fragment alone under schemes it
    does not know to be hierarchical, such as urn:)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


def _dialect(uri) -> str:
    """A `$schema` URI as validators tell drafts apart (no `$schema`: 2020-12)."""
    return (
        uri.rstrip("#") if isinstance(uri, str) else "https://json-schema.org/draft/2020-12/schema"
    )

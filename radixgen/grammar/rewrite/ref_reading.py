"""How the schema rewriter (`rewrite.rewriter.SchemaRewriter`) reads local `$ref`s: resolved to
their target, with the keywords beside each `$ref` merged in (`_resolved`), as a chain alone
(`_resolve_chain`, drafts 3-7's reading), or as validators read them (`_as_validators_read`). A
mixin: the methods use the rewriter's `root`, `draft_3_to_7`, `ref_fallback` and `_merge_follows`."""

from __future__ import annotations

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.schema.merge import resolve_merged
from radixgen.grammar.schema.refs import MISSING, follow_pointer, pointer_parts, root_base

MERGE_FOLLOW_BUDGET = 20_000


class ReferenceReading:
    def _resolve(self, ref: str, path: str):
        parts = ref.split("#")
        if len(parts) != 2 or (parts[0] and parts[0] != root_base(self.root)):
            refuse("$ref", path, f"{ref!r} is not a local reference")
        pointer = pointer_parts("#" + parts[1])
        if pointer is None:
            refuse("$ref", path, f"{ref!r} names an anchor (only JSON pointers are supported)")
        node = follow_pointer(self.root, pointer)
        if node is MISSING:
            refuse("$ref", path, f"{ref!r} does not resolve")
        return node

    def _resolved(self, node):
        """`node` with its `$ref` chain followed, keywords beside each `$ref` merged into the
        target; None when they cannot be merged exactly (under an unambiguous draft 3-7 URI, the
        target alone then: that draft ignores them)."""
        return resolve_merged(node, self._merge_target, self.ref_fallback)

    def _merge_target(self, ref: str):
        """The schema at `ref`, for schema.merge, which follows references every time it merges
        through them: a reference shared along each level of a chain (A = allOf [B, B], B = allOf
        [C, C], ...) would take exponential work, so the follows are counted."""
        self._merge_follows += 1
        if self._merge_follows > MERGE_FOLLOW_BUDGET:
            raise GrammarError(
                "json_schema expands to too large a grammar (its merges follow "
                f"references more than {MERGE_FOLLOW_BUDGET} times)"
            )
        return self._resolve(ref, "$")

    def _as_validators_read(self, node):
        """`node` resolved as validators read it, for what must hold under every reading (a
        oneOf option distributed into, schema.merge; an `if` test, schema.conditionals): drafts
        3-7 read a $ref chain alone; under an ambiguous draft URI a chain with keywords beside a
        $ref is read both ways, so None (cannot tell)."""
        if not self.draft_3_to_7:
            return self._resolved(node)
        alone = self._resolve_chain(node)
        return alone if self.ref_fallback or self._resolved(node) == alone else None

    def _resolve_chain(self, node):
        for _ in range(32):
            if not (isinstance(node, dict) and "$ref" in node):
                return node
            node = self._resolve(node["$ref"], "$")
        return node

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

A node goes to the handler of its first keyword in `HANDLERS` (outlines-core's order), a module
function of the rewrite's state (rewrite.state) in the module of its keyword family:
rewrite.branches (allOf, anyOf, oneOf, prefixItems, enum/const, $ref), rewrite.objects
(properties) and rewrite.type_keyword (type, with a table of its own per type). rewrite.walk
normalizes each node and dispatches it.
"""

from __future__ import annotations

from collections.abc import Callable

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.branches import (
    rewrite_all_of,
    rewrite_any_of,
    rewrite_const,
    rewrite_enum,
    rewrite_one_of,
    rewrite_prefix_items,
    rewrite_ref,
)
from radixgen.grammar.rewrite.objects import rewrite_properties
from radixgen.grammar.rewrite.state import RewriteState
from radixgen.grammar.rewrite.type_keyword import rewrite_type
from radixgen.grammar.rewrite.walk import rewrite
from radixgen.grammar.schema.refs import declared_draft, names_draft_unambiguously

Handler = Callable[[RewriteState, dict, str], dict]

# keyword -> handler, in outlines-core's order: the first of a node's keywords picks its handler
HANDLERS: dict[str, Handler] = {
    "properties": rewrite_properties,
    "allOf": rewrite_all_of,
    "anyOf": rewrite_any_of,
    "oneOf": rewrite_one_of,
    "prefixItems": rewrite_prefix_items,
    "enum": rewrite_enum,
    "const": rewrite_const,
    "$ref": rewrite_ref,
    "type": rewrite_type,
}


class SchemaRewriter:
    """One use: `rewrite(schema)` returns the schema for outlines-core; `state` holds what the
    rewrite recorded (`state.placeholders` maps each placeholder const it introduced to the exact
    regex that replaces it; the places UniqueGuard keeps: rewrite.state)."""

    def __init__(self, root, nonce: str, whitespace: str = "") -> None:
        draft = declared_draft(root)
        if draft == 3:
            raise GrammarError(
                "JSON Schema draft 3 is not supported (its extends, disallow, divisibleBy "
                "and boolean required would be ignored)"
            )
        draft_3_to_7 = draft is not None
        ref_fallback = draft_3_to_7 and names_draft_unambiguously(root)
        self.state = RewriteState(
            root=root,
            nonce=nonce,
            whitespace=whitespace,
            handlers=HANDLERS,
            draft_3_to_7=draft_3_to_7,
            ref_fallback=ref_fallback,
            const_unknown=draft == 4,
            draft_4=draft == 4 and ref_fallback,
        )

    def rewrite(self, node, path: str = "$"):
        """The rewrite of `node` (the root schema, or one of its subschemas at `path`)."""
        return rewrite(self.state, node, path)

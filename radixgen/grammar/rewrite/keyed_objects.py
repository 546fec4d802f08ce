"""Free-form objects whose names follow rules (keyed objects): their regex, written around the
regex outlines-core builds for their values (`KeyedObjects`)."""

from __future__ import annotations

from radixgen.grammar.index.size_budget import check_regex_size, written_size
from radixgen.grammar.matcher import GrammarError, RegexTooLarge
from radixgen.grammar.rewrite.containers import KEYED
from radixgen.grammar.rewrite.outlines import (
    NODE_BUDGET,
    bound_any_depth,
    outlines_regex,
    ref_target,
)
from radixgen.grammar.rewrite.rewriter import SchemaRewriter


class KeyedObjects:
    """Replaces every keyed-object carrier (rewrite.containers' `_keyed_object`) by its placeholder,
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
                raise GrammarError(
                    "recursive $ref without an exit: an object needing a property "
                    "recurses at every level"
                )
            self.rewriter.placeholders[name] = rf"\{{{ws}\}}"
            return {"const": node[KEYED]}
        values = self._node(self._inlined(node["additionalProperties"]))
        bound_any_depth(values)
        value = outlines_regex(values, ws)
        # (the keyed object's regex holds its value twice: checked before either is written)
        check_regex_size(2 * written_size(value, self.rewriter.placeholders))
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
            return self._inlined(ref_target(self.root, node["$ref"]))
        return {k: self._inlined(v) for k, v in node.items() if k not in ("$defs", "definitions")}

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise RegexTooLarge(
                "json_schema expands to too large a grammar (its references written out)"
            )

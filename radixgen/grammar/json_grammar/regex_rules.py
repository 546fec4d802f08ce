"""A regex that spans several JSON tokens, as schema-grammar rules over tokens.

Some of the rewritten schema's placeholders stand for a whole container's regex (a keyed
object's, a counted array's, a unique array of literals'): json_grammar.rules cannot give those one
terminal, since a terminal is one JSON token (json_grammar.tokens). Here the regex's syntax tree is cut
at token boundaries: a subtree whose texts are all single JSON scalar tokens is a terminal (its
DFA), a single `{ } [ ] , :` is punctuation, and a concatenation whose children split a token
(`"`, the characters, `"`) gathers them until they make one. Alternations and repeats around
whole tokens become rules. A regex whose token boundaries fall anywhere else is refused.
"""

from __future__ import annotations

from radixgen.grammar.cfg.dfa import compile_ast
from radixgen.grammar.cfg.terminal_regex import parse_regex
from radixgen.grammar.json_grammar.tokens import is_scalar_token
from radixgen.grammar.matcher import GrammarError

_PUNCT = {ord(c): c for c in "{}[],:"}
_MAX_COUNT = 4096  # repeats written out as that many rules at most


class NotAligned(Exception):
    """A subtree that is part of a token, not a sequence of whole ones."""


class RegexRules:
    """`symbol(regex)`: a rule of `grammar` (a SchemaGrammar) matching exactly the regex."""

    def __init__(self, grammar) -> None:
        self.grammar = grammar
        self._token: dict[
            str, object
        ] = {}  # repr(node) -> its DFA if it is one JSON token, else None

    def symbol(self, regex: str, path: str) -> str:
        try:
            ast, lazy = parse_regex(regex, rust=True)
            if lazy:
                raise NotAligned
            return self.grammar.rule([self._symbols(ast)])
        except (NotAligned, ValueError, RecursionError):
            raise GrammarError(
                f"json_schema: the value at {path} is a regex over several JSON tokens that "
                "cannot be cut into them"
            ) from None

    def _symbols(self, node: tuple) -> list[str]:
        """Grammar symbols whose texts in sequence are exactly the node's texts."""
        kind = node[0]
        if kind == "set" and len(node[1]) == 1 and node[1][0][0] == node[1][0][1] in _PUNCT:
            return [self.grammar.punct(_PUNCT[node[1][0][0]])]
        dfa = self._token_dfa(node)
        if dfa is not None:
            return [self.grammar.terminal_dfa(repr(node), dfa)]
        if kind == "cat":
            return self._sequence(node[1])
        if kind == "alt":
            return [self.grammar.rule([self._symbols(branch) for branch in node[1]])]
        if kind == "rep":
            return self._repeat(self._symbols(node[1]), node[2], node[3])
        raise NotAligned

    def _sequence(self, children: list) -> list[str]:
        out, pending = [], []
        for child in children:
            if pending:
                pending.append(child)
                if self._token_dfa(("cat", pending)) is not None:
                    out += self._symbols(("cat", pending))
                    pending = []
                continue
            try:
                out += self._symbols(child)
            except NotAligned:
                pending = [child]
        if pending:
            raise NotAligned
        return out

    def _repeat(self, body: list[str], low: int, high: int | None) -> list[str]:
        if low > _MAX_COUNT or (high or 0) > _MAX_COUNT:
            raise NotAligned
        item = self.grammar.rule([body]) if len(body) != 1 else body[0]
        return [item] * low + [self.grammar.repeats(item, None if high is None else high - low)]

    def _token_dfa(self, node: tuple):
        """The node's DFA where its texts are single JSON scalar tokens, else None (compiled once:
        the terminal takes the same DFA)."""
        key = repr(node)
        if key not in self._token:
            try:
                dfa = compile_ast(node)
            except ValueError:  # (matches nothing)
                dfa = None
            self._token[key] = dfa if dfa is not None and is_scalar_token(dfa) else None
        return self._token[key]

"""A slow, straightforward CFG mask for differential tests: every token is lexed byte by byte
from the matcher's lexer state and its completed terminals are fed to a plain LALR simulator of
its own (no trie, no shared parser caches, no packed rows), exactly as `CfgGrammar.advance`
defines acceptance; EOS when the partial terminal may end here and the parser accepts $END."""

from __future__ import annotations

from functools import lru_cache

from lark.parsers.lalr_analysis import Shift

from radixgen.grammar.cfg.lexer import DEAD, FRESH

END = "$END"


class RefParser:
    """LALR(1) over Lark's parse table with tuple stacks; one simulation per terminal."""

    def __init__(self, lark) -> None:
        table = lark.parser.parser.parser.parse_table
        self.states = table.states
        self.end_state = table.end_states["start"]
        self.feed = lru_cache(maxsize=None)(self._feed)
        self.acceptable = lru_cache(maxsize=None)(self._acceptable)

    def _feed(self, stack: tuple, term: str) -> tuple | None:
        while True:
            action = self.states[stack[-1]].get(term)
            if action is None:
                return None
            kind, arg = action
            if kind is Shift:
                return None if term == END else stack + (arg,)
            keep = len(stack) - len(arg.expansion)
            stack = stack[:keep] + (self.states[stack[keep - 1]][arg.origin.name][1],)
            if term == END and stack[-1] == self.end_state:
                return stack

    def _acceptable(self, stack: tuple) -> frozenset[str]:
        row = self.states[stack[-1]]
        return frozenset(
            t for t in row if t.isupper() and t != END and self._feed(stack, t) is not None
        )


class RefMasker:
    """Allowed token ids of a `CfgGrammar` state (q, stack), computed token by token."""

    def __init__(self, grammar) -> None:
        self.grammar, self.parser = grammar, RefParser(grammar.lark)
        info = grammar.info
        self.token_ids = [
            i
            for i, b in enumerate(info.token_bytes)
            if b and i not in info.special_ids and i not in grammar.eos_ids
        ]
        self._lexed: dict[int, list[tuple[int, tuple[str, ...], int]]] = {}

    def _lex(self, q0: int) -> list[tuple[int, tuple[str, ...], int]]:
        """Per live token from q0: (id, completed non-ignored terminals, final lexer state)."""
        out = self._lexed.get(q0)
        if out is None:
            lexer = self.grammar.lexer
            trans, emit, names = lexer.trans_rows, lexer.emit_rows, lexer.type_names
            out = []
            for i in self.token_ids:
                q, terms = q0, []
                for b in self.grammar.info.token_bytes[i]:
                    e, q = emit[q][b], trans[q][b]
                    if q == DEAD:
                        break
                    if e >= 0 and names[e] not in lexer.ignored:
                        terms.append(names[e])
                if q != DEAD:
                    out.append((i, tuple(terms), q))
            self._lexed[q0] = out
        return out

    def allowed(self, q0: int, stack: tuple) -> set[int]:
        lexer, parser = self.grammar.lexer, self.parser
        ids = set()
        for i, terms, q in self._lex(q0):
            s = stack
            for t in terms:
                s = parser.feed(s, t)
                if s is None:
                    break
            if s is None:
                continue
            types, acceptable = lexer.winnable[q], parser.acceptable(s)
            ignorable = not types.isdisjoint(lexer.ignored)
            if not types.isdisjoint(acceptable) or (ignorable and acceptable):
                ids.add(i)
        if self._can_end(q0, stack):
            ids |= set(self.grammar.eos_ids)
        return ids

    def _can_end(self, q: int, stack: tuple) -> bool:
        lexer = self.grammar.lexer
        if q != FRESH:
            if lexer.winner[q] < 0:
                return False
            name = lexer.type_names[lexer.winner[q]]
            if name not in lexer.ignored:
                stack = self.parser.feed(stack, name)
        return stack is not None and self.parser.feed(stack, END) is not None

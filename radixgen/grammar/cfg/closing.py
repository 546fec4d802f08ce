"""Closing a CFG output in time: the tokens a matcher state needs to reach a complete text, and
the mask that keeps an output within its max_new_tokens.

A regex automaton tables every state's token distance to a match (index.token_index). A CFG state is a
lexer state plus an unbounded LALR stack, so its distance is computed on demand, and only where
it matters: in a request's last tokens.

- `text(q, stack)`: a shortest completion in bytes. The partial terminal is finished first (a
  BFS over the lexer DFA from q gives each type its shortest suffix), then the parser stack is
  completed with terminals, each costing its shortest spelling plus a separator: a space where
  the grammar ignores one, so that NAME "a" and FROM do not lex as one NAME "aFROM". The
  cheapest terminals come from the grammar's LR(0) items (cfg.items), checked with the parser;
  a Dijkstra over stacks where the table resolved a conflict against them. Memoised per stack.
- `plan(q, stack)`: that text as tokens the matcher accepts, greedy longest pieces, each checked
  with `CfgGrammar.advance`. Its length bounds the tokens a complete text still needs.
- `narrow(q, stack, budget, words)`: once the plan comes within `WINDOW` tokens of the budget,
  the row keeps only the tokens after which a plan still fits. What a token does from q (its
  final lexer state, the terminals it completes) comes from the vocabulary lexed from q at once
  (`VocabLexer.outcomes`); the allowed tokens have a few hundred distinct outcomes, each fed to
  the parser and planned once.

Outside the window nothing is checked: that is sound as long as no single token lengthens the
plan by more than `WINDOW` (a token opens at most a few brackets or a quote; the SQL test walks
measure the largest jump). The same bound spaces the checks: with a slack of s tokens beyond
the window, the next s // (WINDOW + 1) tokens cannot reach it (`steps_until_close`), so a
budget of thousands of tokens costs a plan every few dozen tokens, and a plan of a thousand
tokens (a large schema's required fields) is still closed in time. Inside it the budget is kept exactly, up to the plan being an upper
bound: a token whose own plan does not fit is dropped even if a shorter tokenization would. If
no token fits (the grammar's shortest text is longer than the budget), the tokens with the shortest
plans are kept, as `TokenIndex.keep_closest` does for regexes.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque

import numpy as np

from radixgen.grammar.cfg.items import StackCompletions
from radixgen.grammar.cfg.lexer import FRESH
from radixgen.grammar.cfg.search_budget import OutOfBudget, SizedMemo, WorkBudget
from radixgen.grammar.cfg.vocabulary_index import pack_ids

WINDOW = 16  # plan length + WINDOW >= budget: narrow the row
_SEARCH_LIMIT = 20_000  # stacks a Dijkstra may expand before giving up (no narrowing then)
# work units (cfg.search_budget: a stack state copied or built, ~1-10 ns each) of one completion's
# searches, and of one narrowed row's (a few hundred completions); a completion of a stack d
# deep copies ~d^2/2 states (3,000 open brackets: 4.5 million)
_SEARCH_UNITS = 20_000_000
_NARROW_UNITS = 100_000_000
_MEMO_WEIGHT = 4_000_000  # stack states (and tokens) each memo may hold, ~32 MB
_OUTCOMES_LIMIT = 256  # lexer states whose vocabulary outcomes are kept (~100 KB each)
# spelling preference: letters, digits, a space, punctuation, then any byte
_BYTE_ORDER = (
    list(range(ord("a"), ord("z") + 1))
    + list(range(ord("0"), ord("9") + 1))
    + [ord(" ")]
    + [b for b in range(33, 127) if not chr(b).isalnum()]
)
_BYTE_ORDER += [b for b in range(256) if b not in set(_BYTE_ORDER)]
_MISS = object()
logger = logging.getLogger(__name__)
_FAR = 1 << 30  # the plan length of a dead end


class Closer:
    """Shortest completions and the deadline mask of one compiled CFG (`CfgGrammar`)."""

    def __init__(self, grammar) -> None:
        self.grammar = grammar
        self.lexer, self.parser = grammar.lexer, grammar.parser
        lexer = self.lexer
        self._suffixes: dict[int, dict[str, bytes]] = {}
        self.spelling: dict[str, bytes] = {}  # each terminal's shortest text, from any start
        for start in lexer.starts:
            for t, s in self.suffixes(start).items():
                if s and (t not in self.spelling or len(s) < len(self.spelling[t])):
                    self.spelling[t] = s
        self.separator = next(
            (
                s
                for t, s in sorted(self.spelling.items(), key=lambda x: len(x[1]))
                if t in lexer.ignored and s.strip() == b""
            ),
            b"",
        )
        self._cost = {t: len(s) + len(self.separator) for t, s in self.spelling.items()}
        conf = grammar.lark.parser.parser_conf
        self.completions = StackCompletions(
            conf.rules,
            self.parser,
            conf.start[0],
            self._cost,
            getattr(grammar.lark.parser, "kernels", None),
        )
        self._pieces, self._prefixes = _vocabulary_pieces(grammar.info)
        self._ends = SizedMemo(
            _MEMO_WEIGHT
        )  # stack -> terminal names to feed to reach $END, or None
        self._plans = SizedMemo(_MEMO_WEIGHT)  # (q, stack) -> token ids, or None
        self._budget: WorkBudget | None = None  # the current narrow's, shared by its searches
        self._gave_up = False  # (a narrow ran out of budget: logged once)
        self._outcomes: dict[int, tuple[np.ndarray, list]] = {}  # see _outcomes_from

    def suffixes(self, q: int) -> dict[str, bytes]:
        """Per type name, the shortest bytes that end the current token (lexer state q) as that
        type: b"" for q's own winner. From FRESH: each terminal's shortest spelling."""
        out = self._suffixes.get(q)
        if out is not None:
            return out
        lexer, out, seen, todo = self.lexer, {}, {q: b""}, deque([q])
        while todo:
            s = todo.popleft()
            win = lexer.winner[s]
            if win >= 0 and s != FRESH:
                out.setdefault(lexer.type_names[win], seen[s])
            trans, emit = lexer.trans_rows[s], lexer.emit_rows[s]
            for b in _BYTE_ORDER:
                t = trans[b]
                if t > FRESH and emit[b] < 0 and t not in seen:  # the same token goes on
                    seen[t] = seen[s] + bytes([b])
                    todo.append(t)
        self._suffixes[q] = out
        return out

    def terminals_to_end(self, stack) -> tuple[str, ...] | None:
        """The cheapest terminal sequence after which the parser accepts $END (None: none
        found). Read off the LR(0) items (cfg.items) and checked with the parser; where the
        table resolved a conflict against it, a search."""
        known = self._ends.get(stack, _MISS)
        if known is not _MISS:
            return known
        budget = WorkBudget(_SEARCH_UNITS, self._budget)
        try:
            found = self.completions.complete(stack, budget)
            if found is None or not self._completes(stack, found):
                found = self.search_to_end(stack, budget)
        except OutOfBudget as out:
            if out.budget is not budget:  # the narrow's, not this search's: give up the narrow
                raise
            found = None  # (remembered: the same stack gives up at once next time)
        self._ends.put(stack, found, len(stack) + len(found or ()))
        return found

    def _completes(self, stack, terms: tuple[str, ...]) -> bool:
        for term in terms:
            stack = self.parser.feed(stack, term)
            if stack is None:
                return False
        return self.parser.accepts_end(stack)

    def search_to_end(self, stack, budget: WorkBudget | None = None) -> tuple[str, ...] | None:
        """`terminals_to_end` by a Dijkstra over parser stacks, fed the acceptable terminals at
        their costs (None past _SEARCH_LIMIT stacks: long completions from grammars with many
        cheap terminals). Paths are parent links, and each stack built costs its length in
        `budget`, so a grammar whose stacks only grow (no completion) spends it instead of
        memory."""
        parser, cost_of = self.parser, self._cost
        budget = budget or WorkBudget(_SEARCH_UNITS)
        heap, best, order = [(0, 0, stack, None)], {stack: 0}, 0
        while heap and order < _SEARCH_LIMIT:
            cost, _, st, link = heapq.heappop(heap)
            if cost > best[st]:
                continue
            if parser.accepts_end(st):
                return _path(link)
            for term in parser.acceptable(st):
                step = cost_of.get(term)
                nxt = parser.feed(st, term) if step is not None else None
                if nxt is not None and cost + step < best.get(nxt, cost + step + 1):
                    budget.spend(len(nxt))
                    best[nxt] = cost + step
                    order += 1
                    heapq.heappush(heap, (cost + step, order, nxt, (term, link)))
        return None

    def text(self, q: int, stack) -> bytes | None:
        """A shortest completion of the text in state (q, stack), or None if none was found."""
        sep, spelling, feed = self.separator, self.spelling, self.parser.feed
        options = {None: b""} if q == FRESH else self.suffixes(q)
        best = None
        for term, suffix in options.items():
            after = stack if term is None or term in self.lexer.ignored else feed(stack, term)
            rest = None if after is None else self.terminals_to_end(after)
            if rest is None:
                continue
            parts = [spelling[t] for t in rest]
            text = suffix + (sep.join(parts) if q == FRESH else b"".join(sep + p for p in parts))
            if best is None or len(text) < len(best):
                best = text
        return best

    def plan(self, q: int, stack) -> tuple[int, ...] | None:
        """Token ids that complete the text from (q, stack), each accepted in turn; None if no
        completion was found."""
        key = (q, stack)
        hit = self._plans.get(key, _MISS)
        if hit is not _MISS:
            return hit
        text, out = self.text(q, stack), None
        if text is not None:
            if self._budget is not None:
                self._budget.spend(len(text))
            out = self._tokenize(q, stack, text)
        self._plans.put(key, out, len(stack) + len(out or ()))
        return out

    def _tokenize(self, q: int, stack, text: bytes) -> tuple[int, ...] | None:
        """Greedy longest pieces of `text` that the grammar accepts in turn (None: none fits)."""
        g, ids, pos, pieces, prefixes = self.grammar, [], 0, self._pieces, self._prefixes
        while pos < len(text):
            end = (
                pos + 1
            )  # (only as far as some piece starts with the text: a few bytes, not the longest piece)
            while end < len(text) and text[pos : end + 1] in prefixes:
                end += 1
            for end in range(end, pos, -1):
                tid = pieces.get(text[pos:end])
                nxt = None if tid is None else g.advance(q, stack, text[pos:end])
                if nxt is not None:
                    ids.append(tid)
                    (q, stack), pos = nxt, end
                    break
            else:
                return None
        return tuple(ids) if g.can_end(q, stack) else None

    def narrow(self, q: int, stack, budget: int, words: np.ndarray) -> np.ndarray | None:
        """The allowed row `words` (uint32) narrowed to the tokens after which a completion fits
        in `budget - 1` more tokens; None when the budget is not close (nothing to narrow), or
        when its searches spent _NARROW_UNITS (the row is then left as it is: an output that
        may not close in time, never a stalled scheduler)."""
        self._budget = WorkBudget(_NARROW_UNITS)
        try:
            return self._narrow(q, stack, budget, words)
        except (OutOfBudget, RecursionError):
            if not self._gave_up:
                self._gave_up = True
                logger.warning(
                    "grammar: the shortest completions of a state took more than their "
                    "search budget; rows from such states are not narrowed to max_new_tokens"
                )
            return None
        finally:
            self._budget = None

    def steps_until_close(self, q: int, stack, budget: int) -> int:
        """How many tokens may be accepted from (q, stack) before a row can need narrowing: a
        token spends one of `budget` and lengthens the plan by at most WINDOW (the module doc),
        so `budget - plan - WINDOW` shrinks by at most WINDOW + 1 per token. 0: check now."""
        self._budget = WorkBudget(_NARROW_UNITS)
        try:
            plan = self.plan(q, stack)
        except (OutOfBudget, RecursionError):
            return 0
        finally:
            self._budget = None
        if plan is None:
            return 0
        return max(0, (budget - len(plan) - WINDOW) // (WINDOW + 1))

    def _narrow(self, q: int, stack, budget: int, words: np.ndarray) -> np.ndarray | None:
        plan = self.plan(q, stack)
        if plan is None or len(plan) + WINDOW < budget:
            return None
        ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
        vocab = self.grammar.vocab
        ids = ids[ids < len(vocab.row_of)]
        rows = vocab.row_of[ids]
        eos = ids[rows < 0]  # EOS (allowed only where the text may end)
        ids, rows = ids[rows >= 0], rows[rows >= 0]
        outcome_of, outcomes = self._outcomes_from(q)
        token_outcomes = outcome_of[rows]
        present = np.flatnonzero(np.bincount(token_outcomes, minlength=len(outcomes)))
        lengths = np.full(len(outcomes), _FAR, dtype=np.int64)
        lengths[present] = [self._plan_length(stack, *outcomes[o]) for o in present.tolist()]
        fits = lengths <= budget - 1
        if not fits[present].any() and not len(eos) and len(present):
            fits = lengths == lengths[present].min()
        keep = np.concatenate([ids[fits[token_outcomes]], eos])
        return pack_ids(keep, len(words))

    def _plan_length(self, stack, q: int, terminals: tuple[str, ...]) -> int:
        """Length of the plan after a token that completes `terminals` and ends in lexer state q."""
        for term in terminals:
            stack = self.parser.feed(stack, term)
            if stack is None:
                return _FAR
        plan = self.plan(q, stack)
        return _FAR if plan is None else len(plan)

    def _outcomes_from(self, q: int) -> tuple[np.ndarray, list[tuple[int, tuple[str, ...]]]]:
        """Per vocabulary row, the index of its outcome from lexer state q; the outcomes as
        (final lexer state, completed terminal names) (`VocabLexer.final_outcomes`)."""
        hit = self._outcomes.get(q)
        if hit is not None:
            return hit
        names = self.lexer.type_names
        outcome_of, found = self.grammar.vocab.final_outcomes(q)
        outcomes = [(state, tuple(names[t] for t in seq)) for state, seq in found]
        if len(self._outcomes) >= _OUTCOMES_LIMIT:
            del self._outcomes[next(iter(self._outcomes))]
        small = np.int16 if len(outcomes) < 1 << 15 else np.int32
        hit = self._outcomes[q] = (outcome_of.reshape(-1).astype(small), outcomes)
        return hit


_VOCABULARIES: dict[int, tuple] = {}  # id(TokenizerInfo) -> (info, pieces, prefixes)


def _vocabulary_pieces(info) -> tuple[dict[bytes, int], frozenset[bytes]]:
    """Per token text its (first) id, and every prefix of a token text; shared by the grammars
    of one tokenizer (a few MB)."""
    hit = _VOCABULARIES.get(id(info))
    if hit is None or hit[0] is not info:
        pieces: dict[bytes, int] = {}
        for i, data in enumerate(info.token_bytes):
            if data and i not in info.special_ids:
                pieces.setdefault(data, i)
        prefixes = frozenset(p[:n] for p in pieces for n in range(1, len(p) + 1))
        hit = _VOCABULARIES[id(info)] = (info, pieces, prefixes)
    return hit[1], hit[2]


def _path(link) -> tuple[str, ...]:
    """The terminals of a parent-linked path ((terminal, parent) ... None), first to last."""
    out = []
    while link is not None:
        out.append(link[0])
        link = link[1]
    return tuple(reversed(out))

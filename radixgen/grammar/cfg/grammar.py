"""Context-free grammar constraints (Lark grammars, LALR) -> token-mask matchers.

Pipeline: `compile_cfg` builds a Lark LALR parser for the grammar (Lark resolves `%import`,
`%ignore`, priorities, "..."i strings, templates), then
- cfg.lexer: every terminal -> byte DFA -> one product lexer DFA that lexes like Lark's lexer
  (ordering, greedy matches, unless-keywords), so a token may span any number of terminals and
  a prefix may still become several terminals (keyword vs identifier) at once;
- cfg.parser: the LALR table driven over an immutable state stack;
- cfg.vocabulary_index: per lexer state q, the whole vocabulary lexed from q (numpy) and grouped by outcome
  into a trie over completed-terminal sequences.

Matcher state = (lexer state q, parser stack). Mask method (a per-lexer-state variant of the
"walk the vocabulary once per lexer state" scheme): because lexing is context-free, what a token
does from q - the terminals it completes and the types its trailing partial terminal may still
become - depends on q alone, so `VocabLexer.index(q)` computes it for the whole vocabulary once
per lexer state (numpy, ~10-40 ms; all states are indexed at compile time, 237 for SQL) and
stores it as a trie over completed-terminal sequences. The mask for (q, stack) is the union of
the trie groups the parser accepts: the trie is walked with the LALR stack, descending only into
terminals the parser accepts (`LalrTables.acceptable`, exact, memoised by the top states it
read), and a group is allowed iff one of its trailing types is acceptable after the node's
terminals. The groups holding ~99% of the ids (identifier / keyword-prefix tokens) are stored as
packed bitmask rows, so building the row is a few row ORs plus one scatter of short id lists.
It is cached in the compiled grammar keyed by (q, stack): in steady state a mask is a cache hit
(a row copy, ~5 us); a first visit costs ~20-700 us of CPU (SQL, 49k vocab; Python-bound:
the trie walk and the parser's simulations, see `SeqTrie.collect`). EOS is allowed
when the current partial terminal can end here and the parser then accepts $END. Ignored text
(`%ignore`d whitespace) is allowed only where some terminal may still follow it: once only $END
can follow (after a SQL statement's `;`), the only continuation is EOS, so generation stops
instead of padding the output with whitespace to max_new_tokens. Numbers:
benchmarks/bench_grammar_cfg.py.

Under `limit_tokens` (the request's max_new_tokens left) the last masks keep to the tokens
after which the text can still be completed in time (cfg.closing), so an output that runs to
its limit still parses.

Jump-forward is conservative: tokens are forced only while the mask allows exactly one token
and not EOS. Every continuation of the text must then start with that token's bytes *as the
model would have to emit them*, so forcing it is exactly what constrained sampling would do;
no string is re-tokenized, so a forced token can never be one the tokenizer would not produce.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import numpy as np
import torch
from lark import Lark
from lark.exceptions import LarkError

from radixgen.core import Constraint
from radixgen.grammar.cfg.closing import Closer
from radixgen.grammar.cfg.language import check_finite_string
from radixgen.grammar.cfg.lexer import DEAD, FRESH, LexerDfa
from radixgen.grammar.cfg.parser import LalrTables, Stack
from radixgen.grammar.cfg.vocabulary_index import (
    SeqTrie,
    VocabLexer,
    ids_of,
    pack_ids,
    partial_allowed,
)
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.grammar.unique.guarded_matcher import GuardedMatcher

_MASK_CACHE_LIMIT = 8192
_MASK_KEY_STATES = 2_000_000  # stack states _masks' keys may hold together (~16 MB)
_TRIE_CACHE_LIMIT = 1024
_MAX_JUMP_TOKENS = 32


@dataclass(frozen=True)
class MaskEntry:
    words: torch.Tensor  # int32 [num_words]
    num_allowed: int
    single_id: int  # the allowed id when exactly one (and it is not EOS), else -1


def shipped_grammar(name: str) -> str | None:
    """Text of a grammar shipped in radixgen/grammar/cfg/grammars/<name>.lark, or None."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return None
    path = resources.files("radixgen.grammar.cfg").joinpath("grammars", f"{name}.lark")
    return path.read_text(encoding="utf-8") if path.is_file() else None


def build_lark(text: str, cache: bool = False) -> Lark:
    """A Lark LALR parser for grammar text (start rule `start`); GrammarError on bad grammars.
    `cache`: reuse Lark's on-disk table cache (only for shipped grammars)."""
    try:
        return Lark(text, parser="lalr", start="start", cache=cache)
    except LarkError as exc:
        raise GrammarError(f"invalid lark grammar: {exc}") from None


def compile_cfg(
    constraint: Constraint, tokenizer_info: TokenizerInfo, precompute: bool = True
) -> "CfgGrammar":
    """Compile a `lark` (text or shipped name) or `ebnf` constraint for one tokenizer.
    `precompute`: index the vocabulary from every lexer state now (seconds for SQL), so that no
    mask ever waits for an index; False builds them lazily on first use (tests)."""
    shipped = None
    if constraint.kind == "ebnf":
        from radixgen.grammar.cfg.ebnf import ebnf_to_lark

        text = ebnf_to_lark(constraint.spec)
    elif constraint.kind == "lark":
        spec = constraint.spec.strip()
        shipped = shipped_grammar(spec)
        text = shipped or constraint.spec
        if shipped is None and re.fullmatch(r"[a-z][a-z0-9_]*", spec):
            raise GrammarError(f"unknown shipped grammar {spec!r}")
    else:
        raise GrammarError(f"compile_cfg cannot compile a {constraint.kind!r} constraint")
    grammar = CfgGrammar(build_lark(text, cache=shipped is not None), tokenizer_info)
    if precompute:
        grammar.precompute()
    return grammar


class CfgGrammar:
    """The compiled, shareable grammar: lexer DFA, LALR tables, vocabulary index and caches."""

    def __init__(
        self, lark: Lark, info: TokenizerInfo, lexer: LexerDfa | None = None, guard=None
    ) -> None:
        """`lexer`: the grammar's own (json_grammar.cfg's JSON tokens); by default Lark's terminals'.
        `guard`: a UniqueGuard beside the grammar (json_grammar.cfg: a JSON Schema that needs one)."""
        self.guard = guard
        try:
            self.lexer = lexer or LexerDfa(
                lark.terminals, list(lark.lexer_conf.ignore), lark.lexer_conf.g_regex_flags
            )
        except ValueError as exc:
            raise GrammarError(str(exc)) from None
        conf = lark.parser.parser_conf
        check_finite_string(conf.rules, self.lexer, conf.start[0])
        self.lark = lark
        self.parser = LalrTables(lark)
        self.info = info
        self.num_words = (info.vocab_size + 31) // 32
        self.vocab = VocabLexer(
            self.lexer, info.token_bytes, info.special_ids | set(info.eos_ids), self.num_words
        )
        self.eos_ids = frozenset(info.eos_ids)
        self._tries: dict[int, SeqTrie] = {}
        self._masks: dict[tuple[int, Stack], MaskEntry] = {}
        self._mask_key_states = 0  # total length of the stacks in _masks' keys
        self._closer: Closer | None = None

    @property
    def closer(self) -> Closer:
        """Shortest completions, for outputs that must end within their token budget (built on
        first use: most requests never get close to their max_new_tokens)."""
        if self._closer is None:
            self._closer = Closer(self)
        return self._closer

    def matcher(self) -> "CfgMatcher | GuardedMatcher":
        matcher = CfgMatcher(self, [(FRESH, self.parser.start_stack, False)])
        return GuardedMatcher(matcher, self.guard) if self.guard is not None else matcher

    def precompute(self) -> None:
        """Index the vocabulary from every lexer state (when there are not too many)."""
        self.vocab.uses_kernel()  # the C lexer's setup, off the scheduler loop
        if self.lexer.num_states <= _TRIE_CACHE_LIMIT:
            for q in range(FRESH, self.lexer.num_states):
                self.trie(q)
        self.closer  # (its LR(0) items: tens of ms, not on the scheduler loop)

    def trie(self, q: int) -> SeqTrie:
        trie = self._tries.get(q)
        if trie is None:
            trie = self.vocab.index(q)
            if len(self._tries) >= _TRIE_CACHE_LIMIT:
                del self._tries[next(iter(self._tries))]
            self._tries[q] = trie
        return trie

    def mask(self, q: int, stack: Stack) -> MaskEntry:
        """The allowed-token row for matcher state (q, stack); cached."""
        key = (q, stack)
        entry = self._masks.get(key)
        if entry is None:
            entry = self._compute_mask(q, stack)
            # bounded in entries and in the stack states their keys hold (deep outputs' stacks)
            while self._masks and (
                len(self._masks) >= _MASK_CACHE_LIMIT
                or self._mask_key_states + len(stack) > _MASK_KEY_STATES
            ):
                self._mask_key_states -= len(next(iter(self._masks))[1])
                del self._masks[next(iter(self._masks))]
            self._masks[key] = entry
            self._mask_key_states += len(stack)
        return entry

    def _compute_mask(self, q: int, stack: Stack) -> MaskEntry:
        small: list[bytes] = []
        rows: list[np.ndarray] = []
        num_allowed = self.trie(q).collect(self.parser, stack, small, rows)
        ids = ids_of(small)
        words = (
            pack_ids(ids, self.num_words) if small else np.zeros(self.num_words, dtype=np.uint32)
        )
        for row in rows:
            np.bitwise_or(words, row, out=words)
        single = int(ids[0]) if num_allowed == 1 else -1  # a row holds >= 256 ids
        if self.can_end(q, stack) and self.eos_ids:
            for e in self.eos_ids:
                words[e >> 5] |= np.uint32(1 << (e & 31))
            num_allowed, single = num_allowed + len(self.eos_ids), -1
        return MaskEntry(torch.from_numpy(words.view(np.int32)), num_allowed, single)

    def can_end(self, q: int, stack: Stack) -> bool:
        """May the text end in this state (the partial terminal, if any, completed)?"""
        if q == FRESH:
            return self.parser.accepts_end(stack)
        win = self.lexer.winner[q]
        if win < 0:
            return False
        name = self.lexer.type_names[win]
        if name not in self.lexer.ignored:
            stack = self.parser.feed(stack, name)
        return stack is not None and self.parser.accepts_end(stack)

    def advance(self, q: int, stack: Stack, data: bytes) -> tuple[int, Stack] | None:
        """State after the bytes of one token, or None if the grammar rejects them."""
        trans, emit, names = self.lexer.trans_rows, self.lexer.emit_rows, self.lexer.type_names
        ignored, parser = self.lexer.ignored, self.parser
        for b in data:
            e = emit[q][b]
            q = trans[q][b]
            if q == DEAD:
                return None
            if e >= 0 and names[e] not in ignored:
                stack = parser.feed(stack, names[e])
                if stack is None:
                    return None
        types = self.lexer.winnable[q]
        if not partial_allowed(types, not types.isdisjoint(ignored), parser.acceptable(stack)):
            return None
        return q, stack


class CfgMatcher:
    """One request's cursor: a history of (lexer state, parser stack, terminated) per token."""

    def __init__(
        self,
        grammar: CfgGrammar,
        history: list[tuple[int, Stack, bool]],
        deadline: int | None = None,
    ) -> None:
        self._grammar = grammar
        self._history = history
        self._deadline = deadline  # the most tokens num_accepted may reach (None: no limit)
        self._check_at = 0  # num_accepted from which the deadline is checked again

    def limit_tokens(self, num_tokens: int) -> None:
        """From here on at most `num_tokens` more tokens will be accepted (the request's
        max_new_tokens left): in the last tokens fill_bitmask keeps to those after which the
        text can still be completed in time (cfg.closing), so an output that runs to its limit
        still parses."""
        self._deadline = self.num_accepted + num_tokens
        self._check_at = 0

    @property
    def num_accepted(self) -> int:
        return len(self._history) - 1

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar rejects it."""
        q, stack, terminated = self._history[-1]
        g = self._grammar
        if terminated:
            return False
        if token_id in g.eos_ids:
            if not g.can_end(q, stack):
                return False
            self._history.append((q, stack, True))
            return True
        info = g.info
        if not 0 <= token_id < len(info.token_bytes) or token_id in info.special_ids:
            return False
        data = info.token_bytes[token_id]
        nxt = g.advance(q, stack, data) if data else None
        if nxt is None:
            return False
        self._history.append((*nxt, False))
        return True

    def fill_bitmask(self, bitmask: torch.Tensor, row: int, within_limit: bool = True) -> bool:
        """Write the allowed set into `bitmask[row]` (int32, CPU); mutates only that row. Under
        `limit_tokens`, unless `within_limit` is False, the tokens after which the text can
        still be completed in time. True when that limit narrowed the row."""
        q, stack, terminated = self._history[-1]
        if terminated:
            bitmask[row].zero_()
            return False
        words, narrowed = self._grammar.mask(q, stack).words, None
        if within_limit and self._deadline is not None and self.num_accepted >= self._check_at:
            narrowed = self._narrowed(q, stack, words)
            if narrowed is not None:
                words = torch.from_numpy(narrowed.view(np.int32))
        target = bitmask[row]
        if target.shape[0] == words.shape[0]:
            target.copy_(words)
        else:
            n = min(words.shape[0], target.shape[0])
            target[:n].copy_(words[:n])
            target[n:].zero_()
        return narrowed is not None

    def _narrowed(self, q: int, stack: Stack, words: torch.Tensor) -> np.ndarray | None:
        """The row narrowed to the tokens that still finish in time, or None (not close yet:
        the next check is then scheduled, see `Closer.steps_until_close`)."""
        closer, left = self._grammar.closer, self._deadline - self.num_accepted
        skip = closer.steps_until_close(q, stack, left)
        if skip > 0:
            self._check_at = self.num_accepted + skip
            return None
        return closer.narrow(q, stack, left, words.numpy().view(np.uint32))

    def keep_closest(self, words: np.ndarray) -> None:
        """Narrow an allowed row (numpy int32 words, in place) to the first token of the
        shortest completion, where the row holds it (GuardedMatcher: where its guard bans every
        token that finishes in time)."""
        q, stack, terminated = self._history[-1]
        plan = None if terminated else self._grammar.closer.plan(q, stack)
        if plan:
            first = plan[0]
            if words[first >> 5] >> (first & 31) & 1:
                words[:] = 0
                words[first >> 5] = np.int32(np.uint32(1 << (first & 31)).view(np.int32))

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens; ValueError if more than were accepted."""
        if not 0 <= num_tokens <= self.num_accepted:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self.num_accepted} accepted")
        if num_tokens:
            del self._history[-num_tokens:]
            self._check_at = 0  # (scheduled from a state now undone)

    def fork(self) -> "CfgMatcher":
        """An independent copy in the same state (states are immutable, so a shallow copy)."""
        fork = CfgMatcher(self._grammar, list(self._history), self._deadline)
        fork._check_at = self._check_at
        return fork

    def is_terminated(self) -> bool:
        return self._history[-1][2]

    def is_accepting(self) -> bool:
        """True if EOS would be accepted now."""
        q, stack, terminated = self._history[-1]
        return not terminated and self._grammar.can_end(q, stack)

    def reset(self) -> None:
        del self._history[1:]
        self._check_at = 0

    def jump_forward_token_ids(self) -> list[int]:
        """Tokens forced next: while exactly one non-EOS token is allowed (see module doc)."""
        probe, forced = self.fork(), []
        while len(forced) < _MAX_JUMP_TOKENS and not probe.is_terminated():
            q, stack, _ = probe._history[-1]
            single = self._grammar.mask(q, stack).single_id
            if single < 0 or not probe.accept_token(single):
                break
            forced.append(single)
        return forced

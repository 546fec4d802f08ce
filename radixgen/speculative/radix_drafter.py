"""The radix n-gram drafter: continuations of the context's suffix seen before, as a token tree.

Evidence comes from two indexes of the same kind (`NgramIndex`): one over every sequence the
runtime observed (it calls `observe` on radix-cache insert, so all requests' cached sequences
count), and one per request over its own context, extended incrementally each step.

Proposal: look the context's last n tokens up (longest key first), extend every hit backwards to
its full match length (up to `max_ngram`), and weigh what followed it by match length
(x2 per matched token) and recency (x`decay` per rank). The weighted continuations form a counting
trie; nodes are taken best-first by estimated path probability
(product of child weight / (parent weight + `prior`)), so a dominant continuation grows a deep
chain, split evidence grows branches, thin evidence stops early (`min_prob`).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, Sequence

import torch

from radixgen.speculative.ngram_index import NgramIndex, match_len, unpack
from radixgen.speculative.token_tree import TokenTree

_Candidate = tuple[int, Sequence[int], int]  # (match_len, sequence, end): seq[end:] followed
_TrieNode = list  # [weight: float, children: dict[int, _TrieNode]]


@dataclass
class _ContextState:
    offset: int  # context position of ids[0]
    ids: list[int]  # the context from `offset` on, as indexed so far
    index: NgramIndex


class RadixDrafter:
    """See the module docstring; methods follow `Drafter`."""

    def __init__(
        self,
        max_ngram: int = 8,
        key_lens: Sequence[int] = (1, 2, 4),
        max_stored_tokens: int = 1 << 18,
        max_occurrences: int = 64,
        max_candidates: int = 16,
        decay: float = 0.95,
        prior: float = 0.5,
        min_prob: float = 0.05,
        context_window: int = 4096,
        max_requests: int = 256,
    ):
        assert max_ngram >= max(key_lens) >= 1
        self.max_ngram, self.key_lens = max_ngram, tuple(key_lens)
        self.max_stored_tokens, self.max_occurrences = max_stored_tokens, max_occurrences
        self.max_candidates, self.decay, self.prior = max_candidates, decay, prior
        self.min_prob, self.context_window = min_prob, context_window
        self.max_requests = max_requests
        self._index = NgramIndex(key_lens, max_occurrences)
        self._seqs: OrderedDict[int, list[int]] = OrderedDict()  # seq_id -> tokens, oldest first
        self._next_seq_id = 1
        self._stored = 0
        self._requests: OrderedDict[Hashable, _ContextState] = OrderedDict()

    # ---- learning ----

    def observe(
        self, token_ids: Sequence[int], num_cached: int = 0, namespace: Hashable = None
    ) -> None:
        """See `Drafter.observe` (one index whatever the namespace: `NamespacedDrafter` keeps
        one RadixDrafter per namespace). Keeps `max_ngram` cached tokens before the new ones as
        match context; evicts the oldest sequences beyond `max_stored_tokens`."""
        ids = _as_list(token_ids)
        start = max(0, min(num_cached, len(ids)) - self.max_ngram)
        seq = ids[start:]
        if len(seq) < 2 or num_cached >= len(ids):
            return
        seq_id, self._next_seq_id = self._next_seq_id, self._next_seq_id + 1
        self._seqs[seq_id] = seq
        self._stored += len(seq)
        self._index.add(seq_id, seq, num_cached - start, len(seq))
        self._evict()

    def _evict(self) -> None:
        while self._stored > self.max_stored_tokens and len(self._seqs) > 1:
            _, seq = self._seqs.popitem(last=False)
            self._stored -= len(seq)
            self._index.drop_stale(seq, self._seqs.__contains__)

    def release(self, request_id: Hashable) -> None:
        """See `Drafter.release`."""
        self._requests.pop(request_id, None)

    @property
    def stored_tokens(self) -> int:
        return self._stored

    # ---- proposing ----

    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
        namespace: Hashable = None,
    ) -> TokenTree:
        """See `Drafter.propose` (`namespace` as in `observe`). Without a request_id the last
        anonymous context is reused when the new one extends it (one caller at a time), else
        rebuilt."""
        if not isinstance(context_ids, list):
            context_ids = _as_list(context_ids)  # slices must compare equal to lists
        if max_tokens <= 0 or max_depth <= 0 or not context_ids:
            return TokenTree.empty()
        state = self._context_state(context_ids, request_id)
        suffix = list(context_ids[-self.max_ngram :])
        candidates = self._candidates(state, suffix)
        if not candidates:
            return TokenTree.empty()
        trie = self._count_trie(candidates, max_depth)
        return self._extract(trie, max_tokens)

    def _context_state(self, context: list[int], request_id: Hashable) -> _ContextState:
        """The request's incremental index, extended to the whole context (rebuilt over the
        last `context_window` tokens if the context no longer extends what was indexed)."""
        state = self._requests.get(request_id)
        if state is not None:
            self._requests.move_to_end(request_id)
            indexed_end = state.offset + len(state.ids)
            if indexed_end > len(context) or context[state.offset : indexed_end] != state.ids:
                state = None
        if state is None:
            offset = max(0, len(context) - self.context_window)
            state = _ContextState(offset, [], NgramIndex(self.key_lens, self.max_occurrences))
            self._requests[request_id] = state
            while len(self._requests) > self.max_requests:
                self._requests.popitem(last=False)
        old_len = len(state.ids)
        state.ids.extend(context[state.offset + old_len :])
        state.index.add(0, state.ids, old_len, len(state.ids))
        return state

    def _candidates(self, state: _ContextState, suffix: list[int]) -> list[_Candidate]:
        """Hits of the suffix, own context first then observed sequences, each in recency
        order; then sorted by match length (stable), at most `max_candidates`."""
        own = self._hits(state.index, lambda _: state.ids, suffix)
        seen = self._hits(self._index, self._seqs.get, suffix)
        found = own + seen
        found.sort(key=lambda c: -c[0])
        return found[: self.max_candidates]

    def _hits(self, index: NgramIndex, seq_of, suffix: list[int]) -> list[_Candidate]:
        """Up to max_candidates occurrences of the suffix's longest indexed n-grams, newest
        first, each with its match length re-checked token by token (keys are hashes)."""
        found: list[_Candidate] = []
        seen: set[int] = set()
        for n in reversed(index.key_lens):
            for code in reversed(index.lookup(suffix[-n:]) if n <= len(suffix) else ()):
                seq_id, end = unpack(code)
                seq = seq_of(seq_id)
                if seq is None or code in seen:
                    continue
                seen.add(code)
                m = match_len(seq, end, suffix, self.max_ngram)
                if m:
                    found.append((m, seq, end))
                if len(found) >= self.max_candidates:
                    return found
        return found

    def _count_trie(self, candidates: list[_Candidate], max_depth: int) -> _TrieNode:
        """Weighted counting trie of the candidates' next `max_depth` tokens."""
        root: _TrieNode = [0.0, {}]
        for rank, (m, seq, end) in enumerate(candidates):
            weight = 2.0 ** (m - 2) * self.decay**rank
            node = root
            node[0] += weight
            for token in seq[end : end + max_depth]:
                child = node[1].get(token)
                if child is None:
                    child = node[1][token] = [0.0, {}]
                child[0] += weight
                node = child
        return root

    def _extract(self, root: _TrieNode, max_tokens: int) -> TokenTree:
        """Best-first by estimated path probability; parents always precede children."""
        ids: list[int] = []
        parents: list[int] = []
        confidence: list[float] = []
        heap: list = []
        tie = 0
        self._push_children(heap, root, 1.0, -1, tie)
        while heap and len(ids) < max_tokens:
            neg_prob, _, token, node, parent, cond = heapq.heappop(heap)
            if -neg_prob < self.min_prob:
                break
            ids.append(token)
            parents.append(parent)
            confidence.append(cond)
            tie += 1
            self._push_children(heap, node, -neg_prob, len(ids) - 1, tie * 1000)
        return TokenTree.build(ids, parents, token_probs=confidence)

    def _push_children(
        self, heap: list, node: _TrieNode, prob: float, index: int, tie: int
    ) -> None:
        denom = node[0] + self.prior
        for k, (token, child) in enumerate(node[1].items()):
            cond = child[0] / denom
            heapq.heappush(heap, (-prob * cond, tie + k, token, child, index, cond))


def _as_list(token_ids: Sequence[int]) -> list[int]:
    if isinstance(token_ids, torch.Tensor):
        return token_ids.tolist()
    return list(token_ids)


__all__ = ["RadixDrafter"]

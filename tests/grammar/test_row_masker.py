"""The CPU row-by-row logits masking (RowMasker, used by GrammarBackend.mask_logits) gives exactly
what apply_bitmask gives, for every kind of row and logits dtype."""

import numpy as np
import pytest
import torch

from radixgen.grammar.bitmask import RowMasker, allocate_bitmask, apply_bitmask, pack_token_ids
from radixgen.runtime.grammar_backend import GrammarBackend


def _rows(vocab: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Rows that allow: nothing, everything, one token, a few, about half, all but a few."""
    every = np.arange(vocab)
    sets = [
        np.array([], dtype=np.int64),
        every,
        np.array([7]),
        rng.choice(vocab, 40, replace=False),
        rng.choice(vocab, vocab // 2, replace=False),
        np.setdiff1d(every, rng.choice(vocab, 30)),
    ]
    return [pack_token_ids(s, vocab) for s in sets]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("vocab,width", [(1000, 1000), (1000, 1024), (1000, 1100), (999, 1000)])
def test_row_masker_matches_apply_bitmask(dtype, vocab, width):
    rng = np.random.default_rng(0)
    rows = _rows(vocab, rng)
    bitmask = torch.from_numpy(np.stack(rows))
    logits = torch.randn(len(rows), width).to(dtype)
    logits[0, 3] = float("inf")  # odd values pass through untouched when allowed
    expected = logits.clone()
    apply_bitmask(expected, bitmask)
    masker = RowMasker()
    for _ in range(2):  # second pass: from the cache
        got = logits.clone()
        for r, words in enumerate(bitmask.numpy()):
            masker.apply_row(got[r], words)
        assert torch.equal(got, expected)


def test_row_masker_cache_is_bounded():
    rng = np.random.default_rng(1)
    masker = RowMasker(max_bytes=20_000)
    for _ in range(50):
        masker.ids(pack_token_ids(rng.choice(1000, 400, replace=False), 1000), 1000)
    assert masker._bytes <= 20_000 and len(masker._cache) >= 1


class _Matcher:
    def __init__(self, row):
        self.row = row
        self.limit = None

    def limit_tokens(self, num_tokens):
        self.limit = num_tokens

    def fill_bitmask(self, bitmask, r):
        bitmask[r].copy_(torch.from_numpy(self.row))


class _Req:
    def __init__(self, matcher):
        self.matcher = matcher
        self.remaining_new_tokens, self.seq_len = 16, 5


def test_backend_mask_logits_cpu_path_matches_bitmask_path():
    """Mixed batch (constrained and unconstrained rows): the CPU path equals fill_all + apply."""
    vocab = 1000
    rows = _rows(vocab, np.random.default_rng(2))
    reqs = [_Req(None)] + [_Req(_Matcher(r)) for r in rows] + [_Req(None)]
    backend = GrammarBackend.__new__(GrammarBackend)  # no tokenizer needed for masking
    backend.info = type("Info", (), {"vocab_size": vocab})()
    backend._bitmask = allocate_bitmask(1, vocab)
    backend._row_masker = RowMasker()
    logits = torch.randn(len(reqs), vocab)
    got = logits.clone()
    backend.mask_logits(got, reqs)
    bitmask = allocate_bitmask(len(reqs), vocab)
    for i, row in enumerate(rows):
        bitmask[i + 1] = torch.from_numpy(row)
    expected = logits.clone()
    apply_bitmask(expected, bitmask)
    assert torch.equal(got, expected)


def test_backend_freezes_each_compiled_grammar_once(monkeypatch):
    """A compiled grammar arriving at the scheduler is moved out of the cyclic GC's reach once
    (gc.freeze), not again for later requests that share it."""
    from concurrent.futures import Future

    import radixgen.runtime.grammar_backend as gb

    calls = []
    monkeypatch.setattr(gb.gc, "freeze", lambda: calls.append(1))

    class _Grammar:
        def matcher(self):
            return _Matcher(np.zeros(1, dtype=np.int32))

    class _Compiler:
        num_compiled = 0

    backend = object.__new__(GrammarBackend)
    backend.compiler, backend._frozen_compiles, backend.max_context_len = _Compiler(), 0, None
    grammar, other = _Grammar(), _Grammar()
    futures = []
    for g in (grammar, grammar, other, grammar):
        f = Future()
        f.set_result(g)
        futures.append(f)
    backend.compiler.num_compiled = 1  # `grammar` compiled
    backend.pending = [(_Req(None), futures[0])]
    ready, failed = backend.poll()
    assert len(ready) == 1 and not failed and ready[0].matcher is not None and len(calls) == 1
    assert ready[0].matcher.limit == 16  # told its max_new_tokens left
    backend.compiler.num_compiled = 2  # `other` compiled; `grammar` comes from the cache
    backend.pending = [(_Req(None), futures[1]), (_Req(None), futures[2])]
    ready, _ = backend.poll()
    assert len(ready) == 2 and len(calls) == 2  # only `other` is new
    backend.pending = [(_Req(None), futures[3])]
    ready, _ = backend.poll()
    assert len(ready) == 1 and len(calls) == 2  # a cache hit: nothing new to freeze

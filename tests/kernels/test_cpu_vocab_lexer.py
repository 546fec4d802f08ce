"""The C vocabulary lexer against its plain-Python reference on random lexer tables (dead
states, ignored types, tokens completing more types than a key holds), and its input checks.
The grammar-level check (a whole vocabulary index equal to numpy's) is in
tests/grammar/cfg/test_smollm.py."""

from __future__ import annotations

import numpy as np
import pytest

from radixgen.kernels import cpu_vocab_lexer as vl


def test_library_compiles_here():
    # the machines this project targets have a C compiler: a silent fallback would hide a broken build
    assert vl.available(), vl._state.get("error")


def _random_lexer(seed: int, num_states: int = 30, num_types: int = 7, dead: float = 0.2):
    rng = np.random.default_rng(seed)
    trans = rng.integers(1, num_states, size=(num_states, 256), dtype=np.int32)
    trans[rng.random((num_states, 256)) < dead] = 0
    trans[0] = 0  # the dead state stays dead
    emit = rng.integers(-1, num_types, size=(num_states, 256)).astype(np.int16)
    emit[rng.random((num_states, 256)) < 0.5] = -1
    ignored = np.zeros(num_types, dtype=bool)
    ignored[rng.choice(num_types, 2, replace=False)] = True
    state_set = rng.integers(0, 5, size=num_states).astype(np.int16)
    # bytes from a few values only, so tokens share outcomes and groups hold several rows
    tokens = [
        bytes(rng.choice([9, 34, 65, 66, 200], size=rng.integers(1, 12)).tolist())
        for _ in range(600)
    ]
    return trans, emit, ignored, state_set, tokens


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [2, 6])
def test_matches_reference(seed, limit):
    kernel = vl.VocabLexerKernel(*_random_lexer(seed), limit=limit)
    kinds = set()
    for q in range(len(kernel.state_set)):
        got, want = kernel.lex(q), vl.lex_vocab_ref(kernel, q)
        for field in vl.Groups._fields:
            assert np.array_equal(getattr(got, field), getattr(want, field)), (q, field)
        kinds.update(np.minimum(got.row_group, 0).tolist())
    assert {vl.DEAD_ROW, 0} <= kinds
    if limit == 2:
        assert vl.LONG_ROW in kinds


def test_grouped_by_final_state():
    # the shortest completions group tokens by the state they end in: an identity state_set
    lexer = _random_lexer(3)
    kernel = vl.VocabLexerKernel(*lexer, limit=6)
    identity = np.arange(len(lexer[0]), dtype=np.int16)
    for q in range(1, 6):
        got, want = kernel.lex(q, identity), vl.lex_vocab_ref(kernel, q, identity)
        for field in vl.Groups._fields:
            assert np.array_equal(getattr(got, field), getattr(want, field)), (q, field)
        assert len(got.key) > len(kernel.lex(q).key)  # finer than by winnable set
    with pytest.raises(ValueError, match="int16"):
        kernel.lex(1, identity.astype(np.int32))


def test_groups_partition_the_live_rows():
    kernel = vl.VocabLexerKernel(*_random_lexer(7, dead=0.05), limit=6)
    groups = kernel.lex(1)
    live = np.flatnonzero(groups.row_group >= 0)
    assert sorted(groups.order.tolist()) == live.tolist()
    for g in range(len(groups.key)):
        rows = groups.order[groups.start[g] : groups.start[g + 1]]
        assert len(rows) and (groups.row_group[rows] == g).all() and (np.diff(rows) > 0).all()
    assert len(set(zip(groups.key.tolist(), groups.sets.tolist()))) == len(groups.key)


def test_input_checks():
    trans, emit, ignored, state_set, tokens = _random_lexer(0)
    with pytest.raises(ValueError, match="256"):
        vl.VocabLexerKernel(trans[:, :255], emit, ignored, state_set, tokens, 2)
    bad = trans.copy()
    bad[3, 4] = len(trans)
    with pytest.raises(ValueError, match="trans must lie"):
        vl.VocabLexerKernel(bad, emit, ignored, state_set, tokens, 2)
    bad = emit.copy()
    bad[3, 4] = len(ignored)
    with pytest.raises(ValueError, match="emit must lie"):
        vl.VocabLexerKernel(trans, bad, ignored, state_set, tokens, 2)
    with pytest.raises(ValueError, match="int64"):
        vl.VocabLexerKernel(trans, emit, ignored, state_set, tokens, 40)
    kernel = vl.VocabLexerKernel(trans, emit, ignored, state_set, tokens, 2)
    with pytest.raises(ValueError, match="out of range"):
        kernel.lex(len(trans))

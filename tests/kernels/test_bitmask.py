"""apply_token_bitmask: Triton (interpreter on CPU) == torch reference; grammar bitmask helpers."""

import numpy as np
import pytest
import torch

from radixgen import kernels
from radixgen.grammar.bitmask import (
    allocate_bitmask,
    apply_bitmask,
    fill_all,
    pack_token_ids,
    unpack_row,
)
from tests.kernels.conftest import KERNEL_DEVICE


def _case(batch, vocab, words, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g).to(dtype)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, words), generator=g, dtype=torch.int64).to(
        torch.int32
    )
    return logits, bitmask


def _expected(logits, bitmask):
    out = logits.clone()
    for r in range(logits.shape[0]):
        allowed = set(unpack_row(bitmask[r], 32 * bitmask.shape[1]).tolist())
        for t in range(logits.shape[1]):
            if t not in allowed:
                out[r, t] = float("-inf")
    return out


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch,vocab,words", [(3, 100, 4), (2, 1030, 33), (1, 70, 2)])
def test_matches_bit_by_bit_reference(backend, dtype, batch, vocab, words):
    logits, bitmask = _case(batch, vocab, words, dtype)
    want = _expected(logits, bitmask)
    got = logits.to(KERNEL_DEVICE) if backend == "triton" else logits.clone()
    kernels.apply_token_bitmask(got, bitmask, backend=backend)
    assert torch.equal(got.cpu(), want)


def test_columns_beyond_the_bitmask_are_disallowed():
    logits = torch.zeros(1, 40)
    kernels.apply_token_bitmask(logits, torch.full((1, 1), -1, dtype=torch.int32), backend="torch")
    assert torch.isinf(logits[0, 32:]).all() and torch.isfinite(logits[0, :32]).all()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_bad_inputs_raise_value_error(backend):
    logits = torch.zeros(2, 64, device=KERNEL_DEVICE if backend == "triton" else "cpu")
    with pytest.raises(ValueError):
        kernels.apply_token_bitmask(logits, torch.zeros(2, 2, dtype=torch.int64), backend=backend)
    with pytest.raises(ValueError):
        kernels.apply_token_bitmask(logits, torch.zeros(3, 2, dtype=torch.int32), backend=backend)
    with pytest.raises(ValueError):
        kernels.apply_token_bitmask(
            logits.long(), torch.zeros(2, 2, dtype=torch.int32), backend=backend
        )


def test_grammar_helpers_round_trip():
    bitmask = allocate_bitmask(2, 70)
    assert bitmask.shape == (2, 3) and bitmask.dtype == torch.int32 and bitmask.eq(-1).all()
    ids = np.array([0, 5, 31, 32, 69])
    bitmask[1] = torch.from_numpy(pack_token_ids(ids, 70))
    assert unpack_row(bitmask[1], 70).tolist() == ids.tolist()
    logits = torch.zeros(2, 70)
    apply_bitmask(logits, bitmask)
    assert torch.isfinite(logits[0]).all()
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == ids.tolist()
    fill_all(bitmask, 1)
    assert bitmask.eq(-1).all()

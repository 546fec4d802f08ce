"""merge_state: the log-sum-exp merge of attention states over disjoint key sets (Triton and ref)."""

import math

import pytest
import torch

from radixgen import kernels
from radixgen.kernels import decode_attention as da
from tests.kernels.conftest import KERNEL_DEVICE
from tests.kernels.kv_pools import oracle, poisoned, rel_err

INF = math.inf


def _states(shape, d, gen, dtype=torch.float32):
    o_a, o_b = (torch.randn(*shape, d, generator=gen).to(dtype) for _ in range(2))
    lse_a, lse_b = (torch.randn(*shape, generator=gen) * 5 for _ in range(2))
    lse_a.view(-1)[0] = -INF  # A empty
    lse_b.view(-1)[1] = -INF  # B empty
    lse_a.view(-1)[2] = lse_b.view(-1)[2] = -INF  # both empty
    lse_a.view(-1)[3], lse_b.view(-1)[3] = 80.0, -80.0  # far apart: no overflow
    for o, lse in ((o_a, lse_a), (o_b, lse_b)):
        o[lse == -INF] = 0.0  # an empty state's value is 0
    return o_a, lse_a, o_b, lse_b


def _merge64(o_a, lse_a, o_b, lse_b):
    """The module docstring's formula in float64."""
    o_a, lse_a, o_b, lse_b = (t.cpu().double() for t in (o_a, lse_a, o_b, lse_b))
    lse = torch.logaddexp(lse_a, lse_b)
    w_a = torch.where(lse_a == -INF, 0.0, torch.exp(lse_a - lse))
    w_b = torch.where(lse_b == -INF, 0.0, torch.exp(lse_b - lse))
    return (o_a * w_a[..., None] + o_b * w_b[..., None]).nan_to_num(0.0), lse


def _triton(o_a, lse_a, o_b, lse_b):
    args = [t.to(KERNEL_DEVICE) for t in (o_a, lse_a, o_b, lse_b)]
    out = (
        poisoned(o_a.shape, o_a.dtype, KERNEL_DEVICE),
        poisoned(lse_a.shape, torch.float32, KERNEL_DEVICE),
    )
    return da.merge_state(*args, out=out)


@pytest.mark.parametrize("shape,d", [((3, 4), 32), ((7,), 48)])
def test_merge_matches_float64(shape, d):
    gen = torch.Generator().manual_seed(d)
    states = _states(shape, d, gen)
    want_o, want_lse = _merge64(*states)
    for o, lse in (_triton(*states), da.merge_state_ref(*states)):
        assert rel_err(o, want_o) < 1e-6 and rel_err(lse, want_lse) < 1e-6
        both_empty = lse.view(-1)[2]
        assert both_empty == -INF and (o.reshape(-1, d)[2] == 0).all()


def test_merge_is_commutative_and_keeps_dtype():
    states = _states((2, 4), 32, torch.Generator().manual_seed(1), torch.bfloat16)
    o_ab, lse_ab = _triton(*states)
    o_ba, lse_ba = _triton(*states[2:], *states[:2])
    assert o_ab.dtype == torch.bfloat16 and torch.equal(o_ab, o_ba) and torch.equal(lse_ab, lse_ba)
    want_o, _ = _merge64(*states)
    assert rel_err(o_ab, want_o) < 1e-2


def test_merged_halves_equal_attention_over_the_union():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(3, 4, 32, generator=gen)
    k, v = (
        torch.randn(20, 2, 32, generator=gen).double(),
        torch.randn(20, 2, 32, generator=gen).double(),
    )
    all_keys = torch.ones(3, 20, dtype=torch.bool)
    a_keys = torch.rand(3, 20, generator=gen) > 0.5
    a_keys[0] = False  # query 0: A empty
    state_a = oracle(q, k, v, a_keys, 0.2)
    state_b = oracle(q, k, v, all_keys & ~a_keys, 0.2)
    o, lse = _triton(state_a[0].float(), state_a[1].float(), state_b[0].float(), state_b[1].float())
    want_o, want_lse = oracle(q, k, v, all_keys, 0.2)
    assert rel_err(o, want_o) < 1e-6 and rel_err(lse, want_lse) < 1e-6


@pytest.mark.parametrize("splits", [1, 3, 8, 13])
def test_split_reduce_is_merge_state_over_all_splits(splits):
    """reduce_splits (decode's flash-decoding reduce) folds every split in float64: split counts
    below, at and past its chunk of 8, empty splits, a row of only empty splits, far-apart lse."""
    gen = torch.Generator().manual_seed(splits)
    b, hq, d = 2, 3, 32
    mid_o = torch.randn(b, hq, splits, d, generator=gen)
    mid_lse = torch.randn(b, hq, splits, generator=gen) * 5
    mid_lse[0, 0] = -INF  # every split of this row empty
    mid_lse[0, 1, splits // 2] = -INF
    mid_lse[1, 2, 0], mid_lse[1, 2, -1] = 90.0, -90.0 if splits > 1 else 90.0
    mid_o[mid_lse == -INF] = 0.0
    want_o, want_lse = mid_o[:, :, 0].double(), mid_lse[:, :, 0].double()
    for i in range(1, splits):
        want_o, want_lse = _merge64(want_o, want_lse, mid_o[:, :, i], mid_lse[:, :, i])
    out = (
        poisoned((b, hq, d), torch.bfloat16, KERNEL_DEVICE),
        poisoned((b, hq), torch.float32, KERNEL_DEVICE),
    )
    da.reduce_splits(mid_o.to(KERNEL_DEVICE), mid_lse.to(KERNEL_DEVICE), *out)
    o, lse = out
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse.flatten()[1:], want_lse.flatten()[1:]) < 1e-6
    assert lse[0, 0] == -INF and (o[0, 0] == 0).all()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_validation(backend):
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    o, lse = torch.zeros(2, 4, 8, device=dev), torch.zeros(2, 4, device=dev)
    cases = [
        ((o, lse, o[:1], lse), "must match"),
        ((o, lse, o.double(), lse), "must match"),
        ((o, lse[:, :2], o, lse), "lse shapes"),
        ((o, lse, o, lse.double()), "float32"),
        ((o, lse, o, None), "tensors"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            kernels.merge_state(*args, backend=backend)


@pytest.mark.gpu
def test_gpu_merge_large():
    states = _states((64, 32), 128, torch.Generator().manual_seed(3))
    o, lse = da.merge_state(*(t.cuda() for t in states))
    want_o, want_lse = _merge64(*states)
    assert rel_err(o, want_o) < 1e-6 and rel_err(lse, want_lse) < 1e-6

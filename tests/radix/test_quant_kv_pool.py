"""Quantized KV pools: store/gather round trips, calibrated per-head scales that grow (by
powers of two, rescaling what is stored) instead of saturating, and their byte costs."""

import pytest
import torch

from radixgen.radix.kv_pool import KVPool
from radixgen.radix.quant_kv_pool import (
    HEADROOM,
    FP8KVPool,
    NVFP4KVPool,
    kv_bytes_per_token,
    make_kv_pool,
)

# relative error bounds per token row: FP8 E4M3 has 3 mantissa bits, NVFP4 1 (plus block scales)
BOUNDS = {"fp8_e4m3": 0.05, "nvfp4": 0.2}


def _rel_err(got, ref):
    return ((got.double() - ref.double()).norm(dim=-1) / ref.double().norm(dim=-1)).max().item()


@pytest.mark.parametrize("kind", ["fp8_e4m3", "nvfp4"])
def test_round_trip_and_growth(kind):
    gen = torch.Generator().manual_seed(1)
    pool = make_kv_pool(kind, 64, 2, 3, 32, torch.float32)
    k1, v1 = torch.randn(8, 3, 32, generator=gen), torch.randn(8, 3, 32, generator=gen)
    pool.store(1, torch.arange(8) * 2, k1, v1)
    scale_k = pool.scales["k"][1].clone()
    assert (scale_k > 0).all() and (pool.scales["k"][0] == 0).all()  # only layer 1 calibrated
    before = pool.gather(1, torch.arange(8) * 2)[0]
    # values far beyond the calibrated range: the scale grows instead of saturating
    k2, v2 = (
        torch.randn(4, 3, 32, generator=gen) * 100 * HEADROOM,
        torch.randn(4, 3, 32, generator=gen),
    )
    pool.store(1, torch.tensor([1, 3, 5, 7]), k2, v2)
    grow = pool.scales["k"][1] / scale_k
    assert (grow > 1).all() and torch.equal(torch.log2(grow), torch.log2(grow).round())
    keys, values = pool.gather(1, torch.tensor([[0, 2, 4, 6], [1, 3, 5, 7]]))  # any slot shape
    assert keys.shape == (2, 4, 3, 32) and keys.dtype == torch.float32
    assert _rel_err(keys[1], k2) < BOUNDS[kind] and _rel_err(values[1], v2) < BOUNDS[kind]
    assert _rel_err(keys[0], k1[:4]) < BOUNDS[kind]
    # the rescale by 2^-k is exact for what was stored, except values pushed into E4M3's
    # subnormal range (here those near zero), which keep an absolute error below 2^-9 * scale
    after = pool.gather(1, torch.arange(8) * 2)[0]
    changed = after != before
    assert changed.float().mean() < 0.2
    assert ((after - before).abs() <= 2.0**-9 * pool.scales["k"][1].view(1, -1, 1) * 8).all()


def test_zero_input_never_uses_a_silent_unit_scale():
    pool = FP8KVPool(8, 1, 2, 16, torch.float32)
    pool.store(0, torch.tensor([0]), torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))
    assert torch.equal(pool.gather(0, torch.tensor([0]))[0], torch.zeros(1, 2, 16))
    x = torch.full((1, 2, 16), 3.0)
    pool.store(0, torch.tensor([1]), x, x)
    assert torch.allclose(pool.gather(0, torch.tensor([1]))[0], x)


def test_bytes_per_token():
    # NVFP4: 4.5 bits per value (4-bit codes + one 8-bit scale per 16), nothing hidden
    assert NVFP4KVPool.bytes_per_token(1, 1, 128) * 8 / (2 * 128) == 4.5
    assert FP8KVPool.bytes_per_token(30, 3, 64) == 2 * 30 * 3 * 64
    bf16 = kv_bytes_per_token("bf16", 30, 3, 64, torch.float32)
    assert bf16 == 2 * 30 * 3 * 64 * 2
    assert kv_bytes_per_token("nvfp4", 30, 3, 64, torch.float32) / bf16 == pytest.approx(0.28125)
    pool = make_kv_pool("nvfp4", 10, 1, 2, 32, torch.bfloat16)
    stored = sum(
        t.numel() * t.element_size()
        for t in (*pool.k_codes, *pool.k_bscale, *pool.v_codes, *pool.v_bscale)
    )
    assert stored == 10 * NVFP4KVPool.bytes_per_token(1, 2, 32)


def test_dense_pool_casts_to_the_compute_dtype_and_rejects_unknown_kinds():
    pool = make_kv_pool("bf16", 4, 1, 1, 16, torch.float32)
    assert isinstance(pool, KVPool) and pool.k[0].dtype == torch.bfloat16
    assert pool.gather(0, torch.tensor([0, 1]))[0].dtype == torch.float32
    with pytest.raises(ValueError, match="kv cache dtype"):
        make_kv_pool("int4", 4, 1, 1, 16, torch.float32)
    with pytest.raises(ValueError, match="head_dim"):
        NVFP4KVPool(4, 1, 1, 24, torch.float32)


def test_mixed_pool_demote_moves_prefix_kv_into_the_branch_pool():
    """MixedKVPool.demote: the branch pool ends up holding what storing the prefix pool's
    (dequantized) values there directly gives; the prefix slots and other branch slots keep theirs."""
    from radixgen.radix.mixed_kv_pool import MixedKVPool

    layers, hkv, d, boundary = 2, 2, 32, 16
    make = lambda kind, n: make_kv_pool(kind, n, layers, hkv, d, torch.float32)  # noqa: E731
    pool = MixedKVPool(make("fp8_e4m3", boundary), make("nvfp4", 24), boundary)
    direct = make("nvfp4", 24)  # the same branch pool, written without the move
    gen = torch.Generator().manual_seed(0)
    src, dst, other = (
        torch.tensor([3, 7, 8]),
        torch.tensor([boundary + 5, boundary + 1, boundary + 20]),
        torch.tensor([boundary + 2]),
    )
    for layer in range(layers):
        k, v = (torch.randn(4, hkv, d, generator=gen) for _ in range(2))
        pool.store(layer, torch.cat([src, other]), k, v)
        direct.store(layer, other - boundary, k[3:], v[3:])
        before = pool.gather(layer, src)
        pool.demote(layer, src, dst)
        direct.store(layer, dst - boundary, *before)
        for got, want in zip(pool.gather(layer, dst), direct.gather(layer, dst - boundary)):
            assert torch.equal(got, want)
        for got, want in zip(pool.gather(layer, src), before):  # the prefix slots are untouched
            assert torch.equal(got, want)
        for got, want in zip(pool.gather(layer, other), direct.gather(layer, other - boundary)):
            assert torch.equal(got, want)

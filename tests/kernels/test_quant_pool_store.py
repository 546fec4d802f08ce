"""Device-side quantized-pool stores (`kernels.kv_store.pool_store`, the CUDA path of the FP8 /
NVFP4 / mixed pools): calibration, power-of-two growth with the exact rescale of what a head
holds, and quantization, all without a host sync, bit-identical to the torch path."""

import pytest
import torch

from radixgen.radix.mixed_kv_pool import MixedKVPool
from radixgen.radix.quant_kv_pool import HEADROOM, FP8KVPool, NVFP4KVPool

from .conftest import (
    KERNEL_DEVICE as DEV,  # the device pools: CUDA, or the CPU under TRITON_INTERPRET
)

POOLS = {"fp8": FP8KVPool, "nvfp4": NVFP4KVPool}


def _planes(pool):
    if isinstance(pool, FP8KVPool):
        return [*pool.k, *pool.v]
    return [*pool.k_codes, *pool.v_codes, *pool.k_bscale, *pool.v_bscale]


def _assert_same(a, b):
    for name in ("k", "v"):
        assert torch.equal(a.scales[name].cpu(), b.scales[name].cpu()), name
    for x, y in zip(_planes(a), _planes(b)):
        assert torch.equal(x.view(torch.uint8).cpu(), y.view(torch.uint8).cpu())
    assert a.high_water == b.high_water


def _both(dev, ref, layer, slots, k, v):
    """The same store into the device pool (inputs on DEV, any strides) and the torch pool (CPU)."""
    dev.store(layer, slots.to(DEV), k, v)
    ref.store(layer, slots, k.cpu(), v.cpu())


def _stores(gen, hkv=3, d=32):
    """(layer, slots, k, v): calibrate, stay in range, grow some heads, a large store that grows, strided."""
    r = lambda n: torch.randn(n, hkv, d, generator=gen).to(DEV)
    big = torch.ones(1, hkv, 1, device=DEV)
    big[0, 1] = 100 * HEADROOM  # only head 1 grows
    qkv = torch.randn(5, 3, hkv, d, generator=gen).to(DEV)
    return [
        (0, torch.arange(8) * 2, r(8), r(8)),
        (0, torch.tensor([1, 3]), r(2) * 0.5, r(2)),
        (0, torch.tensor([5, 7, 9]), r(3) * big, r(3)),
        (1, torch.arange(20, 100), r(80), r(80) * 3),  # > FUSE_MAX_ROWS: the three-kernel path
        (1, torch.arange(100, 180), r(80) * big * 40, r(80)),  # grows, large path
        (
            1,
            torch.tensor([11, 13, 15, 17, 19]),
            qkv[:, 1],
            qkv[:, 2],
        ),  # views of a fused projection
    ]


@pytest.mark.parametrize("kind", ["fp8", pytest.param("nvfp4", marks=pytest.mark.slow)])
def test_device_store_matches_the_torch_path(kind):
    gen = torch.Generator().manual_seed(0)
    dev = POOLS[kind](200, 2, 3, 32, torch.float32, DEV, store_backend="triton")
    ref = POOLS[kind](200, 2, 3, 32, torch.float32, store_backend="torch")
    assert dev.fused_store and not ref.fused_store
    grown = None
    for i, (layer, slots, k, v) in enumerate(_stores(gen)):
        _both(dev, ref, layer, slots, k, v)
        _assert_same(dev, ref)
        if i == 1:
            grown = dev.scales["k"][0].clone()
    growth = dev.scales["k"][0] / grown
    assert growth[1] > 1 and growth[0] == 1 and growth[2] == 1
    assert torch.log2(growth[1]) == torch.log2(growth[1]).round()
    dev.check_finite()
    keys = dev.gather(1, torch.arange(100, 180, device=DEV))[0]
    assert torch.isfinite(keys).all() and keys.abs().max() > 100 * HEADROOM  # nothing saturated


def test_growth_factor_is_exact_at_powers_of_two():
    """need / scale just above, at, and just below 2^k: k from the exponents, never a rounded log2."""
    pool = FP8KVPool(4, 1, 1, 16, torch.float32, DEV, store_backend="triton")
    ref = FP8KVPool(4, 1, 1, 16, torch.float32, store_backend="torch")
    base = torch.full((1, 1, 16), 1.0, device=DEV)
    _both(pool, ref, 0, torch.tensor([0]), base, base)
    scale = pool.scales["k"][0].clone()
    for factor in (4.0, 4.0 * (1 + 2**-23), 8.0 * (1 - 2**-23), 64.0):
        x = torch.full((1, 1, 16), float(scale) * 448.0 * factor, device=DEV)
        _both(pool, ref, 0, torch.tensor([1]), x, x)
        _assert_same(pool, ref)
        assert float(pool.scales["k"][0, 0]) * 448.0 >= float(x.max())  # never saturates


@pytest.mark.parametrize("prefix_kind, branch_kind", [("fp8", "nvfp4"), ("nvfp4", "fp8")])
def test_mixed_pool_routes_rows_on_the_device(prefix_kind, branch_kind):
    gen = torch.Generator().manual_seed(2)
    make = lambda kind, n, dev, backend: POOLS[kind](
        n, 1, 2, 32, torch.float32, dev, store_backend=backend
    )
    dev = MixedKVPool(
        make(prefix_kind, 40, DEV, "triton"), make(branch_kind, 24, DEV, "triton"), 40
    )
    ref = MixedKVPool(
        make(prefix_kind, 40, "cpu", "torch"), make(branch_kind, 24, "cpu", "torch"), 40
    )
    batches = [
        torch.arange(0, 30),
        torch.tensor([40, 41, 42]),
        torch.tensor([30, 43, 31, 44]),
        torch.arange(44, 64),
    ]
    for i, slots in enumerate(batches):
        k = torch.randn(len(slots), 2, 32, generator=gen) * (1 + 50 * i)
        v = torch.randn(len(slots), 2, 32, generator=gen)
        _both(dev, ref, 0, slots, k.to(DEV), v.to(DEV))
        if i == 0:  # no branch rows yet: the branch pool stays uncalibrated
            assert (dev.branch.scales["k"] == 0).all()
        _assert_same(dev.prefix, ref.prefix)
        _assert_same(dev.branch, ref.branch)
    got = dev.gather(0, torch.arange(64, device=DEV))
    want = ref.gather(0, torch.arange(64))
    assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])


@pytest.mark.slow  # ~35 s each under the interpreter; the small-store routing test runs by default
@pytest.mark.parametrize("prefix_kind, branch_kind", [("fp8", "nvfp4"), ("nvfp4", "fp8")])
def test_mixed_pool_large_stores_stay_in_each_pool(prefix_kind, branch_kind):
    """Stores of more than FUSE_MAX_ROWS rows (the three-kernel path) where the prefix pool sees
    branch slots: they are skipped, never written past the prefix pool's end (they were when the
    prefix pool's range was its whole buffer) nor counted in its scales or high-water mark."""
    gen = torch.Generator().manual_seed(3)
    make = lambda kind, n, dev, backend: POOLS[kind](
        n, 1, 2, 32, torch.float32, dev, store_backend=backend
    )
    dev = MixedKVPool(
        make(prefix_kind, 100, DEV, "triton"), make(branch_kind, 100, DEV, "triton"), 100
    )
    ref = MixedKVPool(
        make(prefix_kind, 100, "cpu", "torch"), make(branch_kind, 100, "cpu", "torch"), 100
    )
    batches = [
        torch.arange(100, 190),  # branch rows only
        torch.cat([torch.arange(0, 40), torch.arange(190, 200), torch.arange(40, 70)]),  # both
        torch.arange(10, 90),
    ]  # prefix rows only, growing
    for i, slots in enumerate(batches):
        k = torch.randn(len(slots), 2, 32, generator=gen) * (1 + 50 * i)
        v = torch.randn(len(slots), 2, 32, generator=gen)
        _both(dev, ref, 0, slots, k.to(DEV), v.to(DEV))
        if i == 0:  # no prefix rows yet
            assert (dev.prefix.scales["k"] == 0).all() and dev.prefix.high_water == 0
        _assert_same(dev.prefix, ref.prefix)
        _assert_same(dev.branch, ref.branch)
    assert dev.prefix.high_water <= 100 and dev.branch.high_water <= 100


def test_nonfinite_input_is_flagged():
    pool = NVFP4KVPool(8, 1, 2, 32, torch.float32, DEV, store_backend="triton")
    x = torch.randn(2, 2, 32, device=DEV)
    pool.store(0, torch.tensor([0, 1], device=DEV), x, x)
    pool.check_finite()
    x[1, 0, 3] = float("nan")
    pool.store(0, torch.tensor([2, 3], device=DEV), x, x)
    with pytest.raises(ValueError, match="NaN or Inf"):
        pool.check_finite()


def test_public_stores_skip_negative_slots(kernel_device):
    from radixgen.kernels import store_kv_fp8, store_kv_nvfp4

    x = torch.randn(3, 2, 32, device=kernel_device)
    slots = torch.tensor([2, -1, 0], device=kernel_device)
    scale = torch.full((2,), 0.01, device=kernel_device)
    for backend in ("triton", "torch"):
        cache = torch.zeros(4, 2, 32, device=kernel_device).to(torch.float8_e4m3fn)
        store_kv_fp8(cache, scale, slots, x, backend=backend)
        assert (cache[[1, 3]].float() == 0).all() and (cache[[0, 2]].float() != 0).any()
        codes = torch.zeros(4, 2, 16, dtype=torch.uint8, device=kernel_device)
        bscale = torch.zeros(4, 2, 2, device=kernel_device).to(torch.float8_e4m3fn)
        store_kv_nvfp4(codes, bscale, scale, slots, x, backend=backend)
        assert (codes[[1, 3]] == 0).all() and (codes[[0, 2]] != 0).any()

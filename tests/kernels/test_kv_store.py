"""store_kv_fp8 / store_kv_nvfp4: bit-identical to the quantize references with the given per-head
scales, only the addressed slots change, and bad inputs raise ValueError."""

import pytest
import torch

from radixgen import kernels
from radixgen.kernels import kv_store
from radixgen.kernels.fp8 import quantize_fp8_ref
from radixgen.kernels.nvfp4 import quantize_nvfp4_ref
from tests.kernels.conftest import KERNEL_DEVICE

SLOTS = 40
POISON = 0x7F  # a NaN pattern in E4M3, and an unlikely code byte


def _inputs(n, hkv, d, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, hkv, d, generator=gen) * torch.logspace(-2, 2, hkv)[None, :, None]).to(
        dtype
    )
    x[0, 0, :16] = 0.0  # an all-zero block
    slots = torch.randperm(SLOTS, generator=gen)[:n]
    return x, slots


def _fp8_cache(hkv, d, device="cpu"):
    return torch.full((SLOTS, hkv, d), POISON, dtype=torch.uint8, device=device).view(
        torch.float8_e4m3fn
    )


def _nvfp4_cache(hkv, d, device="cpu"):
    codes = torch.full((SLOTS, hkv, d // 2), POISON, dtype=torch.uint8, device=device)
    bscale = torch.full((SLOTS, hkv, d // 16), POISON, dtype=torch.uint8, device=device).view(
        torch.float8_e4m3fn
    )
    return codes, bscale


def _untouched(buf: torch.Tensor, slots: torch.Tensor) -> bool:
    keep = torch.ones(SLOTS, dtype=torch.bool)
    keep[slots] = False
    return bool((buf.cpu().view(torch.uint8)[keep] == POISON).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_store_fp8_bit_exact(dtype, backend):
    x, slots = _inputs(6, 3, 32, dtype, 1)
    scale = x.float().abs().amax((0, 2)) / 448 * 0.5  # half the range: some values saturate
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    cache = _fp8_cache(3, 32, dev)
    kernels.store_kv_fp8(cache, scale.to(dev), slots.to(dev).int(), x.to(dev), backend=backend)
    want = quantize_fp8_ref(x, scale.view(1, -1, 1))[0]
    assert torch.equal(cache.cpu()[slots].view(torch.uint8), want.view(torch.uint8))
    assert _untouched(cache, slots)


@pytest.mark.parametrize("d", [32, 48, 128])
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_store_nvfp4_bit_exact(d, backend):
    x, slots = _inputs(5, 2, d, torch.bfloat16, d)
    tscale = (
        x.float().abs().amax((0, 2)) / 2688 * torch.tensor([1.0, 0.1])
    )  # head 1: saturating block scales
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    codes, bscale = _nvfp4_cache(2, d, dev)
    kernels.store_kv_nvfp4(codes, bscale, tscale.to(dev), slots.to(dev), x.to(dev), backend=backend)
    want_codes, want_scales, _ = quantize_nvfp4_ref(x, tscale.view(1, -1, 1))
    assert torch.equal(codes.cpu()[slots], want_codes)
    assert torch.equal(bscale.cpu()[slots].view(torch.uint8), want_scales.view(torch.uint8))
    assert _untouched(codes, slots) and _untouched(bscale, slots)


def test_empty_store_is_a_no_op():
    codes, bscale = _nvfp4_cache(2, 32, KERNEL_DEVICE)
    empty = torch.empty(0, 2, 32, device=KERNEL_DEVICE)
    kv_store.store_kv_nvfp4(
        codes,
        bscale,
        torch.ones(2, device=KERNEL_DEVICE),
        torch.empty(0, dtype=torch.long, device=KERNEL_DEVICE),
        empty,
    )
    assert (codes.view(torch.uint8) == POISON).all()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_validation(backend):
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    x, slots = _inputs(4, 2, 32, torch.float32, 0)
    x, slots, scale = x.to(dev), slots.to(dev), torch.ones(2, device=dev)
    cache = _fp8_cache(2, 32, dev)
    fp8_cases = [
        ((cache, None, slots, x), "calibrated"),
        ((cache, 1.0, slots, x), "calibrated"),
        ((cache, scale[:1], slots, x), "calibrated"),
        ((cache, scale.double(), slots, x), "calibrated"),
        ((cache.view(torch.uint8), scale, slots, x), "float8_e4m3fn"),
        ((cache[:, :1], scale, slots, x), "does not hold"),
        ((cache, scale, slots.float(), x), "slots"),
        ((cache, scale, slots[:3], x), "slots"),
        ((cache, scale, slots, x.double()), "x must be"),
    ]
    for args, match in fp8_cases:
        with pytest.raises(ValueError, match=match):
            kernels.store_kv_fp8(*args, backend=backend)
    codes, bscale = _nvfp4_cache(2, 32, dev)
    nvfp4_cases = [
        ((codes, bscale, scale, slots, x[..., :24]), "multiple of 16"),
        ((codes.view(torch.int8), bscale, scale, slots, x), "uint8"),
        ((codes, bscale.view(torch.uint8), scale, slots, x), "float8_e4m3fn"),
        ((codes, bscale[:, :, :1], scale, slots, x), "do not match"),
        ((codes, bscale, None, slots, x), "calibrated"),
    ]
    for args, match in nvfp4_cases:
        with pytest.raises(ValueError, match=match):
            kernels.store_kv_nvfp4(*args, backend=backend)


def test_launcher_rejects_non_contiguous_and_reference_rejects_nan():
    x, slots = _inputs(4, 2, 32, torch.float32, 0)
    cache = _fp8_cache(2, 32, KERNEL_DEVICE)
    with pytest.raises(ValueError, match="contiguous"):
        kv_store.store_kv_fp8(
            cache,
            torch.ones(2, device=KERNEL_DEVICE),
            slots.to(KERNEL_DEVICE),
            x.transpose(0, 1).contiguous().transpose(0, 1).to(KERNEL_DEVICE),
        )
    x[1, 1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        kv_store.store_kv_fp8_ref(_fp8_cache(2, 32), torch.ones(2), slots, x)


@pytest.mark.gpu
def test_gpu_store_4096_tokens_bit_exact():
    gen = torch.Generator("cuda").manual_seed(3)
    x = torch.randn(4096, 8, 128, generator=gen, device="cuda").bfloat16()
    slots = torch.randperm(65536, generator=gen, device="cuda")[:4096]
    s8, s4 = x.float().abs().amax((0, 2)) / 448, x.float().abs().amax((0, 2)) / 2688
    cache = torch.zeros(65536, 8, 128, device="cuda").to(torch.float8_e4m3fn)
    kv_store.store_kv_fp8(cache, s8, slots, x)
    assert torch.equal(
        cache[slots].view(torch.uint8), quantize_fp8_ref(x, s8.view(1, -1, 1))[0].view(torch.uint8)
    )
    codes = torch.zeros(65536, 8, 64, dtype=torch.uint8, device="cuda")
    bscale = torch.zeros(65536, 8, 8, device="cuda").to(torch.float8_e4m3fn)
    kv_store.store_kv_nvfp4(codes, bscale, s4, slots, x)
    want_codes, want_scales, _ = quantize_nvfp4_ref(x, s4.view(1, -1, 1))
    assert torch.equal(codes[slots], want_codes)
    assert torch.equal(bscale[slots].view(torch.uint8), want_scales.view(torch.uint8))

"""Quantize-on-write stores of new K (or V) rows into an fp8 or nvfp4 pool (layouts: kv_layout.py).

store_kv_fp8(cache, scale, slots, x):        cache[slots] = quantize_fp8(x, scale per head)
store_kv_nvfp4(codes, bscale, tscale, slots, x): codes[slots], bscale[slots] = quantize_nvfp4(x, s_T per head)
x is [n, Hkv, D] bf16/fp16/fp32, slots [n] int32/int64 (distinct). Scales are the caller's
calibrated per-head float32 [Hkv] scales, never implied; results are bit-identical to the
quantize_fp8 / quantize_nvfp4 references with those scales. Call once for K and once for V.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, check_kernel_tensor, e4m3_bits, e4m3_round
from .fp8 import quantize_fp8_ref
from .nvfp4 import _e2m1_code, quantize_nvfp4_ref


@triton.jit
def _store_fp8_kernel(x_ptr, s_ptr, slots_ptr, cache_ptr, HKV: tl.constexpr, D: tl.constexpr,
                      H_P2: tl.constexpr, D_P2: tl.constexpr):
    # one program: one token, all KV heads [HKV, D]
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + t).to(tl.int64)
    h = tl.arange(0, H_P2)[:, None]
    d = tl.arange(0, D_P2)[None, :]
    mask = (h < HKV) & (d < D)
    x = tl.load(x_ptr + t * HKV * D + h * D + d, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + h, mask=h < HKV, other=1.0)  # [H_P2, 1]
    v = tl.minimum(tl.maximum(tl.div_rn(x, s), -448.0), 448.0)
    sign = (v.to(tl.int32, bitcast=True) >> 24) & 128
    tl.store(cache_ptr + slot * HKV * D + h * D + d, (e4m3_bits(e4m3_round(tl.abs(v))) | sign).to(tl.uint8),
             mask=mask)


@triton.jit
def _store_nvfp4_kernel(x_ptr, s_ptr, slots_ptr, codes_ptr, bscale_ptr, HKV: tl.constexpr, D: tl.constexpr,
                        NB_P2: tl.constexpr):
    # one program: one (token, KV head) row of D values = D/16 blocks; pairs (2i, 2i+1) share a byte
    t, h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    NB: tl.constexpr = D // 16
    slot = tl.load(slots_ptr + t).to(tl.int64)
    blk = tl.arange(0, NB_P2)  # [NB_P2]
    pair = tl.arange(0, 8)[None, :]  # [1, 8]
    in_row = blk < NB
    mask = in_row[:, None]
    offs = (t * HKV + h) * D + blk[:, None] * 16 + pair * 2  # [NB_P2, 8]
    even = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    odd = tl.load(x_ptr + offs + 1, mask=mask, other=0.0).to(tl.float32)
    s_t = tl.load(s_ptr + h)
    amax = tl.maximum(tl.max(tl.abs(even), axis=1), tl.max(tl.abs(odd), axis=1))  # [NB_P2]
    scale = e4m3_round(tl.minimum(tl.div_rn(amax, 6.0 * s_t), 448.0))
    scale = tl.where(scale > 0, scale, 1.0)
    denom = (scale * s_t)[:, None]
    lo = _e2m1_code(tl.div_rn(even, denom))
    hi = _e2m1_code(tl.div_rn(odd, denom))
    row = slot * HKV + h
    tl.store(codes_ptr + row * (D // 2) + blk[:, None] * 8 + pair, (lo | (hi << 4)).to(tl.uint8), mask=mask)
    tl.store(bscale_ptr + row * NB + blk, e4m3_bits(scale).to(tl.uint8), mask=in_row)


# ---------------------------------------------------------------- checks


def _check_common(cache: torch.Tensor, scale, slots, x, d_cache: int) -> None:
    """cache [S, Hkv, d_cache]; x [n, Hkv, D]; slots [n]; scale float32 [Hkv]; one device."""
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.dtype not in FLOAT_DTYPES:
        raise ValueError("x must be a float32/float16/bfloat16 tensor [n, Hkv, D]")
    n, hkv, _ = x.shape
    if cache.ndim != 3 or cache.shape[1:] != (hkv, d_cache):
        raise ValueError(f"cache {tuple(cache.shape)} does not hold rows of x {tuple(x.shape)}")
    if not isinstance(slots, torch.Tensor) or slots.shape != (n,) or slots.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"slots must be an int32/int64 tensor [{n}]")
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32 or scale.shape != (hkv,):
        raise ValueError(f"scale must be a calibrated float32 tensor [{hkv}] (one per KV head)")
    if len({t.device for t in (cache, scale, slots, x)}) != 1:
        raise ValueError("cache, scale, slots and x must be on one device")


def _check_fp8(cache, scale, slots, x) -> None:
    if not isinstance(cache, torch.Tensor) or cache.dtype != torch.float8_e4m3fn:
        raise ValueError("the fp8 cache must be a torch.float8_e4m3fn tensor [num_slots, Hkv, D]")
    _check_common(cache, scale, slots, x, x.shape[-1] if isinstance(x, torch.Tensor) and x.ndim == 3 else -1)


def _check_nvfp4(codes, bscale, tscale, slots, x) -> None:
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        raise ValueError("nvfp4 codes must be a uint8 tensor [num_slots, Hkv, D/2]")
    if not isinstance(bscale, torch.Tensor) or bscale.dtype != torch.float8_e4m3fn:
        raise ValueError("nvfp4 block scales must be a float8_e4m3fn tensor [num_slots, Hkv, D/16]")
    d = x.shape[-1] if isinstance(x, torch.Tensor) and x.ndim == 3 else 0
    if d == 0 or d % 16:
        raise ValueError("x must be [n, Hkv, D] with D a positive multiple of 16")
    _check_common(codes, tscale, slots, x, d // 2)
    if bscale.shape != (codes.shape[0], codes.shape[1], d // 16) or bscale.device != codes.device:
        raise ValueError(f"block scales {tuple(bscale.shape)} do not match codes {tuple(codes.shape)}")


# ---------------------------------------------------------------- launchers


def store_kv_fp8(cache: torch.Tensor, scale: torch.Tensor, slots: torch.Tensor, x: torch.Tensor) -> None:
    """Quantize x [n, Hkv, D] with per-head scale [Hkv] and write it to cache[slots] in place.

    cache float8_e4m3fn [num_slots, Hkv, D]; slots distinct, in range (not checked on device);
    NaN/Inf in x are not checked. All contiguous, on CUDA (or TRITON_INTERPRET=1). Only the
    rows at `slots` change; bit-identical to store_kv_fp8_ref. Raises ValueError for bad inputs.
    """
    _check_fp8(cache, scale, slots, x)
    for t, name in ((cache, "cache"), (scale, "scale"), (slots, "slots"), (x, "x")):
        check_kernel_tensor(t, name)
    n, hkv, d = x.shape
    if n:
        _store_fp8_kernel[(n,)](x, scale, slots, cache.view(torch.uint8), HKV=hkv, D=d,
                                H_P2=triton.next_power_of_2(hkv), D_P2=triton.next_power_of_2(d), num_warps=4)


def store_kv_nvfp4(codes: torch.Tensor, bscale: torch.Tensor, tscale: torch.Tensor, slots: torch.Tensor,
                   x: torch.Tensor) -> None:
    """NVFP4-quantize x [n, Hkv, D] with per-head tensor scale s_T [Hkv] into codes/bscale[slots].

    codes uint8 [num_slots, Hkv, D/2], bscale float8_e4m3fn [num_slots, Hkv, D/16], D % 16 == 0;
    slots distinct and in range (not checked on device); NaN/Inf in x are not checked. All
    contiguous, on CUDA (or TRITON_INTERPRET=1). Only rows at `slots` change; bit-identical to
    store_kv_nvfp4_ref. Raises ValueError for bad inputs.
    """
    _check_nvfp4(codes, bscale, tscale, slots, x)
    for t, name in ((codes, "codes"), (bscale, "bscale"), (tscale, "tscale"), (slots, "slots"), (x, "x")):
        check_kernel_tensor(t, name)
    n, hkv, d = x.shape
    if n:
        _store_nvfp4_kernel[(n, hkv)](x, tscale, slots, codes, bscale.view(torch.uint8), HKV=hkv, D=d,
                                      NB_P2=triton.next_power_of_2(d // 16), num_warps=1)


# ---------------------------------------------------------------- torch references


def store_kv_fp8_ref(cache, scale, slots, x) -> None:
    """Plain-torch store_kv_fp8 (in place; raises ValueError for NaN/Inf x or bad scales)."""
    _check_fp8(cache, scale, slots, x)
    cache[slots.long()] = quantize_fp8_ref(x, scale.view(1, -1, 1))[0]


def store_kv_nvfp4_ref(codes, bscale, tscale, slots, x) -> None:
    """Plain-torch store_kv_nvfp4 (in place; raises ValueError for NaN/Inf x or bad scales)."""
    _check_nvfp4(codes, bscale, tscale, slots, x)
    q_codes, q_scales, _ = quantize_nvfp4_ref(x, tscale.view(1, -1, 1))
    codes[slots.long()] = q_codes
    bscale[slots.long()] = q_scales

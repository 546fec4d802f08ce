"""Quantize-on-write stores of new K (or V) rows into an fp8 or nvfp4 pool (layouts: kv_layout.py).

store_kv_fp8(cache, scale, slots, x):        cache[slots] = quantize_fp8(x, scale per head)
store_kv_nvfp4(codes, bscale, tscale, slots, x): codes[slots], bscale[slots] = quantize_nvfp4(x, s_T per head)
x is [n, Hkv, D] bf16/fp16/fp32, slots [n] int32/int64 (distinct; a negative slot skips its row).
Scales are the caller's calibrated per-head float32 [Hkv] scales, never implied; results are
bit-identical to the quantize_fp8 / quantize_nvfp4 references with those scales. Call once for K
and once for V. `pool_store` (below) is the quantized pools' calibrating store.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, check_kernel_tensor, e4m3_bits, e4m3_decode, e4m3_round
from .fp8 import quantize_fp8_ref
from .nvfp4 import _e2m1_code, quantize_nvfp4_ref


@triton.jit
def _store_fp8_kernel(
    x_ptr,
    s_ptr,
    slots_ptr,
    cache_ptr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    H_P2: tl.constexpr,
    D_P2: tl.constexpr,
):
    # one program: one token, all KV heads [HKV, D]
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + t).to(tl.int64)
    h = tl.arange(0, H_P2)[:, None]
    d = tl.arange(0, D_P2)[None, :]
    mask = (
        (h < HKV) & (d < D) & (h * 0 + slot >= 0)
    )  # a negative slot: a row that belongs to another pool
    x = tl.load(x_ptr + t * HKV * D + h * D + d, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + h, mask=h < HKV, other=1.0)  # [H_P2, 1]
    v = tl.minimum(tl.maximum(tl.div_rn(x, s), -448.0), 448.0)
    sign = (v.to(tl.int32, bitcast=True) >> 24) & 128
    tl.store(
        cache_ptr + slot * HKV * D + h * D + d,
        (e4m3_bits(e4m3_round(tl.abs(v))) | sign).to(tl.uint8),
        mask=mask,
    )


@triton.jit
def _store_nvfp4_kernel(
    x_ptr,
    s_ptr,
    slots_ptr,
    codes_ptr,
    bscale_ptr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    NB_P2: tl.constexpr,
):
    # one program: one (token, KV head) row of D values = D/16 blocks; pairs (2i, 2i+1) share a byte
    t, h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    NB: tl.constexpr = D // 16
    slot = tl.load(slots_ptr + t).to(tl.int64)
    blk = tl.arange(0, NB_P2)  # [NB_P2]
    pair = tl.arange(0, 8)[None, :]  # [1, 8]
    in_row = (blk < NB) & (
        blk * 0 + slot >= 0
    )  # a negative slot: a row that belongs to another pool
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
    tl.store(
        codes_ptr + row * (D // 2) + blk[:, None] * 8 + pair,
        (lo | (hi << 4)).to(tl.uint8),
        mask=mask,
    )
    tl.store(bscale_ptr + row * NB + blk, e4m3_bits(scale).to(tl.uint8), mask=in_row)


# ---------------------------------------------------------------- checks


def _check_common(cache: torch.Tensor, scale, slots, x, d_cache: int) -> None:
    """cache [S, Hkv, d_cache]; x [n, Hkv, D]; slots [n]; scale float32 [Hkv]; one device."""
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.dtype not in FLOAT_DTYPES:
        raise ValueError("x must be a float32/float16/bfloat16 tensor [n, Hkv, D]")
    n, hkv, _ = x.shape
    if cache.ndim != 3 or cache.shape[1:] != (hkv, d_cache):
        raise ValueError(f"cache {tuple(cache.shape)} does not hold rows of x {tuple(x.shape)}")
    if (
        not isinstance(slots, torch.Tensor)
        or slots.shape != (n,)
        or slots.dtype not in (torch.int32, torch.int64)
    ):
        raise ValueError(f"slots must be an int32/int64 tensor [{n}]")
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32 or scale.shape != (hkv,):
        raise ValueError(f"scale must be a calibrated float32 tensor [{hkv}] (one per KV head)")
    if len({t.device for t in (cache, scale, slots, x)}) != 1:
        raise ValueError("cache, scale, slots and x must be on one device")


def _check_fp8(cache, scale, slots, x) -> None:
    if not isinstance(cache, torch.Tensor) or cache.dtype != torch.float8_e4m3fn:
        raise ValueError("the fp8 cache must be a torch.float8_e4m3fn tensor [num_slots, Hkv, D]")
    _check_common(
        cache, scale, slots, x, x.shape[-1] if isinstance(x, torch.Tensor) and x.ndim == 3 else -1
    )


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
        raise ValueError(
            f"block scales {tuple(bscale.shape)} do not match codes {tuple(codes.shape)}"
        )


# ---------------------------------------------------------------- launchers


def store_kv_fp8(
    cache: torch.Tensor, scale: torch.Tensor, slots: torch.Tensor, x: torch.Tensor
) -> None:
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
        _store_fp8_kernel[(n,)](
            x,
            scale,
            slots,
            cache.view(torch.uint8),
            HKV=hkv,
            D=d,
            H_P2=triton.next_power_of_2(hkv),
            D_P2=triton.next_power_of_2(d),
            num_warps=4,
        )


def store_kv_nvfp4(
    codes: torch.Tensor,
    bscale: torch.Tensor,
    tscale: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
) -> None:
    """NVFP4-quantize x [n, Hkv, D] with per-head tensor scale s_T [Hkv] into codes/bscale[slots].

    codes uint8 [num_slots, Hkv, D/2], bscale float8_e4m3fn [num_slots, Hkv, D/16], D % 16 == 0;
    slots distinct and in range (not checked on device); NaN/Inf in x are not checked. All
    contiguous, on CUDA (or TRITON_INTERPRET=1). Only rows at `slots` change; bit-identical to
    store_kv_nvfp4_ref. Raises ValueError for bad inputs.
    """
    _check_nvfp4(codes, bscale, tscale, slots, x)
    for t, name in (
        (codes, "codes"),
        (bscale, "bscale"),
        (tscale, "tscale"),
        (slots, "slots"),
        (x, "x"),
    ):
        check_kernel_tensor(t, name)
    n, hkv, d = x.shape
    if n:
        _store_nvfp4_kernel[(n, hkv)](
            x,
            tscale,
            slots,
            codes,
            bscale.view(torch.uint8),
            HKV=hkv,
            D=d,
            NB_P2=triton.next_power_of_2(d // 16),
            num_warps=1,
        )


# ---------------------------------------------------------------- torch references


def store_kv_fp8_ref(cache, scale, slots, x) -> None:
    """Plain-torch store_kv_fp8 (in place; raises ValueError for NaN/Inf x or bad scales)."""
    _check_fp8(cache, scale, slots, x)
    keep = slots >= 0  # a negative slot skips its row, as in the kernel
    cache[slots[keep].long()] = quantize_fp8_ref(x, scale.view(1, -1, 1))[0][keep]


def store_kv_nvfp4_ref(codes, bscale, tscale, slots, x) -> None:
    """Plain-torch store_kv_nvfp4 (in place; raises ValueError for NaN/Inf x or bad scales)."""
    _check_nvfp4(codes, bscale, tscale, slots, x)
    q_codes, q_scales, _ = quantize_nvfp4_ref(x, tscale.view(1, -1, 1))
    keep = slots >= 0  # a negative slot skips its row, as in the kernel
    codes[slots[keep].long()] = q_codes[keep]
    bscale[slots[keep].long()] = q_scales[keep]


# ---------------------------------------------------------------- calibrating pool stores (no host sync)
#
# The quantized KV pools (radix/quant_kv_pool.py) keep one float32 scale per (layer, KV head) that
# is calibrated by the first store (HEADROOM * amax / range) and grown by a power of two, 2^k, when a
# later store's amax exceeds it; the head's stored values (FP8 values, or NVFP4 block scales) of
# every slot below the high-water mark are then rescaled by 2^-k (E4M3 round to nearest even, as
# torch's cast). `pool_store` does all of it on the device: per KV head one program finds the amax
# of the new rows, updates the scale in place, rescales the head only when it grew (a device-side
# branch), and quantizes the new rows with the new scale. Nothing is read back to the host, so a
# store costs one launch per K or V (rows <= FUSE_MAX_ROWS) or three (more rows: a parallel amax,
# the per-head fit, the parallel store). Non-finite inputs set `flag` (checked by the pool's
# `check_finite`, which syncs) instead of raising.

FUSE_MAX_ROWS = 64
FLOAT32_TINY = tl.constexpr(1.1754943508222875e-38)  # torch.finfo(torch.float32).tiny


@triton.jit
def _exp2i(e):
    """2^e as float32 for integer e in [-126, 127] (exact, from the exponent bits)."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _amax_rows_kernel(
    x_ptr,
    stride_t,
    stride_h,
    slots_ptr,
    n,
    amax_ptr,
    hw_ptr,
    D: tl.constexpr,
    D_P2: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    # grid (cdiv(n, BLOCK_T), Hkv): amax bits of |x| over this block's rows with slot >= 0
    h = tl.program_id(1)
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, D_P2)[None, :]
    slot = tl.load(slots_ptr + t, mask=t < n, other=-1).to(tl.int64)
    ok = slot >= 0
    x = tl.load(
        x_ptr + t[:, None].to(tl.int64) * stride_t + h * stride_h + d,
        mask=ok[:, None] & (d < D),
        other=0.0,
    ).to(tl.float32)
    bits = tl.where(ok, tl.max(tl.abs(x).to(tl.int32, bitcast=True), 1), -1)  # [BLOCK_T]
    tl.atomic_max(
        amax_ptr + h, tl.max(bits, 0)
    )  # |x| >= 0: its float order is its bit order; NaN is largest
    tl.atomic_max(hw_ptr, tl.max(tl.where(ok, slot + 1, 0), 0).to(tl.int32))


@triton.jit
def _fit_store_kernel(
    x_ptr,
    stride_t,
    stride_h,
    slots_ptr,
    n,
    lo,
    hi,
    amax_ptr,
    scale_ptr,
    hw_ptr,
    flag_ptr,
    val_ptr,
    bs_ptr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    D_P2: tl.constexpr,
    NB_P2: tl.constexpr,
    NVFP4: tl.constexpr,
    RANGE_MAX: tl.constexpr,
    HEADROOM: tl.constexpr,
    FUSED: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    # grid (Hkv,): one KV head. val_ptr: fp8 values (uint8 view) or nvfp4 codes; bs_ptr: nvfp4 block scales
    h = tl.program_id(0)
    d = tl.arange(0, D_P2)[None, :]
    if FUSED:  # the amax of the head's rows (and the high-water mark), here
        acc = tl.full([BLOCK_T], -1, tl.int32)
        top = tl.full([BLOCK_T], 0, tl.int64)
        for t0 in range(0, n, BLOCK_T):
            t = t0 + tl.arange(0, BLOCK_T)
            slot = tl.load(slots_ptr + t, mask=t < n, other=-1).to(tl.int64)
            ok = (slot >= lo) & (slot < hi)
            slot = slot - lo
            x = tl.load(
                x_ptr + t[:, None].to(tl.int64) * stride_t + h * stride_h + d,
                mask=ok[:, None] & (d < D),
                other=0.0,
            ).to(tl.float32)
            acc = tl.maximum(acc, tl.where(ok, tl.max(tl.abs(x).to(tl.int32, bitcast=True), 1), -1))
            top = tl.maximum(top, tl.where(ok, slot + 1, 0))
        bits = tl.max(acc, 0)
        tl.atomic_max(hw_ptr, tl.max(top, 0).to(tl.int32))
    else:  # from _amax_rows_kernel
        bits = tl.load(amax_ptr + h)
    present = bits >= 0  # the store has rows for this pool
    finite = bits < 0x7F800000
    tl.atomic_max(flag_ptr, (present & (bits >= 0x7F800000)).to(tl.int32))
    amax = tl.maximum(bits, 0).to(tl.float32, bitcast=True)
    scale = tl.load(scale_ptr + h)
    need = tl.maximum(tl.div_rn(amax, RANGE_MAX), FLOAT32_TINY)
    fresh = scale == 0.0
    # k = ceil(log2(need / scale)) exactly, from the exponents: need / scale lies in (2^(e-1), 2^(e+1))
    e = ((need.to(tl.int32, bitcast=True) >> 23) & 255) - (
        (scale.to(tl.int32, bitcast=True) >> 23) & 255
    )
    e = tl.minimum(tl.maximum(e, -126), 126)
    k = tl.where(need <= scale * _exp2i(e), e, e + 1)
    k = tl.where(present & finite & (scale != 0.0) & (need > scale), k, 0)
    new = tl.where(present & finite & fresh, need * HEADROOM, scale * _exp2i(k))
    tl.store(scale_ptr + h, new)
    if k > 0:  # rare: the head's scale grew by 2^k; rescale what it holds (every slot ever written)
        inv = _exp2i(-k)
        hw = tl.load(hw_ptr)
        if NVFP4:
            W: tl.constexpr = D // 16
            W_P2: tl.constexpr = NB_P2
            buf = bs_ptr
        else:
            W: tl.constexpr = D
            W_P2: tl.constexpr = D_P2
            buf = val_ptr
        w = tl.arange(0, W_P2)[None, :]
        for s0 in range(0, hw, BLOCK_S):
            s = (s0 + tl.arange(0, BLOCK_S))[:, None].to(tl.int64)
            m = (s < hw) & (w < W)
            offs = (s * HKV + h) * W + w
            v = e4m3_decode(tl.load(buf + offs, mask=m, other=0).to(tl.int32)) * inv
            sign = (v.to(tl.int32, bitcast=True) >> 24) & 128
            tl.store(buf + offs, (e4m3_bits(e4m3_round(tl.abs(v))) | sign).to(tl.uint8), mask=m)
    if FUSED:  # quantize the new rows with the (new) scale
        for t0 in range(0, n, BLOCK_T):
            t = t0 + tl.arange(0, BLOCK_T)
            slot = tl.load(slots_ptr + t, mask=t < n, other=-1).to(tl.int64)
            ok = (slot >= lo) & (slot < hi)
            slot = slot - lo
            if NVFP4:
                NB: tl.constexpr = D // 16
                blk = tl.arange(0, NB_P2)[None, :, None]
                pair = tl.arange(0, 8)[None, None, :]
                m3 = ok[:, None, None] & (blk < NB)
                base = (
                    x_ptr
                    + t[:, None, None].to(tl.int64) * stride_t
                    + h * stride_h
                    + blk * 16
                    + pair * 2
                )
                even = tl.load(base, mask=m3, other=0.0).to(tl.float32)
                odd = tl.load(base + 1, mask=m3, other=0.0).to(tl.float32)
                b_amax = tl.maximum(
                    tl.max(tl.abs(even), axis=2), tl.max(tl.abs(odd), axis=2)
                )  # [T, NB_P2]
                bsc = e4m3_round(tl.minimum(tl.div_rn(b_amax, 6.0 * new), 448.0))
                bsc = tl.where(bsc > 0, bsc, 1.0)
                denom = (bsc * new)[:, :, None]
                c_lo = _e2m1_code(tl.div_rn(even, denom))
                c_hi = _e2m1_code(tl.div_rn(odd, denom))
                row = slot * HKV + h  # [T]
                tl.store(
                    val_ptr + row[:, None, None] * (D // 2) + blk * 8 + pair,
                    (c_lo | (c_hi << 4)).to(tl.uint8),
                    mask=m3,
                )
                blk2 = tl.arange(0, NB_P2)[None, :]
                tl.store(
                    bs_ptr + row[:, None] * NB + blk2,
                    e4m3_bits(bsc).to(tl.uint8),
                    mask=ok[:, None] & (blk2 < NB),
                )
            else:
                m = ok[:, None] & (d < D)
                x = tl.load(
                    x_ptr + t[:, None].to(tl.int64) * stride_t + h * stride_h + d, mask=m, other=0.0
                ).to(tl.float32)
                v = tl.minimum(tl.maximum(tl.div_rn(x, new), -448.0), 448.0)
                sign = (v.to(tl.int32, bitcast=True) >> 24) & 128
                tl.store(
                    val_ptr + (slot[:, None] * HKV + h) * D + d,
                    (e4m3_bits(e4m3_round(tl.abs(v))) | sign).to(tl.uint8),
                    mask=m,
                )


def pool_store(
    values: torch.Tensor,
    block_scales: torch.Tensor | None,
    scale: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
    high_water: torch.Tensor,
    flag: torch.Tensor,
    range_max: float,
    headroom: float,
    lo: int = 0,
    hi: int | None = None,
) -> None:
    """A quantized pool's store of K or V rows x [n, Hkv, D] at `slots` [n], calibrating on the
    device (see the section comment): values = fp8 [S, Hkv, D] (block_scales None) or nvfp4 codes
    uint8 [S, Hkv, D/2] with block_scales float8_e4m3fn [S, Hkv, D/16]; scale float32 [Hkv]
    (0 = not calibrated), updated in place; high_water, flag int32 [1]. Only rows whose slot lies
    in [lo, hi) are stored, at slot - lo (the others belong to another pool). x may have any
    strides. A trusted internal launcher: shapes and devices are checked, tensor values never (no
    host sync)."""
    nvfp4 = block_scales is not None
    n, hkv, d = x.shape
    hi = values.shape[0] + lo if hi is None else hi
    if values.ndim != 3 or values.shape[1] != hkv or values.shape[2] != (d // 2 if nvfp4 else d):
        raise ValueError(
            f"pool buffer {tuple(values.shape)} does not hold rows of x {tuple(x.shape)}"
        )
    if scale.shape != (hkv,) or scale.dtype != torch.float32 or slots.shape != (n,):
        raise ValueError("scale must be float32 [Hkv] and slots [n]")
    for t, name in (
        (values, "values"),
        (scale, "scale"),
        (slots, "slots"),
        (high_water, "high_water"),
        (flag, "flag"),
    ):
        check_kernel_tensor(t, name)
    if n == 0:
        return
    if x.stride(2) != 1:
        x = x.contiguous()
    vals = values.view(torch.uint8)
    bs = block_scales.view(torch.uint8) if nvfp4 else vals
    d_p2 = triton.next_power_of_2(d)
    nb_p2 = triton.next_power_of_2(max(d // 16, 1))
    common = dict(
        HKV=hkv,
        D=d,
        D_P2=d_p2,
        NB_P2=nb_p2,
        NVFP4=nvfp4,
        RANGE_MAX=float(range_max),
        HEADROOM=float(headroom),
        BLOCK_S=64,
    )
    if n <= FUSE_MAX_ROWS:
        _fit_store_kernel[(hkv,)](
            x,
            x.stride(0),
            x.stride(1),
            slots,
            n,
            lo,
            hi,
            flag,
            scale,
            high_water,
            flag,
            vals,
            bs,
            FUSED=True,
            BLOCK_T=16,
            num_warps=4,
            **common,
        )
        return
    # rebase; rows outside [lo, hi) get slot -1 (skipped). Always: a mixed pool hands every pool
    # the batch's global slot ids, so a prefix pool (lo = 0, hi = its size) also sees branch
    # slots >= hi, which the kernels below would otherwise write past the end of its buffer
    slots = torch.where((slots >= lo) & (slots < hi), slots - lo, -1)
    lo, hi = 0, values.shape[0]
    amax = torch.full((hkv,), -1, dtype=torch.int32, device=x.device)
    block_t = 32
    _amax_rows_kernel[(triton.cdiv(n, block_t), hkv)](
        x,
        x.stride(0),
        x.stride(1),
        slots,
        n,
        amax,
        high_water,
        D=d,
        D_P2=d_p2,
        BLOCK_T=block_t,
        num_warps=4,
    )
    _fit_store_kernel[(hkv,)](
        x,
        x.stride(0),
        x.stride(1),
        slots,
        n,
        lo,
        hi,
        amax,
        scale,
        high_water,
        flag,
        vals,
        bs,
        FUSED=False,
        BLOCK_T=16,
        num_warps=4,
        **common,
    )
    x = x.contiguous()
    if nvfp4:
        _store_nvfp4_kernel[(n, hkv)](
            x,
            scale,
            slots,
            vals,
            bs,
            HKV=hkv,
            D=d,
            NB_P2=triton.next_power_of_2(d // 16),
            num_warps=1,
        )
    else:
        _store_fp8_kernel[(n,)](
            x,
            scale,
            slots,
            vals,
            HKV=hkv,
            D=d,
            H_P2=triton.next_power_of_2(hkv),
            D_P2=d_p2,
            num_warps=4,
        )

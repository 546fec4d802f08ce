"""FP8 E4M3 quantization with per-tensor or per-head float32 scales.

q = saturate(x / scale) rounded to torch.float8_e4m3fn (OCP E4M3: max 448, ties to even; never
the FNUZ +-240 variant); x ~= q * scale. Without an explicit scale, it is calibrated from the
data as amax / 448, per tensor or per head (`per_head_dim`); an all-zero input (or head) gets
scale 1.0, by explicit convention rather than as a silent default.
"""

import math

import torch
import triton
import triton.language as tl

from ._common import (
    E4M3_MAX,
    FLOAT_DTYPES,
    amax_scale,
    as_scale,
    bad_scale,
    check_float_input,
    check_kernel_tensor,
    e4m3_bits,
    e4m3_decode,
    e4m3_round,
    flag_if_any,
    nonfinite,
    program_offsets,
    raise_if_flagged,
    store_rne,
    wide_offsets,
)

BLOCK = 2048  # elements per Triton program


def fp8_scale(x: torch.Tensor, per_head_dim: int | None = None) -> torch.Tensor:
    """amax / 448 from data (1.0 if all zero): 0-d, or per head keeping dims (see amax_scale)."""
    return amax_scale(x, E4M3_MAX, per_head_dim)  # max |x| is exact in x's own dtype


def _checked_input(x: torch.Tensor, scale, per_head_dim, values: bool = True) -> torch.Tensor:
    """Validate x; return the float32 scale, broadcastable to x. values=False leaves the finiteness
    of x and of a given scale tensor to the caller (the Triton kernel flags them)."""
    check_float_input(x, finite=values)
    if scale is not None and per_head_dim is not None:
        raise ValueError("pass either scale or per_head_dim, not both")
    if scale is None:
        return fp8_scale(x, per_head_dim)
    return as_scale(scale, x, "scale", values)


def _checked_q(q: torch.Tensor, scale, dtype) -> torch.Tensor:
    if q.dtype != torch.float8_e4m3fn:
        raise ValueError(f"q must be torch.float8_e4m3fn (not FNUZ or e5m2), got {q.dtype}")
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype}")
    return as_scale(scale, q, "scale")


# ---------------------------------------------------------------- torch reference


def quantize_fp8_ref(x: torch.Tensor, scale=None, per_head_dim: int | None = None):
    """Plain-torch FP8 quantization: returns (q float8_e4m3fn like x, scale float32)."""
    scale = _checked_input(x, scale, per_head_dim)
    q = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_fp8_ref(q: torch.Tensor, scale, dtype=torch.bfloat16) -> torch.Tensor:
    """Plain-torch FP8 dequantization: q * scale in float32, cast to `dtype`."""
    scale = _checked_q(q, scale, dtype)
    return (q.float() * scale).to(dtype)


# ---------------------------------------------------------------- Triton kernels


@triton.jit
def _quantize_fp8_kernel(
    x_ptr, s_ptr, q_ptr, flag_ptr, numel, inner, num_scales, BLOCK: tl.constexpr, WIDE: tl.constexpr
):
    # element i uses scale (i // inner) % num_scales (see _scale_layout); bad inputs set bits of *flag_ptr;
    # offsets are int32 unless the tensor needs int64 (WIDE)
    offs = program_offsets(BLOCK, WIDE)
    mask = offs < numel
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + (offs // inner) % num_scales, mask=mask, other=1.0)
    flag_if_any(flag_ptr, mask & nonfinite(x), mask & bad_scale(s))
    v = tl.minimum(tl.maximum(tl.div_rn(x, s), -448.0), 448.0)
    sign = (v.to(tl.int32, bitcast=True) >> 24) & 128
    tl.store(q_ptr + offs, (e4m3_bits(e4m3_round(tl.abs(v))) | sign).to(tl.uint8), mask=mask)


@triton.jit
def _dequantize_fp8_kernel(
    q_ptr, s_ptr, out_ptr, numel, inner, num_scales, BLOCK: tl.constexpr, WIDE: tl.constexpr
):
    offs = program_offsets(BLOCK, WIDE)
    mask = offs < numel
    bits = tl.load(q_ptr + offs, mask=mask, other=0).to(tl.int32)
    s = tl.load(s_ptr + (offs // inner) % num_scales, mask=mask, other=1.0)
    store_rne(out_ptr + offs, e4m3_decode(bits) * s, mask)


# ---------------------------------------------------------------- launchers


def _scale_layout(scale: torch.Tensor, shape: torch.Size) -> tuple[torch.Tensor, int, int]:
    """(flat scales, inner, num_scales) so that flat element i of `shape` uses scale (i // inner) % num_scales.

    The scale's non-1 dims (right-aligned against `shape`) must form one run of full dims, which
    covers per-tensor, per-head [1, H, 1] and per-token-head [T, H, 1] scales.
    """
    s_shape = (1,) * (len(shape) - scale.ndim) + tuple(scale.shape)
    varying = [d for d, size in enumerate(s_shape) if size != 1]
    if not varying:
        return scale.reshape(1).contiguous(), max(math.prod(shape), 1), 1
    first, last = varying[0], varying[-1]
    if any(s_shape[d] != shape[d] for d in range(first, last + 1)):
        raise ValueError(
            f"the Triton kernel needs scale dims that vary as one run, got {tuple(scale.shape)}"
        )
    return scale.reshape(-1).contiguous(), max(math.prod(shape[last + 1 :]), 1), scale.numel()


def quantize_fp8(x: torch.Tensor, scale=None, per_head_dim: int | None = None):
    """Quantize x to torch.float8_e4m3fn with a float32 scale; returns (q, scale).

    scale: None (calibrate amax / 448 from x, 1.0 if all zero), a positive scalar, or a tensor
    broadcastable to x. per_head_dim (only without scale) calibrates one scale per index of that
    dim, returned with kept dims (x [T, H, D], per_head_dim=1 -> scale [1, H, 1]). Values beyond
    +-448 * scale saturate. x must be contiguous, on CUDA (or TRITON_INTERPRET=1), finite and
    fp32/fp16/bf16, else ValueError. Allocates q; bit-identical to `quantize_fp8_ref`.
    """
    scale = _checked_input(x, scale, per_head_dim, values=False)
    check_kernel_tensor(x)
    q = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    if x.numel():
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        launch_quantize_fp8(x, scale, q, flag)
        raise_if_flagged(flag, "x", "scale")
    return q.view(torch.float8_e4m3fn), scale


def launch_quantize_fp8(x, scale, q, flag) -> None:
    """The quantize kernel alone, on checked arguments (x contiguous, scale float32 broadcastable
    to it, q uint8 like x; flag int32 [1]: bits set for NaN/Inf in x or a bad scale, not read)."""
    flat_scale, inner, num_scales = _scale_layout(scale, x.shape)
    grid = (triton.cdiv(x.numel(), BLOCK),)
    _quantize_fp8_kernel[grid](
        x,
        flat_scale,
        q,
        flag,
        x.numel(),
        inner,
        num_scales,
        BLOCK=BLOCK,
        WIDE=wide_offsets(x.numel(), BLOCK),
    )


def dequantize_fp8(q: torch.Tensor, scale, dtype=torch.bfloat16) -> torch.Tensor:
    """Dequantize q (float8_e4m3fn, contiguous) times `scale` into a new tensor of `dtype`.

    Raises ValueError for a wrong dtype, a scale that does not broadcast to q, or a bad
    device/layout. Bit-identical to `dequantize_fp8_ref`.
    """
    scale = _checked_q(q, scale, dtype)
    check_kernel_tensor(q, "q")
    flat_scale, inner, num_scales = _scale_layout(scale, q.shape)
    out = torch.empty(q.shape, dtype=dtype, device=q.device)
    if q.numel():
        grid = (triton.cdiv(q.numel(), BLOCK),)
        _dequantize_fp8_kernel[grid](
            q.view(torch.uint8),
            flat_scale,
            out,
            q.numel(),
            inner,
            num_scales,
            BLOCK=BLOCK,
            WIDE=wide_offsets(q.numel(), BLOCK),
        )
    return out

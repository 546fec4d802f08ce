"""NVFP4 quantization: E2M1 codes, one E4M3 scale per 16 values, one FP32 tensor scale.

Format (NVIDIA ModelOpt convention), for x [..., n] with n % 16 == 0:
  codes         uint8 [..., n / 2]            two E2M1 codes per byte, element 2i in the low nibble
  block_scales  float8_e4m3fn [..., n / 16]   one per 16 consecutive values of the last dim
  tensor_scale  float32, 0-d (per tensor) or broadcastable to [..., 1] (e.g. per head)
  x ~= e2m1(code) * block_scale * tensor_scale

E2M1 magnitudes, by the low three bits of a code: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign.
Rounding is to the nearest grid value, ties to the even code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1,
1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4); magnitudes above 6 saturate to 6. Negative values that
round to zero keep the sign bit (code 0x8, i.e. -0), as the hardware conversion does.

tensor_scale s_T = amax / (6 * 448), so the largest block scale is ~448, the E4M3 maximum.
block_scale = E4M3(block_amax / (6 * s_T)), saturated at 448; a block whose scale rounds to 0 in
E4M3 (all-zero blocks included) stores 1.0, and all its codes are then zero (or -0).

TensorRT-LLM and flashinfer take the *inverse* ("global scale") 6 * 448 / amax = 1 / s_T:
convert with `nvfp4_global_scale` and `nvfp4_tensor_scale_from_global`.
"""

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

E2M1_MAX = 6.0
BLOCK_SIZE = 16
BLOCKS = 256  # 16-value blocks per Triton program (4,096 values)
# value of each 4-bit code; index = code
E2M1_VALUES = (
    0.0,
    0.5,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    -0.0,
    -0.5,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
)


# ---------------------------------------------------------------- scale helpers


def nvfp4_tensor_scale(x: torch.Tensor, per_head_dim: int | None = None) -> torch.Tensor:
    """s_T = amax / (6 * 448) from data (1.0 if all zero); per tensor, or per head keeping dims."""
    if per_head_dim is not None and per_head_dim % x.ndim == x.ndim - 1:
        raise ValueError("per_head_dim cannot be the last (blocked) dim")
    return amax_scale(x, E2M1_MAX * E4M3_MAX, per_head_dim)  # max |x| is exact in x's own dtype


def nvfp4_global_scale(tensor_scale: torch.Tensor) -> torch.Tensor:
    """The TensorRT-LLM / flashinfer global scale, 1 / s_T = 6 * 448 / amax (float32)."""
    return 1.0 / torch.as_tensor(tensor_scale, dtype=torch.float32)


def nvfp4_tensor_scale_from_global(global_scale: torch.Tensor) -> torch.Tensor:
    """The radixgen tensor scale s_T = 1 / global_scale, from a TensorRT-LLM / flashinfer scale."""
    return 1.0 / torch.as_tensor(global_scale, dtype=torch.float32)


def _checked_input(x: torch.Tensor, tensor_scale, values: bool = True) -> torch.Tensor:
    """Validate x; return s_T (float32, broadcastable to x[..., :1]). values=False leaves the
    finiteness of x and of a given scale tensor to the caller (the Triton kernel flags them)."""
    check_float_input(x, finite=values)
    if x.ndim == 0 or x.shape[-1] == 0 or x.shape[-1] % BLOCK_SIZE:
        raise ValueError(
            f"the last dim of x must be a positive multiple of 16, got shape {tuple(x.shape)}"
        )
    if tensor_scale is None:
        return nvfp4_tensor_scale(x)
    return as_scale(tensor_scale, x[..., :1], "tensor_scale", values)


def _checked_codes(codes, block_scales, tensor_scale, dtype) -> torch.Tensor:
    """Validate dequantize inputs; return s_T (float32, broadcastable to codes[..., :1])."""
    if codes.dtype != torch.uint8 or block_scales.dtype != torch.float8_e4m3fn:
        raise ValueError(
            f"need uint8 codes and float8_e4m3fn block_scales, got {codes.dtype}, "
            f"{block_scales.dtype}"
        )
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype}")
    if (
        codes.ndim == 0
        or codes.shape[:-1] != block_scales.shape[:-1]
        or codes.shape[-1] != 8 * block_scales.shape[-1]
    ):
        raise ValueError(
            f"codes {tuple(codes.shape)} and block_scales {tuple(block_scales.shape)} do not match"
        )
    if codes.device != block_scales.device:
        raise ValueError("codes and block_scales must be on the same device")
    return as_scale(tensor_scale, codes[..., :1], "tensor_scale")


# ---------------------------------------------------------------- torch reference


def e2m1_codes_ref(v: torch.Tensor) -> torch.Tensor:
    """4-bit E2M1 codes (uint8) of fp32 values already divided by their scales: the number of
    rounding boundaries below |v|, with ties to the even code (|v| > 0.25, >= 0.75, > 1.25,
    >= 1.75, > 2.5, >= 3.5, > 5: a `>=` boundary is the float32 just below it, under `>`)."""
    magnitude_code = torch.bucketize(v.abs(), _E2M1_BOUNDARIES.to(v.device))
    return (magnitude_code + 8 * (v < 0)).to(torch.uint8)


_E2M1_BOUNDARIES = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float32)
_E2M1_BOUNDARIES[1::2] = torch.nextafter(_E2M1_BOUNDARIES[1::2], torch.tensor(0.0))


def quantize_nvfp4_ref(x: torch.Tensor, tensor_scale=None):
    """Plain-torch NVFP4 quantization; see the module docstring for the format."""
    s_t = _checked_input(x, tensor_scale)
    blocks = x.float().unflatten(-1, (-1, BLOCK_SIZE))  # [..., n/16, 16]
    block_amax = blocks.abs().amax(-1)  # [..., n/16]
    scales = (block_amax / (E2M1_MAX * s_t)).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn).float()
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = e2m1_codes_ref(blocks / (scales * s_t).unsqueeze(-1)).flatten(-2)  # [..., n]
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)  # [..., n/2]
    return packed, scales.to(torch.float8_e4m3fn), s_t


def dequantize_nvfp4_ref(codes, block_scales, tensor_scale, dtype=torch.bfloat16):
    """Plain-torch NVFP4 dequantization: e2m1(code) * block_scale * tensor_scale, in `dtype`."""
    s_t = _checked_codes(codes, block_scales, tensor_scale, dtype)
    nibbles = torch.stack([codes & 15, codes >> 4], dim=-1).flatten(-2).long()  # [..., n]
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    values = table[nibbles].unflatten(-1, (-1, BLOCK_SIZE))  # [..., n/16, 16]
    out = (values * block_scales.float().unsqueeze(-1)) * s_t.unsqueeze(-1)
    return out.flatten(-2).to(dtype)


# ---------------------------------------------------------------- Triton kernels


@triton.jit
def _e2m1_code(v):
    a = tl.abs(v)
    steps = (
        (a > 0.25).to(tl.int32)
        + (a >= 0.75).to(tl.int32)
        + (a > 1.25).to(tl.int32)
        + (a >= 1.75).to(tl.int32)
        + (a > 2.5).to(tl.int32)
        + (a >= 3.5).to(tl.int32)
        + (a > 5.0).to(tl.int32)
    )
    return steps + tl.where(v < 0, 8, 0)


@triton.jit
def _e2m1_value(code):
    mag = code & 7
    exp = mag >> 1
    mant = (mag & 1).to(tl.float32)
    value = tl.where(
        exp == 0,
        0.5 * mant,
        tl.where(exp == 1, 1.0 + 0.5 * mant, tl.where(exp == 2, 2.0 + mant, 4.0 + 2.0 * mant)),
    )
    # the sign goes in as a bit: negation on the GPU computes 0 - x, which loses -0
    return (value.to(tl.int32, bitcast=True) | ((code & 8) << 28)).to(tl.float32, bitcast=True)


@triton.jit
def _quantize_nvfp4_kernel(
    x_ptr,
    s_ptr,
    codes_ptr,
    scales_ptr,
    flag_ptr,
    num_blocks,
    row_blocks,
    BLOCKS: tl.constexpr,
    WIDE: tl.constexpr,
):
    # one program: BLOCKS consecutive 16-value blocks of the flat input (rows of row_blocks blocks,
    # s_ptr one tensor scale per row); pairs (2i, 2i+1) share a byte; bad inputs set bits of
    # *flag_ptr
    blk = program_offsets(BLOCKS, WIDE)  # [BLOCKS] block indices
    pair = tl.arange(0, 8)[None, :]  # [1, 8]
    in_range = blk < num_blocks
    mask = in_range[:, None]
    offs = blk[:, None] * 16 + pair * 2  # [BLOCKS, 8]
    even = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    odd = tl.load(x_ptr + offs + 1, mask=mask, other=0.0).to(tl.float32)
    s_t = tl.load(s_ptr + blk // row_blocks, mask=in_range, other=1.0)
    flag_if_any(
        flag_ptr, mask & (nonfinite(even) | nonfinite(odd)), (in_range & bad_scale(s_t))[:, None]
    )
    amax = tl.maximum(tl.max(tl.abs(even), axis=1), tl.max(tl.abs(odd), axis=1))  # [BLOCKS]
    scale = e4m3_round(tl.minimum(tl.div_rn(amax, 6.0 * s_t), 448.0))
    scale = tl.where(scale > 0, scale, 1.0)
    denom = (scale * s_t)[:, None]
    lo = _e2m1_code(tl.div_rn(even, denom))
    hi = _e2m1_code(tl.div_rn(odd, denom))
    tl.store(codes_ptr + blk[:, None] * 8 + pair, (lo | (hi << 4)).to(tl.uint8), mask=mask)
    tl.store(scales_ptr + blk, e4m3_bits(scale).to(tl.uint8), mask=in_range)


@triton.jit
def _dequantize_nvfp4_kernel(
    codes_ptr,
    scales_ptr,
    s_ptr,
    out_ptr,
    num_blocks,
    row_blocks,
    BLOCKS: tl.constexpr,
    WIDE: tl.constexpr,
):
    blk = program_offsets(BLOCKS, WIDE)  # [BLOCKS] block indices
    pair = tl.arange(0, 8)[None, :]  # [1, 8]
    in_range = blk < num_blocks
    mask = in_range[:, None]
    byte = tl.load(codes_ptr + blk[:, None] * 8 + pair, mask=mask, other=0).to(tl.int32)
    scale = e4m3_decode(tl.load(scales_ptr + blk, mask=in_range, other=0).to(tl.int32))
    s_t = tl.load(s_ptr + blk // row_blocks, mask=in_range, other=1.0)
    offs = blk[:, None] * 16 + pair * 2  # [BLOCKS, 8]
    lo = (_e2m1_value(byte & 15) * scale[:, None]) * s_t[:, None]
    hi = (_e2m1_value(byte >> 4) * scale[:, None]) * s_t[:, None]
    store_rne(out_ptr + offs, lo, mask)
    store_rne(out_ptr + offs + 1, hi, mask)


# ---------------------------------------------------------------- launchers


def _row_scales(s_t: torch.Tensor, lead_shape: torch.Size) -> torch.Tensor:
    """s_T expanded to one float32 per row: [prod(lead_shape)]."""
    return s_t.expand(*lead_shape, 1).reshape(-1).contiguous()


def quantize_nvfp4(x: torch.Tensor, tensor_scale=None):
    """Quantize x [..., n] (n % 16 == 0, contiguous, CUDA or TRITON_INTERPRET=1) to NVFP4.

    Returns (codes uint8 [..., n/2], block_scales float8_e4m3fn [..., n/16], tensor_scale float32).
    tensor_scale defaults to amax(|x|) / (6 * 448) (a 0-d tensor; 1.0 if x is all zero); pass a
    scalar or a tensor broadcastable to x[..., :1] for per-head scales. Allocates new outputs and
    does not modify x. Raises ValueError for bad dtype/shape/device/layout and for NaN/Inf in x.
    Bit-identical to `quantize_nvfp4_ref`.
    """
    s_t = _checked_input(x, tensor_scale, values=False)
    check_kernel_tensor(x)
    lead, n = x.shape[:-1], x.shape[-1]
    codes = torch.empty(*lead, n // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(*lead, n // BLOCK_SIZE, dtype=torch.uint8, device=x.device)
    if x.numel():
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        launch_quantize_nvfp4(x, _row_scales(s_t, lead), codes, scales, flag)
        raise_if_flagged(flag, "x", "tensor_scale")
    return codes, scales.view(torch.float8_e4m3fn), s_t


def launch_quantize_nvfp4(x, row_scales, codes, scales, flag) -> None:
    """The quantize kernel alone, on checked arguments (x [..., n] contiguous, one float32 tensor
    scale per row of n; codes, scales uint8 outputs; flag int32 [1]: bits set for NaN/Inf in x or a
    bad scale, not read)."""
    num_blocks = x.numel() // BLOCK_SIZE
    _quantize_nvfp4_kernel[(triton.cdiv(num_blocks, BLOCKS),)](
        x,
        row_scales,
        codes,
        scales,
        flag,
        num_blocks,
        x.shape[-1] // BLOCK_SIZE,
        BLOCKS=BLOCKS,
        WIDE=wide_offsets(x.numel(), BLOCKS * BLOCK_SIZE),
    )


def dequantize_nvfp4(codes, block_scales, tensor_scale, dtype=torch.bfloat16) -> torch.Tensor:
    """Dequantize NVFP4 (as returned by `quantize_nvfp4`) to a new [..., n] tensor of `dtype`.

    Computes e2m1(code) * block_scale (exact) then * tensor_scale (one rounding), then casts.
    Inputs must be contiguous, on one device (CUDA or TRITON_INTERPRET=1); raises ValueError
    otherwise. Bit-identical to `dequantize_nvfp4_ref`.
    """
    s_t = _checked_codes(codes, block_scales, tensor_scale, dtype)
    check_kernel_tensor(codes, "codes")
    check_kernel_tensor(block_scales, "block_scales")
    lead, num_blocks = codes.shape[:-1], block_scales.shape[-1]
    out = torch.empty(*lead, num_blocks * BLOCK_SIZE, dtype=dtype, device=codes.device)
    if block_scales.numel():
        grid = (triton.cdiv(block_scales.numel(), BLOCKS),)
        _dequantize_nvfp4_kernel[grid](
            codes,
            block_scales.view(torch.uint8),
            _row_scales(s_t, lead),
            out,
            block_scales.numel(),
            num_blocks,
            BLOCKS=BLOCKS,
            WIDE=wide_offsets(out.numel(), BLOCKS * BLOCK_SIZE),
        )
    return out

"""Shared pieces of the quantization kernels: input checks and exact E4M3 bit helpers.

The E4M3 helpers work on integer bit patterns and power-of-two scalings only, so the
Triton kernels round exactly like `torch.Tensor.to(torch.float8_e4m3fn)` (round to
nearest, ties to even) on a GPU and under `TRITON_INTERPRET=1` alike, without relying
on the interpreter's or the hardware's fp8 conversions.
"""

import math
import os

import torch
import triton
import triton.language as tl

E4M3_MAX = 448.0  # OCP float8_e4m3fn (torch.float8_e4m3fn); never the FNUZ +-240 range
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def ctas_per_sm(n_regs: int, shared: int, warps: int, props) -> int:
    """CTAs of a kernel (n_regs per thread, `shared` bytes, `warps` warps each) that fit on one SM
    of a device with properties `props` (torch.cuda.get_device_properties)."""
    regs_per_warp = (
        triton.cdiv(max(n_regs, 1) * 32, 256) * 256
    )  # registers are allocated per warp in 256s
    by_regs = getattr(props, "regs_per_multiprocessor", 65536) // regs_per_warp // warps
    by_smem = getattr(props, "shared_memory_per_multiprocessor", 233472) // (
        shared + 1024
    )  # 1 KiB reserved each
    by_threads = getattr(props, "max_threads_per_multi_processor", 2048) // (32 * warps)
    return max(1, min(by_regs, by_smem, by_threads, 32))


def check_float_input(x: torch.Tensor, name: str = "x", finite: bool = True) -> None:
    """Raise ValueError unless `x` is a fp32/fp16/bf16 tensor, finite unless finite=False (the
    Triton launchers check finiteness inside their kernel instead: see `raise_if_flagged`)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be float32, float16 or bfloat16, got {x.dtype}")
    if finite and x.numel() and not bool(torch.isfinite(x).all()):  # syncs on CUDA
        raise_nonfinite(name)


def check_kernel_tensor(x: torch.Tensor, name: str = "x") -> None:
    """Raise ValueError unless `x` can be handed to a Triton kernel as a flat buffer."""
    if not (x.is_cuda or interpreting()):
        raise ValueError(
            f"{name} must be a CUDA tensor (or set TRITON_INTERPRET=1), got {x.device}"
        )
    if not x.is_contiguous():
        raise ValueError(f"{name} must be contiguous; call .contiguous() first")


def raise_nonfinite(name: str):
    raise ValueError(f"{name} contains NaN or Inf; it cannot be quantized")


def raise_if_flagged(flag: torch.Tensor, name: str, scale_name: str) -> None:
    """After a quantize kernel that set bits of `flag` (int32 [1], zeroed before; see
    `flag_if_any`): raise ValueError for a NaN/Inf input (bit 0) or a scale that is not finite and
    > 0 (bit 1), as the torch reference would. One sync and no second pass over the input; the
    fresh outputs the kernel wrote are dropped with the exception."""
    bits = int(flag.item())
    if bits & 1:
        raise_nonfinite(name)
    if bits & 2:
        raise ValueError(f"{scale_name} must be finite and > 0")


def wide_offsets(numel: int, block: int = 1024) -> bool:
    """Whether flat offsets into `numel` elements (plus a block of overrun) need int64."""
    return numel + block > 2**31 - 1


@triton.jit
def program_offsets(BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """This program's BLOCK flat offsets: int64 when WIDE (see `wide_offsets`), else int32 (cheaper
    index arithmetic: a 64-bit division per element is dozens of instructions)."""
    if WIDE:
        return tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def nonfinite(v):
    """Where fp32 `v` is NaN or +-Inf (from its bits: no float compare a compiler could fold)."""
    return (v.to(tl.int32, bitcast=True) & 0x7FFFFFFF) >= 0x7F800000


@triton.jit
def bad_scale(s):
    """Where fp32 scale `s` is not finite and > 0 (from its bits: <= 0 as an int32 is a zero or a
    negative float, >= 0x7F800000 Inf or NaN)."""
    bits = s.to(tl.int32, bitcast=True)
    return (bits <= 0) | (bits >= 0x7F800000)


@triton.jit
def _bit_or(a, b):
    return a | b


@triton.jit
def flag_if_any(flag_ptr, bad_input, bad_scales):
    """OR into *flag_ptr (int32) bit 0 if any element of the boolean block `bad_input` is set and
    bit 1 if any of `bad_scales` (broadcast to it) is: one reduction and, only in a program that
    found one, one atomic."""
    code = bad_input.to(tl.int32) | (bad_scales.to(tl.int32) << 1)
    found = tl.reduce(tl.ravel(code), 0, _bit_or)
    if found > 0:
        tl.atomic_or(flag_ptr, found)


def as_scale(scale, like: torch.Tensor, name: str, values: bool = True) -> torch.Tensor:
    """A positive, finite float32 scale tensor on `like`'s device, broadcastable to `like`.
    A Python number is checked on the host (as float32); a tensor's values cost one sync on CUDA
    (values=False leaves them to the caller: the quantize kernels flag bad scales themselves)."""
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        value = torch.tensor(scale, dtype=torch.float32)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0")
        return value.to(like.device)
    scale = torch.as_tensor(scale, dtype=torch.float32, device=like.device)
    try:
        fits = torch.broadcast_shapes(scale.shape, like.shape) == like.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(scale.shape)} does not broadcast to {tuple(like.shape)}"
        )
    if values and not bool((torch.isfinite(scale) & (scale > 0)).all()):
        raise ValueError(f"{name} must be finite and > 0")
    return scale


def scale_from_amax(amax: torch.Tensor, max_value: float) -> torch.Tensor:
    """amax / max_value in float32, or 1.0 (explicitly) where that is 0: an all-zero input, or
    one so tiny (amax below ~1e-42) that the scale underflows; such inputs quantize to zeros."""
    amax = amax.to(torch.float32)
    # a tensor divisor: CUDA would turn division by a Python float into a multiply by its
    # (rounded) reciprocal, giving scales 1 ulp off those computed on the CPU
    scale = amax / torch.full_like(amax, max_value)
    return torch.where(scale > 0, scale, torch.ones_like(scale))


@triton.jit
def e4m3_round(v):
    """Round fp32 v in [0, 448] to the nearest E4M3 value (ties to even), as fp32."""
    bits = v.to(tl.int32, bitcast=True)
    exp = tl.maximum((bits >> 23) & 0xFF, 121)  # 121 = 127 - 6: subnormals share 2^-9 steps
    quantum = ((exp - 3) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    inv_quantum = ((257 - exp) << 23).to(tl.float32, bitcast=True)
    steps = v * inv_quantum  # exact (power of two), in [0, 16]
    steps = (steps + 8388608.0) - 8388608.0  # + 2^23: fp32 add rounds to an integer, ties to even
    return steps * quantum


@triton.jit
def e4m3_bits(r):
    """E4M3 bit pattern (int32, sign bit clear) of an exactly representable fp32 r >= 0."""
    bits = r.to(tl.int32, bitcast=True)
    exp = (bits >> 23) & 0xFF
    normal = ((exp - 120) << 3) | ((bits >> 20) & 7)
    subnormal = (r * 512.0).to(tl.int32)  # r = k * 2^-9, k in 0..7
    return tl.where(exp >= 121, normal, subnormal)


@triton.jit
def e4m3_decode(bits):
    """fp32 value of E4M3 bit patterns (int32 in 0..255); NaN patterns are not special-cased."""
    exp = (bits >> 3) & 15
    mant = bits & 7
    normal = (((exp + 120) << 23) | (mant << 20)).to(tl.float32, bitcast=True)
    value = tl.where(exp == 0, mant.to(tl.float32) * 0.001953125, normal)  # 2^-9
    # the sign goes in as a bit: negation on the GPU computes 0 - x, which loses -0
    return (value.to(tl.int32, bitcast=True) | ((bits & 128) << 24)).to(tl.float32, bitcast=True)


def amax_scale(x: torch.Tensor, max_value: float, per_head_dim: int | None = None) -> torch.Tensor:
    """Calibrate a float32 scale amax / max_value from `x` (1.0 where amax == 0).

    Per-tensor (0-d result) when `per_head_dim` is None; otherwise the amax is taken over every
    dim except `per_head_dim`, keeping dims, so the scale broadcasts against `x`
    (e.g. x [num_tokens, num_heads, head_dim], per_head_dim=1 -> scale [1, num_heads, 1]).
    """
    # the infinity norm is max |x| in one read of x (abs().amax() wrote |x| out first); exact
    if per_head_dim is None:
        return scale_from_amax(torch.linalg.vector_norm(x, math.inf), max_value)
    if not -x.ndim <= per_head_dim < x.ndim:
        raise ValueError(f"per_head_dim={per_head_dim} is out of range for a {x.ndim}-d tensor")
    head = per_head_dim % x.ndim
    dims = tuple(d for d in range(x.ndim) if d != head)
    amax = torch.linalg.vector_norm(x, math.inf, dim=dims, keepdim=True) if dims else x.abs()
    return scale_from_amax(amax, max_value)


@triton.jit
def store_rne(ptr, value, mask):
    """Store fp32 `value` as ptr's element type, rounding to nearest even.

    bf16 is rounded here with integer ops because the interpreter's fp32 -> bf16 cast does not
    round to nearest even; the final cast is then exact on every backend.
    """
    if ptr.dtype.element_ty == tl.bfloat16:
        bits = value.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        value = bits.to(tl.float32, bitcast=True)
    tl.store(ptr, value.to(ptr.dtype.element_ty), mask=mask)

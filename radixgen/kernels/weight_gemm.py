"""Weight-only GEMMs for decode sizes: out [M, N] = x [M, K] @ dequant(w)[N, K].T, the weight
decoded in registers and never written out dense.

Two weight formats share one tiling:
- NVFP4 (nvfp4.py's format): codes uint8 [N, K/2] with element 2i in the low nibble, read as
  int32 words of 8 elements; block_scales float8_e4m3fn [N, K/16]; a float32 scale per row.
- FP8 E4M3 [N, K] with a float32 scale per row (W8A16: the activations stay in their dtype).

At M = 1..64 the product is bound by the weight bytes, so the tiling is chosen to keep every SM
streaming: each program owns a BLOCK_M x BLOCK_N output tile and a 1/split slice of K (split-K),
and the partial sums of the slices are added in a fixed order afterwards (deterministic, unlike
atomics). An E2M1 code becomes a float by placing its exponent and mantissa bits in an fp16 bit
pattern (a subnormal-aware exact map, times 2^14 folded into the row scale), not by a select
chain. The tile's dot runs in the activation dtype with float32 accumulation.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ._common import e4m3_decode, interpreting

E2M1_FP16_SHIFT = 16384.0  # the fp16 bit pattern of an E2M1 code is its value / 2^14


@dataclass(frozen=True)
class Tiling:
    """One launch's tile sizes, K split and warps."""

    block_m: int
    block_n: int
    block_k: int
    split: int
    warps: int = 4
    stages: int = 3


def plan_tiling(m: int, n: int, k: int, device: torch.device, **override) -> Tiling:
    """Tile sizes for an [M, K] x [N, K] product: BLOCK_M the smallest MMA height >= M (16..64),
    BLOCK_N 32 up to M 16 and 64 beyond, BLOCK_K 128 where it divides K, else 64, and K split
    until the grid is >= 2 programs per SM with >= 2 K tiles per program. `override` replaces
    any field (the benchmark's sweep)."""
    block_m = max(16, min(64, triton.next_power_of_2(m)))
    block_n = 32 if m <= 16 else 64  # H100 sweep at M 1 and 16: 32 beat 64 by 1.3-1.8x (NVFP4)
    block_k = 128 if k % 128 == 0 else 64
    sms = (
        1
        if device.type != "cuda"
        else torch.cuda.get_device_properties(device).multi_processor_count
    )
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    k_tiles = k // block_k
    split = max(1, min(triton.cdiv(2 * sms, tiles), k_tiles // 2))
    plan = dict(block_m=block_m, block_n=block_n, block_k=block_k, split=split)
    plan.update(override)
    if k % plan["block_k"]:
        raise ValueError(f"K = {k} must be a multiple of block_k = {plan['block_k']}")
    return Tiling(**plan)


@triton.jit
def _e2m1_scaled(words, scale, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BLOCK_N, BLOCK_K] float32 weights / 2^14 from int32 words [BLOCK_N, BLOCK_K/8] (8 codes
    each, element e at bits 4e) and their float32 block scales [BLOCK_N, BLOCK_K/16]."""
    shifts = tl.arange(0, 8) * 4
    codes = (words[:, :, None] >> shifts[None, None, :]) & 15  # [BN, BK/8, 8]
    # exponent and mantissa into fp16 bits 11..9, the sign into bit 15: exact, -0 kept
    bits = ((codes & 7) << 9) | ((codes & 8) << 12)
    value = bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    value = tl.reshape(value, (BLOCK_N, BLOCK_K // 16, 16)) * scale[:, :, None]
    return tl.reshape(value, (BLOCK_N, BLOCK_K))


@triton.jit
def _weight_gemm_kernel(
    x_ptr,
    w_ptr,
    block_scale_ptr,
    row_scale_ptr,
    out_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    NVFP4: tl.constexpr,
    HW_FP8: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols[:, None] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_begin = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    for k0 in range(k_begin, k_end, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=rows[:, None] < M, other=0.0)
        if NVFP4:
            words = tl.load(
                w_ptr + cols[:, None] * (K // 8) + k0 // 8 + tl.arange(0, BLOCK_K // 8)[None, :],
                mask=col_ok,
                other=0,
            )
            scale_bits = tl.load(
                block_scale_ptr
                + cols[:, None] * (K // 16)
                + k0 // 16
                + tl.arange(0, BLOCK_K // 16)[None, :],
                mask=col_ok,
                other=0,
            )
            w = _e2m1_scaled(words, e4m3_decode(scale_bits.to(tl.int32)), BLOCK_N, BLOCK_K)
        else:
            byte = tl.load(w_ptr + cols[:, None] * K + kk[None, :], mask=col_ok, other=0)
            if HW_FP8:
                w = byte.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            else:
                w = e4m3_decode(byte.to(tl.int32))
        acc += tl.dot(x, tl.trans(w.to(x.dtype)), input_precision=DOT_PRECISION)
    out = acc * tl.load(row_scale_ptr + cols, mask=cols < N, other=0.0)[None, :]
    tl.store(
        out_ptr + pid_k * M * N + rows[:, None] * N + cols[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def weight_gemm(
    x: torch.Tensor,
    weight: torch.Tensor,
    row_scale: torch.Tensor,
    block_scales: torch.Tensor | None,
    tiling: Tiling,
) -> torch.Tensor:
    """Launch the kernel: NVFP4 when `block_scales` is given (weight = the uint8 codes), else
    FP8 (weight float8_e4m3fn [N, K]). Inputs are checked by the callers."""
    m, k = x.shape
    n = weight.shape[0]
    nvfp4 = block_scales is not None
    k_per_split = triton.cdiv(k // tiling.block_k, tiling.split) * tiling.block_k
    split = triton.cdiv(k, k_per_split)
    out_dtype = x.dtype if split == 1 else torch.float32
    out = torch.empty(split, m, n, dtype=out_dtype, device=x.device)
    scale = row_scale.reshape(n).float() * (E2M1_FP16_SHIFT if nvfp4 else 1.0)
    grid = (triton.cdiv(m, tiling.block_m), triton.cdiv(n, tiling.block_n), split)
    extra = {} if interpreting() else {"num_warps": tiling.warps, "num_stages": tiling.stages}
    _weight_gemm_kernel[grid](
        x,
        weight.view(torch.int32) if nvfp4 else weight.view(torch.uint8),
        block_scales.view(torch.uint8) if nvfp4 else weight,
        scale.contiguous(),
        out,
        m,
        n,
        k,
        k_per_split,
        NVFP4=nvfp4,
        HW_FP8=x.is_cuda
        and not interpreting()
        and torch.cuda.get_device_capability(x.device) >= (8, 9),
        DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32",  # fp32 stays fp32 (no TF32)
        BLOCK_M=tiling.block_m,
        BLOCK_N=tiling.block_n,
        BLOCK_K=tiling.block_k,
        **extra,
    )
    return out[0] if split == 1 else out.sum(0).to(x.dtype)

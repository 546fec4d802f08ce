"""NVFP4 weight-only GEMM (W4A16): out [M, N] = x [M, K] @ dequant(w)[N, K].T.

The weight is in the NVFP4 format of nvfp4.py (codes uint8 [N, K/2], element 2i in the low
nibble; block_scales float8_e4m3fn [N, K/16]; one float32 tensor scale per row [N, 1]). Each
program owns a BLOCK_M x BLOCK_N tile of the output and walks K: it loads the packed codes and
block scales of a BLOCK_N x BLOCK_K weight tile, decodes them in registers (E2M1 value times
the E4M3 scale), and multiplies with `tl.dot` in the activation dtype, accumulating in float32;
the per-row tensor scale multiplies the finished tile. Weight bytes are read once per M tile,
so at decode sizes (one M tile) the kernel streams 4.5 bits per weight.
"""

import torch
import triton
import triton.language as tl

from ._common import check_kernel_tensor, e4m3_decode
from .nvfp4 import _e2m1_value, dequantize_nvfp4_ref


@triton.jit
def _nvfp4_gemm_kernel(
    x_ptr,
    codes_ptr,
    scales_ptr,
    s_ptr,
    out_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM]
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    half = tl.arange(0, BLOCK_K // 2)  # byte offsets within the K tile
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        byte = tl.load(
            codes_ptr + cols[:, None] * (K // 2) + k0 // 2 + half[None, :],
            mask=cols[:, None] < N,
            other=0,
        ).to(tl.int32)  # [BN, BK/2]
        scale = e4m3_decode(
            tl.load(
                scales_ptr + cols[:, None] * (K // 16) + (k0 + 2 * half[None, :]) // 16,
                mask=cols[:, None] < N,
                other=0,
            ).to(tl.int32)
        )  # [BN, BK/2]
        lo = _e2m1_value(byte & 15) * scale
        hi = _e2m1_value(byte >> 4) * scale
        w = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))  # element 2i from the low nibble
        k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * K + k[None, :], mask=rows[:, None] < M, other=0.0)
        acc += tl.dot(x, tl.trans(w.to(x.dtype)))
    s = tl.load(s_ptr + cols, mask=cols < N, other=0.0)
    out = acc * s[None, :]
    tl.store(
        out_ptr + rows[:, None] * N + cols[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def nvfp4_linear(
    x: torch.Tensor,
    codes: torch.Tensor,
    block_scales: torch.Tensor,
    tensor_scale: torch.Tensor,
    block_m: int | None = None,
    block_n: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """x [M, K] (bf16/fp16/fp32) @ the NVFP4 weight [N, K] .T -> [M, N] in x's dtype. Raises
    ValueError for mismatched shapes, dtypes or devices; K must be a multiple of block_k."""
    m, k = x.shape
    n = codes.shape[0]
    if codes.dtype != torch.uint8 or block_scales.dtype != torch.float8_e4m3fn:
        raise ValueError(
            f"need uint8 codes and float8_e4m3fn block scales, got {codes.dtype}, "
            f"{block_scales.dtype}"
        )
    if (
        codes.shape != (n, k // 2)
        or block_scales.shape != (n, k // 16)
        or tensor_scale.numel() != n
    ):
        raise ValueError(
            f"x {tuple(x.shape)} does not match codes {tuple(codes.shape)}, "
            f"block_scales {tuple(block_scales.shape)}, tensor_scale {tuple(tensor_scale.shape)}"
        )
    if k % block_k:
        raise ValueError(f"K = {k} must be a multiple of block_k = {block_k}")
    for t, name in ((x, "x"), (codes, "codes"), (block_scales, "block_scales")):
        check_kernel_tensor(t, name)
    block_m = block_m or max(16, min(64, triton.next_power_of_2(m)))
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    scale = tensor_scale.reshape(n).float().contiguous()
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _nvfp4_gemm_kernel[grid](
        x,
        codes,
        block_scales.view(torch.uint8),
        scale,
        out,
        m,
        n,
        k,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )
    return out


def nvfp4_linear_ref(x, codes, block_scales, tensor_scale, **_) -> torch.Tensor:
    """The same product in plain torch: dequantize in float32, matmul, cast to x's dtype."""
    w = dequantize_nvfp4_ref(codes, block_scales, tensor_scale.reshape(-1, 1), torch.float32)
    return (x.float() @ w.T).to(x.dtype)

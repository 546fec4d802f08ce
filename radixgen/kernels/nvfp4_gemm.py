"""NVFP4 weight-only GEMM (W4A16): out [M, N] = x [M, K] @ dequant(w)[N, K].T.

The weight is in the NVFP4 format of nvfp4.py (codes uint8 [N, K/2], element 2i in the low
nibble; block_scales float8_e4m3fn [N, K/16]; one float32 tensor scale per row [N, 1]). The
kernel (weight_gemm.py) decodes codes and scales in registers, so at decode sizes it streams
4.5 bits per weight.
"""

import torch

from ._common import check_kernel_tensor
from .nvfp4 import dequantize_nvfp4_ref
from .weight_gemm import plan_tiling, weight_gemm


def nvfp4_linear(
    x: torch.Tensor,
    codes: torch.Tensor,
    block_scales: torch.Tensor,
    tensor_scale: torch.Tensor,
    **tiling,
) -> torch.Tensor:
    """x [M, K] (bf16/fp16/fp32) @ the NVFP4 weight [N, K] .T -> [M, N] in x's dtype. Raises
    ValueError for mismatched shapes, dtypes or devices; K must be a multiple of 64.
    `tiling` overrides fields of weight_gemm.Tiling."""
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
    for t, name in ((x, "x"), (codes, "codes"), (block_scales, "block_scales")):
        check_kernel_tensor(t, name)
    plan = plan_tiling(m, n, k, x.device, **tiling)
    return weight_gemm(x, codes.contiguous(), tensor_scale, block_scales.contiguous(), plan)


def nvfp4_linear_ref(x, codes, block_scales, tensor_scale, **_) -> torch.Tensor:
    """The same product in plain torch: dequantize in float32, matmul, cast to x's dtype."""
    w = dequantize_nvfp4_ref(codes, block_scales, tensor_scale.reshape(-1, 1), torch.float32)
    return (x.float() @ w.T).to(x.dtype)

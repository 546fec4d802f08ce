"""The matmul of a QuantizedWeight, per device.

CPU: an emulation for CI and the quality evals, numerically the quantized model: the weight is
dequantized into the activation dtype once, on its first forward, and kept (oneDNN-packed)
beside the codes, so a CPU model is as fast as the dense one and saves no memory (dequantizing
every layer at every forward measured ~5x slower end to end on this 2-core machine). CUDA keeps
nothing dense: NVFP4 through the W4A16 Triton
kernel (codes and scales dequantized in registers) for small M, and for larger M a dequantized
bf16 copy of the layer and cuBLAS; FP8 through `torch._scaled_mm` with per-token activation
scales on compute capability >= 8.9, else dequantize + cuBLAS. `dispatch_table` holds measured
(shape, M) -> path choices that override the defaults (benchmarks/bench_quant_weights.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from radixgen.runtime.quant.weight import QuantizedWeight

NVFP4_KERNEL_BLOCK_K = 64  # the kernel's K tile: other K take the dequantize path
NVFP4_KERNEL_MAX_M = 64  # default: the Triton kernel up to this many rows, then dequantize + cuBLAS
# (format, N, K, M bucket) -> "kernel" | "dequant" | "scaled_mm", written from measurements
dispatch_table: dict[tuple[str, int, int, int], str] = {}
M_BUCKETS = (1, 4, 16, 64, 256)


def m_bucket(m: int) -> int:
    """The smallest measured M >= m (the largest bucket beyond it)."""
    return next((b for b in M_BUCKETS if m <= b), M_BUCKETS[-1])


def quantized_linear(
    x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [M, K] @ dequantized(weight)[N, K].T (+ bias) -> [M, N] in x's dtype."""
    if x.is_cuda:
        path = _cuda_path(weight, x.shape[0])
        if path == "kernel":
            from radixgen.kernels.nvfp4_gemm import nvfp4_linear

            out = nvfp4_linear(x, weight.data, weight.block_scales, weight.scale)
            return out if bias is None else out + bias
        if path == "scaled_mm":
            from radixgen.kernels.fp8_gemm import fp8_linear

            return fp8_linear(x, weight.data, weight.scale, bias)
    if x.is_cuda:
        return F.linear(x, weight.dequantize(x.dtype), bias)
    return _cpu_linear(x, weight, bias)


def _cpu_linear(
    x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None
) -> torch.Tensor:
    from radixgen.runtime.model.layers import linear, prepare_weight  # layers imports this module

    if weight.cpu_dense is None or weight.cpu_dense.dtype != x.dtype:
        weight.cpu_dense = prepare_weight(weight.dequantize(x.dtype))
    return linear(x, weight.cpu_dense, bias)


def _cuda_path(weight: QuantizedWeight, m: int) -> str:
    n, k = weight.shape[-2:]
    chosen = dispatch_table.get((weight.format, n, k, m_bucket(m)))
    if chosen is not None:
        return chosen
    if weight.format == "nvfp4":
        fits = k % NVFP4_KERNEL_BLOCK_K == 0 and len(weight.shape) == 2
        return "kernel" if fits and m <= NVFP4_KERNEL_MAX_M else "dequant"
    return "scaled_mm" if fp8_mm_supported(weight.device) else "dequant"


def fp8_mm_supported(device: torch.device) -> bool:
    """torch._scaled_mm needs FP8 tensor cores: CUDA compute capability 8.9 (Ada) or newer."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)

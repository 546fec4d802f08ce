"""The matmul of a QuantizedWeight, per device.

CPU: an emulation for CI and the quality evals, numerically the quantized model: the weight is
dequantized into the activation dtype once, on its first forward, and kept (oneDNN-packed)
beside the codes, so a CPU model is as fast as the dense one and saves no memory (dequantizing
every layer at every forward measured ~5x slower end to end on this 2-core machine). CUDA keeps
nothing dense: up to a measured M the weight-only Triton kernels (kernels/weight_gemm.py: NVFP4
W4A16 and FP8 W8A16, the weight decoded in registers); beyond it FP8 through `torch._scaled_mm`
with per-token activation scales (compute capability >= 8.9), and NVFP4 through a dequantized
copy of the layer and cuBLAS. `dispatch_table` holds measured
(shape, M) -> path choices that override the defaults (benchmarks/bench_quant_weights.py).
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from radixgen.runtime.quant.weight import QuantizedWeight

logger = logging.getLogger(__name__)
KERNEL_CHECK_TOLERANCE = 2e-2  # relative error of a bf16 product against the dequantized one

WEIGHT_KERNEL_K_MULTIPLE = 64  # the kernels' smallest K tile: other K take the dequantize path
# default: the weight-only kernel up to this many rows, then the format's large-M path
WEIGHT_KERNEL_MAX_M = {"nvfp4": 64, "fp8": 16}
# (format, N, K, M bucket) -> "kernel" | "dequant" | "scaled_mm", from bench_quant_weights.py on
# an H100 (docs/BENCHMARKS.md): at M 64 the FP8 W8A16 kernel beat _scaled_mm on these Llama-3-8B
# shapes (qkv, o, down); gate_up and lm_head keep _scaled_mm
dispatch_table: dict[tuple[str, int, int, int], str] = {
    ("fp8", 6144, 4096, 64): "kernel",
    ("fp8", 4096, 4096, 64): "kernel",
    ("fp8", 4096, 14336, 64): "kernel",
}
M_BUCKETS = (1, 4, 16, 64, 256)


def m_bucket(m: int) -> int:
    """The smallest measured M >= m (the largest bucket beyond it)."""
    return next((b for b in M_BUCKETS if m <= b), M_BUCKETS[-1])


def quantized_linear(
    x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [M, K] @ dequantized(weight)[N, K].T (+ bias) -> [M, N] in x's dtype."""
    if not x.is_cuda:
        return _cpu_linear(x, weight, bias)
    path = _cuda_path(weight, x.shape[0])
    if path == "kernel":
        return weight_kernel_linear(x, weight, bias)
    if path == "scaled_mm":
        from radixgen.kernels.fp8_gemm import fp8_linear

        return fp8_linear(x, weight.data, weight.scale, bias)
    return F.linear(x, weight.dequantize(x.dtype), bias)


def weight_kernel_linear(
    x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """The weight-only Triton kernel of the weight's format (kernels/weight_gemm.py)."""
    if weight.format == "nvfp4":
        from radixgen.kernels.nvfp4_gemm import nvfp4_linear

        out = nvfp4_linear(x, weight.data, weight.block_scales, weight.scale)
        return out if bias is None else out + bias
    from radixgen.kernels.fp8_gemm import fp8_weight_linear

    return fp8_weight_linear(x, weight.data, weight.scale, bias)


def check_weight_kernels(weights: dict, dtype: torch.dtype, kernel=weight_kernel_linear) -> set:
    """Run each format's weight-only kernel once, eagerly, on the first kernel-shaped weight of
    that format against the dequantized product; a format whose kernel disagrees (a compiler or
    driver defect on this device) is logged and served by its large-M path instead, so a wrong
    kernel can never reach a response. Returns the formats switched off."""
    off, seen = set(), set()
    for w in weights.values():
        if not isinstance(w, QuantizedWeight) or w.format in seen or not _kernel_shaped(w):
            continue
        seen.add(w.format)
        probe = torch.randn(4, w.shape[-1], device=w.device).to(dtype)
        got = kernel(probe, w).float()
        want = F.linear(probe.float(), w.dequantize(torch.float32))
        err = ((got - want).norm() / want.norm().clamp(min=1e-12)).item()
        if not err <= KERNEL_CHECK_TOLERANCE:
            logger.error(
                "the %s weight kernel disagrees with its reference on this device (relative "
                "error %.3g): serving %s weights without it",
                w.format,
                err,
                w.format,
            )
            WEIGHT_KERNEL_MAX_M[w.format] = 0
            off.add(w.format)
    return off


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
    if _kernel_shaped(weight) and m <= WEIGHT_KERNEL_MAX_M[weight.format]:
        return "kernel"
    if weight.format == "fp8" and fp8_mm_supported(weight.device):
        return "scaled_mm"
    return "dequant"


def _kernel_shaped(weight: QuantizedWeight) -> bool:
    return len(weight.shape) == 2 and weight.shape[-1] % WEIGHT_KERNEL_K_MULTIPLE == 0


def fp8_mm_supported(device: torch.device) -> bool:
    """torch._scaled_mm needs FP8 tensor cores: CUDA compute capability 8.9 (Ada) or newer."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)

"""FP8 linears, weights E4M3 with a scale per output channel:
- W8A8 through cuBLASLt (`torch._scaled_mm`), activations quantized per token (dynamic,
  amax / 448 per row); CUDA with compute capability >= 8.9 only. For larger M.
- W8A16 through weight_gemm.py's kernel, the weight decoded in registers and the activations
  left in their dtype: no activation pass, so it suits decode sizes.
Tensor ops only (no host sync), so both run inside CUDA graphs."""

import torch

from ._common import check_kernel_tensor
from .weight_gemm import plan_tiling, weight_gemm

E4M3_MAX = 448.0


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q float8_e4m3fn [M, K], scale float32 [M, 1]) with x ~= q * scale per row."""
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / E4M3_MAX
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def fp8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """x [M, K] @ (weight [N, K] e4m3 * weight_scale [N, 1]).T (+ bias) -> [M, N] in x's dtype."""
    q, x_scale = quantize_per_token(x)
    n = weight.shape[0]
    out = torch._scaled_mm(
        q,
        weight.t(),
        scale_a=x_scale,
        scale_b=weight_scale.reshape(1, n).float(),
        bias=bias,
        out_dtype=x.dtype,
    )
    return out


def fp8_weight_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    **tiling,
) -> torch.Tensor:
    """x [M, K] @ (weight [N, K] e4m3 * weight_scale [N, 1]).T (+ bias), the activations
    unquantized (W8A16). Raises ValueError for mismatched shapes or dtypes; K a multiple of 64."""
    n, k = weight.shape
    if weight.dtype != torch.float8_e4m3fn or x.shape[-1] != k or weight_scale.numel() != n:
        raise ValueError(
            f"x {tuple(x.shape)} does not match the float8_e4m3fn weight {tuple(weight.shape)} "
            f"({weight.dtype}) and its scale {tuple(weight_scale.shape)}"
        )
    for t, name in ((x, "x"), (weight, "weight")):
        check_kernel_tensor(t, name)
    plan = plan_tiling(x.shape[0], n, k, x.device, **tiling)
    out = weight_gemm(x, weight, weight_scale, None, plan)
    return out if bias is None else out + bias


def fp8_weight_linear_ref(x, weight, weight_scale, bias=None, **_) -> torch.Tensor:
    """W8A16 in plain torch: the weight dequantized in float32, the activations as given."""
    out = x.float() @ (weight.float() * weight_scale.reshape(-1, 1)).T
    return (out if bias is None else out + bias.float()).to(x.dtype)


def fp8_linear_ref(x, weight, weight_scale, bias=None) -> torch.Tensor:
    """The same product in plain torch (float32 on the quantized operands)."""
    q, x_scale = quantize_per_token(x)
    out = (q.float() * x_scale) @ (weight.float() * weight_scale.reshape(-1, 1)).T
    return (out if bias is None else out + bias.float()).to(x.dtype)

"""FP8 W8A8 linear through cuBLASLt (`torch._scaled_mm`): activations quantized per token
(dynamic, amax / 448 per row), weights per output channel. CUDA with compute capability >= 8.9
only. Tensor ops only (no host sync), so it runs inside CUDA graphs."""

import torch

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


def fp8_linear_ref(x, weight, weight_scale, bias=None) -> torch.Tensor:
    """The same product in plain torch (float32 on the quantized operands)."""
    q, x_scale = quantize_per_token(x)
    out = (q.float() * x_scale) @ (weight.float() * weight_scale.reshape(-1, 1)).T
    return (out if bias is None else out + bias.float()).to(x.dtype)

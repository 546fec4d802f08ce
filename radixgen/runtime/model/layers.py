"""Building blocks of Llama-family decoders, on flattened ragged batches ([num_tokens, ...])."""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from radixgen.runtime.quant.linear import quantized_linear
from radixgen.runtime.quant.weight import QuantizedWeight, join_weights

# (projection name, its input [T, in], its output [T, out] to add a delta into)
Adapt = Callable[[str, torch.Tensor, torch.Tensor], None]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm computed in float32 and cast back before the weight multiply, as HF does
    (the fused op is bit-identical to HF's formula in float32)."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


def prepare_weight(weight: torch.Tensor | QuantizedWeight) -> torch.Tensor | QuantizedWeight:
    """The form `linear` runs fastest with. On the CPU: oneDNN's pre-packed (blocked) layout,
    which measured 1.3-1.6x the plain oneDNN GEMM and ~2x the default BLAS at decode batch
    sizes here (docs/benchmarks-history.md). Elsewhere, and for a quantized weight: the weight
    itself."""
    if isinstance(weight, QuantizedWeight):
        return weight
    if (
        weight.device.type == "cpu"
        and weight.dtype in _ONEDNN_DTYPES
        and _ONEDNN
        and _PACK_CPU.get()
    ):
        try:
            return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), _PACK_BATCH_HINT)
        except RuntimeError:  # e.g. bf16 on a CPU without AVX-512 BF16 / AVX-NE-CONVERT
            pass
    return weight


def linear(
    x: torch.Tensor, weight: torch.Tensor | QuantizedWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [num_tokens, in] @ weight[out, in].T (+ bias), for weights from `prepare_weight`."""
    if isinstance(weight, QuantizedWeight):
        return quantized_linear(x, weight, bias)
    if weight.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


_ONEDNN = torch.backends.mkldnn.is_available()
# off inside `host_staging()`: weights built on the host as a copy for a GPU keep their layout
_PACK_CPU: contextvars.ContextVar[bool] = contextvars.ContextVar("pack_cpu_weights", default=True)


@contextlib.contextmanager
def host_staging():
    """Build weights in host memory as a staging copy for a GPU: `prepare_weight` leaves them
    plain, so they can be copied into a device model's tensors. Per thread (a ContextVar)."""
    token = _PACK_CPU.set(False)
    try:
        yield
    finally:
        _PACK_CPU.reset(token)


_ONEDNN_DTYPES = (torch.float32, torch.bfloat16)
_PACK_BATCH_HINT = 128  # oneDNN picks its blocking for this many rows; any row count works


class RotaryEmbedding:
    """RoPE in HF's rotate-half layout; cos/sin tables in float32, indexed by position."""

    def __init__(
        self,
        head_dim: int,
        theta: float,
        max_positions: int,
        scaling: dict[str, Any] | None,
        device: torch.device,
    ):
        inv_freq = 1.0 / (
            theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
        )
        inv_freq, magnitude = _scale_inv_freq(inv_freq, scaling, head_dim, theta)
        positions = torch.arange(max_positions, dtype=torch.float32)
        freqs = positions[:, None] * inv_freq[None, :]  # [max_positions, head_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos = (emb.cos() * magnitude).to(device)  # [max_positions, head_dim]
        self.sin = (emb.sin() * magnitude).to(device)

    def tables(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, 1, D] for a batch's positions; computed once per forward."""
        return self.cos[positions].unsqueeze(1).to(dtype), self.sin[positions].unsqueeze(1).to(
            dtype
        )

    @staticmethod
    def apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate x [T, H, D] (q and k heads together) by the batch tables."""
        return x * cos + _rotate_half(x) * sin


def hadamard_rotation(
    head_dim: int, dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    """An orthonormal, symmetric [D, D] Hadamard matrix for rotating q and k after RoPE: block
    diagonal, each block the Sylvester Hadamard of the largest power of two dividing D, over
    sqrt(block). q.k is unchanged (H.T @ H = I); the rotation spreads the few large channels of
    each key over all channels of its block, which is what quantized KV pools need: the
    quantization error of a dot product is sum_d q_d * err(k_d), and err(k_d) grows with |k_d|,
    so keys and queries that are large in the same channels amplify it
    (docs/benchmarks-history.md)."""
    block = head_dim & -head_dim
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < block:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    return torch.block_diag(*[h / math.sqrt(block)] * (head_dim // block)).to(
        device=device, dtype=dtype
    )


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _scale_inv_freq(
    inv_freq: torch.Tensor, scaling: dict[str, Any] | None, head_dim: int, theta: float
) -> tuple[torch.Tensor, float]:
    """(scaled inverse frequencies, the factor on cos and sin) of a rope_scaling config."""
    kind = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / float(scaling["factor"]), 1.0
    if kind == "llama3":
        return _llama3_inv_freq(inv_freq, scaling), 1.0
    if kind == "yarn":
        return _yarn_inv_freq(inv_freq, scaling, head_dim, theta)
    raise ValueError(
        f"unsupported rope_scaling type {kind!r} (supported: default, linear, llama3, yarn)"
    )


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention magnitude for a context stretched `factor` times: 0.1 m ln(factor) + 1."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_inv_freq(
    inv_freq: torch.Tensor, s: dict[str, Any], head_dim: int, theta: float
) -> tuple[torch.Tensor, float]:
    """YaRN (as HF's _compute_yarn_parameters): frequencies that turn fewer than beta_slow times
    over the original context are divided by `factor`, those above beta_fast kept, a linear
    ramp between; cos and sin scaled by mscale(factor, mscale) / mscale(factor, mscale_all_dim)
    (DeepSeek's attention_factor; models with equal mscales get 1)."""
    old_len = float(s["original_max_position_embeddings"])
    factor = float(s["factor"])
    magnitude = s.get("attention_factor")
    if magnitude is None:
        m, m_all = s.get("mscale"), s.get("mscale_all_dim")
        magnitude = yarn_mscale(factor, m) / yarn_mscale(factor, m_all) if m and m_all else None
        magnitude = yarn_mscale(factor) if magnitude is None else magnitude

    def turns_to_dim(turns: float) -> float:  # the dimension whose frequency turns `turns` times
        return head_dim * math.log(old_len / (turns * 2 * math.pi)) / (2 * math.log(theta))

    low, high = turns_to_dim(s.get("beta_fast") or 32), turns_to_dim(s.get("beta_slow") or 1)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    high = high + 0.001 if low == high else high
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: the original frequency (extrapolate), 0: divided by factor
    return inv_freq / factor * (1 - keep) + inv_freq * keep, float(magnitude)


def _llama3_inv_freq(inv_freq: torch.Tensor, s: dict[str, Any]) -> torch.Tensor:
    """Llama 3.1 frequency-dependent scaling: long wavelengths divided by `factor`, short ones
    kept, a smooth blend in between."""
    factor, low, high = (
        float(s["factor"]),
        float(s["low_freq_factor"]),
        float(s["high_freq_factor"]),
    )
    old_len = float(s["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(is_medium, blended, scaled)


@dataclass
class DenseMLP:
    """SwiGLU feed-forward with gate and up fused into one GEMM: down(silu(gate x) * up x)."""

    gate_up: torch.Tensor  # [2 * intermediate, hidden], from prepare_weight
    down: torch.Tensor  # [hidden, intermediate]

    def __call__(self, x: torch.Tensor, adapt: Adapt | None = None) -> torch.Tensor:
        """`adapt(projection, input, output)` adds a LoRA delta into each output in place."""
        gate_up = linear(x, self.gate_up)
        if adapt is not None:
            adapt("gate_up", x, gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        act = F.silu(gate) * up
        out = linear(act, self.down)
        if adapt is not None:
            adapt("down", act, out)
        return out

    @classmethod
    def take(
        cls,
        weights: dict[str, torch.Tensor],
        prefix: str,
        gate: str = "gate_proj",
        up: str = "up_proj",
        down: str = "down_proj",
    ) -> "DenseMLP":
        """Pop `prefix{gate,up,down}.weight` from an HF state dict."""
        take = lambda name: weights.pop(f"{prefix}{name}.weight")  # noqa: E731
        return cls(prepare_weight(join_weights([take(gate), take(up)])), prepare_weight(take(down)))

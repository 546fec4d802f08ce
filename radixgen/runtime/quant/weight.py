"""`QuantizedWeight`, the stored form of a quantized linear weight [..., N, K], and
quantize-on-load.

Formats (the KV pools' encodings, kernels/fp8.py and kernels/nvfp4.py):
  fp8    data float8_e4m3fn [..., N, K]; w ~= data * scale
  nvfp4  data uint8 [..., N, K/2] (element 2i in the low nibble), block_scales float8_e4m3fn
         [..., N, K/16]; w ~= e2m1(code) * block_scale * scale
`scale` is float32 [..., N, 1], one per output row, in every format: a per-tensor scale is
stored expanded, so fused matrices (q/k/v, gate/up, stacked experts) concatenate exactly even
when their parts were quantized with different scales.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from radixgen.kernels import dispatch
from radixgen.kernels.nvfp4 import BLOCK_SIZE, E2M1_VALUES, quantize_nvfp4_ref
from radixgen.runtime.quant.scale_search import search_block_scales

METHODS = ("none", "fp8", "nvfp4")
E4M3_MAX = 448.0


@dataclass
class QuantizedWeight:
    format: str  # "fp8" or "nvfp4"
    data: torch.Tensor
    scale: torch.Tensor  # float32 [..., N, 1]
    block_scales: torch.Tensor | None = None  # nvfp4 only
    input_scale: torch.Tensor | None = None  # a checkpoint's static activation scale (kept, unused)
    cpu_dense: torch.Tensor | None = field(default=None, repr=False)  # see quant/linear.py

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense weight's shape [..., N, K]."""
        k = self.data.shape[-1] * (2 if self.format == "nvfp4" else 1)
        return (*self.data.shape[:-1], k)

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def nbytes(self) -> int:
        parts = (self.data, self.scale, self.block_scales)
        return sum(t.numel() * t.element_size() for t in parts if t is not None)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The dense weight [..., N, K] in `dtype`: the products in float32, then one cast."""
        if self.format == "fp8":
            return (self.data.float() * self.scale).to(dtype)
        if self.data.is_cuda:
            return dispatch("dequantize_nvfp4", self.data, self.block_scales, self.scale, dtype)
        pairs = F.embedding(self.data.long(), _byte_table(self.device))  # [..., N, K/2, 2]
        blocks = pairs.view(*self.data.shape[:-1], -1, BLOCK_SIZE)  # [..., N, K/16, 16]
        values = (blocks * self.block_scales.float().unsqueeze(-1)) * self.scale.unsqueeze(-1)
        return values.flatten(-2).to(dtype)

    def to(self, device: torch.device) -> "QuantizedWeight":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return replace(
            self,
            data=move(self.data),
            scale=move(self.scale),
            block_scales=move(self.block_scales),
            input_scale=move(self.input_scale),
        )


def _byte_table(device: torch.device) -> torch.Tensor:
    """float32 [256, 2]: the two E2M1 values of each code byte (low nibble first)."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    byte = torch.arange(256, device=device)
    return torch.stack([values[byte & 15], values[byte >> 4]], dim=-1)


def join_weights(parts: list, stack: bool = False):
    """torch.cat (dim 0) or torch.stack of dense tensors or of QuantizedWeights of one format."""
    join = torch.stack if stack else torch.cat
    if not any(isinstance(p, QuantizedWeight) for p in parts):
        return join(parts)
    formats = {getattr(p, "format", "dense") for p in parts}
    if len(formats) != 1:
        raise ValueError(
            f"cannot fuse weights stored as {sorted(formats)}: the parts of a fused "
            "projection (q/k/v, gate/up, experts) must share one quantization"
        )
    first = parts[0]
    joined = lambda name: join([getattr(p, name) for p in parts])  # noqa: E731
    return QuantizedWeight(
        first.format,
        joined("data"),
        joined("scale"),
        None if first.block_scales is None else joined("block_scales"),
    )


def quantize_fp8_weight(w: torch.Tensor, per_tensor: bool = False) -> QuantizedWeight:
    """FP8 E4M3 with one scale per output channel, amax(|row|) / 448 (1.0 for a zero row), or
    with `per_tensor` one for the whole matrix (stored expanded per row)."""
    w = w.float()
    amax = w.abs().amax(dim=-1, keepdim=True)
    if per_tensor:
        amax = amax.amax().expand_as(amax)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    data = (w / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return QuantizedWeight("fp8", data, scale)


def quantize_nvfp4_weight(
    w: torch.Tensor, scale_search: bool = False, tensor_scale: torch.Tensor | None = None
) -> QuantizedWeight:
    """NVFP4 with one FP32 tensor scale per matrix (amax / (6 * 448)); block scales round to
    nearest from each block's amax, or with `scale_search` take the E4M3 value near it with
    the least squared error (scale_search.py). A given `tensor_scale` (0-d float32) replaces
    the matrix's own, e.g. one shared by the parts of a fused projection."""
    if w.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"NVFP4 needs K % 16 == 0, got a weight of shape {tuple(w.shape)}")
    if tensor_scale is None:
        tensor_scale = nvfp4_tensor_scale_of(w.abs().amax().float())
    if scale_search:
        codes, block_scales = search_block_scales(w.float(), tensor_scale)
    else:
        codes, block_scales, _ = quantize_nvfp4_ref(w, tensor_scale)
    scale = tensor_scale.expand(*w.shape[:-1], 1).contiguous()
    return QuantizedWeight("nvfp4", codes, scale, block_scales)


def nvfp4_tensor_scale_of(amax: torch.Tensor) -> torch.Tensor:
    """The FP32 tensor scale amax / (6 * 448) (1.0 for an all-zero weight)."""
    return torch.where(amax > 0, amax / (6.0 * E4M3_MAX), torch.ones_like(amax))


def quantize_weight(w: torch.Tensor, method: str, scale_search: bool = False) -> QuantizedWeight:
    if method == "fp8":
        return quantize_fp8_weight(w)
    if method == "nvfp4":
        return quantize_nvfp4_weight(w, scale_search)
    raise ValueError(f"unknown quantization {method!r}; choose one of {', '.join(METHODS)}")


_NOT_LINEAR = (".gate.weight", "shared_expert_gate.weight")  # MoE router and gate: tiny, kept exact


def is_quantizable(name: str, tensor: torch.Tensor, quantize_lm_head: bool) -> bool:
    """Whether quantize-on-load quantizes this HF weight: the decoder layers' projections and
    experts (never norms or MoE routers), and lm_head only when asked."""
    if tensor.ndim < 2 or not tensor.is_floating_point():
        return False
    if name == "lm_head.weight":
        return quantize_lm_head
    if not name.startswith("model.layers.") or name.endswith(_NOT_LINEAR) or "norm" in name:
        return False
    return name.endswith((".weight", "experts.gate_up_proj", "experts.down_proj"))


def quantize_state_dict(
    weights: dict, method: str, quantize_lm_head: bool = False, scale_search: bool = True
) -> dict:
    """Replace (in place) every quantizable dense weight of an HF state dict by its
    QuantizedWeight; already quantized entries (a pre-quantized checkpoint) are kept as they are.
    With `quantize_lm_head` and tied embeddings, lm_head becomes a quantized copy of the
    embedding (which stays dense for the lookup)."""
    if method == "none":
        return weights
    if (
        quantize_lm_head
        and "lm_head.weight" not in weights
        and "model.embed_tokens.weight" in weights
    ):
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    for name, tensor in list(weights.items()):
        if isinstance(tensor, torch.Tensor) and is_quantizable(name, tensor, quantize_lm_head):
            weights[name] = quantize_weight(tensor, method, scale_search)
    return weights

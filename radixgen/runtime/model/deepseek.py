"""DeepSeek-V2 and V3: multi-head latent attention (model/mla.py) with a latent KV cache
(radix/latent_pool.py), routed + shared experts, dense first layers (first_k_dense_replace),
grouped top-k routing and YaRN rope on the rope dims only. The families differ in their config
(MoEArch, MLAArch): V2-Lite has a direct q_proj and greedy softmax routing, V3 a low-rank query
(q_lora_rank) and sigmoid scores with group-limited routing and a correction bias."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from radixgen.radix.latent_pool import LatentPool
from radixgen.runtime.attention import AttentionBackend
from radixgen.runtime.forward_batch import ForwardBatch
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.layers import RotaryEmbedding, hadamard_rotation, rms_norm
from radixgen.runtime.model.mla import MLAttention, mla_shapes
from radixgen.runtime.model.moe import DEEPSEEK_NAMES
from radixgen.runtime.model.moe_models import MoEModel


@dataclass
class MLADecoderLayer:
    input_norm: torch.Tensor  # [hidden]
    attn: MLAttention
    post_norm: torch.Tensor  # [hidden]
    mlp: Callable[[torch.Tensor], torch.Tensor]  # [T, hidden] -> [T, hidden]


class DeepseekModel(MoEModel):
    EXPERT_NAMES = DEEPSEEK_NAMES

    def __init__(self, arch: ModelArch, weights: dict[str, torch.Tensor], device: torch.device):
        # V3 checkpoints store their multi-token-prediction module (num_nextn_predict_layers)
        # as layers past the decoder's; it is not served here (as in HF's DeepseekV3), so drop it
        for name in [k for k in weights if _layer_index(k) >= arch.num_layers]:
            del weights[name]
        super().__init__(arch, weights, device)

    @classmethod
    def _attention_shapes(cls, arch: ModelArch, prefix: str) -> dict[str, tuple[int, ...]]:
        return mla_shapes(prefix, arch.mla, arch.hidden_size, arch.num_heads)

    @staticmethod
    def _rope(arch: ModelArch, device: torch.device) -> RotaryEmbedding:
        """Rope of the qk_rope_head_dim dims only (the nope dims carry no position)."""
        return RotaryEmbedding(
            arch.mla.qk_rope_head_dim,
            arch.rope_theta,
            arch.max_position_embeddings,
            arch.rope_scaling,
            device,
        )

    def rotate_qk(self) -> None:
        """LlamaModel.rotate_qk for the latent: the cached vector and the absorbed queries are
        rotated together (their dot products unchanged), the attention outputs rotated back."""
        dim = self.arch.mla.latent_dim
        self.qk_rotation = hadamard_rotation(dim, self.dtype, self.embed.device)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, pool, attn: AttentionBackend) -> torch.Tensor:
        """LlamaModel.forward, over `pool` seen as a latent cache."""
        return super().forward(batch, LatentPool(pool, *self.arch.pool_shape), attn)

    def _layer(
        self,
        n: int,
        layer: MLADecoderLayer,
        hidden: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        pool: LatentPool,
        attn: AttentionBackend,
        lora=None,
    ) -> torch.Tensor:
        if lora is not None:  # adapters target q/k/v/o/gate/up/down, which MLA layers lack
            raise ValueError("LoRA adapters are not supported on DeepSeek (MLA) models")
        eps = self.arch.rms_norm_eps
        x = rms_norm(hidden, layer.input_norm, eps)
        hidden = hidden + layer.attn(n, x, rope, pool, attn, self.qk_rotation)
        return hidden + layer.mlp(rms_norm(hidden, layer.post_norm, eps))

    def _take_layer(self, w: dict[str, torch.Tensor], n: int) -> MLADecoderLayer:
        p = f"model.layers.{n}."
        return MLADecoderLayer(
            input_norm=w.pop(p + "input_layernorm.weight"),
            attn=MLAttention.take(w, p + "self_attn.", self.arch.mla, self.arch.num_heads),
            post_norm=w.pop(p + "post_attention_layernorm.weight"),
            mlp=self._take_mlp(w, n),
        )


class DeepseekV2Model(DeepseekModel):
    """DeepSeek-V2 / V2-Lite: rope on adjacent pairs, softmax routing (greedy or group-limited)."""


class DeepseekV3Model(DeepseekModel):
    """DeepSeek-V3 / R1: low-rank queries, sigmoid routing over groups with a correction bias."""


def _layer_index(name: str) -> int:
    """N of a `model.layers.N.` weight name; -1 for the others."""
    parts = name.split(".")
    return int(parts[2]) if parts[:2] == ["model", "layers"] and parts[2].isdigit() else -1

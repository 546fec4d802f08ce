"""Mixture-of-experts decoders: Llama-family attention (with Qwen3's q/k norm where the arch
says so) and a sparse feed-forward (moe.MoEBlock) in every layer but the arch's dense ones.
The families differ only in their routing options (MoEArch) and weight names (ExpertNames)."""

from __future__ import annotations

from typing import Callable

import torch

from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.llama import LlamaModel
from radixgen.runtime.model.moe import (
    MIXTRAL_NAMES,
    QWEN_NAMES,
    ExpertNames,
    MoEBlock,
    moe_block_shapes,
)


class MoEModel(LlamaModel):
    EXPERT_NAMES: ExpertNames = QWEN_NAMES

    @classmethod
    def _mlp_shapes(cls, arch: ModelArch, n: int) -> dict[str, tuple[int, ...]]:
        if not arch.is_moe_layer(n):
            return super()._mlp_shapes(arch, n)
        return moe_block_shapes(f"model.layers.{n}.", arch.moe, arch.hidden_size, cls.EXPERT_NAMES)

    def _take_mlp(
        self, weights: dict[str, torch.Tensor], n: int
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        if not self.arch.is_moe_layer(n):
            return super()._take_mlp(weights, n)
        return MoEBlock.take(weights, f"model.layers.{n}.", self.arch.moe, self.EXPERT_NAMES)


class Qwen2MoeModel(MoEModel):
    """Qwen1.5/2-MoE: qkv bias, softmax top-k, a shared expert scaled by sigmoid(x @ w_gate)."""


class Qwen3MoeModel(MoEModel):
    """Qwen3-MoE: q/k norm, softmax top-k renormalised (norm_topk_prob), no shared expert."""


class MixtralModel(MoEModel):
    """Mixtral: softmax top-2 renormalised; experts named w1 (gate), w3 (up), w2 (down)."""

    EXPERT_NAMES = MIXTRAL_NAMES

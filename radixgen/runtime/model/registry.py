"""Which model class serves each HF `architectures` entry."""

from __future__ import annotations

import torch

from radixgen.runtime.model.arch import SUPPORTED_ARCHITECTURES, ModelArch
from radixgen.runtime.model.deepseek import DeepseekV2Model, DeepseekV3Model
from radixgen.runtime.model.llama import LlamaModel
from radixgen.runtime.model.moe_models import MixtralModel, Qwen2MoeModel, Qwen3MoeModel

MODEL_CLASSES: dict[str, type[LlamaModel]] = {
    "LlamaForCausalLM": LlamaModel,
    "Qwen2ForCausalLM": LlamaModel,
    "MistralForCausalLM": LlamaModel,
    "Qwen3ForCausalLM": LlamaModel,  # + q/k norm (arch.qk_norm)
    "Qwen2MoeForCausalLM": Qwen2MoeModel,
    "Qwen3MoeForCausalLM": Qwen3MoeModel,
    "MixtralForCausalLM": MixtralModel,
    "DeepseekV2ForCausalLM": DeepseekV2Model,
    "DeepseekV3ForCausalLM": DeepseekV3Model,
}
assert set(MODEL_CLASSES) == set(SUPPORTED_ARCHITECTURES)


def model_class(arch: ModelArch) -> type[LlamaModel]:
    """The class for `arch` (ModelArch.from_config already refused unsupported architectures)."""
    return MODEL_CLASSES[arch.architecture]


def build_model(
    arch: ModelArch, weights: dict[str, torch.Tensor], device: torch.device
) -> LlamaModel:
    """The model of `arch` over `weights` (an HF state dict, consumed)."""
    return model_class(arch)(arch, weights, device)


def param_shapes(arch: ModelArch) -> dict[str, tuple[int, ...]]:
    """HF parameter name -> shape of every weight of `arch`."""
    return model_class(arch).param_shapes(arch)

"""The MoE block with DeepSeek's routing options (grouped top-k, sigmoid scores with the
e_score_correction_bias, routed_scaling_factor, shared experts) equals HF's DeepSeek-V3 and
DeepSeek-V2 MoE blocks on tiny configs, so the DeepSeek families can reuse it."""

from dataclasses import replace

import pytest
import torch

from radixgen.runtime.model.arch import MoEArch
from radixgen.runtime.model.moe import DEEPSEEK_NAMES, MoEBlock, route

TINY = dict(
    hidden_size=32,
    intermediate_size=48,
    moe_intermediate_size=16,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_shared_experts=1,
    n_group=4,
    topk_group=2,
    num_hidden_layers=2,
    first_k_dense_replace=1,
    initializer_range=0.5,
)


def _hf_block(module_path: str, block: str, config_cls: str, **overrides):
    import importlib

    import transformers

    config = getattr(transformers, config_cls)(**{**TINY, **overrides})
    torch.manual_seed(0)
    hf = getattr(importlib.import_module(module_path), block)(config).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            param.normal_(0, 0.5)
        if hasattr(hf.gate, "e_score_correction_bias"):
            hf.gate.e_score_correction_bias.normal_(0, 0.3)
    return config, hf


def _ours(config, hf) -> MoEBlock:
    state = {"model.layers.1.mlp." + k: v.detach().clone() for k, v in hf.state_dict().items()}
    moe = MoEArch.from_config(
        config.architectures[0] if config.architectures else "", config.to_dict()
    )
    block = MoEBlock.take(state, "model.layers.1.", moe, DEEPSEEK_NAMES)
    assert not state, list(state)
    return block


@pytest.mark.parametrize("case", ["v3", "v2-grouped", "v2-greedy"])
def test_moe_block_matches_hf_deepseek(case):
    if case == "v3":
        config, hf = _hf_block(
            "transformers.models.deepseek_v3.modeling_deepseek_v3",
            "DeepseekV3MoE",
            "DeepseekV3Config",
            routed_scaling_factor=2.5,
            norm_topk_prob=True,
        )
    else:
        method = "group_limited_greedy" if case == "v2-grouped" else "greedy"
        config, hf = _hf_block(
            "transformers.models.deepseek_v2.modeling_deepseek_v2",
            "DeepseekV2Moe",
            "DeepseekV2Config",
            topk_method=method,
            routed_scaling_factor=1.5,
            topk_group=1,
        )  # with max-scored groups, 2 groups never bind top-2
    ours = _ours(config, hf)
    assert ours.moe.dense_layers == (0,) and ours.moe.shared_expert_size == 16
    assert (ours.moe.num_groups is not None) == (case != "v2-greedy")
    assert ours.moe.correction_bias == (case == "v3") and ours.moe.scoring == (
        "sigmoid" if case == "v3" else "softmax"
    )
    x = torch.randn(1, 37, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(x)
    torch.testing.assert_close(ours(x[0]), ref.reshape(37, 32), atol=1e-5, rtol=1e-5)
    if ours.moe.num_groups:  # the group limit changed some token's experts: it was exercised
        logits = torch.nn.functional.linear(x[0], ours.router)
        _, grouped = route(logits, ours.moe, ours.correction_bias)
        _, free = route(logits, replace(ours.moe, num_groups=None), ours.correction_bias)
        assert (grouped.sort(-1).values != free.sort(-1).values).any()

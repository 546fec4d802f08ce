"""Multi-head latent attention's KV side: the latent pool over the ordinary pools, and the
DeepSeek-V2-Lite shape's parameters and KV bytes. (The HF-equality tests of DeepSeek-V2/V3 are
in test_moe_families.py.)"""

import torch

from radixgen.radix.kv_pool import KVPool
from radixgen.radix.latent_pool import LatentPool, latent_groups
from radixgen.radix.quant_kv_pool import kv_bytes_per_token
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import param_bytes


def test_latent_pool_round_trip_stores_each_value_once():
    groups, width = latent_groups(48, 16)
    assert (groups, width) == (2, 16)
    pool = KVPool(10, 2, groups, width, torch.float32)
    latent_pool = LatentPool(pool, groups, width)
    latents = torch.randn(3, 1, 64)
    slots = torch.tensor([7, 2, 5])
    latent_pool.store(1, slots, latents, latents)
    k, v = latent_pool.gather(1, slots.view(3, 1))
    assert k.shape == (3, 1, 1, 64)
    torch.testing.assert_close(k[:, 0], latents, rtol=0, atol=0)
    assert v is k
    torch.testing.assert_close(pool.k[1][2], latents[1, 0, :32].view(2, 16), rtol=0, atol=0)
    assert pool.k[0].abs().sum() == 0  # other layers untouched


DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "norm_topk_prob": False,
    "topk_method": "greedy",
    "routed_scaling_factor": 1.0,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "type": "yarn",
        "factor": 40,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
    },
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_deepseek_v2_lite_shape_counts_its_parameters_and_kv_bytes():
    """The GPU benchmark builds this shape from its config alone: 15.7B parameters; 576 cached
    values per token and layer (31 KB in bf16), against 128 KB for Llama-3-8B's GQA."""
    arch = ModelArch.from_config(DEEPSEEK_V2_LITE)
    assert arch.mla is not None and arch.mla.latent_dim == 576
    assert arch.moe.dense_layers == (0,) and arch.moe.shared_expert_size == 2816
    total = param_bytes(arch, torch.bfloat16) / 2
    assert 15.5e9 < total < 16.0e9, total
    mla_bytes = kv_bytes_per_token("auto", arch.num_layers, *arch.pool_shape, torch.bfloat16)
    assert mla_bytes == 27 * 576 * 2
    assert kv_bytes_per_token("auto", 32, 8, 128, torch.bfloat16) / mla_bytes > 4

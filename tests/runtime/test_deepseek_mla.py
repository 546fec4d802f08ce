"""Multi-head latent attention's KV side: the latent pool over the ordinary pools (bf16, FP8,
NVFP4, an FP8 prefix with an NVFP4 branch and its window), end to end against the float32 pool,
and the DeepSeek-V2-Lite shape's parameters and KV bytes. (The HF-equality tests of
DeepSeek-V2/V3 are in test_moe_families.py.)

Random tiny models have many near-tied logits, so greedy agreement is reported, not asserted;
the bar is the logprob error of the first generated token, whose prefill attends over the
quantized latents of the whole prompt."""

import pytest
import torch

from benchmarks.model_shapes import DEEPSEEK_TINY, DEEPSEEK_V2_LITE
from radixgen.radix.kv_pool import KVPool
from radixgen.radix.latent_pool import LatentPool, latent_groups
from radixgen.radix.quant_kv_pool import FP8KVPool, NVFP4KVPool, kv_bytes_per_token
from radixgen.runtime.engine import Engine
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import param_bytes
from tests.runtime.test_moe_families import one_thread, save_tiny_moe  # noqa: F401

GREEDY = {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True, "top_logprobs_num": 20}
ENGINE = dict(dtype="float32", max_total_tokens=2048, max_running_requests=8)
# latent pool -> bound on the mean |logprob error| of the first token's top 20, against the
# float32 pool (measured on this model: bf16 <= 0.003, fp8 <= 0.009, nvfp4 <= 0.03)
POOLS = {
    "bf16": (dict(kv_cache_dtype="bf16"), 0.01),
    "fp8_e4m3": (dict(kv_cache_dtype="fp8_e4m3"), 0.03),
    "nvfp4": (dict(kv_cache_dtype="nvfp4"), 0.1),
    "fp8+nvfp4": (
        dict(kv_prefix_dtype="fp8_e4m3", kv_branch_dtype="nvfp4", kv_branch_window="2,4"),
        0.03,  # the prompt is in the fp8 pool; generated tokens move to nvfp4 past the window
    ),
}
# the mixed pair runs both formats and the window's moves; the single formats add ~8 s each
POOL_PARAMS = [p if p == "fp8+nvfp4" else pytest.param(p, marks=pytest.mark.slow) for p in POOLS]


@pytest.fixture(scope="module")
def quant_model(tmp_path_factory, model_path):
    """(folder, prompts, float32-pool results) of a tiny DeepSeek-V3 with smaller random
    weights than test_moe_families' (initializer_range 0.05: fewer near-ties)."""
    folder = tmp_path_factory.mktemp("deepseek_v3_quant")
    save_tiny_moe(folder, "deepseek_v3", model_path, seed=3, initializer_range=0.05)
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 49152, (n,), generator=gen).tolist() for n in (12, 31, 50, 70)]
    with Engine(str(folder), **ENGINE) as engine:
        return folder, prompts, engine.generate(input_ids=prompts, sampling_params=GREEDY)


def _first_token_error(ref: dict, out: dict) -> float:
    """Mean |logprob difference| over the top-20 tokens both runs list for the first token."""
    a, b = (
        {int(t): lp for lp, t, _ in r["meta_info"]["output_top_logprobs"][0]} for r in (ref, out)
    )
    common = set(a) & set(b)
    assert len(common) >= 15
    return sum(abs(a[t] - b[t]) for t in common) / len(common)


@pytest.mark.parametrize("pool", POOL_PARAMS)
def test_quantized_latent_pools_against_float32(quant_model, pool):
    folder, prompts, ref = quant_model
    kv, bound = POOLS[pool]
    with Engine(str(folder), **ENGINE, **kv) as engine:
        out = engine.generate(input_ids=prompts, sampling_params=GREEDY)
        if "kv_branch_window" in kv:  # the window moved generated latents into the nvfp4 pool
            assert engine.scheduler.cache.total_size(1) > 0
            engine.scheduler.cache.check_integrity()
        again = engine.generate(input_ids=prompts[-1], sampling_params=GREEDY)
    assert again["meta_info"]["cached_tokens"] >= len(prompts[-1]) - 1
    assert again["output_ids"] == out[-1]["output_ids"]
    errors = [_first_token_error(r, o) for r, o in zip(ref, out)]
    agree = [
        next((i for i, (x, y) in enumerate(zip(r["output_ids"], o["output_ids"])) if x != y), 16)
        for r, o in zip(ref, out)
    ]
    print(f"\n{pool}: first-token logprob error {errors}, tokens before divergence {agree}")
    assert max(errors) < bound, (pool, errors)


def test_rotation_with_a_float32_pool_changes_nothing(quant_model):
    folder, prompts, ref = quant_model
    with Engine(str(folder), kv_rotation="on", **ENGINE) as engine:
        out = engine.generate(input_ids=prompts, sampling_params=GREEDY)
    assert [o["output_ids"] for o in out] == [r["output_ids"] for r in ref]
    assert max(_first_token_error(r, o) for r, o in zip(ref, out)) < 1e-4


@pytest.mark.parametrize("pool_cls, rel_rms", [(FP8KVPool, 0.04), (NVFP4KVPool, 0.12)])
def test_quantized_latent_keeps_the_rope_key_apart(pool_cls, rel_rms):
    """k_pe far larger than c_kv: each is its own quantization group, so c_kv keeps its
    precision (one shared scale would flush it to zero)."""
    groups, width = latent_groups(48, 16)
    pool = LatentPool(pool_cls(16, 1, groups, width, torch.float32), groups, width)
    c_kv, k_pe = torch.randn(8, 1, 48), 1e4 * torch.randn(8, 1, 16)
    pool.store(0, torch.arange(8), torch.cat([c_kv, k_pe], -1))
    latent, _ = pool.gather(0, torch.arange(8))
    for part, got in ((c_kv, latent[..., :48]), (k_pe, latent[..., 48:])):
        assert ((got - part).pow(2).mean() / part.pow(2).mean()).sqrt() < rel_rms


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


def test_v3_multi_token_prediction_layer_is_dropped():
    """A V3 checkpoint's MTP module (stored as layer num_hidden_layers) is not an error."""
    from radixgen.runtime.model.loader import dummy_state_dict
    from radixgen.runtime.model.registry import build_model

    arch = ModelArch.from_config({**DEEPSEEK_TINY, "architectures": ["DeepseekV3ForCausalLM"]})
    weights = dummy_state_dict(arch, torch.float32, torch.device("cpu"))
    weights[f"model.layers.{arch.num_layers}.eh_proj.weight"] = torch.zeros(4, 4)
    model = build_model(arch, weights, torch.device("cpu"))
    assert len(model.layers) == arch.num_layers and not weights

"""On CUDA, the Engine's greedy output equals the CPU path on the same dummy weights, through
the cascade (shared-prefix) decode path too."""

import random

import pytest
import torch

from radixgen.runtime.engine import Engine

pytestmark = pytest.mark.gpu


def test_cuda_greedy_equals_cpu(tiny_model_path):
    rng = random.Random(0)
    system = [rng.randrange(100, 40000) for _ in range(64)]  # shared: forms a cascade group
    prompts = [
        system + [rng.randrange(100, 40000) for _ in range(rng.randrange(3, 20))] for _ in range(6)
    ]
    params = {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True}
    outputs = []
    for device in ("cpu", "cuda"):
        # full-precision KV on both devices ('auto' would pick FP8 + NVFP4 pools on CUDA)
        engine = Engine(
            str(tiny_model_path),
            load_format="dummy",
            dtype="float32",
            device=device,
            max_total_tokens=4096,
            kv_cache_dtype="fp32",
        )
        outputs.append(
            [r["output_ids"] for r in engine.generate(input_ids=prompts, sampling_params=params)]
        )
        assert engine.scheduler.runner.pool.k[0].device.type == device
    assert outputs[0] == outputs[1]
    assert engine.scheduler.runner.graphs.replays > 0  # CUDA's decode steps replayed CUDA graphs


def test_cuda_sampling_and_penalties_run(tiny_model_path):
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=1024,
    )
    params = {
        "max_new_tokens": 8,
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 50,
        "seed": 3,
        "frequency_penalty": 0.5,
        "repetition_penalty": 1.1,
        "ignore_eos": True,
        "top_logprobs_num": 2,
    }
    first = engine.generate(input_ids=[5, 6, 7, 8], sampling_params=params)
    again = engine.generate(input_ids=[5, 6, 7, 8], sampling_params=params)
    assert len(first["output_ids"]) == 8 and first["output_ids"] == again["output_ids"]
    assert len(first["meta_info"]["output_top_logprobs"]) == 8


def test_cuda_default_mixed_kv_with_branch_window(tiny_model_path):
    """CUDA's default KV: FP8 prefix + NVFP4 branch pools with the branch window (4, 16).
    Generations longer than the window move their older tokens to the branch pool; the per-pool
    census holds after the run and a second turn hits the cached branch."""
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=2048,
    )
    sched = engine.scheduler
    assert sched.runner.kv_dtypes == ("fp8_e4m3", "nvfp4") and sched.kv.window == (4, 16)
    prompts = [[5 + i, 17, 300, 4000 + i, 9] * 6 for i in range(3)]
    params = {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}
    outs = [r["output_ids"] for r in engine.generate(input_ids=prompts, sampling_params=params)]
    assert sched.num_demoted > 0
    cache, runner = sched.cache, sched.runner
    for tier, capacity in enumerate(runner.capacity):
        assert runner.allocator.num_free(tier) + cache.total_size(tier) == capacity
    tiers = (cache.match_prefix(prompts[0] + outs[0]).slots >= runner.capacity[0]).tolist()
    assert not any(tiers[: 30 + 4]) and not any(tiers[-16:]) and all(tiers[30 + 4 : 30 + 48 - 24])
    again = engine.generate(
        input_ids=prompts[0] + outs[0] + [7, 8], sampling_params={**params, "max_new_tokens": 4}
    )
    assert again["meta_info"]["cached_tokens"] == 30 + 47

"""The runtime's kernel attention backend (`attention_backend="triton"`), run here under the Triton
interpreter on a tiny dummy-weight model: greedy output equals the torch attention path for
bf16-free float pools, FP8, NVFP4 and mixed pools, through prefill, decode, cache hits and mixed
batches."""

import pytest
import torch

from radixgen.runtime.engine import Engine
from tests.kernels.conftest import KERNEL_DEVICE
from tests.runtime.conftest import tiny_model_path  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(
    KERNEL_DEVICE != "cpu", reason="the GPU run uses the real kernels elsewhere"
)
GREEDY = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
KV = [
    {},
    {"kv_cache_dtype": "fp8_e4m3"},
    {"kv_cache_dtype": "nvfp4"},
    {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4"},
]


@pytest.mark.parametrize(
    "kv",
    [
        KV[0],
        pytest.param(KV[1], marks=pytest.mark.slow),
        pytest.param(KV[2], marks=pytest.mark.slow),
        KV[3],
    ],
    ids=["fp32", "fp8", "nvfp4", "mixed"],
)
def test_kernel_backend_matches_torch_backend(tiny_model_path, kv):
    prompts = [[7, 8, 9, 10] * 5, [7, 8, 9, 10] * 5 + [11, 12], [300, 301, 302]]
    outputs = []
    for backend in ("torch", "triton"):
        eng = Engine(
            str(tiny_model_path),
            load_format="dummy",
            dtype="float32",
            max_total_tokens=256,
            attention_backend=backend,
            chunked_prefill_size=16,
            **kv,
        )
        first = eng.generate(input_ids=prompts[0], sampling_params=GREEDY)  # then a cache hit
        rest = eng.generate(input_ids=prompts, sampling_params=GREEDY)
        outputs.append([first["output_ids"]] + [r["output_ids"] for r in rest])
        eng.shutdown()
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("kv", [KV[0], KV[3]], ids=["fp32", "mixed"])
def test_kernel_backend_verifies_token_trees_like_torch(tiny_model_path, kv):
    """Speculative verify forwards (extends with tree masks) through the kernels."""
    prompts = [[7, 8, 9, 10] * 6, [7, 8, 9, 10] * 5 + [11, 12]]
    outputs, steps = [], []
    for backend in ("torch", "triton"):
        eng = Engine(
            str(tiny_model_path),
            load_format="dummy",
            dtype="float32",
            max_total_tokens=256,
            attention_backend=backend,
            speculative_algorithm="radix",
            speculative_num_draft_tokens=6,
            **kv,
        )
        rest = eng.generate(input_ids=prompts, sampling_params={**GREEDY, "max_new_tokens": 10})
        outputs.append([r["output_ids"] for r in rest])
        steps.append(eng.scheduler.spec.stats.num_steps)
        eng.shutdown()
    assert outputs[0] == outputs[1]
    assert steps[0] > 0 and steps[1] > 0

"""Tensor parallelism on the CPU (gloo): a tiny random Qwen2 (4 heads, 2 KV heads, qkv bias)
loaded from an HF folder, sharded over 2 ranks by the offline Engine (rank 0 in this process,
rank 1 a spawned follower), gives the same greedy tokens as one rank."""

import pytest

from radixgen.runtime.engine import Engine
from tests.runtime.test_model_families import save_tiny_model

PROMPTS = [[5, 6, 7, 8], list(range(100, 130)), [9] * 17]
GREEDY = {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def tiny_qwen2(tmp_path_factory, model_path):
    folder = tmp_path_factory.mktemp("tiny-qwen2")
    save_tiny_model(folder, "qwen2", model_path)
    return folder


def greedy_ids(folder, **options) -> list[list[int]]:
    engine = Engine(str(folder), max_total_tokens=2048, **options)
    try:
        return [o["output_ids"] for o in engine.generate(input_ids=PROMPTS, sampling_params=GREEDY)]
    finally:
        engine.shutdown()


@pytest.mark.slow
def test_tp2_engine_matches_tp1(tiny_qwen2):
    assert greedy_ids(tiny_qwen2, tp_size=2) == greedy_ids(tiny_qwen2, tp_size=1)


def test_tp_size_not_dividing_heads_is_a_clear_error(tiny_qwen2):
    with pytest.raises(ValueError, match="does not divide the model's 4 attention heads"):
        Engine(str(tiny_qwen2), tp_size=3, max_total_tokens=2048)

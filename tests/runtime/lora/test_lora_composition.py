"""Adapters with the other features, on the tiny dummy model: radix speculative decoding drafts
only from the request's own adapter's sequences and keeps greedy outputs exact, a grammar
constrains an adapter's output, and an FP8 KV pool serves a mixed batch as each request alone."""

from __future__ import annotations

import re

import pytest

from radixgen.runtime.model.arch import ModelArch
from radixgen.speculative import NamespacedDrafter, RadixDrafter
from tests.runtime.lora.peft_files import tiny_lora_engine, write_adapter

GREEDY = {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}
PROMPTS = [list(range(100, 120)), list(range(200, 212)) * 2]


@pytest.fixture(scope="module")
def adapter_paths(tiny_model_path, tmp_path_factory):
    arch = ModelArch.from_folder(tiny_model_path)
    root = tmp_path_factory.mktemp("adapters")
    return {
        "a": str(write_adapter(root / "a", arch, rank=8, std=0.3, seed=1)),
        "b": str(write_adapter(root / "b", arch, rank=4, std=0.3, seed=2)),
    }


def engine(tiny_model_path, adapter_paths, **extra):
    return tiny_lora_engine(tiny_model_path, adapter_paths, **extra)


def test_namespaced_drafter_drafts_only_from_its_namespace():
    drafter = NamespacedDrafter(RadixDrafter)
    seq = [5, 6, 7, 8, 9, 10, 11, 12]
    drafter.observe(seq, 0, "a")
    assert drafter.propose(seq[:4], 8, 8, namespace="a").num_nodes > 0
    assert drafter.propose(seq[:4], 8, 8, namespace="b").num_nodes == 0
    assert drafter.propose(seq[:4], 8, 8).num_nodes == 0  # the base model's


@pytest.mark.slow  # ~80 s on a loaded 2-core machine
def test_radix_speculation_with_adapters_keeps_greedy_outputs(tiny_model_path, adapter_paths):
    names = ["a", "b", None, "a"]
    prompts = [PROMPTS[i % 2] for i in range(len(names))]
    with engine(tiny_model_path, adapter_paths) as plain:
        want = [
            o["output_ids"]
            for o in plain.generate(input_ids=prompts, sampling_params=GREEDY, lora_path=names)
        ]
    with engine(tiny_model_path, adapter_paths, speculative_algorithm="radix") as spec:
        for _ in range(2):  # the second round drafts from the first one's cached sequences
            outs = spec.generate(input_ids=prompts, sampling_params=GREEDY, lora_path=names)
            assert [o["output_ids"] for o in outs] == want
        assert sum(o["meta_info"].get("spec_verify_ct", 0) for o in outs) > 0
        drafters = spec.scheduler.spec.drafter.drafters
        lora = spec.scheduler.runner.lora
        assert set(drafters) == {None, lora.adapters["a"].cache_key, lora.adapters["b"].cache_key}


def test_a_grammar_constrains_an_adapter(tiny_model_path, adapter_paths):
    params = {"max_new_tokens": 12, "temperature": 0, "regex": "(yes|no|maybe) [0-9]{2}"}
    with engine(tiny_model_path, adapter_paths) as eng:
        outs = eng.generate(["Answer:", "Answer:"], params, lora_path=["a", None])
    for out in outs:
        assert re.fullmatch("(yes|no|maybe) [0-9]{2}", out["text"]), out["text"]


def test_fp8_kv_serves_a_mixed_batch_as_each_alone(tiny_model_path, adapter_paths):
    names = ["a", None, "b"]
    prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[1]]
    with engine(tiny_model_path, adapter_paths, kv_cache_dtype="fp8_e4m3") as eng:
        alone = []
        for ids, name in zip(prompts, names):
            assert eng.scheduler.flush_cache()
            alone.append(
                eng.generate(input_ids=ids, sampling_params=GREEDY, lora_path=name)["output_ids"]
            )
        assert eng.scheduler.flush_cache()
        outs = eng.generate(input_ids=prompts, sampling_params=GREEDY, lora_path=names)
    assert [o["output_ids"] for o in outs] == alone
    assert alone[0] != alone[1]

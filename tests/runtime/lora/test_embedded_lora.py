"""LoRA adapters on the embedded SmolLM2 model (CPU, float32): an adapter served through the
pool gives the greedy ids and logits of a model whose weights were merged with it, and a batch
mixing three adapters and the base model gives what each request gives alone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from radixgen.runtime.engine import Engine
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.weights.checks import canary_logits
from tests.runtime.checkpoints import write_checkpoint
from tests.runtime.lora.peft_files import ATTN, merged_weights, write_adapter

pytestmark = [pytest.mark.model, pytest.mark.slow]

GREEDY = {"max_new_tokens": 10, "temperature": 0}
PROMPTS = ["The capital of France is", "def add(a, b):", "Once upon a time"]
ENGINE = {"dtype": "float32", "max_total_tokens": 1024}


def prompt_logits(engine: Engine, prompts: list[str], adapters: list[str | None]):
    """Logits of every prompt position, one extend forward, each prompt on its adapter."""
    runner = engine.scheduler.runner
    ids = tuple(tuple(engine.tokenizer.encode(p, add_special_tokens=False)) for p in prompts)
    lora = None
    if runner.lora is not None:
        reqs = [
            SimpleNamespace(adapter=runner.lora.adapters.get(a) if a else None) for a in adapters
        ]
        lora = runner.lora.batch(reqs, [len(i) for i in ids], decode=False)
    return canary_logits(runner.model, runner.arch, runner.device, ids, lora)


def test_adapter_matches_the_merged_model(model_path, tmp_path):
    arch = ModelArch.from_folder(model_path)
    adapter = write_adapter(tmp_path / "adapter", arch, rank=8, alpha=16, seed=1, std=0.02)
    base = load_file(str(model_path / "model.safetensors"))
    merged = write_checkpoint(tmp_path / "merged", model_path, merged_weights(base, adapter))
    with Engine(str(merged), **ENGINE) as eng:
        want_ids = [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)]
        want_logits = prompt_logits(eng, PROMPTS, [None] * 3)
    with Engine(str(model_path), enable_lora=True, lora_paths={"a": str(adapter)}, **ENGINE) as eng:
        got = eng.generate(PROMPTS, GREEDY, lora_path="a")
        base_ids = [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)]
        got_logits = prompt_logits(eng, PROMPTS, ["a"] * 3)
    assert [r["output_ids"] for r in got] == want_ids
    assert base_ids != want_ids  # the adapter changes what the model says
    # float32 rounding alone (every weight of the base model moved by half an ulp) moves these
    # logits by up to 7e-5, most on the first position, whose hidden state is the largest; the
    # merged model's rounded W + s B A and the unmerged W x + B (A x) measured 1.5e-4 apart
    torch.testing.assert_close(got_logits, want_logits, atol=2e-4, rtol=0)
    assert (got_logits - want_logits).abs().mean() < 5e-5  # measured 2.1e-5


def test_a_batch_mixing_adapters_equals_each_alone(model_path, tmp_path):
    arch = ModelArch.from_folder(model_path)
    paths = {
        "a": write_adapter(tmp_path / "a", arch, rank=8, seed=1),
        "b": write_adapter(tmp_path / "b", arch, rank=4, alpha=8, seed=2, targets=ATTN),
        "c": write_adapter(tmp_path / "c", arch, rank=16, alpha=4, seed=3, rslora=True),
    }
    prompts = PROMPTS * 2 + ["The capital of France is a city"]
    names = ["a", "b", "c", None, "a", "c", "b"]
    with Engine(
        str(model_path),
        enable_lora=True,
        lora_paths={k: str(v) for k, v in paths.items()},
        max_loras_per_batch=3,
        **ENGINE,
    ) as eng:
        alone = []
        for prompt, name in zip(prompts, names):
            assert eng.scheduler.flush_cache()
            alone.append(eng.generate(prompt, GREEDY, lora_path=name)["output_ids"])
        assert eng.scheduler.flush_cache()
        batch = eng.generate(prompts, GREEDY, lora_path=names)
    assert [r["output_ids"] for r in batch] == alone
    assert len({tuple(ids) for ids in alone[:4]}) == 4  # each adapter says something else

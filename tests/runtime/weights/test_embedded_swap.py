"""A weight update on the embedded SmolLM2 model: a perturbed copy passes every check (the
canary's entropy stays in the band), serves exactly what a fresh engine on that copy serves,
and a rollback brings back the original outputs."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from radixgen.runtime.engine import Engine
from tests.runtime.checkpoints import write_checkpoint

pytestmark = [pytest.mark.model, pytest.mark.slow]

GREEDY = {"max_new_tokens": 12, "temperature": 0}
PROMPTS = ["The capital of France is", "def add(a, b):"]


def test_update_and_rollback_on_the_embedded_model(model_path, tmp_path):
    gen = torch.Generator().manual_seed(0)
    weights = {
        name: (t.float() * (1 + 0.05 * torch.randn(t.shape, generator=gen))).to(t.dtype)
        for path in sorted(model_path.glob("*.safetensors"))
        for name, t in load_file(str(path)).items()
    }
    folder = write_checkpoint(tmp_path / "perturbed", model_path, weights)
    with Engine(str(folder), max_total_tokens=1024) as fresh:
        reference = [r["output_ids"] for r in fresh.generate(PROMPTS, GREEDY)]
    with Engine(str(model_path), max_total_tokens=1024) as eng:
        before = [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)]
        result = eng.update_weights(model_path=str(folder), version="perturbed")
        assert result["weight_version"] == "perturbed"
        manager = eng.scheduler.gate.weights
        assert abs(manager.active.canary_entropy - manager.previous.canary_entropy) <= 2.0
        after = eng.generate(PROMPTS, GREEDY)
        assert [r["output_ids"] for r in after] == reference != before
        assert eng.rollback_weights()["weight_version"] == "default"
        assert [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)] == before

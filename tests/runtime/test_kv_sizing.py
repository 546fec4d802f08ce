"""The KV pool's size: --max-total-tokens when given; on the CPU otherwise a fixed number of
contexts (capped by --mem-fraction-static of total RAM), never a share of whatever RAM happens
to be free; --context-length caps the context and a longer one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixgen.config import CacheConfig, ModelConfig
from radixgen.runtime import model_runner
from radixgen.runtime.model_runner import CPU_CONTEXTS_PER_POOL, ModelRunner


def _runner(model: Path, context_length: int | None = None, **cache: object) -> ModelRunner:
    model_cfg = ModelConfig(load_format="dummy", device="cpu", context_length=context_length)
    return ModelRunner(model, model_cfg, CacheConfig(**cache), max_running_requests=4)


def test_cpu_default_is_a_fixed_number_of_contexts(tiny_model_path, monkeypatch):
    runner = _runner(tiny_model_path)
    assert runner.num_slots == CPU_CONTEXTS_PER_POOL * runner.max_context_len
    # free RAM plays no part: the same size whatever /proc/meminfo says
    monkeypatch.setattr(model_runner, "_device_memory", lambda device: 1 << 40)
    assert _runner(tiny_model_path).num_slots == runner.num_slots


def test_cpu_default_is_capped_by_the_ram_fraction(tiny_model_path, monkeypatch):
    full = _runner(tiny_model_path)
    token_bytes = full.kv_bytes() / full.num_slots
    ram = (full.weight_bytes + 1000 * token_bytes) / 0.5  # half of it: the weights + 1000 tokens
    monkeypatch.setattr(model_runner, "_device_memory", lambda device: ram)
    assert _runner(tiny_model_path, mem_fraction_static=0.5).num_slots == 1000 < full.num_slots


def test_max_total_tokens_and_context_length_win(tiny_model_path):
    runner = _runner(tiny_model_path, max_total_tokens=640, context_length=300)
    assert (runner.num_slots, runner.max_context_len) == (640, 300)
    assert _runner(tiny_model_path, context_length=300).num_slots == CPU_CONTEXTS_PER_POOL * 300


def test_a_context_longer_than_the_model_is_refused(tiny_model_path):
    with pytest.raises(ValueError, match="exceeds this model's context of 1024"):
        _runner(tiny_model_path, context_length=4096)

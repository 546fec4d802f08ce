"""The warm-up before ready: it runs every step kind, then leaves no trace, and the requests
after it are served as by an engine that never warmed up."""

from __future__ import annotations

from radixgen.runtime.engine import Engine

PROMPTS = ["The capital of France is", "def fibonacci(n):"]
GREEDY = {"temperature": 0.0, "max_new_tokens": 12}


def _engine(model_path, **kw) -> Engine:
    return Engine(
        str(model_path), load_format="dummy", max_total_tokens=8192, chunked_prefill_size=128, **kw
    )


def test_warmup_runs_the_step_kinds_and_leaves_no_trace(tiny_model_path):
    cold = _engine(tiny_model_path, warmup=False)
    expected = [r["output_ids"] for r in cold.generate(PROMPTS, GREEDY)]
    cold.shutdown()

    warm = _engine(tiny_model_path, warmup=True, max_step_ms=500)
    sched = warm.scheduler
    assert sched.planner.step_cost.ready  # the cost model learnt from the timed round
    assert sched.planner.step_cost.max_rows > sched.chunk_size // 2  # it saw long chunks
    assert not sched.has_work and sched.outputs == []
    assert sched.cache.total_size(0) == 0  # nothing cached
    assert (sched.num_prompt_tokens, sched.num_cached_tokens, sched.num_cached_by_tier) == (
        0,
        0,
        [0, 0],
    )
    assert sched.runner.allocator.num_free(0) == sched.runner.capacity[0]  # every KV slot free
    assert [r["output_ids"] for r in warm.generate(PROMPTS, GREEDY)] == expected
    warm.shutdown()


def test_warmup_is_off_on_cpu_by_default(tiny_model_path, monkeypatch):
    import radixgen.runtime.engine as engine_module

    calls = []
    monkeypatch.setattr(engine_module, "warm_up", lambda sched: calls.append(sched))
    _engine(tiny_model_path).shutdown()
    assert calls == []
    _engine(tiny_model_path, warmup=True).shutdown()
    assert len(calls) == 1

"""KV accounting under pressure: random traffic, shared prefixes, aborts, retraction.
After every step, per KV pool: free + cached + owned == capacity, and no slot is in two places.
Runs with one pool and with mixed precision (FP8 prefix pool + NVFP4 branch pool)."""

import random

import pytest
import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import AbortReq, GenerateReq


def _census(engine: Engine) -> None:
    sched = engine.scheduler
    runner, cache = sched.runner, sched.cache
    owned = [
        runner.table.read(r.row, r.kv_len, r.tree_len)
        for r in sched.running + sched.chunked
        if r.row is not None
    ]
    num_owned = sum(len(o) for o in owned)
    assert runner.allocator.num_free() + cache.total_size() + num_owned == runner.num_slots
    if runner.mixed_kv:
        boundary = runner.capacity[0]
        for tier, capacity in enumerate(runner.capacity):
            mine = sum(int(((o >= boundary) == bool(tier)).sum()) for o in owned)
            assert runner.allocator.num_free(tier) + cache.total_size(tier) + mine == capacity, tier
        window = sched.kv.window
        for r in sched.running + sched.chunked:  # prompt positions in the prefix pool, the rest not
            if r.row is not None:
                slots = runner.table.read(r.row, r.kv_len)
                prompt = len(r.input_ids)
                assert (slots[:prompt] < boundary).all()
                if window is None:
                    assert (slots[prompt:] >= boundary).all()
                else:  # the window's first tokens stay in the prefix pool; older ones move lazily
                    assert (slots[prompt : prompt + window[0]] < boundary).all()
    cache.check_integrity()
    everything = torch.cat([runner.allocator.free_slots(), cache.all_slots(), *owned])
    assert len(everything.unique()) == runner.num_slots, "a KV slot is in two places"


def _traffic(rng: random.Random, num: int, alphabet: int = 40000) -> list[GenerateReq]:
    """Random requests, 60% behind a shared system prompt, some of them scoring prompts that
    share a start with the request before (score groups); a small alphabet makes repeats
    (n-gram drafts) common."""
    system = [rng.randrange(100, 100 + alphabet) for _ in range(48)]
    reqs = []
    for i in range(num):
        head = system if rng.random() < 0.6 else []
        ids = head + [rng.randrange(100, 100 + alphabet) for _ in range(rng.randrange(1, 40))]
        params = SamplingParams(
            max_new_tokens=rng.randrange(1, 24),
            ignore_eos=True,
            temperature=rng.choice([0.0, 0.8]),
            seed=i,
        )
        if reqs and rng.random() < 0.4:  # a scoring prompt sharing a start with the one before
            base = reqs[-1].input_ids
            keep = (
                rng.randrange(1, len(base) + 1) if reqs[-1].params.max_new_tokens else len(base) - 1
            )
            ids = base[:keep] + [
                rng.randrange(100, 100 + alphabet) for _ in range(rng.randrange(1, 5))
            ]
            params = SamplingParams(max_new_tokens=0, return_logprob=True, logprob_start_len=keep)
        reqs.append(GenerateReq(rid=str(i), input_ids=ids, params=params))
    return reqs


MIXED = {
    "kv_prefix_dtype": "fp8_e4m3",
    "kv_branch_dtype": "nvfp4",
    "kv_branch_fraction": 0.1,
    "kv_branch_window": "none",
}
WINDOW = {**MIXED, "kv_branch_window": "2,3"}  # short generations here: a small window moves tokens


SPEC = {"speculative_algorithm": "radix", "speculative_num_draft_tokens": 6}


@pytest.mark.parametrize(
    "kv",
    [
        {"max_total_tokens": 160},
        {"max_total_tokens": 48, **MIXED},
        {"max_total_tokens": 36, **WINDOW},
        {"max_total_tokens": 160, **SPEC},
        {"max_total_tokens": 64, **WINDOW, **SPEC},
    ],
    ids=["one-pool", "mixed", "mixed-window", "speculative", "mixed-window-speculative"],
)
def test_kv_invariant_holds_every_step(tiny_model_path, kv):
    rng = random.Random(0)
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        chunked_prefill_size=32,
        max_running_requests=6,
        **kv,
    )
    sched = engine.scheduler
    pending = _traffic(rng, 30, alphabet=8 if "speculative_algorithm" in kv else 40000)
    finished, steps = set(), 0
    while pending or sched.has_work:
        for _ in range(rng.randrange(0, 3)):
            if pending:
                sched.handle(pending.pop(0))
        if rng.random() < 0.05:
            sched.handle(AbortReq(rid=str(rng.randrange(30))))
        for out in sched.step():
            if out.finish is not None:
                finished.add(out.rid)
        _census(engine)
        steps += 1
        assert steps < 5000, "scheduler made no progress"
    assert finished == {str(i) for i in range(30)}
    assert sched.num_retractions > 0, "the pool was meant to be small enough to force retraction"
    assert sched.num_cached_tokens > 0, "shared prefixes should hit the cache"
    if sched.spec is not None:
        assert sched.spec.stats.num_steps > 0 and sched.spec.stats.num_accepted > 0
    if sched.kv.window is not None:
        assert sched.num_demoted > 0, "generations were meant to outgrow the branch window"

"""Mixed-precision KV end to end: prompt tokens in the prefix pool, generated tokens in the
branch pool (but for a window of them), a later turn reusing the earlier turn's generated branch
from the radix tree."""

import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq

GREEDY = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}


def _engine(path, **kv):
    return Engine(str(path), load_format="dummy", max_total_tokens=512, **kv)


def test_lossless_pools_through_the_mixed_path_change_nothing(tiny_model_path):
    prompts = [[5 + i, 17, 300, 4000 + i, 9] * 6 for i in range(4)]
    single = _engine(tiny_model_path)
    # two fp32 pools ("fp32" and "auto" = the model dtype) take the mixed-precision code path
    mixed = _engine(tiny_model_path, kv_prefix_dtype="fp32", kv_branch_dtype="auto")
    assert mixed.scheduler.runner.mixed_kv and not single.scheduler.runner.mixed_kv
    a = [r["output_ids"] for r in single.generate(input_ids=prompts, sampling_params=GREEDY)]
    b = [r["output_ids"] for r in mixed.generate(input_ids=prompts, sampling_params=GREEDY)]
    assert a == b


def test_second_turn_reuses_the_generated_branch(tiny_model_path):
    eng = _engine(
        tiny_model_path,
        kv_prefix_dtype="fp8_e4m3",
        kv_branch_dtype="nvfp4",
        kv_branch_window="none",
    )
    runner, cache = eng.scheduler.runner, eng.scheduler.cache
    boundary = runner.capacity[0]
    turn1 = [11, 12, 13, 14, 15, 16, 17, 18] * 4
    out1 = eng.generate(input_ids=turn1, sampling_params=GREEDY)["output_ids"]
    assert cache.total_size(0) == len(turn1) and cache.total_size(1) == len(out1) - 1
    turn2 = turn1 + out1 + [21, 22, 23, 24]
    second = eng.generate(input_ids=turn2, sampling_params=GREEDY)
    assert second["meta_info"]["cached_tokens"] == len(turn1) + len(out1) - 1
    # the path through the tree alternates precisions: prompt, branch, then the new user turn
    slots = cache.match_prefix(turn2).slots
    tiers = (slots >= boundary).to(torch.int64).tolist()
    n1 = len(turn1)
    assert tiers[:n1] == [0] * n1 and set(tiers[n1 : n1 + len(out1) - 1]) == {1}
    assert tiers[-4:] == [0] * 4  # the second turn's own (prompt) tokens: prefix pool
    cache.check_integrity()


def test_branch_window_keeps_first_and_newest_tokens_in_the_prefix_pool(tiny_model_path):
    """Window (4, 16): after 48 generated tokens the cached path holds the prompt and the first
    4 generated tokens in the prefix pool, the middle in the branch pool (moved in batches of
    DEMOTE_BATCH), the newest 16 or more in the prefix pool; every count adds up per pool."""
    from radixgen.runtime.kv_manager import DEMOTE_BATCH

    eng = _engine(
        tiny_model_path,
        kv_prefix_dtype="fp8_e4m3",
        kv_branch_dtype="nvfp4",
        kv_branch_window="4,16",
    )
    sched, cache = eng.scheduler, eng.scheduler.cache
    boundary = sched.runner.capacity[0]
    prompt = [31, 32, 33, 34, 35] * 4
    out = eng.generate(input_ids=prompt, sampling_params={**GREEDY, "max_new_tokens": 48})[
        "output_ids"
    ]
    tiers = (cache.match_prefix(prompt + out).slots >= boundary).to(torch.int64).tolist()
    gen = tiers[len(prompt) :]  # the 47 generated tokens with KV (the last one has none)
    assert tiers[: len(prompt)] == [0] * len(prompt) and gen[:4] == [0] * 4
    assert gen[-16:] == [0] * 16 and set(gen[4 : 48 - 16 - DEMOTE_BATCH]) == {1}
    assert sched.num_demoted == sum(gen)
    assert cache.total_size(0) + cache.total_size(1) == len(tiers)
    assert sched.runner.allocator.num_free(0) + cache.total_size(0) == sched.runner.capacity[0]
    cache.check_integrity()


def test_window_wider_than_the_generation_equals_the_prefix_precision(tiny_model_path):
    """A window covering every generated token keeps them all in the FP8 prefix pool: the same
    greedy tokens as FP8 KV everywhere."""
    prompts = [[5 + i, 17, 300, 4000 + i, 9] * 6 for i in range(3)]
    params = {**GREEDY, "max_new_tokens": 40}
    run = lambda **kv: [
        r["output_ids"]
        for r in _engine(tiny_model_path, **kv).generate(input_ids=prompts, sampling_params=params)
    ]
    fp8 = run(kv_cache_dtype="fp8_e4m3")
    wide = run(kv_prefix_dtype="fp8_e4m3", kv_branch_dtype="nvfp4", kv_branch_window="100,100")
    assert wide == fp8


def test_second_turn_whose_cached_branch_fills_the_branch_pool_finishes(tiny_model_path):
    """Turn 1's generated branch stays cached in the branch pool under the second turn's prompt.
    When turn 2's own generation cannot fit next to that branch (which turn 2 itself locks as
    cached prefix), the request reuses only the prefix-pool part of its cached prefix and
    recomputes the rest; eviction of the branch pool takes the cached turn below it. Both turns
    finish with all their tokens; nothing hangs."""
    eng = _engine(
        tiny_model_path,
        kv_prefix_dtype="fp8_e4m3",
        kv_branch_dtype="nvfp4",
        kv_branch_window="none",
        kv_branch_fraction=0.006,
    )
    sched = eng.scheduler
    branch = sched.runner.capacity[1]
    assert 16 <= branch < 40, sched.runner.capacity
    params = {**GREEDY, "max_new_tokens": branch * 2 // 3}
    turn1 = [40, 41, 42, 43] * 5
    out1 = eng.generate(input_ids=turn1, sampling_params=params)["output_ids"]
    turn2 = turn1 + out1 + [50, 51]
    sched.handle(GenerateReq(rid="turn2", input_ids=turn2, params=SamplingParams.from_dict(params)))
    outs = []
    for _ in range(500):  # stepped here: a regression shows as a failure, not a hung test run
        outs += sched.step()
        if not sched.has_work:
            break
    assert not sched.has_work, "the second turn made no progress"
    assert sum(len(o.token_ids) for o in outs) == params["max_new_tokens"]
    assert outs[-1].finish["type"] == "length"
    cache = sched.cache
    for tier, capacity in enumerate(sched.runner.capacity):
        assert sched.runner.allocator.num_free(tier) + cache.total_size(tier) == capacity
    cache.check_integrity()


def test_alloc_positions_per_tier_and_empty(tiny_model_path):
    """Positions get slots of their tier in position order (prompt, window sink, middle, newest);
    no positions give an empty tensor, not 'cannot be had' (the draft model asks for none when a
    context is fully cached)."""
    from radixgen.runtime.request import Request

    for kv in (
        {},
        {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4", "kv_branch_window": "2,3"},
    ):
        sched = _engine(tiny_model_path, **kv).scheduler
        req = Request("r", [5, 6, 7, 8], SamplingParams())
        req.output_ids = list(range(10, 20))  # 10 generated: indices 2..6 are outside the window
        empty = sched.kv.alloc_positions(req, 3, 0)
        assert empty is not None and len(empty) == 0
        slots = sched.kv.alloc_positions(req, 0, 14)
        tiers = (
            (slots >= sched.runner.capacity[0]).tolist() if sched.runner.mixed_kv else [False] * 14
        )
        expect = [False] * 6 + [True] * 5 + [False] * 3 if sched.runner.mixed_kv else [False] * 14
        assert tiers == expect and len(set(slots.tolist())) == 14
        sched.runner.allocator.free(slots)

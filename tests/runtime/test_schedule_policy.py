"""In-batch prefix sharing: a waiting request that shares enough uncached prompt tokens with
one admitted this step waits a step and then reads them from the cache; the threshold is a
scheduler option with a per-device default."""

import pytest

from radixgen.config import SchedulerConfig
from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq
from radixgen.runtime.request import Request
from radixgen.runtime.schedule_policy import (
    IN_BATCH_SHARE_MIN_CPU,
    IN_BATCH_SHARE_MIN_GPU,
    in_batch_share_min,
    shares_uncached_prefix,
)


def test_threshold_defaults_per_device_and_can_be_set():
    assert in_batch_share_min(SchedulerConfig(), "cpu") == IN_BATCH_SHARE_MIN_CPU == 8
    assert in_batch_share_min(SchedulerConfig(), "cuda") == IN_BATCH_SHARE_MIN_GPU == 32
    assert in_batch_share_min(SchedulerConfig(in_batch_prefix_tokens=3), "cuda") == 3
    with pytest.raises(ValueError, match="in_batch_prefix_tokens"):
        SchedulerConfig(in_batch_prefix_tokens=0)


def test_shares_uncached_prefix_counts_only_uncached_tokens():
    params = SamplingParams(max_new_tokens=1)
    chosen = [Request("a", list(range(100, 120)), params)]
    req = Request("b", list(range(100, 110)) + [7, 8], params)  # shares 10 tokens
    assert shares_uncached_prefix(req, 0, chosen, 8)
    assert not shares_uncached_prefix(req, 3, chosen, 8)  # 3 cached: 7 uncached shared
    assert not shares_uncached_prefix(req, 0, chosen, 11)


def _submit(engine: Engine, shared: list[int], max_new_tokens: int = 1) -> None:
    for i in range(3):
        params = SamplingParams(max_new_tokens=max_new_tokens)
        engine.scheduler.handle(
            GenerateReq(rid=str(i), input_ids=shared + [500 + i, 600 + i], params=params)
        )


@pytest.mark.parametrize("threshold, admitted_first", [(None, 1), (32, 3)])
def test_requests_sharing_an_uncached_prefix_wait_a_step(
    tiny_model_path, threshold, admitted_first
):
    """12 shared uncached tokens: with the CPU default (8) one request computes them and the
    two others read them from the cache a step later; with 32 all three compute them."""
    engine = Engine(str(tiny_model_path), load_format="dummy", in_batch_prefix_tokens=threshold)
    shared = list(range(1000, 1012))
    _submit(engine, shared)
    outs = {o.rid: o for o in engine.scheduler.step()}
    assert len(outs) == admitted_first and len(engine.scheduler.waiting) == 3 - admitted_first
    while engine.scheduler.has_work:
        outs.update({o.rid: o for o in engine.scheduler.step()})
    cached = sorted(outs[str(i)].cached_tokens for i in range(3))
    assert cached == ([0, 12, 12] if admitted_first == 1 else [0, 0, 0])


def test_prompt_only_request_waits_for_any_shared_token(tiny_model_path):
    """A prompt-only request (a pin) has no first token to hurry: it waits a step for 2 shared
    uncached tokens, below the threshold, then reads them from the cache."""
    engine = Engine(str(tiny_model_path), load_format="dummy", in_batch_prefix_tokens=8)
    shared = [1000, 1001]
    for rid, tail, max_new in (("gen", 500, 1), ("pin", 600, 0)):
        engine.scheduler.handle(
            GenerateReq(
                rid=rid,
                input_ids=shared + [tail, tail + 1],
                params=SamplingParams(max_new_tokens=max_new),
            )
        )
    outs = {o.rid: o for o in engine.scheduler.step()}
    assert set(outs) == {"gen"} and len(engine.scheduler.waiting) == 1
    while engine.scheduler.has_work:
        outs.update({o.rid: o for o in engine.scheduler.step()})
    assert outs["gen"].cached_tokens == 0 and outs["pin"].cached_tokens == 2


def test_scoring_prompt_skips_its_last_token_a_pin_does_not(tiny_model_path):
    """A prompt-only request with prompt logprobs computes (and caches) every token but the
    last, whose logits nothing reads; a pin (no logprobs) caches its whole prompt; a one-token
    scoring prompt still runs."""
    engine = Engine(str(tiny_model_path), load_format="dummy")
    scoring = {"max_new_tokens": 0, "return_logprob": True, "logprob_start_len": 0}
    prompt, pinned = list(range(1000, 1010)), list(range(2000, 2010))
    first = engine.generate(input_ids=prompt, sampling_params=scoring)
    assert len(first["meta_info"]["input_token_logprobs"]) == len(prompt)
    assert engine.scheduler.cache.match_prefix(prompt, None).length == len(prompt) - 1
    engine.generate(input_ids=pinned, sampling_params={"max_new_tokens": 0})
    assert engine.scheduler.cache.match_prefix(pinned, None).length == len(pinned)
    for ids, cached in ((prompt, len(prompt) - 1), (pinned, len(pinned))):
        again = engine.generate(input_ids=ids + [5], sampling_params={"max_new_tokens": 1})
        assert again["meta_info"]["cached_tokens"] == cached
    single = engine.generate(input_ids=[7], sampling_params=scoring)
    assert single["meta_info"]["prompt_tokens"] == 1 and single["output_ids"] == []


def test_prefill_chunks_shrink_while_requests_decode(tiny_model_path):
    """Alone, a prompt prefills in chunks of chunked_prefill_size; while another request
    decodes, in chunks of mixed_chunk_size (its decode step waits for the chunk);
    max_prefill_tokens caps both. (The long-prompt threshold is raised to the chunk size: by
    default it would cap this prompt's share at half a chunk.)"""
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        chunked_prefill_size=64,
        mixed_chunk_size=16,
        long_prefill_token_threshold=64,
    )
    sched = engine.scheduler
    sched.handle(
        GenerateReq(
            rid="long",
            input_ids=list(range(1000, 1100)),
            params=SamplingParams(max_new_tokens=40, ignore_eos=True),
        )
    )
    sched.step()
    assert sched.chunked[0].kv_len == 64  # nothing decodes yet: a full chunk
    while sched.chunked:
        sched.step()
    sched.handle(
        GenerateReq(
            rid="new", input_ids=list(range(2000, 2050)), params=SamplingParams(max_new_tokens=1)
        )
    )
    lens = []
    while any(r.rid == "new" for r in sched.waiting + sched.chunked):
        sched.step()
        lens += [r.kv_len for r in sched.chunked if r.rid == "new"]
    assert lens == [16, 32, 48] and sched.running  # 16 tokens a step beside the decoding request
    capped = Engine(
        str(tiny_model_path), load_format="dummy", chunked_prefill_size=64, max_prefill_tokens=8
    )
    assert capped.scheduler.chunk_size == capped.scheduler.mixed_chunk_size == 8

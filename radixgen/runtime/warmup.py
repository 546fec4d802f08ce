"""Warm-up before a scheduler reports ready: a few requests of each step kind run through the
scheduler itself, so the first user request pays no kernel compilation (on a GPU, flashinfer's
JIT and the Triton kernels' first launches took ~45-50 s at the first extend) and the
step-time target's cost model has learnt the device.

Two rounds of the same shapes on fresh random prompts: the first compiles, the second is timed
into a fresh cost model (the first round's compile stalls would skew its fit for many steps).
The shapes: a long prompt prefilled in chunks while short ones decode (mixed steps, chunks deep
in a prompt), a prompt that hits the long one's cached prefix, greedy, sampled and logprob
decoding, and decode steps at a few batch sizes. Afterwards nothing of it is left: the prefix
cache is flushed, the counters read zero and the drafter has seen none of its tokens.
"""

from __future__ import annotations

import logging
import time

import torch

from radixgen.core import SamplingParams
from radixgen.runtime.messages import GenerateReq
from radixgen.runtime.scheduler import Scheduler
from radixgen.runtime.step_cost import StepCostModel

logger = logging.getLogger(__name__)

MAX_WARMUP_PROMPT = 4096  # the long prompt's tokens at most (its chunks reach this depth)
SHORT_PROMPTS = (17, 48, 130)  # odd sizes: Triton specializes int arguments by divisibility
DECODE_TOKENS = 8


def warm_up(sched: Scheduler) -> float:
    """Run the warm-up requests (module docstring) and return the seconds it took."""
    started = time.perf_counter()
    long_len = _long_len(sched)
    on_insert, sched.kv.on_insert = sched.kv.on_insert, None  # the drafter learns from users only
    try:
        for round_ in range(2):
            if round_ == 1 and sched.planner.step_cost is not None:
                sched.planner.step_cost = StepCostModel()
            _run_round(sched, long_len, seed=round_)
    finally:
        sched.kv.on_insert = on_insert
    _forget(sched)
    seconds = time.perf_counter() - started
    logger.info("warm-up: %.1f s (prompts up to %d tokens)", seconds, long_len)
    return seconds


def _long_len(sched: Scheduler) -> int:
    """The long prompt's length: what the context, the KV pool and the chunk size allow."""
    room = min(sched.runner.max_context_len - DECODE_TOKENS - 1, sched.runner.capacity[0] // 4)
    return max(1, min(MAX_WARMUP_PROMPT, 2 * sched.chunk_size + 5, room))


def _run_round(sched: Scheduler, long_len: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(1234 + seed)
    vocab = sched.runner.arch.vocab_size

    def ids(n: int) -> list[int]:
        return torch.randint(0, vocab, (n,), generator=gen).tolist()

    greedy = SamplingParams(temperature=0.0, max_new_tokens=DECODE_TOKENS, ignore_eos=True)
    sampled = SamplingParams(
        temperature=0.8, top_p=0.9, top_k=20, max_new_tokens=DECODE_TOKENS, ignore_eos=True
    )
    logprobs = SamplingParams(
        temperature=0.0,
        max_new_tokens=DECODE_TOKENS,
        ignore_eos=True,
        return_logprob=True,
        top_logprobs_num=2,
    )
    for n, params in zip(SHORT_PROMPTS, (greedy, sampled, logprobs)):
        _submit(sched, ids(min(n, long_len)), params)
    _steps(sched, 2)  # the short ones decode now
    long_prompt = ids(long_len)
    _submit(sched, long_prompt, greedy)  # its chunks ride along with their decode rows
    _drain(sched)
    _submit(sched, long_prompt + ids(min(SHORT_PROMPTS[0], long_len)), greedy)  # a prefix hit
    for n in range(1, 9):  # decode steps at growing batch sizes
        _submit(sched, ids(min(SHORT_PROMPTS[0] + n, long_len)), greedy if n % 2 else sampled)
    _drain(sched)


def _submit(sched: Scheduler, input_ids: list[int], params: SamplingParams) -> None:
    rid = f"warmup-{time.perf_counter_ns()}"
    sched.handle(GenerateReq(rid=rid, input_ids=input_ids, params=params))


def _steps(sched: Scheduler, n: int) -> None:
    for _ in range(n):
        sched.step()


def _drain(sched: Scheduler) -> None:
    while sched.has_work:
        sched.step()


def _forget(sched: Scheduler) -> None:
    """Leave no trace of the warm-up: an empty cache, zero counters, no outputs."""
    sched.flush_cache()
    sched.outputs = []
    sched.num_prompt_tokens = sched.num_cached_tokens = sched.num_retractions = (
        sched.num_demoted
    ) = 0
    sched.num_cached_by_tier = [0, 0]
    if sched.spec is not None:
        sched.spec.stats = type(sched.spec.stats)()
        sched.spec.num_pruned = sched.spec.num_forced = 0

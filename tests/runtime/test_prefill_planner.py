"""PrefillPlanner with several prompts mid-prefill: long prompts' shares, the next-step
admission of short prompts, progress of long prompts under a stream of short ones, the partial
prefill limits, KV reservations, and chunks sized to a step-time target under a fake clock.
A fake KV manager (one pool, no cache) keeps these unit tests free of a model."""

import itertools

import pytest

from radixgen.config import SchedulerConfig
from radixgen.core import SamplingParams
from radixgen.runtime.prefill_planner import MIN_LONG_CHUNK, PrefillPlanner
from radixgen.runtime.request import Request
from radixgen.runtime.step_cost import StepCostModel, StepShape, prefill_pairs


class FakeKV:
    """One pool of `capacity` slots without a prefix cache: an admitted request holds kv_len
    slots; positions planned but not computed yet are the planner's reservations to count."""

    def __init__(self, capacity: int = 1 << 20):
        self.capacity, self.rows, self.admitted = capacity, itertools.count(), []

    def match(self, req: Request) -> int:
        return 0

    def fits(self, prompt_tokens: int, generated_tokens: int) -> bool:
        return prompt_tokens + generated_tokens <= self.capacity - sum(
            r.kv_len for r in self.admitted
        )

    def admit(self, req: Request) -> bool:
        req.row, req.kv_len = next(self.rows), 0
        self.admitted.append(req)
        return True

    def split_positions(self, req: Request, start: int, n: int) -> tuple[int, int]:
        prompt = max(min(start + n, len(req.input_ids)) - start, 0)
        return prompt, n - prompt

    def generated_need(self, tokens: int) -> tuple[int, int]:
        return 0, tokens


_ids = itertools.count(100)


def _req(rid: str, n: int, max_new: int = 4) -> Request:
    return Request(rid, [next(_ids) for _ in range(n)], SamplingParams(max_new_tokens=max_new))


def _planner(kv=None, device: str = "cpu", **cfg) -> PrefillPlanner:
    return PrefillPlanner(kv or FakeKV(), SchedulerConfig(**cfg), device, 1 << 20)


def _step(planner, waiting, running, chunked) -> dict[str, int]:
    """Plan one step and apply it as the scheduler would: chunks move kv_len on, a finished
    prompt starts decoding (one token, then done); returns rid -> tokens planned."""
    for req in list(running):
        running.remove(req)  # each short request decodes for one step, then finishes
    plan = planner.plan(waiting, running, chunked)
    for req, ext in zip(plan.reqs, plan.extend_lens):
        req.kv_len += ext
        if req.kv_len == req.prefill_len:
            if req in chunked:
                chunked.remove(req)
            running.append(req)
        elif req not in chunked:
            chunked.append(req)
    return {r.rid: e for r, e in zip(plan.reqs, plan.extend_lens)}


def test_defaults_per_device_and_validation():
    cpu, gpu = _planner(device="cpu"), _planner(device="cuda")
    assert (cpu.long_threshold, cpu.step_cost) == (256, None)
    assert gpu.long_threshold == 2048 and gpu.max_step_s == pytest.approx(0.05)
    assert _planner(device="cuda", max_step_ms=0).step_cost is None
    assert _planner(long_prefill_token_threshold=77).long_threshold == 77
    with pytest.raises(ValueError, match="max_long_partial_prefills"):
        SchedulerConfig(max_num_partial_prefills=1, max_long_partial_prefills=2)
    for bad in (
        {"max_num_partial_prefills": 0},
        {"long_prefill_token_threshold": 0},
        {"max_step_ms": -1},
    ):
        with pytest.raises(ValueError):
            SchedulerConfig(**bad)


def test_long_prompt_share_is_capped_at_the_threshold():
    planner = _planner(chunked_prefill_size=512, long_prefill_token_threshold=128)
    waiting, running, chunked = [_req("long", 1000)], [], []
    assert _step(planner, waiting, running, chunked) == {"long": 128}
    assert _step(planner, waiting, running, chunked) == {"long": 128}


def test_short_prompt_arriving_mid_prefill_runs_in_the_next_step():
    """Two long prompts mid-prefill use the whole budget; a short prompt that arrives is
    prefilled whole in the next step, and both long prompts still progress in that step."""
    planner = _planner(chunked_prefill_size=512, long_prefill_token_threshold=256)
    waiting, running, chunked = [_req("a", 3000), _req("b", 2000)], [], []
    assert _step(planner, waiting, running, chunked) == {"a": 256, "b": 256}
    waiting.append(_req("short", 100))
    got = _step(planner, waiting, running, chunked)
    assert got["short"] == 100 and got["a"] > 0 and got["b"] > 0 and sum(got.values()) <= 512
    assert got["b"] >= got["a"]  # fewer tokens left: goes first
    assert [r.rid for r in running] == ["short"]


def test_long_prompts_progress_under_a_stream_of_short_ones():
    planner = _planner(chunked_prefill_size=256, long_prefill_token_threshold=128)
    long = _req("long", 1500)
    waiting, running, chunked = [long], [], []
    steps = 0
    while long.kv_len < long.prefill_len:
        waiting.extend(_req(f"s{steps}-{i}", 60) for i in range(4))  # 240 short tokens a step
        before = long.kv_len
        got = _step(planner, waiting, running, chunked)
        assert long.kv_len - before >= min(MIN_LONG_CHUNK, long.prefill_len - before), got
        assert sum(got.values()) <= 256
        steps += 1
    assert (
        steps <= 1500 // MIN_LONG_CHUNK + 1
    )  # it shares the kept half with short prompts left mid-prefill


def test_long_prompt_limit_lets_short_ones_pass():
    planner = _planner(
        chunked_prefill_size=512,
        long_prefill_token_threshold=100,
        max_num_partial_prefills=3,
        max_long_partial_prefills=2,
    )
    waiting, running, chunked = (
        [_req(f"long{i}", 900) for i in range(3)] + [_req("short", 50)],
        [],
        [],
    )
    got = _step(planner, waiting, running, chunked)
    assert got == {"short": 50, "long0": 100, "long1": 100}
    assert [r.rid for r in waiting] == ["long2"]


def test_partial_limit_one_keeps_one_chunked_prompt_at_a_time():
    """max_num_partial_prefills=1 with no long prompts: the chunked prompt continues with the
    whole budget, another one waits for its last chunk (one chunked prompt at a time)."""
    planner = _planner(
        chunked_prefill_size=64,
        long_prefill_token_threshold=1 << 20,
        max_num_partial_prefills=1,
        max_long_partial_prefills=1,
    )
    waiting, running, chunked = [_req("a", 100), _req("b", 100)], [], []
    assert _step(planner, waiting, running, chunked) == {"a": 64}
    assert _step(planner, waiting, running, chunked) == {"a": 36, "b": 28}
    assert _step(planner, waiting, running, chunked) == {"b": 64}
    assert _step(planner, waiting, running, chunked) == {"b": 8}


def test_short_prompt_that_would_stay_partial_needs_a_free_slot():
    """With one partial slot, held by a long prompt: a short prompt that fits the short
    budget whole is prefilled, one that would stay mid-prefill waits."""
    planner = _planner(
        chunked_prefill_size=64,
        long_prefill_token_threshold=50,
        max_num_partial_prefills=1,
        max_long_partial_prefills=1,
    )
    waiting, running, chunked = [_req("long", 200)], [], []
    assert _step(planner, waiting, running, chunked) == {"long": 50}
    waiting += [_req("s40", 40), _req("s20", 20)]  # the short budget: 64 - the long's floor (32)
    assert _step(planner, waiting, running, chunked) == {"s20": 20, "long": 44}
    assert [r.rid for r in waiting] == ["s40"]


def test_a_mid_prefill_prompt_keeps_its_remaining_kv():
    """Admitting short prompts never takes the KV the long prompt still needs for its
    remaining prompt (it would be pushed back to the queue)."""
    kv = FakeKV(capacity=949)
    planner = _planner(kv, chunked_prefill_size=256, long_prefill_token_threshold=128)
    waiting, running, chunked = [_req("long", 900, max_new=0)], [], []
    _step(planner, waiting, running, chunked)
    waiting.append(_req("short", 50, max_new=0))  # 900 + 50 > 949
    assert "short" not in _step(planner, waiting, running, chunked)
    kv.capacity = 950
    assert _step(planner, waiting, running, chunked).get("short") == 50


def _true_seconds(shape: StepShape) -> float:
    """A device: 2 ms a step, 20 us a token, 4 ns per attention pair, 1 ns per decode KV token."""
    return 0.002 + 20e-6 * shape.rows + 4e-9 * shape.prefill_pairs + 1e-9 * shape.decode_kv


def test_step_cost_model_learns_the_device():
    model = StepCostModel()
    shapes = []
    for ext, prefix in [
        (100, 0),
        (400, 0),
        (200, 3000),
        (50, 9000),
        (300, 500),
        (120, 6000),
        (80, 20),
    ]:
        shape = StepShape()
        shape.add_prefill(prefix, ext)
        shape.add_decode(700, rows=3)
        shapes.append(shape)
        model.observe(shape, _true_seconds(shape))
    assert model.ready
    probe = StepShape()
    probe.add_prefill(4000, 250)
    assert model.predict(probe) == pytest.approx(_true_seconds(probe), rel=0.05)
    c = model.max_chunk(4000, 0.02, cap=10_000)
    assert 20e-6 * c + 4e-9 * prefill_pairs(4000, c) == pytest.approx(0.02, rel=0.05)
    assert model.max_chunk(40_000, 0.02, cap=10_000) < c  # deeper in the prompt: fewer tokens
    stall = StepShape(rows=100)
    assert not model.observe(stall, 50.0)  # a stall (a compile) is not fitted


def test_chunks_adapt_to_the_step_target_under_a_fake_clock():
    """A long prompt with short requests decoding beside it: after a few steps the planner's
    chunks keep the (fake) step time near --max-step-ms, shrinking as the prompt gets deeper."""
    planner = _planner(device="cuda", chunked_prefill_size=8192, max_step_ms=40)
    long = _req("long", 60_000)
    waiting, running, chunked = [long], [], []
    times, chunks = [], []
    while long.kv_len < long.prefill_len:
        decoding = [_req(f"d{i}", 500) for i in range(4)]
        for r in decoding:
            r.kv_len = r.seq_len - 1
        shape = StepShape()
        for r in decoding:
            shape.add_decode(r.seq_len)
        plan = planner.plan(waiting, decoding, chunked)
        for req, ext in zip(plan.reqs, plan.extend_lens):
            shape.add_prefill(req.kv_len, ext)
            req.kv_len += ext
            chunks.append(ext)
        if long not in chunked and long.kv_len < long.prefill_len:
            chunked.append(long)
        planner.observe_step(shape, _true_seconds(shape))
        times.append(_true_seconds(shape))
    settled = times[10:-1]
    assert max(settled) <= 0.040 * 1.1 and min(settled) >= 0.040 * 0.8
    assert chunks[10] > chunks[-2] * 1.5  # the same step time buys fewer tokens deep in the prompt

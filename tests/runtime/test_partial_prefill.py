"""Several prompts mid-prefill in one scheduler, end to end on the tiny dummy model: a short
request that arrives while two long prompts prefill gets its first token while they are still
prefilling, the long prompts progress every step, and every output equals the request's greedy
output run alone."""

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq

OPTIONS = {
    "load_format": "dummy",
    "dtype": "float32",
    "chunked_prefill_size": 64,
    "max_total_tokens": 4096,
}
GREEDY = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
LONG = {"long-a": list(range(1000, 1400)), "long-b": list(range(3000, 3260))}
SHORT = {f"short-{i}": [5000 + 37 * i + j for j in range(12)] for i in range(3)}


def _submit(sched, rid: str, ids: list[int]) -> None:
    sched.handle(GenerateReq(rid=rid, input_ids=ids, params=SamplingParams(**GREEDY)))


def test_short_requests_overtake_long_prefills_and_outputs_match(tiny_model_path):
    engine = Engine(str(tiny_model_path), **OPTIONS)
    sched = engine.scheduler
    for rid, ids in LONG.items():
        _submit(sched, rid, ids)
    tokens: dict[str, list[int]] = {}
    first_token_step, steps = {}, 0
    shorts = iter(SHORT.items())
    while sched.has_work or steps == 0:
        if steps in (2, 4, 5):  # short requests arrive while the long prompts prefill
            _submit(sched, *next(shorts))
        before = {r.rid: r.kv_len for r in sched.chunked}
        for out in sched.step():
            tokens.setdefault(out.rid, []).extend(out.token_ids)
            if out.token_ids:
                first_token_step.setdefault(out.rid, steps)
        after = {r.rid: r.kv_len for r in sched.chunked + sched.running}
        long_mid = [rid for rid in LONG if rid in before and before[rid] < len(LONG[rid])]
        assert all(after.get(rid, len(LONG[rid])) > before[rid] for rid in long_mid), (
            steps,
            before,
            after,
        )
        steps += 1
    long_done = min(first_token_step[rid] for rid in LONG)
    for arrival, rid in zip((2, 4, 5), SHORT):
        assert first_token_step[rid] == arrival  # prefilled in the step after it arrived
        assert first_token_step[rid] < long_done
    alone = Engine(str(tiny_model_path), **OPTIONS)
    for rid, ids in {**LONG, **SHORT}.items():
        assert tokens[rid] == alone.generate(input_ids=ids, sampling_params=GREEDY)["output_ids"], (
            rid
        )

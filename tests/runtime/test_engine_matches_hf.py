"""Greedy output of the Engine == HF transformers `generate` on the same converted folder,
in every scheduling mode (batched, one at a time, cache hit, chunked prefill, retraction)."""

import pytest
import torch

import radixgen.runtime.attention as attention_mod
from radixgen.runtime.engine import Engine
from tests.runtime.prompts import PROMPTS, chat_ids

pytestmark = pytest.mark.model
MAX_NEW = 24
GREEDY = {"max_new_tokens": MAX_NEW, "temperature": 0}


@pytest.fixture(scope="module")
def prompt_ids(tokenizer):
    return [chat_ids(tokenizer, p) for p in PROMPTS]


@pytest.fixture(scope="module")
def hf_outputs(model_path, prompt_ids):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    outs = []
    with torch.no_grad():
        for ids in prompt_ids:
            gen = hf.generate(
                torch.tensor([ids]),
                max_new_tokens=MAX_NEW,
                do_sample=False,
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            )
            outs.append(gen[0, len(ids) :].tolist())
    return outs


@pytest.fixture(scope="module")
def engine(model_path):
    eng = Engine(str(model_path), dtype="float32")
    yield eng
    eng.shutdown()


def _output_ids(results):
    return [r["output_ids"] for r in results]


def test_batched_greedy_matches_hf(engine, prompt_ids, hf_outputs):
    results = engine.generate(input_ids=prompt_ids, sampling_params=GREEDY)
    for ours, ref, ids in zip(_output_ids(results), hf_outputs, prompt_ids):
        # HF stops at EOS too; both include the EOS token when they stop on it
        assert ours == ref, (ids, ours, ref)


def test_one_at_a_time_equals_batched(engine, prompt_ids, hf_outputs):
    for ids, ref in zip(prompt_ids[:4], hf_outputs):
        assert engine.generate(input_ids=ids, sampling_params=GREEDY)["output_ids"] == ref


def test_prefix_cache_hit_gives_same_output(engine, prompt_ids, hf_outputs):
    first = engine.generate(input_ids=prompt_ids[1], sampling_params=GREEDY)
    again = engine.generate(input_ids=prompt_ids[1], sampling_params=GREEDY)
    assert again["meta_info"]["cached_tokens"] >= len(prompt_ids[1]) - 1
    assert first["output_ids"] == again["output_ids"] == hf_outputs[1]


def test_no_radix_cache_and_chunked_prefill_match(model_path, prompt_ids, hf_outputs):
    for options in ({"disable_radix_cache": True}, {"chunked_prefill_size": 16}):
        eng = Engine(str(model_path), dtype="float32", **options)
        results = eng.generate(input_ids=prompt_ids, sampling_params=GREEDY)
        assert _output_ids(results) == hf_outputs, options
        if options.get("disable_radix_cache"):
            assert all(r["meta_info"]["cached_tokens"] == 0 for r in results)


def test_retraction_keeps_outputs(model_path, prompt_ids, hf_outputs):
    longest = max(len(ids) for ids in prompt_ids) + MAX_NEW
    eng = Engine(str(model_path), dtype="float32", max_total_tokens=longest + 40)
    results = eng.generate(input_ids=prompt_ids, sampling_params=GREEDY)
    assert _output_ids(results) == hf_outputs
    sched = eng.scheduler
    assert sched.num_retractions > 0
    assert sched.runner.allocator.num_free() + sched.cache.total_size() == sched.runner.num_slots


def test_last_token_logits_close_to_hf(model_path, prompt_ids):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    eng = Engine(str(model_path), dtype="float32")
    worst = 0.0
    for ids in prompt_ids[:4]:
        ours = eng.generate(
            input_ids=ids,
            sampling_params={"max_new_tokens": 1, "temperature": 0, "top_logprobs_num": 5},
        )
        with torch.no_grad():
            ref = torch.log_softmax(hf(torch.tensor([ids])).logits[0, -1], -1)
        for token, logprob in ours["meta_info"]["output_top_logprobs"][0]:
            worst = max(worst, abs(logprob - ref[token].item()) / max(abs(ref[token].item()), 1e-3))
    print(f"max relative error of top-5 logprobs vs HF: {worst:.2e}")
    assert worst < 1e-3


SHARED_SYSTEM = (
    "You are Atlas, the support agent of Northwind Traders. You can call these tools: "
    "get_order(order_id: string) returns the order with its items, status and history; "
    "refund_order(order_id: string, amount: number, reason: string) refunds part of an order; "
    "search_faq(query: string) returns up to five help-center articles. Always confirm the "
    "order id before acting, never promise delivery dates, and answer in at most three sentences."
)


def test_shared_system_prompt_decodes_through_cascade_and_matches_hf(
    model_path, tokenizer, monkeypatch
):
    """Requests sharing a long system prompt read it once per group (cascade attention) and
    still give HF's greedy tokens."""
    from transformers import AutoModelForCausalLM

    users = [
        "Where is my order ORD-1?",
        "I want a refund for ORD-7.",
        "How do I reset my password?",
        "Can you ship to Norway?",
        "Is ORD-3 insured?",
        "My parcel arrived damaged.",
        "Do you sell gift cards?",
        "Cancel ORD-9, please.",
    ]  # 8: a group with the CPU kernel
    ids = [chat_ids(tokenizer, u, system=SHARED_SYSTEM) for u in users]
    hf = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    with torch.no_grad():
        ref = [
            hf.generate(
                torch.tensor([x]),
                max_new_tokens=MAX_NEW,
                do_sample=False,
                attention_mask=torch.ones(1, len(x), dtype=torch.long),
            )[0, len(x) :].tolist()
            for x in ids
        ]
    eng = Engine(str(model_path), dtype="float32")
    groups = []
    original = attention_mod.plan_decode

    def spy(*args, **kwargs):
        plan = original(*args, **kwargs)
        groups.append(len(plan.groups))
        return plan

    monkeypatch.setattr(attention_mod, "plan_decode", spy)
    results = eng.generate(input_ids=ids, sampling_params=GREEDY)
    assert _output_ids(results) == ref
    assert max(groups) >= 1, "the shared system prompt should form a cascade group"
    assert sum(r["meta_info"]["cached_tokens"] for r in results) >= 7 * 60

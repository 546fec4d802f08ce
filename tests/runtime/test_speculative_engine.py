"""Speculative decoding in the scheduler, end to end on the embedded model: greedy outputs are
identical with speculation on and off (batch 1 and 16, every constraint kind, radix and
draft-model drafters), constrained outputs stay valid when sampling, and per-request /
server-wide speculation figures are reported."""

from __future__ import annotations

import json
import re

import pytest

from radixgen.runtime.engine import Engine
from radixgen.runtime.server.scheduler_proc import scheduler_stats

pytestmark = pytest.mark.model
jsonschema = pytest.importorskip("jsonschema")

GREEDY = {"temperature": 0, "max_new_tokens": 32}
SMALL = {"max_total_tokens": 8192, "max_running_requests": 32}
TOPICS = [
    "the numbers from 1 to 25, separated by commas",
    "the days of the week, twice",
    "the letters of the alphabet in order",
    "a Python function that adds two numbers",
    "the first ten multiples of 7",
    "three colours, then the same three again",
    "a JSON object with keys a, b and c",
    "the months of the year",
    "the word 'echo' eight times",
    "a short SQL query over a users table",
    "the planets of the solar system",
    "five animals and their sounds",
    "the even numbers below 30",
    "a haiku about the sea, twice",
    "a list of fruits",
    "the countdown from 20 to 1",
]
SCHEMA = {
    "type": "object",
    "required": ["name", "tags"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "tags": {
            "type": "array",
            "items": {"enum": ["red", "green", "blue"]},
            "minItems": 1,
            "maxItems": 4,
        },
    },
}
REGEX = r"(Paris|London|Rome), [0-9]{1,3} km, (north|south)"
EBNF = 'root ::= "The answer is " ("yes" | "no") "."'


def _chat(tokenizer, text: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [_chat(tokenizer, f"Write {t}.") for t in TOPICS]


@pytest.fixture(scope="module")
def base_engine(model_path):
    engine = Engine(str(model_path), **SMALL)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def radix_engine(model_path):
    engine = Engine(str(model_path), speculative_algorithm="radix", **SMALL)
    yield engine
    engine.shutdown()


def _ids(outs):
    return [o["output_ids"] for o in outs]


def test_greedy_output_identical_at_batch_1_and_16(base_engine, radix_engine, prompts):
    base = base_engine.generate(prompts, GREEDY)
    one = radix_engine.generate(prompts[0], GREEDY)
    assert one["output_ids"] == base[0]["output_ids"]
    spec = radix_engine.generate(prompts, GREEDY)
    assert _ids(spec) == _ids(base)
    # the second run drafts from the cached first one: most drafts must be accepted
    again = radix_engine.generate(prompts, GREEDY)
    assert _ids(again) == _ids(base)
    steps = sum(o["meta_info"].get("spec_verify_ct", 0) for o in again)
    tokens = sum(o["meta_info"]["completion_tokens"] for o in again)
    assert steps and tokens / steps >= 3, (tokens, steps)
    stats = scheduler_stats(radix_engine.scheduler)
    assert stats["spec_verify_steps"] > 0 and stats["spec_accept_length"] > 1
    assert len(stats["spec_position_accept_rate"]) >= 1
    _check_kv_accounting(radix_engine)


def _constrained(tokenizer):
    ask = lambda text: _chat(tokenizer, text)
    return [
        (
            ask("Describe a flag as JSON with a name and colour tags."),
            {"json_schema": json.dumps(SCHEMA)},
        ),
        (ask("Name a city and how far it is."), {"regex": REGEX}),
        (
            ask("Is the sky blue? Answer yes, no or maybe not."),
            {"choices": ["yes", "no", "maybe not"]},
        ),
        (ask("Write a SQL query that lists the names of users older than 30."), {"lark": "sql"}),
        (ask("Is water wet?"), {"ebnf": EBNF}),
    ]


def _assert_valid(cases, outs):
    from radixgen.grammar.cfg.grammar import build_lark, shipped_grammar

    texts = [o["text"] for o in outs]
    jsonschema.validate(json.loads(texts[0]), SCHEMA)
    assert re.fullmatch(REGEX, texts[1]), texts[1]
    assert texts[2] in ("yes", "no", "maybe not")
    if outs[3]["meta_info"]["finish_reason"]["type"] == "stop":
        build_lark(shipped_grammar("sql")).parse(texts[3])
    assert re.fullmatch(r"The answer is (yes|no)\.", texts[4]), texts[4]


def test_greedy_output_identical_under_every_constraint_kind(base_engine, radix_engine, tokenizer):
    cases = _constrained(tokenizer)
    params = [{**GREEDY, "max_new_tokens": 64, **c} for _, c in cases]
    base = base_engine.generate([p for p, _ in cases], params)
    for _ in range(2):  # cold, then drafting from the cached outputs
        spec = radix_engine.generate([p for p, _ in cases], params)
        assert _ids(spec) == _ids(base)
    _assert_valid(cases, spec)
    assert sum(o["meta_info"].get("spec_verify_ct", 0) for o in spec) > 0


def test_sampled_constrained_outputs_stay_valid(radix_engine, tokenizer):
    cases = _constrained(tokenizer)
    params = [
        {"temperature": 0.9, "top_p": 0.95, "max_new_tokens": 64, "seed": 7, **c} for _, c in cases
    ]
    for _ in range(2):
        outs = radix_engine.generate([p for p, _ in cases], params)
        _assert_valid(cases, outs)
    _check_kv_accounting(radix_engine)


def test_self_drafting_draft_model_keeps_greedy_output(base_engine, model_path, prompts):
    """The embedded model drafting for itself (merged with radix drafts): the drafts are the
    target's own greedy choices, so nearly all are accepted and nothing changes."""
    engine = Engine(
        str(model_path),
        speculative_algorithm="radix+draft",
        speculative_draft_model_path=str(model_path),
        speculative_num_draft_tokens=6,
        speculative_depth=4,
        speculative_draft_max_total_tokens=4096,
        **SMALL,
    )
    try:
        spec = engine.generate(prompts[:4], {**GREEDY, "max_new_tokens": 24})
        base = base_engine.generate(prompts[:4], {**GREEDY, "max_new_tokens": 24})
        assert _ids(spec) == _ids(base)
        steps = sum(o["meta_info"]["spec_verify_ct"] for o in spec)
        tokens = sum(o["meta_info"]["completion_tokens"] for o in spec)
        assert tokens / steps >= 3, (tokens, steps)
        _check_kv_accounting(engine)
    finally:
        engine.shutdown()


def _check_kv_accounting(engine: Engine) -> None:
    from tests.runtime.test_scheduler_invariants import _census

    _census(engine)
    assert not engine.scheduler.running and not engine.scheduler.chunked


def test_dummy_weight_draft_model_keeps_greedy_output(tiny_model_path, tmp_path):
    """A different (random, one-layer) draft model: few drafts survive, outputs never change."""
    from tests.runtime.conftest import TINY_CONFIG

    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(
        json.dumps({**TINY_CONFIG, "num_hidden_layers": 1, "hidden_size": 32})
    )
    ids = [[5 + (i * 7 + j) % 50 for j in range(12 + i)] for i in range(6)]
    params = {"temperature": 0, "max_new_tokens": 20, "ignore_eos": True}
    common = dict(load_format="dummy", max_total_tokens=2048, max_running_requests=8)
    with Engine(str(tiny_model_path), **common) as plain:
        base = plain.generate(input_ids=ids, sampling_params=params)
    with Engine(
        str(tiny_model_path),
        speculative_algorithm="draft",
        speculative_draft_model_path=str(draft),
        speculative_draft_max_total_tokens=1024,
        **common,
    ) as engine:
        spec = engine.generate(input_ids=ids, sampling_params=params)
        assert _ids(spec) == _ids(base)
        assert all(o["meta_info"]["spec_verify_ct"] > 0 for o in spec)
        _check_kv_accounting(engine)

"""Constrained outputs that reach max_new_tokens or the model's context still validate: the
matcher closes the JSON in the last tokens. A 2-layer model with random weights, sampled, is the
adversary: nothing pulls it towards closing a string or an array."""

import json

import jsonschema
import pytest

from tests.runtime.conftest import TINY_CONFIG

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["name", "tags", "meta"],
}


@pytest.fixture(scope="module")
def short_context_engine(tmp_path_factory, tiny_model_path):
    """The tiny model with a 96-token context."""
    from radixgen.runtime.engine import Engine

    folder = tmp_path_factory.mktemp("tiny-llama-96")
    (folder / "config.json").write_text(json.dumps({**TINY_CONFIG, "max_position_embeddings": 96}))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).write_bytes((tiny_model_path / name).read_bytes())
    return Engine(str(folder), load_format="dummy", max_total_tokens=1024)


def _sampled_to_limits(engine, schema: dict, limits: tuple, seeds: int) -> list:
    """Sampled outputs of `schema` at each max_new_tokens in `limits`, each checked: within its
    limit and valid."""
    params = [
        {"max_new_tokens": n, "temperature": 1.0, "seed": seed, "json_schema": json.dumps(schema)}
        for n in limits
        for seed in range(seeds)
    ]
    outs = engine.generate(input_ids=[[11, 12, 13]] * len(params), sampling_params=params)
    for p, out in zip(params, outs):
        assert len(out["output_ids"]) <= p["max_new_tokens"]
        jsonschema.validate(json.loads(out["text"]), schema)
    return outs


def test_outputs_at_max_new_tokens_validate(short_context_engine):
    outs = _sampled_to_limits(short_context_engine, SCHEMA, (18, 25, 40), seeds=4)
    # random weights rarely end by themselves: most outputs ran to the limit, closed in time
    assert sum(o["meta_info"]["finish_reason"]["type"] == "length" for o in outs) >= len(outs) // 2


def test_grammar_compiled_schema_outputs_at_max_new_tokens_validate(short_context_engine):
    """A schema past the regex budget runs on the CFG matcher: its outputs close in time too."""
    from tests.grammar.json_grammar.test_cfg import _too_large_schema

    assert (
        len(_sampled_to_limits(short_context_engine, _too_large_schema(), (6, 14, 30), seeds=3))
        == 9
    )


def test_outputs_at_the_context_limit_validate(short_context_engine):
    prompt = list(range(100, 160))  # 60 of the 96 positions
    outs = short_context_engine.generate(
        input_ids=[prompt] * 3,
        sampling_params=[
            {
                "max_new_tokens": 500,
                "temperature": 1.0,
                "seed": s,
                "json_schema": json.dumps(SCHEMA),
            }
            for s in range(3)
        ],
    )
    for out in outs:
        assert len(prompt) + len(out["output_ids"]) <= 96
        jsonschema.validate(json.loads(out["text"]), SCHEMA)


def test_sql_outputs_at_max_new_tokens_parse(short_context_engine):
    from lark import Lark

    from radixgen.grammar.cfg.grammar import shipped_grammar

    params = [
        {"max_new_tokens": n, "temperature": 1.0, "seed": seed, "lark": "sql"}
        for n in (4, 9, 16, 30)
        for seed in range(3)
    ]
    outs = short_context_engine.generate(
        input_ids=[[11, 12, 13]] * len(params), sampling_params=params
    )
    parser = Lark(shipped_grammar("sql"), parser="lalr")
    for p, out in zip(params, outs):
        assert len(out["output_ids"]) <= p["max_new_tokens"]
        parser.parse(out["text"])
    assert sum(o["meta_info"]["finish_reason"]["type"] == "length" for o in outs) >= len(outs) // 2


def test_grammar_compiled_schema_with_flexible_whitespace_closes_in_time(tiny_model_path):
    """The same with whitespace in the gaps (json_grammar.tokens): the random model takes plenty of it,
    and the outputs still close in time, without whitespace before or after the value."""
    from radixgen.runtime.engine import Engine
    from tests.grammar.json_grammar.test_cfg import _too_large_schema

    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        max_total_tokens=1024,
        grammar_whitespace="flexible",
    )
    outs = _sampled_to_limits(engine, _too_large_schema(), (6, 14, 30), seeds=3)
    assert all(o["text"] == o["text"].strip() for o in outs)
    assert any(c in o["text"] for o in outs for c in " \n\t")

"""A schema large enough for the CFG matcher (json_grammar.cfg), whose shortest completion is hundreds of
tokens, still ends valid when max_new_tokens is just above that completion: random walks (nothing
pulls them towards an end) stopped at the limit parse and validate."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from radixgen.grammar.bitmask import allocate_bitmask
from radixgen.grammar.json_grammar.cfg import compile_json_grammar
from radixgen.grammar.json_schema import schema_to_compiled_form
from radixgen.grammar.matcher import RegexTooLarge

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _schema(num_objects: int, num_patterns: int) -> dict:
    props = {
        f"o{i}": {
            "type": "object",
            "properties": {"kind": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
            "required": ["kind", "ok"],
        }
        for i in range(num_objects)
    }
    props.update(
        {
            f"p{i}": {"type": "string", "pattern": "^[a-z]{2,4}-[0-9]{3}$"}
            for i in range(num_patterns)
        }
    )
    return {"type": "object", "properties": props, "required": list(props)}


@pytest.mark.parametrize("seed", [0, 1])
def test_a_long_shortest_completion_closes_within_the_limit(smol_info, seed):
    schema = _schema(30, 20)
    form, _ = schema_to_compiled_form(
        json.dumps(schema), too_large=RegexTooLarge("(test: the grammar)")
    )
    grammar = compile_json_grammar(form, smol_info, precompute=False)
    matcher = grammar.matcher()
    q, stack, _ = matcher._history[-1]
    shortest = len(grammar.closer.plan(q, stack))
    assert shortest > 512  # past what the deadline mask used to watch
    limit = shortest + 20 + 10 * seed
    matcher.limit_tokens(limit)
    rng, row, out = random.Random(seed), allocate_bitmask(1, smol_info.vocab_size), []
    for _ in range(limit):
        matcher.fill_bitmask(row, 0)
        ids = np.flatnonzero(np.unpackbits(row[0].numpy().view(np.uint8), bitorder="little"))
        token = int(rng.choice(ids.tolist()))
        assert matcher.accept_token(token)
        if matcher.is_terminated():
            break
        out.append(token)
    jsonschema.validate(json.loads(b"".join(smol_info.token_bytes[i] for i in out)), schema)

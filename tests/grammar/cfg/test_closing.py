"""CFG outputs that reach max_new_tokens still parse: the closer's plans complete any state, its
item-based completions are as cheap as a search finds, and under `limit_tokens` random walks
(the adversary: uniform over allowed tokens, nothing pulls them towards an end) stop parseable."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from lark import Lark

from radixgen.core import Constraint
from radixgen.grammar.cfg.closing import WINDOW
from radixgen.grammar.cfg.ebnf import ebnf_to_lark
from radixgen.grammar.cfg.grammar import compile_cfg, shipped_grammar
from radixgen.grammar.tokenizer_info import TokenizerInfo
from tests.grammar.cfg.test_smollm import ARITH_GBNF, allowed_ids
from tests.grammar.conftest import JSON_LARK

MODEL_DIR = os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct")
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not os.path.isdir(MODEL_DIR), reason="embedded model not materialised"),
]
GRAMMARS = {
    "sql": (Constraint("lark", "sql"), shipped_grammar("sql")),
    "json": (Constraint("lark", JSON_LARK), JSON_LARK),
    "gbnf": (Constraint("ebnf", ARITH_GBNF), ebnf_to_lark(ARITH_GBNF)),
}


@pytest.fixture(scope="module")
def info():
    from transformers import AutoTokenizer

    return TokenizerInfo.from_hf(AutoTokenizer.from_pretrained(MODEL_DIR))


@pytest.fixture(scope="module")
def compiled(info):
    return {name: compile_cfg(c, info, precompute=False) for name, (c, _) in GRAMMARS.items()}


def uniform_walk(grammar, info, rng: random.Random, steps: int, limit: int | None):
    """Up to `steps` tokens sampled uniformly among the allowed ones (EOS when drawn)."""
    m = grammar.matcher()
    if limit is not None:
        m.limit_tokens(limit)
    out = []
    for _ in range(steps):
        ids = allowed_ids(m, info)
        assert len(ids), f"dead end after {b''.join(info.token_bytes[i] for i in out)!r}"
        tok = int(rng.choice(ids.tolist()))
        assert m.accept_token(tok)
        if m.is_terminated():
            break
        out.append(tok)
    return m, out


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_plans_complete_every_state(name, info, compiled):
    grammar, parser = compiled[name], Lark(GRAMMARS[name][1], parser="lalr")
    rng, closer = random.Random(7), compiled[name].closer
    for walk in range(12):
        m, ids = uniform_walk(grammar, info, rng, rng.randrange(1, 30), None)
        if m.is_terminated():
            continue
        q, stack, _ = m._history[-1]
        plan = closer.plan(q, stack)
        assert plan is not None, "no completion found"
        for tok in plan:
            assert m.accept_token(tok)
        assert m.is_accepting()
        parser.parse(
            b"".join(info.token_bytes[i] for i in ids + list(plan)).decode("utf-8", "replace")
        )


def test_item_completions_are_as_cheap_as_a_search(info, compiled):
    closer, parser = compiled["sql"].closer, compiled["sql"].parser
    cost = lambda terms: sum(len(closer.spelling[t]) + len(closer.separator) for t in terms)
    rng, compared = random.Random(3), 0
    for _ in range(150):  # random parser walks over acceptable terminals
        stack = parser.start_stack
        for _ in range(rng.randrange(0, 12)):
            terms = sorted(parser.acceptable(stack))
            if terms:  # (none after a complete statement and its ";")
                stack = parser.feed(stack, rng.choice(terms))
        items, searched = closer.completions.complete(stack), closer.search_to_end(stack)
        assert items is not None
        if searched is not None:
            assert cost(items) == cost(searched)
            compared += 1
    assert compared > 100


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walks_under_a_limit_parse(name, info, compiled):
    grammar, parser = compiled[name], Lark(GRAMMARS[name][1], parser="lalr")
    rng, cut_without = random.Random(11), 0
    for limit in (3, 6, 10, 16, 25, 40):
        for _ in range(2):
            m, ids = uniform_walk(grammar, info, rng, limit, limit)
            assert len(ids) <= limit and (m.is_terminated() or m.is_accepting())
            parser.parse(b"".join(info.token_bytes[i] for i in ids).decode("utf-8", "replace"))
            m, _ = uniform_walk(grammar, info, rng, limit, None)
            cut_without += not (m.is_terminated() or m.is_accepting())
    assert cut_without >= 4  # without the limit the same walks are mostly cut off


def test_no_token_lengthens_a_plan_by_the_window(info, compiled):
    """Outside the last WINDOW tokens nothing is checked: sound while no token's own plan is
    WINDOW tokens longer than its state's (every allowed token's outcome, along random walks)."""
    closer, rng, worst = compiled["sql"].closer, random.Random(5), 0
    for _ in range(8):
        m = compiled["sql"].matcher()
        for _ in range(25):
            q, stack, _ = m._history[-1]
            ids = allowed_ids(m, info)
            ids = ids[ids != info.eos_ids[0]]
            if not len(ids):
                break
            outcome_of, outcomes = closer._outcomes_from(q)
            rows = compiled["sql"].vocab.row_of[ids]
            base = len(closer.plan(q, stack))
            for o in np.unique(outcome_of[rows]).tolist():
                worst = max(worst, closer._plan_length(stack, *outcomes[o]) - base)
            assert m.accept_token(int(rng.choice(ids.tolist())))
    assert 0 < worst < WINDOW


def test_a_budget_below_the_shortest_text_keeps_the_closest(info, compiled):
    m = compiled["sql"].matcher()
    m.limit_tokens(1)  # "select *" needs two tokens: the row keeps the first ones that come closest
    ids = allowed_ids(m, info)
    texts = {info.token_bytes[i].strip().lower() for i in ids.tolist()}
    assert len(ids) and texts <= {b"select", b"update", b"delete", b"insert"}

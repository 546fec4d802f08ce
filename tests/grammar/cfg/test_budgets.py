"""No constraint can take the process down: grammars with no finite string are refused when they
compile, and the searches the deadline mask runs on a CFG (cfg.closing) stay within their work
and memory budgets however deep the output nests."""

from __future__ import annotations

import time

import pytest

from radixgen.core import Constraint
from radixgen.grammar.bitmask import allocate_bitmask
from radixgen.grammar.cfg import closing as cfg_closing
from radixgen.grammar.cfg.grammar import compile_cfg
from radixgen.grammar.cfg.search_budget import OutOfBudget, SizedMemo, WorkBudget
from radixgen.grammar.matcher import GrammarError
from tests.grammar.conftest import toy_info

TOY = toy_info([b"", b"a", b"b", b"x", b"y", b"(", b")", b"((", b"))", b" "])
NO_FINITE_STRING = [
    ("lark", 'start: "a" start'),
    ("lark", 'start: start "a"'),
    ("lark", 'start: a\na: "x" b\nb: "y" a'),  # mutual recursion
    ("lark", 'start: "a" | b\nb: "x" b'),  # start is fine: only b is stuck
    ("ebnf", 'root ::= "a" root'),
    ("ebnf", 'root ::= root "a"'),
    ("ebnf", 'root ::= x\nx ::= "x" y\ny ::= "y" x'),
]


@pytest.mark.parametrize("kind, spec", NO_FINITE_STRING)
def test_a_grammar_with_no_finite_string_is_refused(kind, spec):
    constraint = Constraint(kind, spec)
    if spec.startswith('start: "a" | b'):  # a stuck rule beside a productive start compiles
        grammar = compile_cfg(constraint, TOY, precompute=False)
        assert grammar.matcher().accept_token(1)
        return
    start = time.perf_counter()
    with pytest.raises(GrammarError, match="admits no finite string"):
        compile_cfg(constraint, TOY, precompute=False)
    assert time.perf_counter() - start < 10


def _walk(grammar, token: int, count: int, budget: int):
    matcher = grammar.matcher()
    for _ in range(count):
        assert matcher.accept_token(token)
    matcher.limit_tokens(budget)
    row = allocate_bitmask(1, TOY.vocab_size)
    matcher.fill_bitmask(row, 0)
    return {i for i in range(TOY.vocab_size) if row[0, i // 32] >> (i % 32) & 1}


def test_deep_nesting_near_the_limit_closes_without_recursion_limits():
    """3,000 open brackets: a completion reduces once per level (3,000 levels), beyond Python's
    recursion limit; the mask still narrows to the closing brackets."""
    grammar = compile_cfg(Constraint("lark", 'start: "(" start ")" | "x"'), TOY, precompute=False)
    allowed = _walk(grammar, 5, 3000, 1502)  # "x" then 1,500 "))": 1,501 tokens, and no more fit
    assert allowed and allowed <= {3}  # only "x": anything else no longer fits


def test_a_narrow_out_of_budget_leaves_the_row_unnarrowed(monkeypatch):
    grammar = compile_cfg(Constraint("lark", 'start: "(" start ")" | "x"'), TOY, precompute=False)
    full = _walk(grammar, 5, 200, 10_000)
    monkeypatch.setattr(cfg_closing, "_NARROW_UNITS", 50)
    assert _walk(grammar, 5, 200, 150) == full  # gave up narrowing: the plain mask


def test_work_budget_and_sized_memo_bounds():
    parent = WorkBudget(10)
    child = WorkBudget(100, parent)
    child.spend(8)
    with pytest.raises(OutOfBudget) as out:
        child.spend(5)
    assert out.value.budget is parent
    memo = SizedMemo(10)
    for i in range(25):
        memo.put(i, i, 3)
        assert memo.weight <= 10
    assert memo.get(24) == 24 and len(memo) <= 3

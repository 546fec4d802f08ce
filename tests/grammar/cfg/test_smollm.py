"""CFG matchers with the SmolLM2 tokenizer (49k byte-level BPE): seeded random walks produce text
Lark parses; every token of real tokenizations of valid SQL is allowed; invalid ones are not."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch
from lark import Lark

from radixgen.core import Constraint
from radixgen.grammar.cfg.ebnf import ebnf_to_lark
from radixgen.grammar.cfg.grammar import compile_cfg, shipped_grammar
from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.kernels.cpu_vocab_lexer import LONG_ROW
from tests.grammar.conftest import JSON_LARK

MODEL_DIR = os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct")
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not os.path.isdir(MODEL_DIR), reason="embedded model not materialised"),
]

VALID_SQL = [
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name ASC LIMIT 10;",
    "select u.name, count(*) as n from users u left join orders o on u.id = o.user_id "
    "group by u.name having count(*) > 2 order by n desc",
    "SELECT DISTINCT city FROM customers WHERE country IN ('FR', 'DE') AND NOT city LIKE 'B%'",
    "SELECT * FROM products WHERE price BETWEEN 10 AND 20.5 OR stock IS NOT NULL",
    "SELECT name FROM employees WHERE salary > (SELECT AVG(salary) FROM employees)",
    "SELECT a.x, b.y FROM a INNER JOIN b USING (id) WHERE EXISTS (SELECT 1 FROM c WHERE c.id = a.id)",
    "SELECT x FROM (SELECT x FROM t) AS s CROSS JOIN u RIGHT OUTER JOIN v ON s.x = v.x",
    "INSERT INTO logs (level, message) VALUES ('info', 'it''s started'), ('warn', 'slow');",
    "INSERT INTO archive SELECT * FROM logs WHERE level = 'debug'",
    "UPDATE accounts SET balance = balance - 100, updated = 1 WHERE id = 42;",
    "DELETE FROM sessions WHERE expires < 1700000000",
    "SELECT title FROM books UNION ALL SELECT title FROM magazines ORDER BY title LIMIT 5 OFFSET 10",
    "SELECT CASE WHEN score >= 90 THEN 'A' ELSE 'B' END AS grade FROM results",
]
ARITH_GBNF = r"""
# arithmetic, whitespace after every token
root   ::= expr
expr   ::= term (("+" | "-") ws term)*
term   ::= factor (("*" | "/") ws factor)*
factor ::= number ws | "(" ws expr ")" ws
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t]*
"""


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module")
def info(tokenizer):
    return TokenizerInfo.from_hf(tokenizer)


@pytest.fixture(scope="module")
def sql(info):
    return compile_cfg(Constraint("lark", "sql"), info, precompute=False)


def allowed_ids(matcher, info) -> np.ndarray:
    row = torch.zeros(1, (info.vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(row, 0)
    return np.flatnonzero(
        np.unpackbits(row[0].numpy().view(np.uint8), bitorder="little")[: info.vocab_size]
    )


def random_walk(grammar, info, rng: random.Random, max_tokens: int = 48) -> bytes | None:
    """Sample allowed tokens (biased to EOS and short tokens); the text, or None if unfinished."""
    m, out = grammar.matcher(), b""
    eos = set(info.eos_ids)
    for step in range(max_tokens):
        ids = allowed_ids(m, info)
        assert len(ids), f"dead end after {out!r}"
        if eos & set(ids.tolist()) and (rng.random() < 0.2 + step / max_tokens or len(ids) == 1):
            assert m.accept_token(info.eos_ids[0]) and m.is_terminated()
            return out
        sample = [int(i) for i in rng.sample(list(ids), min(32, len(ids))) if int(i) not in eos]
        sample.sort(key=lambda i: len(info.token_bytes[i]) + 3 * rng.random())
        tok = sample[0] if rng.random() < 0.6 else rng.choice(sample)
        assert m.accept_token(tok)
        out += info.token_bytes[tok]
    return None


@pytest.mark.parametrize(
    "name, constraint, lark_text, walks",
    [
        ("sql", Constraint("lark", "sql"), None, 10),
        ("json", Constraint("lark", JSON_LARK), JSON_LARK, 6),
        ("gbnf", Constraint("ebnf", ARITH_GBNF), None, 8),
    ],
)
def test_random_walks_parse(name, constraint, lark_text, walks, info, sql):
    grammar = sql if name == "sql" else compile_cfg(constraint, info, precompute=False)
    text = lark_text or (shipped_grammar("sql") if name == "sql" else ebnf_to_lark(ARITH_GBNF))
    parser = Lark(text, parser="lalr")
    rng, finished = random.Random(1234), 0
    for _ in range(walks):
        out = random_walk(grammar, info, rng)
        if out is not None:
            finished += 1
            parser.parse(out.decode("utf-8"))  # raises if our walk left the language
    assert finished >= walks // 2


@pytest.mark.parametrize("query", VALID_SQL)
def test_real_tokenizations_are_allowed(query, tokenizer, info, sql):
    Lark(shipped_grammar("sql"), parser="lalr").parse(query)
    m = sql.matcher()
    for tok in tokenizer.encode(query):
        assert tok in set(allowed_ids(m, info).tolist()), f"{tokenizer.decode([tok])!r} refused"
        assert m.accept_token(tok)
    assert info.eos_ids[0] in allowed_ids(m, info)
    assert m.accept_token(info.eos_ids[0])


@pytest.mark.parametrize(
    "prefix, bad",
    [
        ("SELECT", ";"),  # no select list
        ("SELECT a FROM", ";"),
        ("SELECT a FROM t WHERE", ")"),
        ("INSERT INTO t", " WHERE"),  # " WHERE" can become neither a keyword nor a name here
        ("SELECT a,", ","),
        ("UPDATE t SET a", ","),
        ("DELETE FROM t", " SET"),
        ("SELECT a FROM t WHERE b IN (1, 2", " FROM"),
    ],
)
def test_invalid_tokens_are_rejected(prefix, bad, tokenizer, info, sql):
    m = sql.matcher()
    ids = tokenizer.encode(prefix)
    assert all(m.accept_token(t) for t in ids)
    (bad_id,) = tokenizer.encode(bad)
    assert bad_id not in set(allowed_ids(m, info).tolist())
    assert not m.accept_token(bad_id) and m.num_accepted == len(ids)
    assert (
        (info.eos_ids[0] in allowed_ids(m, info)) == (prefix == "DELETE FROM t") == m.is_accepting()
    )


def test_keywords_are_not_identifiers(tokenizer, info, sql):
    m = sql.matcher()
    assert all(m.accept_token(t) for t in tokenizer.encode("SELECT a FROM"))
    (select_id,) = tokenizer.encode(" select")
    assert m.accept_token(select_id)  # may still become "selected"
    assert info.eos_ids[0] not in allowed_ids(m, info)
    assert m.accept_token(tokenizer.encode("ed")[0]) and m.is_accepting()


@pytest.mark.parametrize(
    "name, text, end",
    [
        ("sql", "SELECT a FROM t;", ";"),
        ("json", '{"a": [1, 2]}', "}"),
    ],
)
def test_finished_parse_allows_only_eos(name, text, end, tokenizer, info, sql):
    """Once only the end of input may follow, %ignore'd whitespace is refused too (else a model
    pads its answer with newlines up to max_new_tokens); before that, whitespace is allowed."""
    grammar = (
        sql if name == "sql" else compile_cfg(Constraint("lark", JSON_LARK), info, precompute=False)
    )
    m = grammar.matcher()
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids[-1:]).endswith(end)
    assert all(m.accept_token(t) for t in ids[:-1])
    spaces = [tokenizer.encode(s)[0] for s in (" ", "\n", "\n\n")]
    assert set(spaces) <= set(allowed_ids(m, info).tolist())  # more may follow here
    assert m.accept_token(ids[-1])
    assert allowed_ids(m, info).tolist() == sorted(info.eos_ids)
    assert not any(m.accept_token(s) for s in spaces) and m.is_accepting()
    assert m.accept_token(info.eos_ids[0]) and m.is_terminated()


def _trie_groups(trie) -> dict:
    """Every node's groups: path -> (types, always, per-group id sets, all ids)."""

    def ids(part):
        short, row, _ = part
        if short is not None:
            return frozenset(np.frombuffer(short, dtype=np.intp).tolist())
        return frozenset(
            np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist()
        )

    out, todo = {}, [((), trie)]
    while todo:
        path, node = todo.pop()
        if node.num_groups:
            out[path] = (
                node.group_types,
                node.always,
                tuple(ids(p) for p in node.group_parts),
                ids(node.whole),
            )
        todo += [(path + (t,), child) for t, child in node.children.items()]
    return out


def _row_outcomes(found) -> list:
    """Each row's (final state, completed types) (the shortest completions' per-token outcomes)."""
    outcome_of, outcomes = found
    return [outcomes[o] for o in outcome_of.tolist()]


@pytest.mark.parametrize("name", ["sql", "json_schema"])
def test_vocabulary_index_is_the_same_with_the_c_lexer(name, info, sql):
    # the C lexer (kernels/cpu_vocab_lexer) and numpy's column-at-a-time lexing index every
    # lexer state alike: SQL's keyword prefixes, JSON's keys and values (long runs of brackets
    # complete more terminals than one sequence key holds)
    if name == "sql":
        grammar = sql
    else:
        from radixgen.grammar.compiler import GrammarCompiler
        from tests.grammar.json_grammar.test_cfg import _too_large_schema

        grammar = GrammarCompiler(info).compile(
            Constraint("json_schema", json.dumps(_too_large_schema()))
        )
    vocab = grammar.vocab
    assert vocab.uses_kernel()
    states = range(1, grammar.lexer.num_states, 4 if name == "sql" else 1)
    assert any((vocab._kernel.lex(q).row_group == LONG_ROW).any() for q in states)
    with_c = [_trie_groups(vocab.index(q)) for q in states]
    outcomes_c = [_row_outcomes(vocab.final_outcomes(q)) for q in states[:12]]
    vocab._kernel = False  # numpy from here on
    try:
        assert [_trie_groups(vocab.index(q)) for q in states] == with_c
        assert [_row_outcomes(vocab.final_outcomes(q)) for q in states[:12]] == outcomes_c
    finally:
        vocab._kernel = None
    assert sum(len(groups) for groups in with_c) > len(states)

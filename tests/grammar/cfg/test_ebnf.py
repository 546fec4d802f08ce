"""GBNF -> Lark conversion: syntax, errors with positions, and matching through compile_cfg."""

from __future__ import annotations

import pytest
from lark import Lark
from lark.exceptions import LarkError

from radixgen.core import Constraint
from radixgen.grammar.cfg.ebnf import ebnf_to_lark
from radixgen.grammar.cfg.grammar import compile_cfg
from radixgen.grammar.matcher import GrammarError
from tests.grammar.cfg.test_toy import EOS, toy_info

LIST_GBNF = r"""
root ::= "[" ws (item ("," ws item)*)? "]"   # a list
item ::= word ws | "'" [^'\n]* "'" ws | root ws
word ::= [a-z]+ ("-" [a-z]+)?
ws ::= [ \t]*
"""


def parses(gbnf: str, text: str) -> bool:
    try:
        Lark(ebnf_to_lark(gbnf), parser="lalr").parse(text)
        return True
    except LarkError:
        return False


def test_conversion_is_equivalent_on_examples():
    for text in ["[]", "[ ]", "[ab]", "[ab-cd , 'x y' ,ef]", "['']", "[[a, []], b]"]:
        assert parses(LIST_GBNF, text), text
    for text in ["[", "[ab,]", "[ab-]", "['a]", "[AB]", "x"]:
        assert not parses(LIST_GBNF, text), text


def test_regular_runs_become_terminals():
    lark = ebnf_to_lark(LIST_GBNF)
    assert "r_item:" in lark and "start T_R_WS?" in lark  # nullable ws: non-empty terminal + ?
    assert "r_word:" not in lark and "T_ANON_" in lark  # `"'" [^'\n]* "'" ws` is one word


def test_repetition_counts_and_escapes():
    gbnf = r'root ::= "\x41" [0-9]{2,3} "\n"? ("-" | "+"){1,} tail' + "\ntail ::= .?"
    for text, ok in [
        ("A12-", True),
        ("A123+-x", True),
        ("A1-", False),
        ("A1234-", False),
        ("A12\n+", True),
        ("A12", False),
    ]:
        assert parses(gbnf, text) == ok, text


@pytest.mark.parametrize(
    "bad, where",
    [
        ('root ::= "abc', 9),
        ('root ::= ("a" | "b"', 19),
        ("root ::= [a-z", 9),
        ('x ::= "a"', None),
        ("root ::= undefined-rule", 9),
        ('root ::= "a"\nroot ::= "b"', 13),
        ('root ::= "a" {3,1}', 13),
    ],
)
def test_syntax_errors_name_the_position(bad, where):
    with pytest.raises(GrammarError) as info:
        ebnf_to_lark(bad)
    assert isinstance(info.value, ValueError)
    if where is not None:
        assert f"position {where}" in str(info.value)


def test_gbnf_constraint_matches_tokens():
    info = toy_info(["[", "]", "ab", " ", ", ", "'x'", "-c", "[ab]"])
    g = compile_cfg(Constraint("ebnf", LIST_GBNF), info, precompute=False)
    ids = {b.decode(): i for i, b in enumerate(info.token_bytes) if b}
    m = g.matcher()
    for piece in ["[", "ab", "-c", ", ", "'x'", " ", "]"]:
        assert m.accept_token(ids[piece]), piece
    assert m.accept_token(EOS)
    m = g.matcher()
    assert m.accept_token(ids["[ab]"]) and m.is_accepting()
    assert not g.matcher().accept_token(ids["ab"])

"""CFG matcher on toy vocabularies: tokens spanning terminals, lexer ambiguity, %ignore,
priorities, EOS, rollback, fork, jump-forward; differential checks against Lark itself."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch
from lark import Lark
from lark.exceptions import LarkError

from radixgen.core import Constraint
from radixgen.grammar.cfg.grammar import compile_cfg
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.tokenizer_info import TokenizerInfo

EOS = 0


def toy_info(pieces: list[str]) -> TokenizerInfo:
    """Token 0 is EOS (special); token i is pieces[i - 1]."""
    token_bytes = (b"",) + tuple(p.encode() for p in pieces)
    return TokenizerInfo(token_bytes, (EOS,), frozenset({EOS}), len(token_bytes), name="toy")


def allowed(matcher, info: TokenizerInfo) -> set[str]:
    row = torch.zeros(1, (info.vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(row, 0)
    bits = np.unpackbits(row[0].numpy().view(np.uint8), bitorder="little")[: info.vocab_size]
    return {"<eos>" if i == EOS else info.token_bytes[i].decode() for i in np.flatnonzero(bits)}


def feed(matcher, info: TokenizerInfo, pieces: list[str]) -> bool:
    ids = {b.decode(): i for i, b in enumerate(info.token_bytes) if b}
    return all(matcher.accept_token(EOS if p == "<eos>" else ids[p]) for p in pieces)


CALLS = r"""
start: call ("," call)*
call: NAME "(" (NAME ("," NAME)*)? ")"
NAME: /[a-z]+/
%ignore " "
"""
SELECT = r"""
start: "select"i NAME ("," NAME)* ("from"i NAME)? ";"?
NAME: /[A-Za-z_][A-Za-z0-9_]*/
%import common.WS
%ignore WS
"""


def compile_toy(grammar: str, pieces: list[str]):
    info = toy_info(pieces)
    return compile_cfg(Constraint("lark", grammar), info, precompute=False), info


def test_token_spanning_several_terminals():
    g, info = compile_toy(CALLS, ["f", "(", "a", "),", "g", "()", ")", ",", "x)", "(a,b),", " "])
    m = g.matcher()
    assert feed(m, info, ["f", "(", "a", "),", "g", "()"])
    assert m.is_accepting()
    m2 = g.matcher()
    assert feed(m2, info, ["f", "(a,b),", "g", "(", "x)"])
    assert allowed(m2, info) == {"<eos>", ",", " ", "),"} - {"),"}
    assert not m2.accept_token(info.token_bytes.index(b"),"))


def test_space_and_keyword_in_one_token_and_ignore():
    g, info = compile_toy(
        SELECT, ["SELECT", " a", " FROM", " from", " b", ";", " ", "  ", "a", ",", " ,"]
    )
    m = g.matcher()
    assert feed(m, info, ["SELECT", " a", " FROM", " b", ";", "<eos>"])
    assert m.is_terminated() and allowed(m, info) == set()
    m = g.matcher()
    assert feed(m, info, ["SELECT", "  ", " ", "a", " ,", " ", "a", " from", " b", " "])
    assert "<eos>" in allowed(m, info)


def test_keyword_versus_identifier_prefixes():
    pieces = ["select", " ", "sel", "ect", "x", ";", "from", " from"]
    g, info = compile_toy(SELECT, pieces)
    m = g.matcher()
    assert feed(m, info, ["select", " "])
    assert {"sel", "select", "x", "from"} <= allowed(m, info)  # prefixes of identifiers
    assert feed(m, info, ["select"])  # "select" may still become "selectx"
    assert "<eos>" not in allowed(m, info) and ";" not in allowed(m, info)
    assert feed(m, info, ["x"])  # now it is the identifier "selectx"
    assert {"<eos>", ";", " from"} <= allowed(m, info)
    m = g.matcher()
    assert feed(m, info, ["sel", "ect", " ", "from"])  # "from" may still become "fromx"
    assert "<eos>" not in allowed(m, info) and "x" in allowed(m, info)


@functools.lru_cache(maxsize=None)
def _lark(grammar: str, lexer: str) -> Lark:
    return Lark(grammar, parser="lalr", lexer=lexer)


def _lark_accepts(grammar: str, text: str, lexer: str = "contextual") -> bool:
    try:
        _lark(grammar, lexer).parse(text)
        return True
    except LarkError:
        return False


def _ours_accepts(g, info, text: str) -> bool:
    m = g.matcher()
    ids = {b.decode(): i for i, b in enumerate(info.token_bytes) if b}
    return all(m.accept_token(ids[c]) for c in text) and m.accept_token(EOS)


@pytest.mark.parametrize(
    "grammar, alphabet",
    [
        (
            r"""start: KW NAME | NAME
         KW.2: "ab"
         NAME: /[a-z]+/""",
            "abc",
        ),
        (
            r"""start: (INT | FLOAT) ("+" (INT | FLOAT))*
         INT: /[0-9]+/
         FLOAT: /[0-9]+\.[0-9]+/""",
            "1.+",
        ),
        (
            r"""start: ESCAPED_STRING+
         %import common.ESCAPED_STRING
         %ignore " " """,
            'a"\\ ',
        ),
        (SELECT, "se ,;"),
    ],
)
def test_differential_against_lark(grammar: str, alphabet: str):
    """Every string we accept (bytes fed one at a time) Lark parses (with its default contextual
    lexer and with the basic lexer we emulate); we refuse a basic-lexer string only where Lark's
    regex engine would give bytes back."""
    g, info = compile_toy(grammar, list(alphabet))
    disagreements = []
    for n in range(1, 6):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            ours, basic = _ours_accepts(g, info, text), _lark_accepts(grammar, text, "basic")
            assert not ours or (basic and _lark_accepts(grammar, text)), f"accepted {text!r}"
            if basic and not ours:
                disagreements.append(text)
    # conservative refusals only where Lark would have to give bytes back (e.g. "1." + "+")
    assert all("." in t or '"' in t for t in disagreements), disagreements[:10]


def test_priorities_decide_between_terminals():
    g, info = compile_toy(
        r"""start: KW NAME | NAME
        KW.2: "ab"
        NAME: /[a-z]+/""",
        ["ab", "c", "abc", "a"],
    )
    m = g.matcher()
    assert feed(m, info, ["abc"])  # KW "ab" then NAME "c", as Lark lexes it
    assert "<eos>" in allowed(m, info)
    m = g.matcher()
    assert feed(m, info, ["ab"]) and "<eos>" not in allowed(m, info)  # KW alone is not a start


def test_rollback_fork_eos():
    g, info = compile_toy(CALLS, ["f", "(", ")", ",", "a"])
    m = g.matcher()
    assert feed(m, info, ["f", "(", ")"])
    child = m.fork()
    assert feed(child, info, [",", "a"]) and not child.is_accepting()
    assert m.is_accepting() and allowed(m, info) == {"<eos>", ","}
    assert not m.accept_token(info.token_bytes.index(b"a"))  # rejected, state unchanged
    assert m.accept_token(EOS) and m.is_terminated()
    assert not m.accept_token(EOS)
    m.rollback(2)
    assert not m.is_terminated() and allowed(m, info) == {"a", "f", ")"}
    with pytest.raises(ValueError):
        m.rollback(5)
    assert feed(child, info, ["(", ")", "<eos>"]) and child.is_terminated()


def test_jump_forward_only_when_forced():
    g, info = compile_toy(
        r"""start: "hi" "!" NAME
        NAME: /[a-z]+/""",
        ["hi", "!", "h", "i", "x", "y"],
    )
    m = g.matcher()
    assert m.jump_forward_token_ids() == []  # "hi" or "h"
    assert feed(m, info, ["h", "i"])
    assert m.jump_forward_token_ids() == [info.token_bytes.index(b"!")]
    assert m.num_accepted == 2  # jump-forward does not accept
    assert feed(m, info, ["!"]) and m.jump_forward_token_ids() == []


def test_bitmask_row_and_padding_columns():
    g, info = compile_toy(CALLS, ["f", "("])
    bitmask = torch.full((2, 4), -1, dtype=torch.int32)
    g.matcher().fill_bitmask(bitmask, 1)
    assert bitmask[0].eq(-1).all() and bitmask[1, 1:].eq(0).all()
    assert int(bitmask[1, 0]) == 0b010  # only "f": "(" and EOS are not allowed yet


def test_bad_grammars_raise_grammar_error():
    info = toy_info(["a"])
    with pytest.raises(GrammarError):
        compile_cfg(Constraint("lark", "start: (("), info)
    with pytest.raises(GrammarError):
        compile_cfg(Constraint("lark", "no_such_grammar"), info)
    with pytest.raises(GrammarError, match="terminal"):
        compile_cfg(Constraint("lark", "start: A\nA: /a(?=b)/"), info)


def test_parse_tables_agree_with_lark_interactive_parser():
    from radixgen.grammar.cfg.grammar import build_lark, shipped_grammar
    from radixgen.grammar.cfg.parser import END, LalrTables

    lark = build_lark(shipped_grammar("sql"), cache=True)
    tables = LalrTables(lark)
    ip = lark.parse_interactive(
        "SELECT a, COUNT(*) FROM t WHERE b IN (1, 2) ORDER BY a DESC LIMIT 3"
    )
    stack = tables.start_stack
    for token in ip.iter_parse():  # yields each token before feeding it
        assert list(stack) == ip.parser_state.state_stack
        ours = tables.acceptable(stack) | ({END} if tables.accepts_end(stack) else set())
        assert ours == ip.accepts()
        stack = tables.feed(stack, token.type)
    assert tables.accepts_end(stack)

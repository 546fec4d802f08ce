"""RegexMatcher on toy vocabularies: accept, EOS, rollback, fork, bitmask rows, jump-forward."""

import pytest

from radixgen.core import Constraint
from radixgen.grammar.bitmask import allocate_bitmask, unpack_row
from radixgen.grammar.compiler import GrammarCompiler
from tests.grammar.conftest import toy_info

# id:  0     1     2     3     4      5     6       7      8     9     10
PIECES = [b"", b"a", b"b", b"c", b"ab", b"{", b'{"k', b'":', b'"', b"k", b":"]
EOS = 0


@pytest.fixture(scope="module")
def info():
    return toy_info(PIECES)


@pytest.fixture(scope="module")
def compiler(info):
    return GrammarCompiler(info)


def _allowed(matcher, info):
    bitmask = allocate_bitmask(2, info.vocab_size)
    matcher.fill_bitmask(bitmask, 1)
    assert bitmask[0].eq(-1).all()  # other rows untouched
    return set(unpack_row(bitmask[1], info.vocab_size).tolist())


def test_accept_and_eos(compiler, info):
    matcher = compiler.compile(Constraint("regex", "a+b")).matcher()
    assert _allowed(matcher, info) == {1, 4}
    assert not matcher.accept_token(EOS)  # not accepting yet
    assert not matcher.accept_token(2)  # rejected: state unchanged
    assert matcher.accept_token(1)
    assert _allowed(matcher, info) == {1, 2, 4}
    assert matcher.accept_token(2)
    assert _allowed(matcher, info) == {EOS}  # accepting, nothing else: EOS only
    assert not matcher.is_terminated()
    assert matcher.accept_token(EOS)
    assert matcher.is_terminated()
    assert _allowed(matcher, info) == set()
    assert not matcher.accept_token(1)


def test_eos_allowed_with_continuations(compiler, info):
    # outlines-core alone drops "b" here (leftmost-first matching); the end sentinel keeps it
    matcher = compiler.compile(Constraint("regex", "a(bc)*")).matcher()
    assert _allowed(matcher, info) == {1, 4}
    assert matcher.accept_token(1)
    assert _allowed(matcher, info) == {EOS, 2}
    assert matcher.accept_token(2) and _allowed(matcher, info) == {3}


def test_alternation_keeps_every_branch(compiler, info):
    matcher = compiler.compile(Constraint("regex", "a|ab")).matcher()
    assert _allowed(matcher, info) == {1, 4}
    assert matcher.accept_token(1) and _allowed(matcher, info) == {EOS, 2}


def test_rollback(compiler, info):
    matcher = compiler.compile(Constraint("regex", "a+b")).matcher()
    for token in (1, 1, 2, EOS):
        assert matcher.accept_token(token)
    matcher.rollback(2)  # undo b and EOS
    assert not matcher.is_terminated()
    assert _allowed(matcher, info) == {1, 2, 4}
    with pytest.raises(ValueError):
        matcher.rollback(3)
    matcher.rollback(2)
    assert matcher.num_accepted == 0


def test_fork_is_independent(compiler, info):
    matcher = compiler.compile(Constraint("regex", "a+b")).matcher()
    matcher.accept_token(1)
    child = matcher.fork()
    assert child.accept_token(2) and child.accept_token(EOS)
    assert not matcher.is_terminated()
    assert _allowed(matcher, info) == {1, 2, 4}
    child.rollback(2)
    assert _allowed(child, info) == {1, 2, 4}


def test_jump_forward_single_token_states(compiler, info):
    matcher = compiler.compile(Constraint("regex", "cc(a|b)")).matcher()
    assert matcher.jump_forward_token_ids() == [3, 3]
    assert matcher.jump_forward_string() == "cc"
    for token in matcher.jump_forward_token_ids():
        assert matcher.accept_token(token)
    assert matcher.jump_forward_token_ids() == []


def test_jump_forward_string_spans_competing_tokens(compiler, info):
    matcher = compiler.compile(Constraint("regex", '\\{"k":(a|b)')).matcher()
    assert matcher.jump_forward_token_ids() == []  # "{" and '{"k' compete
    assert matcher.jump_forward_string() == '{"k":'


def test_not_forced_when_eos_is_allowed(compiler, info):
    matcher = compiler.compile(Constraint("regex", "c(c)?")).matcher()
    matcher.accept_token(3)
    assert matcher.jump_forward_token_ids() == []


def test_padding_columns_never_allowed():
    info = toy_info(PIECES)
    wide = type(info)(info.token_bytes, info.eos_ids, info.special_ids, 40, name="wide")
    matcher = GrammarCompiler(wide).compile(Constraint("regex", "a")).matcher()
    bitmask = allocate_bitmask(1, 40)
    matcher.fill_bitmask(bitmask, 0)
    assert set(unpack_row(bitmask[0], 64).tolist()) == {1}


def test_reset(compiler):
    matcher = compiler.compile(Constraint("regex", "ab")).matcher()
    matcher.accept_token(4)
    matcher.reset()
    assert matcher.num_accepted == 0 and matcher.accept_token(1)


def test_byte_tokens_cannot_spell_the_end_sentinel():
    # every regex is compiled with a private-use end sentinel (see index.token_index.OutlinesVocab);
    # byte tokens that could spell it must not become allowed after a complete match
    info = toy_info([b"", b"a", b"\xee", b"\x80", "\ue000".encode()[:2]])
    matcher = GrammarCompiler(info).compile(Constraint("regex", "a")).matcher()
    assert matcher.accept_token(1)
    assert _allowed(matcher, info) == {EOS}
    assert not matcher.accept_token(2) and not matcher.accept_token(4)

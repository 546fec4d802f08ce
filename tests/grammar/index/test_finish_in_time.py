"""Finishing within max_new_tokens: a regex / JSON Schema matcher told how many tokens are left
(`limit_tokens`) keeps, in its last tokens, to those from which a complete match is still within
reach, so an output that would be cut off mid-value closes instead."""

import json
import random

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.bitmask import allocate_bitmask, unpack_row
from radixgen.grammar.compiler import GrammarCompiler
from tests.grammar.conftest import toy_info
from tests.grammar.schemas import SUPPORTED

# id:  0    1     2     3     4     5      6
PIECES = [b"", b'"', b"a", b"b", b"ab", b'a"', b"abc"]
EOS = 0


@pytest.fixture(scope="module")
def toy():
    """The toy vocabulary and a compiler over it."""
    info = toy_info(PIECES)
    return info, GrammarCompiler(info)


def _allowed(matcher, info) -> set[int]:
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    return set(unpack_row(bitmask[0], info.vocab_size).tolist())


def test_last_tokens_close_the_string(toy):
    info, compiler = toy
    grammar = compiler.compile(Constraint("regex", '"[ab]*"'))
    matcher = grammar.matcher()
    matcher.limit_tokens(4)
    assert matcher.accept_token(1)  # '"', 3 tokens left
    assert _allowed(matcher, info) == {1, 2, 3, 4, 5}  # anything still closes in time
    assert matcher.accept_token(2) and matcher.accept_token(2)  # 1 token left
    assert _allowed(matcher, info) == {1, 5}  # only tokens that end the string
    assert matcher.accept_token(5) and _allowed(matcher, info) == {EOS}


def test_unlimited_and_unreachable_budgets(toy):
    info, compiler = toy
    grammar = compiler.compile(Constraint("regex", 'abab"'))
    assert _allowed(grammar.matcher(), info) == {2, 4}
    matcher = grammar.matcher()
    matcher.limit_tokens(1)  # three tokens needed at least: the ones that come closest
    assert _allowed(matcher, info) == {4}  # "ab" leaves 2 tokens to go, "a" 3
    index = grammar.index
    assert index.distance(index.initial_state) == 3


def test_fork_and_rollback_keep_the_limit(toy):
    info, compiler = toy
    grammar = compiler.compile(Constraint("regex", '"[ab]*"'))
    matcher = grammar.matcher()
    matcher.limit_tokens(3)
    assert matcher.accept_token(1) and matcher.accept_token(2)
    assert _allowed(matcher, info) == {1, 5}
    fork = matcher.fork()
    assert _allowed(fork, info) == {1, 5}
    matcher.rollback(1)
    assert _allowed(matcher, info) == {1, 2, 3, 4, 5}


def test_keep_closest_narrows_a_row_to_the_nearest_ends(toy):
    """The fallback where a guard bans every token that finishes in time: of the tokens it
    leaves, those after which a complete match is nearest."""
    info, compiler = toy
    matcher = compiler.compile(Constraint("regex", '"[ab]*"')).matcher()
    assert matcher.accept_token(1)
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    words = bitmask.numpy()[0]
    matcher.keep_closest(words)
    assert set(unpack_row(bitmask[0], info.vocab_size).tolist()) == {1, 5}  # '"' and 'a"' end it
    words[:] = 0
    words[0] = (1 << 2) | (1 << 4)  # "a", "ab": one token from the end either way
    matcher.keep_closest(words)
    assert set(unpack_row(bitmask[0], info.vocab_size).tolist()) == {2, 4}


def _stubborn_walk(grammar, info, limit: int, seed: int) -> str:
    """A walk that never ends by choice: it takes a random allowed token that is neither EOS nor
    one that completes a match, until only such tokens are left."""
    rng, matcher = random.Random(seed), grammar.matcher()
    matcher.limit_tokens(limit)
    bitmask = allocate_bitmask(1, info.vocab_size)
    ids = []
    while len(ids) < limit:
        matcher.fill_bitmask(bitmask, 0)
        allowed = [int(t) for t in unpack_row(bitmask[0], info.vocab_size) if t not in info.eos_ids]
        if not allowed:
            break
        rng.shuffle(allowed)
        token = next((t for t in allowed if not _completes(matcher, t)), allowed[0])
        assert matcher.accept_token(token)
        ids.append(token)
    assert matcher.is_accepting(), b"".join(info.token_bytes[i] for i in ids)
    return b"".join(info.token_bytes[i] for i in ids).decode()


def _completes(matcher, token: int) -> bool:
    probe = matcher.fork()
    return probe.accept_token(token) and probe.is_accepting()


@pytest.mark.parametrize(
    "name",
    [
        "flat",
        "nested",
        "array_of_objects",
        "additional_schema",
        "json_object",
        "recursive_optional",
        "pattern_two_repeats",
        "format_uri",
    ],
)
def test_walks_that_refuse_to_end_still_validate(small_compiler, small_info, name):
    """Under every limit from the shortest output's length up, a walk that avoids ending ends
    within the limit, and its output validates."""
    grammar = small_compiler.compile(Constraint("json_schema", json.dumps(SUPPORTED[name])))
    shortest = grammar.index.distance(grammar.index.initial_state)
    for limit in range(shortest, shortest + 12, 3):
        text = _stubborn_walk(grammar, small_info, limit, seed=limit)
        jsonschema.validate(json.loads(text), SUPPORTED[name])


def test_unique_items_guard_with_a_limit(small_compiler, small_info):
    """The uniqueness guard bans repeats on top of the narrowed row; where it would ban every
    token that finishes in time, the matcher falls back to the unnarrowed row (never an empty
    mask)."""
    schema = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}
    grammar = small_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for limit in (3, 5, 9, 14):
        text = _stubborn_walk(grammar, small_info, limit, seed=limit)
        jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize("name", ["nested", "recursive_optional", "pattern_two_repeats"])
def test_both_readings_of_an_automaton_agree(small_info, name):
    """A small automaton is read from outlines-core's whole transition table, a large one a
    state at a time: the tables, distances and forced tokens are the same either way."""
    from radixgen.grammar.index.token_index import build_index
    from radixgen.grammar.json_schema import schema_to_regex

    regex = schema_to_regex(json.dumps(SUPPORTED[name]))
    bulk, streamed = build_index(regex, small_info, entries=0), build_index(regex, small_info)
    assert bulk._row_of.keys() == streamed._row_of.keys() and len(bulk._row_of) > 3
    for state in bulk._row_of:
        assert (bulk.row(state) == streamed.row(state)).all()
        assert bulk.distance(state) == streamed.distance(state)
        assert bulk.is_accepting(state) == streamed.is_accepting(state)
        assert bulk.single_token(state) == streamed.single_token(state)
        assert bulk.forced_bytes(state) == streamed.forced_bytes(state)

"""cfg.dfa's byte DFAs: the language of each regex (against Python's `re` on sampled texts),
minimality (Hopcroft's partition against Moore's refinement written here), and counted repeats
long enough that Moore's rounds were the cost."""

import random
import re
import time

import pytest

from radixgen.grammar.cfg.dfa import compile_regex

REGEXES = [
    r"a|ab|abc",
    r"(a|b)*a(a|b){3}",
    r"[a-c]{2,5}x?",
    r"(ab|a)(bc|c)*",
    r"x[^/].{0,12}",
    r"([^~]*(~[01])*){1,4}",
    r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"(a+|b+)*c{0,3}",
    r"\d{2}-\d{2}|\d{4}",
    r"[a-z]+[a-z0-9]{1,6}",
    r"(?:a|b|)c*",
]
ALPHABET = "abcx/~01.9-eE+z"


def _matches(dfa, text: bytes) -> bool:
    state = 0
    for b in text:
        state = dfa.trans[state][b]
        if state < 0:
            return False
    return state in dfa.accepting


def _moore_blocks(dfa) -> int:
    """The number of states Moore's refinement leaves (the reference for minimality)."""
    block = [1 if s in dfa.accepting else 0 for s in range(len(dfa.trans))]
    while True:
        sigs = {}
        new = [
            sigs.setdefault((block[s], tuple(block[t] if t >= 0 else -1 for t in row)), len(sigs))
            for s, row in enumerate(dfa.trans)
        ]
        if len(sigs) == len(set(block)):
            return len(sigs)
        block = new


@pytest.mark.parametrize("regex", REGEXES)
def test_the_dfa_matches_what_python_re_fullmatches_and_is_minimal(regex):
    dfa = compile_regex(regex)
    rng = random.Random(regex)
    compiled = re.compile(regex)
    texts = {"".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12))) for _ in range(3000)}
    texts |= {"abc", "ab", "a", "", "12-34", "1234", "x/abc", "aaaa", "aabba"}
    for text in texts:
        assert _matches(dfa, text.encode()) == bool(compiled.fullmatch(text)), (regex, text)
    assert _moore_blocks(dfa) == len(dfa.trans)
    assert all(
        any(t >= 0 for t in row) or s in dfa.accepting for s, row in enumerate(dfa.trans)
    )  # no dead states


def test_long_counted_repeats_minimize_fast():
    """`.{0,1023}` (an ARN's tail in CloudFormation schemas): a thousand-state chain."""
    start = time.perf_counter()
    dfa = compile_regex(r"arn:[^/].{0,1023}")
    assert time.perf_counter() - start < 20
    assert _matches(dfa, b"arn:x" + b"y" * 1023) and not _matches(dfa, b"arn:x" + b"y" * 1024)
    assert not _matches(dfa, b"arn:/")
    chain = compile_regex(r"[^/][a-z]{0,60}")  # (a chain: Moore's rounds are its length)
    assert _moore_blocks(chain) == len(chain.trans)

"""Patterns anchored at one end only are opened at the other (regex.open_ends): the opened
pattern's full matches are exactly the strings the original finds, where it opens every
alternative, and never a string it does not find."""

import itertools
import re

import pytest

from radixgen.grammar.regex.open_ends import open_ends

ALPHABET = "ab/x"
STRINGS = ["".join(p) for n in range(6) for p in itertools.product(ALPHABET, repeat=n)]


@pytest.mark.parametrize(
    ("pattern", "opened"),
    [
        ("^ab", r"^ab[\s\S]*"),
        ("b/$", r"[\s\S]*b/$"),
        ("^a|b$", r"^a[\s\S]*|[\s\S]*b$"),
        ("^a+", r"^a[\s\S]*"),  # a repeat at the open end: its least count
        ("^ab{2,9}?", r"^ab{2}[\s\S]*"),
        ("[ab]*x{1,1000}/$", r"[\s\S]*x/$"),  # cut until a piece stays
        ("(a|b)/$", r"[\s\S]*(a|b)/$"),
        ("^a\\x41*", r"^a[\s\S]*"),  # an escape of a code is one character
    ],
)
def test_opened(pattern, opened):
    assert open_ends(pattern) == opened


@pytest.mark.parametrize(
    "pattern",
    [
        "^[ab]+$",
        "ab",
        "",  # both ends, or neither: their full matches
        "(ab)+/$",
        "^a(b/)*",  # a group with a repeat at the free end
        "x[ab]{1,64}/$",  # a large count behind an open start
    ],
)
def test_left_as_written(pattern):
    assert open_ends(pattern) == pattern


@pytest.mark.parametrize(
    "pattern",
    [
        "^ab",
        "b/$",
        "^a|b$",
        "^a+",
        "[ab]*x{1,3}/$",
        "(a|b)/$",
        "^(ab|x)",
        "^x|ab|/$",
        "a{2}$",
        "^a?b*",
    ],
)
def test_full_matches_are_what_the_pattern_finds(pattern):
    opened = open_ends(pattern)
    every_one_opened = all("^" in alt or "$" in alt for alt in pattern.split("|"))
    for s in STRINGS:
        found, full = re.search(pattern, s) is not None, re.fullmatch(opened, s) is not None
        assert found or not full, (s, opened)  # never a string the pattern does not find
        if every_one_opened:
            assert found == full, (s, opened)

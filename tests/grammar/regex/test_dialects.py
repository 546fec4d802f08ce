"""Patterns written for Python, Java or PCRE in the syntax the translation reads (regex.dialects):
Python's string anchors as ^ and $, Java's inline (?i) spelt as classes of both cases, valid
under Java's ASCII reading and Python's Unicode one."""

import itertools
import json
import re

import pytest

from radixgen.core import Constraint
from radixgen.grammar.regex.dialects import caret_dollar, case_spelt
from tests.grammar.walks import accepts_text, random_walk


@pytest.mark.parametrize(
    ("pattern", "spelt"),
    [
        ("\\A[a-z]+\\Z", "^[a-z]+$"),
        ("\\\\A", "\\\\A"),  # an escaped backslash, then a letter
        ("[\\A\\Z]x\\Z", "[\\A\\Z]x$"),  # in a class: not anchors
        ("a|\\Ab", "a|^b"),
    ],
)
def test_string_anchors_are_caret_and_dollar(pattern, spelt):
    assert caret_dollar(pattern) == spelt
    for s in ["".join(p) for n in range(5) for p in itertools.product("abAZ", repeat=n)]:
        if "[" not in pattern:  # (Python reads them alike on strings without newlines)
            assert (re.search(pattern, s) is None) == (re.search(spelt, s) is None), s


@pytest.mark.parametrize(
    ("pattern", "spelt"),
    [
        (
            "^(?!(?i)aws)[A-Za-z0-9]{2,64}$",
            "^(?![aA][wW][sS\u017f])[A-Za-z0-9]{2,64}$",
        ),  # CloudFormation's
        ("^(?i:ab)c$", "^(?:[aA][bB])c$"),
        ("(?i)^a[b-d]$", "^[aA][b-dBCD]$"),
        ("x(?i)[^k]", "x[^kK\u212a]"),  # a negated class outside a negative lookaround: wide
        ("(?!(?i)[^s])", "(?![^sS])"),  # inside one: narrow
        ("(a(?i)b|c)d", "(a[bB]|[cC])d"),  # to the end of the enclosing group, across its |
        ("(?P<n>(?i)x)", "(?P<n>[xX])"),
        ("(?i)\\p{Lower}", "(?i)\\p{Lower}"),  # left as written (then refused)
        ("(?s)(?i)a", "(?s)(?i)a"),
        ("^[a-z]+$", "^[a-z]+$"),
        ("(?i)\u00e9", "\u00e9"),  # a non-ASCII letter: as written where a subset is safe,
        (
            "(?!(?i)\u00e9)",
            "(?!(?i)\u00e9)",
        ),  # not inside a negation (Python folds it into its other case)
        ("(?!(?i)[a-\u00ff])", "(?!(?i)[a-\u00ff])"),
        ("(?i)[^\u00e0-\u00ff]", "(?i)[^\u00e0-\u00ff]"),  # (a negated class: the wider set)
    ],
)
def test_case_insensitive_parts_are_spelt(pattern, spelt):
    assert case_spelt(pattern) == spelt


STRINGS = [
    "".join(p)
    for n in range(4)
    for p in itertools.product("aAsS\u017fkK\u212aix\u0130\u0131\u00e9\u00c9", repeat=n)
]


# negations outside the flag's part: every case excluded there too (the regex module's reading)
OUTSIDE = {"^(?!s|(?i:k))", "^(?![^a])(?i:x)?"}


@pytest.mark.parametrize(
    "scoped",
    [
        "^(?!(?i:as))[a-zA-Z\u017f]+$",
        "(?i:[^a-k])",
        "^(?!(?i:[^a]))",
        "(?i:s|k)i",
        "^(?!x(?i:[a-z]))",
        "^(?!(?!(?i:s)))",
        "(?i:\u00e9)",
        "(?i:[\u00e0-\u00ff])",
        "^(?!s|(?i:k))",
        "^(?![^a])(?i:x)?",
    ],
)
def test_spelt_parts_are_valid_under_java_and_python(scoped):
    # scoped: Python's form of the flag; Java's reading folds ASCII cases only (re.ASCII); the
    # regex module's version 0 applies it to the whole pattern
    spelt = case_spelt(scoped)
    whole = "(?i)" + scoped.replace("(?i:", "(?:")
    assert "(?i" not in spelt
    for s in STRINGS:
        if re.search(spelt, s):
            assert (
                re.search(scoped, s) and re.search(scoped, s, re.ASCII) and re.search(whole, s)
            ), (s, spelt)
        if s.isascii() and scoped not in OUTSIDE:  # on ASCII, exactly Java's reading
            assert bool(re.search(spelt, s)) == bool(re.search(scoped, s, re.ASCII)), (s, spelt)


def test_a_case_insensitive_lookahead_in_a_schema(small_compiler, small_info):
    schema = {"type": "string", "pattern": "^(?!(?i)aws)[A-Za-z0-9]{2,64}$"}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text, ok in (("ab", True), ("awx", True), ("aws1", False), ("AwS", False), ("a", False)):
        assert accepts_text(grammar, small_info, json.dumps(text)) == ok, text
    for seed in range(6):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        assert re.fullmatch("[A-Za-z0-9]{2,64}", value) and not value.lower().startswith("aws")

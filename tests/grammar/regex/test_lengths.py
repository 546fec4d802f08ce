"""Patterns under minLength/maxLength: repeat counts that fit the bounds, without an automaton
that explodes (CloudFormation's `^.*[a-zA-Z0-9]+.*$` with maxLength 128, split into three equal
counts, aborted the server after minutes of CPU), and none counted past REPEAT_MAX."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.regex.leaves import string_pattern_regex
from tests.grammar.walks import random_walk


@pytest.mark.parametrize(
    "pattern,max_length,expected",
    [
        # one repeat, or repeats a separator keeps apart: equal counts (the automaton grows linearly)
        ("^[a-z0-9_]+$", 32, '(?:[[a-z0-9_]--["\\\\\\x00-\\x1f]]{1,32})'),
        (
            "^[a-z]+-[a-z]+$",
            20,
            '(?:[[a-z]--["\\\\\\x00-\\x1f]]{1,9}-[[a-z]--["\\\\\\x00-\\x1f]]{1,9})',
        ),
        # overlapping repeats: the last one takes the length, the others their least count
        (
            "^.*[a-zA-Z0-9]+.*$",
            128,
            '(?:[^"\\\\\\x00-\\x1f\\u2028\\u2029]{0,0}[[a-zA-Z0-9]--["\\\\\\x00-\\x1f]]{1,1}'
            '[^"\\\\\\x00-\\x1f\\u2028\\u2029]{0,127})',
        ),
        # repeats inside groups, and no repeat counted past REPEAT_MAX
        (
            "^(https|s3)://([^/]+)/?(.*)$",
            1024,
            '(?:(https|s3)://([[^/]--["\\\\\\x00-\\x1f]]{1,1})/?'
            '([^"\\\\\\x00-\\x1f\\u2028\\u2029]{0,256}))',
        ),
        (
            "arn:.+:iam::[0-9]{12}:role/.+",
            256,
            '(?:arn:[^"\\\\\\x00-\\x1f\\u2028\\u2029]{1,1}:iam::'
            '[[0-9]--["\\\\\\x00-\\x1f]]{12}:role/[^"\\\\\\x00-\\x1f\\u2028\\u2029]{1,227})',
        ),
    ],
)
def test_counts_fit_the_length_without_exploding(pattern, max_length, expected):
    assert string_pattern_regex(pattern, "x", 1, max_length) == expected


@pytest.mark.parametrize(
    "pattern,max_length",
    [
        ("^.*[a-zA-Z0-9]+.*$", 128),
        (".*\\S.*", 64),
        pytest.param("arn:aws(-[\\w]+)*:.+:.+:[0-9]{12}:.+", 256, marks=pytest.mark.slow),
        ("^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", 63),
    ],
)
def test_bounded_patterns_compile_and_validate(pattern, max_length, smol_compiler, smol_info):
    schema = {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": pattern},
        "minItems": 1,
        "maxItems": 2,
        "uniqueItems": True,
    }
    grammar = smol_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for seed in range(3):
        _, text = random_walk(grammar, smol_info, seed)
        jsonschema.validate(json.loads(text), schema)
        assert all(re.search(pattern, item) for item in json.loads(text))


@pytest.mark.parametrize(
    "pattern,max_length,samples",
    [
        ("^[a-z]{2,64}$", 33, {"ab": True, "a" * 33: True, "a" * 34: False, "a": False}),
        (
            "^[a-z]{2,64}-[0-9]{3}$",
            20,
            {"ab-123": True, "a" * 16 + "-123": True, "a" * 17 + "-123": False},
        ),
        (
            "^[a-z]{2,10}$",
            33,
            {"a" * 10: True, "a" * 11: False},
        ),  # a repeat within maxLength keeps its bound
    ],
)
def test_a_repeat_past_max_length_is_bounded_by_it(pattern, max_length, samples):
    # `[a-z]{2,64}` under maxLength 33 was refused ("its strings are 2..64 characters long");
    # no string of <= 33 characters repeats past 33, so the repeat counts as open and is fitted
    from radixgen.grammar.unique.values import fullmatches

    regex = string_pattern_regex(pattern, "x", 1, max_length)
    for text, want in samples.items():
        assert fullmatches(regex, text.encode()) == want, text


@pytest.mark.parametrize(
    "pattern,min_length,max_length,alphabet",
    [
        ("^[a-z_-]{0,6}$", 1, 6, "a_"),  # a least count raised: was "0..6, outside minLength 1"
        ("^[a-z](?:-?[a-z0-9]){0,5}$", 1, 6, "a-0"),  # a most count lowered inside its range
        ("^([a-c][_-]?){1,4}$", 1, 4, "a_"),
        ("^x-[a-c]{2,5}$", 5, 6, "xa-"),
        ("^[a-c]{1,3}-[a-c]{1,3}$", 5, 7, "ab-"),  # several bounded repeats at once
        ("^[a-c]([a-c-]*[a-c])?$", 3, 6, "ab-"),  # an optional group made required (DNS labels)
        ("^colou?r$", 0, 5, "colur"),  # an optional character dropped
        ("^[a-c]+?-?[0-9]??$", 3, 4, "a-0"),  # lazy marks are not repeats
    ],
)
def test_bounded_repeats_narrowed_within_their_own_ranges(
    pattern, min_length, max_length, alphabet
):
    """Where the unbounded repeats alone cannot fit the lengths, `{a,b}` and `?` vary within their
    own ranges: every string generated matches the pattern and has an allowed length, and some
    string is generated."""
    _check_generated(pattern, min_length, max_length, alphabet, max_length + 1)


@pytest.mark.parametrize(
    "pattern,min_length,max_length", [("^[a-z]{1,3}$", 4, 9), ("^[a-z]{2,3}-[0-9]$", 6, 9)]
)
def test_bounded_repeats_that_cannot_fit_are_still_refused(pattern, min_length, max_length):
    from radixgen.grammar.matcher import GrammarError

    with pytest.raises(GrammarError, match="characters long|no repeat count"):
        string_pattern_regex(pattern, "x", min_length, max_length)


@pytest.mark.parametrize(
    "pattern,min_length,max_length", [("\\S", 4, 6), ("^a[bc]", 4, 5), ("[a-c]{2}", 3, None)]
)
def test_a_search_too_short_for_min_length_is_followed_by_any_text(pattern, min_length, max_length):
    """A pattern that does not end with `$` is a search: any text may follow what it matches, so a
    minLength it cannot reach alone (CloudFormation's `\\S` under minLength 20) is met by a tail."""
    _check_generated(pattern, min_length, max_length, "ab c", 6)


def test_no_tail_after_an_end_anchor():
    from radixgen.grammar.matcher import GrammarError

    with pytest.raises(GrammarError, match="characters long"):
        string_pattern_regex("\\S$", "x", 4, 6)


@pytest.mark.parametrize(
    "pattern,min_length,max_length,alphabet",
    [
        (
            "^$|^[a-c](?:-?[a-c0-9]){0,5}$",
            1,
            4,
            "a-0",
        ),  # CloudFormation's "empty or a name" under minLength 1
        ("^x$|^[a-c]{1,2}$|^[0-9]+$", 2, 3, "ax0"),  # one alternative cannot fit: left out
        ("(ab[a-c]*)|()", 4, 5, "ab"),  # an empty search alternative matches anything
    ],
)
def test_top_level_alternatives_fitted_one_by_one(pattern, min_length, max_length, alphabet):
    _check_generated(pattern, min_length, max_length, alphabet, max_length + 1)


def test_alternatives_none_of_which_fits_are_refused():
    from radixgen.grammar.matcher import GrammarError

    with pytest.raises(GrammarError, match="characters long"):
        string_pattern_regex("^a$|^b$", "x", 3, 4)


def _check_generated(
    pattern: str, min_length: int, max_length: int | None, alphabet: str, longest: int
) -> None:
    """Every string over `alphabet` of up to `longest` characters that the translation of `pattern`
    under the lengths generates matches the pattern (a search) and has an allowed length; some is."""
    import itertools

    from radixgen.grammar.unique.values import fullmatches

    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    generated = 0
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            if fullmatches(regex, text.encode()):
                generated += 1
                assert re.search(pattern, text) and min_length <= n <= (max_length or n), (
                    pattern,
                    text,
                )
    assert generated

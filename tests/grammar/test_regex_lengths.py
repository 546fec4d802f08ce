"""Patterns under minLength/maxLength: repeat counts that fit the bounds, without an automaton
that explodes (CloudFormation's `^.*[a-zA-Z0-9]+.*$` with maxLength 128, split into three equal
counts, aborted the server after minutes of CPU), and none counted past REPEAT_MAX."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.regex_leaves import string_pattern_regex
from tests.grammar.walks import random_walk


@pytest.mark.parametrize("pattern,max_length,expected", [
    # one repeat, or repeats a separator keeps apart: equal counts (the automaton grows linearly)
    ("^[a-z0-9_]+$", 32, "(?:[[a-z0-9_]--[\"\\\\\\x00-\\x1f]]{1,32})"),
    ("^[a-z]+-[a-z]+$", 20, "(?:[[a-z]--[\"\\\\\\x00-\\x1f]]{1,9}-[[a-z]--[\"\\\\\\x00-\\x1f]]{1,9})"),
    # overlapping repeats: the last one takes the length, the others their least count
    ("^.*[a-zA-Z0-9]+.*$", 128, "(?:[^\"\\\\\\x00-\\x1f\\u2028\\u2029]{0,0}[[a-zA-Z0-9]--[\"\\\\\\x00-\\x1f]]{1,1}"
                                "[^\"\\\\\\x00-\\x1f\\u2028\\u2029]{0,127})"),
    # repeats inside groups, and no repeat counted past REPEAT_MAX
    ("^(https|s3)://([^/]+)/?(.*)$", 1024, "(?:(https|s3)://([[^/]--[\"\\\\\\x00-\\x1f]]{1,1})/?"
                                           "([^\"\\\\\\x00-\\x1f\\u2028\\u2029]{0,256}))"),
    ("arn:.+:iam::[0-9]{12}:role/.+", 256, "(?:arn:[^\"\\\\\\x00-\\x1f\\u2028\\u2029]{1,1}:iam::"
                                           "[[0-9]--[\"\\\\\\x00-\\x1f]]{12}:role/[^\"\\\\\\x00-\\x1f\\u2028\\u2029]{1,227})"),
])
def test_counts_fit_the_length_without_exploding(pattern, max_length, expected):
    assert string_pattern_regex(pattern, "x", 1, max_length) == expected


@pytest.mark.parametrize("pattern,max_length", [
    ("^.*[a-zA-Z0-9]+.*$", 128), (".*\\S.*", 64), ("arn:aws(-[\\w]+)*:.+:.+:[0-9]{12}:.+", 256),
    ("^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", 63),
])
def test_bounded_patterns_compile_and_validate(pattern, max_length, smol_compiler, smol_info):
    schema = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": max_length,
                                         "pattern": pattern}, "minItems": 1, "maxItems": 2, "uniqueItems": True}
    grammar = smol_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for seed in range(3):
        _, text = random_walk(grammar, smol_info, seed)
        jsonschema.validate(json.loads(text), schema)
        assert all(re.search(pattern, item) for item in json.loads(text))


@pytest.mark.parametrize("pattern,max_length,samples", [
    ("^[a-z]{2,64}$", 33, {"ab": True, "a" * 33: True, "a" * 34: False, "a": False}),
    ("^[a-z]{2,64}-[0-9]{3}$", 20, {"ab-123": True, "a" * 16 + "-123": True, "a" * 17 + "-123": False}),
    ("^[a-z]{2,10}$", 33, {"a" * 10: True, "a" * 11: False}),  # a repeat within maxLength keeps its bound
])
def test_a_repeat_past_max_length_is_bounded_by_it(pattern, max_length, samples):
    # `[a-z]{2,64}` under maxLength 33 was refused ("its strings are 2..64 characters long");
    # no string of <= 33 characters repeats past 33, so the repeat counts as open and is fitted
    from radixgen.grammar.unique_values import fullmatches

    regex = string_pattern_regex(pattern, "x", 1, max_length)
    for text, want in samples.items():
        assert fullmatches(regex, text.encode()) == want, text


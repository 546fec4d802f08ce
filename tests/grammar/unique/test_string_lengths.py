"""Strings with a large maxLength: the regex takes any string there and `UniqueGuard` keeps the
length (a counted repeat costs the token automaton a state per character: maxLength 1024 took
20 s and 6.7 GB to compile). The toy test lowers the threshold so that short bounds are guarded,
and checks that guard plus free string allow exactly the texts of the counted regex, with the
bitmask equal to acceptance at every prefix."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.compiler import GrammarCompiler
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.unique import tables as guard_tables
from tests.grammar.conftest import toy_info
from tests.grammar.unique.test_unique_strings import _texts
from tests.grammar.walks import checked_mask_after, random_walk

# the structure in a few tokens; quotes that close one string and open the next, escapes, a
# two-byte character, tokens longer than a bound
PIECES = [
    '{"t":"',
    '","u":[',
    "]}",
    '"',
    "a",
    "ab",
    "abc",
    "\\",
    "n",
    '\\"',
    ",",
    "]",
    '","',
    '"a',
    '"abc',
    'a"',
    "\u00e9",
    'a"]}',
    "{",
    "}",
    "t",
    "u",
    ":",
    "[",
]
BOUNDED = {
    "type": "object",
    "properties": {
        "t": {"type": "string", "minLength": 1, "maxLength": 3},
        "u": {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
    },
    "required": ["t", "u"],
}


@pytest.mark.slow
def test_guarded_lengths_allow_exactly_the_counted_regex(monkeypatch):
    info = toy_info([b""] + [p.encode() for p in PIECES])
    exact = GrammarCompiler(info).compile(
        Constraint("json_schema", BOUNDED)
    )  # threshold 16: counted
    monkeypatch.setattr(guard_tables, "LENGTH_GUARD_MIN", 2)
    regex, paths = schema_to_guarded_regex(json.dumps(BOUNDED))
    assert dict(paths) == {("t",): ("length", 1, 3), ("u", None): ("length", 0, 2)}
    guarded = GrammarCompiler(info).compile(Constraint("json_schema", BOUNDED))
    walked = {text for text, done in _texts(guarded, info, 6) if done}  # asserts mask == accept
    assert walked == {text for text, done in _texts(exact, info, 6) if done}
    assert any(len(json.loads(t)["t"]) == 3 for t in walked)
    for text in walked:
        jsonschema.validate(json.loads(text), BOUNDED)
    assert re.fullmatch(regex, '{"t":"abcd","u":[]}')  # the regex alone takes any length


def test_shared_places_keep_the_counted_regex():
    """Where another string can be (another bound, a pattern, a literal), no guard: counted."""
    long_text = {"type": "string", "maxLength": 40}
    # (a const of at most 40 characters would be one of long_text's values: that anyOf is long_text)
    for other in (
        {"type": "string", "maxLength": 50},
        {"type": "string", "pattern": "^x+$"},
        {"const": "y" * 41},
    ):
        schema = {"type": "object", "properties": {"a": {"anyOf": [long_text, other]}}}
        regex, paths = schema_to_guarded_regex(json.dumps(schema))
        assert paths == () and "{0,40}" in regex
    schema = {"type": "object", "properties": {"a": long_text, "b": {"type": "integer"}}}
    assert schema_to_guarded_regex(json.dumps(schema))[1] == ((("a",), ("length", 0, 40)),)
    # property names are never guarded: a keyed object's names keep their counted regex
    keyed = {
        "type": "object",
        "propertyNames": {"maxLength": 20},
        "additionalProperties": {"type": "integer"},
    }
    regex, paths = schema_to_guarded_regex(json.dumps(keyed))
    assert paths == () and not re.fullmatch(regex, '{"' + "k" * 21 + '":1}')


def test_large_max_length_compiles_fast_and_masks_match(smol_compiler, smol_info, smol_tokenizer):
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 2048},
            "body": {"type": "string", "minLength": 20, "maxLength": 4096},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3},
        },
        "required": ["title", "body", "tags"],
    }
    grammar = smol_compiler.compile(Constraint("json_schema", schema))
    for prefix in [
        '{"title":"' + "a" * 2040,
        '{"title":"' + "b" * 2047 + "\\",
        '{"title":"","body":"short',
        '{"title":"","body":"' + "c" * 4090,
        '{"title":"","body":"' + "d" * 20 + '","tags":["' + "é" * 25,
        '{"title":"","body":"' + "d" * 20 + '","tags":[',
    ]:
        assert checked_mask_after(grammar, smol_info, smol_tokenizer, prefix)
    for seed in range(5):
        _, text = random_walk(grammar, smol_info, seed, max_steps=3000)
        jsonschema.validate(json.loads(text), schema)


PATTERNED = {
    "type": "object",
    "properties": {
        "t": {"type": "string", "pattern": "^(?:ab|c)[abc]*$", "minLength": 2, "maxLength": 3}
    },
    "required": ["t"],
}


def test_guarded_pattern_lengths_allow_exactly_the_schemas_strings(monkeypatch):
    """A pattern whose automaton can close (and grow) in every state past its first characters
    keeps its own unbounded regex, the guard keeping the length: exactly the strings the schema
    allows (the counted regex, `(?:ab|c)[abc]{1,1}`, is a subset: no "ab"), with the mask equal
    to acceptance at every prefix."""
    import itertools

    info = toy_info(
        [b""]
        + [
            p.encode()
            for p in [
                '{"t":"',
                '"}',
                '"',
                "a",
                "ab",
                "abc",
                "b",
                "c",
                "ca",
                'c"}',
                "{",
                "}",
                "t",
                ":",
            ]
        ]
    )
    counted = GrammarCompiler(info).compile(Constraint("json_schema", PATTERNED))
    monkeypatch.setattr(guard_tables, "LENGTH_GUARD_MIN", 2)
    regex, paths = schema_to_guarded_regex(json.dumps(PATTERNED))
    assert (
        dict(paths) == {("t",): ("length", 2, 3)} and "]]*)" in regex and "{" not in regex[2:]
    )  # unbounded
    guarded = GrammarCompiler(info).compile(Constraint("json_schema", PATTERNED))
    walked = {text for text, done in _texts(guarded, info, 6) if done}  # asserts mask == accept
    allowed = {
        "".join(chars)
        for n in (2, 3)
        for chars in itertools.product("abc", repeat=n)
        if re.fullmatch("(?:ab|c)[abc]*", "".join(chars))
    }
    assert {json.loads(t)["t"] for t in walked} == allowed
    assert walked > {text for text, done in _texts(counted, info, 6) if done}


def test_patterns_that_cannot_close_everywhere_keep_the_counted_regex():
    """A guard beside `^(ab)+$` could reach maxLength after an "a" that cannot close: counted.
    Unique items of a pattern keep their counted regex too (the guard counts the item)."""
    for pattern in ("^(ab)+$", "^.*[a-z0-9]+.*$"):
        schema = {"type": "string", "pattern": pattern, "maxLength": 40}
        assert schema_to_guarded_regex(json.dumps(schema))[1] == ()
    item = {"type": "string", "pattern": "^[a-z0-9_]+$", "maxLength": 40}
    assert schema_to_guarded_regex(json.dumps(item))[1] == (((), ("length", 0, 40)),)
    regex, paths = schema_to_guarded_regex(
        json.dumps({"type": "array", "items": item, "uniqueItems": True})
    )
    assert [kind[0] for _, kind in paths] == ["bounded"] and "{1,40}" in regex


def test_huge_pattern_max_length_compiles_small_and_validates(smol_compiler, smol_info):
    """CloudFormation's Tag value: `^[\\s\\S]*$` with maxLength 10,000,000, exact under the guard."""
    tag = {"type": "string", "pattern": "^[\\s\\S]*$", "minLength": 1, "maxLength": 10_000_000}
    key = {"type": "string", "pattern": "^[a-zA-Z0-9_.:/=+@-]+$", "minLength": 1, "maxLength": 128}
    schema = {
        "type": "object",
        "properties": {"Key": key, "Value": tag},
        "required": ["Key", "Value"],
        "additionalProperties": False,
    }
    from radixgen.grammar.index.size_budget import check_index_size

    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert sorted(kind for _, kind in paths) == [("length", 1, 128), ("length", 1, 10_000_000)]
    assert check_index_size(regex, smol_info) < 20 * smol_info.vocab_size  # no state per character
    grammar = smol_compiler.compile(Constraint("json_schema", schema))
    for seed in range(4):
        _, text = random_walk(grammar, smol_info, seed, max_steps=3000)
        jsonschema.validate(json.loads(text), schema)

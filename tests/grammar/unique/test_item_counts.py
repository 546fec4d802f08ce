"""Arrays with a large maxItems: the regex takes any number of items there and
`UniqueGuard` counts them (a counted repeat costs the token automaton a copy of the item per
count: Discord's webhook schema, two `maxItems: 100` string arrays, made 1,566 states that each
allow the whole vocabulary). The toy tests lower the threshold so that small counts are guarded
and check that guard plus free repeat allow exactly the texts of the counted regex, with the
bitmask equal to acceptance at every prefix."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.compiler import GrammarCompiler
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.rewrite import guarded as rewrite_guarded
from radixgen.grammar.rewrite import unique_items as rewrite_unique_items
from tests.grammar.conftest import toy_info
from tests.grammar.unique.test_unique_strings import _texts
from tests.grammar.walks import checked_mask_after, random_walk

# separators inside and after items, tokens that close an item and start the next, close two
# levels at once, or hold a whole item
PIECES = [
    '{"a":[',
    "[",
    "]",
    "]}",
    ",",
    '"',
    "x",
    '"x"',
    '",',
    '","',
    '"]',
    ',"',
    "1",
    "1,",
    ",1",
    "1]",
    "[1",
    "[]",
    "],[",
    "]]",
    "{",
    "}",
    ":",
    "a",
    '":',
    ",[",
    "[[",
    "}]",
]

SCHEMAS = [
    # strings at most 3, an integer list of 2 to 3 inside an object
    {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string", "maxLength": 1}, "maxItems": 3}
        },
        "required": ["a"],
    },
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 1},
        "minItems": 2,
        "maxItems": 3,
    },
    # counted arrays in a counted array: the inner count closes with the outer item
    {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 1},
            "maxItems": 2,
        },
        "maxItems": 2,
    },
    # a set of integers: uniqueness and count together
    {
        "type": "array",
        "items": {"type": "integer"},
        "uniqueItems": True,
        "minItems": 2,
        "maxItems": 2,
    },
]
DEPTHS = [7, 7, 7, 5]  # tokens walked (free integers branch widely)


@pytest.mark.parametrize("schema,depth", list(zip(SCHEMAS, DEPTHS)))
def test_guarded_counts_allow_exactly_the_counted_regex(schema, depth, monkeypatch):
    info = toy_info([b""] + [p.encode() for p in PIECES])
    exact = GrammarCompiler(info).compile(
        Constraint("json_schema", schema)
    )  # threshold 16: counted
    for module in (rewrite_guarded, rewrite_unique_items):
        monkeypatch.setattr(module, "ITEMS_GUARD_MIN", 2)
    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert any(kind[0] == "items" for _, kind in paths if isinstance(kind, tuple)), paths
    guarded = GrammarCompiler(info).compile(Constraint("json_schema", schema))
    walked = {text for text, done in _texts(guarded, info, depth) if done}  # asserts mask == accept
    assert walked == {text for text, done in _texts(exact, info, depth) if done}
    assert walked
    for text in walked:
        jsonschema.validate(json.loads(text), schema)


def test_shared_places_keep_the_counted_regex():
    """Where another array can be (other counts, a literal), the counts stay in the regex."""
    big = {"type": "array", "items": {"type": "integer"}, "maxItems": 40}
    for other in (
        {"type": "array", "items": {"type": "string"}, "maxItems": 50},
        {"const": [1, 2]},
        {"type": "array", "items": {"type": "boolean"}},
    ):
        schema = {"type": "object", "properties": {"a": {"anyOf": [big, other]}}}
        regex, paths = schema_to_guarded_regex(json.dumps(schema))
        assert paths == () and "{0,39}" in regex, other
    schema = {
        "type": "object",
        "properties": {"a": big, "b": {"type": "array", "items": {"type": "integer"}}},
    }
    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert paths == ((("a",), ("items", 40)),) and "{0,39}" not in regex


def test_min_items_above_max_items_is_refused():
    from radixgen.grammar.matcher import GrammarError

    with pytest.raises(GrammarError, match="minItems"):
        schema_to_guarded_regex(json.dumps({"type": "array", "minItems": 30, "maxItems": 20}))


def test_large_counts_compile_fast_and_masks_match(smol_compiler, smol_info, smol_tokenizer):
    """SmolLM2's full vocabulary at the bounds: 100 strings (a set, as in Discord's webhook
    schema) and at least 20 integers."""
    schema = {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "maxItems": 100,
            },
            "scores": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 20,
                "maxItems": 30,
            },
        },
        "required": ["ids", "scores"],
    }
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    assert not re.search(r"\{\d+,\d+\}", regex)  # no bounded repeat left (minItems 20 stays: {19,})
    grammar = smol_compiler.compile(Constraint("json_schema", schema))
    full = '{"ids":[' + ",".join(f'"id{i}"' for i in range(100))
    short = full + '],"scores":[' + ",".join("7" for _ in range(19))
    for prefix, banned, wanted in [
        (full[:-1], '",', '"]'),
        (full, ",", "]"),
        (short, "]", ","),
        (short + ",", None, "8"),
        (short + ",8", None, "]"),
    ]:
        allowed = checked_mask_after(grammar, smol_info, smol_tokenizer, prefix)
        ids = lambda text: smol_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
        assert ids(wanted)[0] in allowed, (prefix[-12:], wanted)
        if banned is not None:
            assert ids(banned)[0] not in allowed, (prefix[-12:], banned)
    for seed in range(5):
        _, text = random_walk(grammar, smol_info, seed, max_steps=3000)
        jsonschema.validate(json.loads(text), schema)


def test_a_token_opening_and_overfilling_an_array_is_masked(monkeypatch):
    """A token holding '[' and enough commas opens a counted array and passes its maxItems at
    once: the mask must refuse it as acceptance does."""
    for module in (rewrite_guarded, rewrite_unique_items):
        monkeypatch.setattr(module, "ITEMS_GUARD_MIN", 2)
    info = toy_info([b"", b'{"a":', b"[", b"]", b",", b"1", b"[1,1]", b"[1,1,1]", b"}", b"[1]"])
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["a"],
    }
    walked = {
        text
        for text, done in _texts(
            GrammarCompiler(info).compile(Constraint("json_schema", schema)), info, 4
        )
        if done
    }
    assert (
        '{"a":[1,1]}' in walked and '{"a":[1]}' in walked and not any("1,1,1" in t for t in walked)
    )


def test_flexible_whitespace_never_dead_ends(smol_info):
    """With whitespace allowed, only ']' may follow whitespace after an item: minItems stays in
    the regex (a guard refusing ']' there would leave nothing)."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "integer"}, "minItems": 16, "maxItems": 40}
        },
        "required": ["a"],
    }
    grammar = GrammarCompiler(smol_info, "flexible").compile(Constraint("json_schema", schema))
    for seed in range(6):
        _, text = random_walk(grammar, smol_info, seed, max_steps=3000)  # asserts no dead end
        jsonschema.validate(json.loads(text), schema)

"""uniqueItems over free strings: the regex shapes the array, `UniqueGuard` bans repeated items.

The toy-vocabulary test walks every token sequence up to a length and checks, at each prefix,
that the bitmask allows exactly the tokens `accept_token` takes, that something is always
allowed, and that the complete texts are exactly the regex's texts with distinct items."""

import itertools
import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.bitmask import allocate_bitmask, unpack_row
from radixgen.grammar.compiler import GrammarCompiler, tool_calls_regex
from radixgen.grammar.json_schema import schema_to_guarded_regex, schema_to_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.unique.values import bounded_string_regex, exhausted_prefixes, item_counts
from tests.grammar.conftest import toy_info
from tests.grammar.walks import accepts_prefix, accepts_text, random_walk

SET_OF_STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3}
# several quotes per token, escapes, a token spelling an item's end plus more
PIECES = ['"', "a", "b", "\\", ",", "[", "]", '""', '","', '"a"', 'a"', 'a",', '"]', '\\"', "ab"]


def _texts(grammar, info, max_tokens: int):
    """Every token sequence the matcher accepts, up to max_tokens: yields (text, complete)
    after checking each prefix's bitmask against accept_token."""
    bitmask = allocate_bitmask(1, info.vocab_size)

    def visit(matcher, ids):
        matcher.fill_bitmask(bitmask, 0)
        allowed = set(unpack_row(bitmask[0], info.vocab_size).tolist())
        text = b"".join(info.token_bytes[i] for i in ids).decode()
        assert allowed, f"dead end after {text!r}"
        for token in range(info.vocab_size):
            fork = matcher.fork()
            assert fork.accept_token(token) == (token in allowed), (text, info.token_bytes[token])
        if 0 in allowed:
            yield text, True
        if len(ids) < max_tokens:
            for token in sorted(allowed - {0}):
                fork = matcher.fork()
                fork.accept_token(token)
                yield from visit(fork, ids + [token])

    yield from visit(grammar.matcher(), [])


SET_OF_INTEGERS = {
    "type": "array",
    "items": {"type": "integer"},
    "uniqueItems": True,
    "maxItems": 3,
}
# multi-digit tokens, tokens that end an item or hold two, a lone 0 (it cannot grow), a token
# that opens the array and repeats 0 in it
INTEGER_PIECES = [
    "0",
    "1",
    "2",
    "10",
    "-",
    "-1",
    ",",
    "[",
    "]",
    "1,",
    "0,",
    ",0",
    "1,1",
    "0]",
    "2]",
    "[0,0",
]

# integers from a lower bound up (pydantic's set[PositiveInt]): every item can take another digit
SET_OF_POSITIVE = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1},
    "uniqueItems": True,
    "maxItems": 3,
}


# strings of a pattern that can grow wherever it can close (each value spelt one way)
SET_OF_PATTERNED = {
    "type": "array",
    "items": {"type": "string", "pattern": "^[ab]+$"},
    "uniqueItems": True,
    "maxItems": 3,
}
PATTERN_PIECES = ['"', "a", "b", ",", "[", "]", '"a"', 'a"', "ab", '","', 'b",', '"]']


# objects kept unique by a required string property (the only one here, so objects differ
# exactly when it does); tokens that close the name and open or close its value, and whole items
SET_OF_NAMED = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"n": {"type": "string"}},
        "required": ["n"],
        "additionalProperties": False,
    },
    "uniqueItems": True,
    "maxItems": 3,
}
NAMED_PIECES = [
    '{"n":"',
    "a",
    "b",
    '"}',
    ",",
    "[",
    "]",
    '{"n',
    '":"',
    '":"a"}',
    '{"n":"a"}',
    'a"}',
    'b"}',
    '"},{"n":"',
]


# strings with a maxLength: an item at maxLength equal to an earlier one could neither close nor
# grow, so no token may end one there ('a","a' closes "a" and reaches it again)
SET_OF_SHORT = {
    "type": "array",
    "items": {"type": "string", "maxLength": 1},
    "uniqueItems": True,
    "maxItems": 3,
}
SHORT_PIECES = ['"', "a", "b", ",", "[", "]", '""', '","', '"a"', 'a"', '"a', ',"a', 'a","a', "ab"]


# a pattern with four values (a, b, ab, bb): the guard counts what each prefix can still become
# and the array takes at most four items
SET_OF_CODES = {
    "type": "array",
    "items": {"type": "string", "pattern": "^[ab]b?$"},
    "uniqueItems": True,
}
CODE_PIECES = ['"', "a", "b", ",", "[", "]", '"a"', 'b"', '"a', '","', "ab", '"b"', 'b","a']


# objects kept unique by a bounded name: a token that closes the name and opens the value
# ('":"a') can reach an exhausted value from inside the name
SET_OF_SHORT_NAMED = {
    "type": "array",
    "uniqueItems": True,
    "items": {
        "type": "object",
        "properties": {"n": {"type": "string", "maxLength": 1}},
        "required": ["n"],
        "additionalProperties": False,
    },
}
SHORT_NAMED_PIECES = [
    '{"n":"a"}',
    '{"n',
    '":"a',
    '":"',
    "a",
    '"}',
    ",",
    "[",
    "]",
    "{",
    '"',
    "n",
    ":",
    "}",
]


@pytest.mark.parametrize(
    "schema,pieces,expected",
    [
        (SET_OF_STRINGS, PIECES, ['["a","b"]', '["","a"]', '["\\"","a"]']),
        pytest.param(
            SET_OF_INTEGERS,
            INTEGER_PIECES,
            ["[0,1,2]", "[10,-1]", "[1,0]", "[-10,10]"],
            marks=pytest.mark.slow,
        ),
        (SET_OF_PATTERNED, PATTERN_PIECES, ['["a","b"]', '["ab","a"]', '["b","a"]']),
        (SET_OF_POSITIVE, INTEGER_PIECES, ["[1,2]", "[10,1]", "[1,10]", "[2]"]),
        (
            SET_OF_NAMED,
            NAMED_PIECES,
            ['[{"n":"a"},{"n":"b"}]', '[{"n":""},{"n":"a"}]', '[{"n":"b"},{"n":"a"}]'],
        ),
        (SET_OF_SHORT, SHORT_PIECES, ['["a","b"]', '["","a"]', '["a",""]']),
        (SET_OF_CODES, CODE_PIECES, ['["a","b"]', '["ab","a"]', '["b","a"]', '["ab","b"]']),
        (SET_OF_SHORT_NAMED, SHORT_NAMED_PIECES, ['[{"n":"a"}]', '[{"n":""}]']),
    ],
    ids=[
        "strings",
        "integers",
        "patterned",
        "positive",
        "named objects",
        "bounded strings",
        "finite pattern",
        "short names",
    ],
)
def test_toy_masks_match_acceptance_and_outputs_are_unique_sets(schema, pieces, expected):
    info = toy_info([b""] + [p.encode() for p in pieces])
    grammar = GrammarCompiler(info).compile(Constraint("json_schema", schema))
    complete = {text for text, done in _texts(grammar, info, 6) if done}
    for text in complete:
        jsonschema.validate(json.loads(text), schema)
    assert set(expected) <= complete
    # the guard bans exactly the repeats: every regex text of the walk with distinct items is in
    repeats = 0
    for text, done in _texts(
        GrammarCompiler(info).compile(Constraint("regex", grammar.source)), info, 6
    ):
        if done:
            items = [json.dumps(item) for item in json.loads(text)]
            assert (text in complete) == (len(set(items)) == len(items)), text
            repeats += len(set(items)) < len(items)
    assert repeats > 0  # the regex alone lets repeats through


def test_only_the_guarded_array_is_unique(small_compiler, small_info):
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "words": {"type": "array", "items": {"type": "string"}},
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "tags": {
                            "type": "array",
                            "items": {"type": "string", "minLength": 1},
                            "uniqueItems": True,
                            "minItems": 2,
                        }
                    },
                    "required": ["tags"],
                },
            },
        },
        "required": ["tags", "words", "rows"],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))

    def accepts(text: str) -> bool:
        return accepts_prefix(grammar, small_info, text)

    each_row = '"rows":[{"tags":["a","aa"]},{"tags":["a","aa"]}]'
    assert accepts('{"tags":["a","aa"],"words":["a","a"],' + each_row + "}")
    assert not accepts('{"tags":["a","a"]')
    assert not accepts('{"tags":[],"words":[],"rows":[{"tags":["aa","a","aa"]')
    for seed in range(20):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_objects_kept_unique_by_a_required_name(small_compiler, small_info):
    # OpenAPI's tags: the name (the second property, after an optional one) is kept unique
    tag = {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "name": {"type": "string"},
            "docs": {"type": "object", "properties": {"url": {"type": "string"}}},
        },
        "required": ["name"],
    }
    schema = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"$ref": "#/$defs/tag"},
                "uniqueItems": True,
                "minItems": 2,
            }
        },
        "required": ["tags"],
        "$defs": {"tag": tag},
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))

    def accepts(text: str) -> bool:
        return accepts_prefix(grammar, small_info, text)

    assert accepts('{"tags":[{"name":"a","docs":{"url":"a"}},{"description":"a","name":"b"}]}')
    assert not accepts('{"tags":[{"name":"a"},{"description":"b","name":"a"}')
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_objects_without_a_required_name_get_one(small_compiler, small_info):
    # CloudFormation's settings lists require nothing: the first string property is generated
    # always, and kept unique (a subset)
    setting = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "Port": {"type": "integer"},
            "Name": {"type": "string"},
            "Value": {"type": "string"},
        },
    }
    schema = {"type": "array", "items": setting, "uniqueItems": True, "maxItems": 4}
    grammar = small_compiler.compile(Constraint("json_schema", schema))

    def accepts(text: str) -> bool:
        return accepts_prefix(grammar, small_info, text)

    assert accepts('[{"Port":1,"Name":"a"},{"Name":"b","Value":"a"}]')
    assert not accepts('[{"Name":"a"},{"Port":2,"Name":"a"}')  # the name repeats
    assert not accepts('[{"Value":"a"}')  # the name is always there
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_a_key_property_may_be_a_reference(small_compiler, small_info):
    # CloudFormation's Tags: {"Key": {"$ref": "#/definitions/TagKey"}, "Value": ...}, Key required
    schema = {
        "type": "array",
        "uniqueItems": True,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["Key", "Value"],
            "properties": {"Key": {"$ref": "#/definitions/TagKey"}, "Value": {"type": "string"}},
        },
        "definitions": {"TagKey": {"type": "string", "minLength": 1, "maxLength": 3}},
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, '[{"Key":"a","Value":"x"},{"Key":"b","Value":"x"}]')
    assert not accepts_prefix(
        grammar, small_info, '[{"Key":"a","Value":"x"},{"Key":"a","Value":"y"}'
    )
    assert not accepts_prefix(grammar, small_info, '[{"Key":"abcd"')  # the target's maxLength holds
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_a_key_property_may_be_a_set_of_strings(small_compiler, small_info):
    # CloudFormation's schedules: {"Day": {"enum": [...]}, ...} required: each day once, so at most
    # as many objects as days
    schema = {
        "type": "array",
        "uniqueItems": True,
        "maxItems": 6,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["Day", "Start"],
            "properties": {
                "Day": {"type": "string", "enum": ["MON", "TUE", "WED"]},
                "Start": {"type": "string", "maxLength": 2},
            },
        },
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(
        grammar, small_info, '[{"Day":"MON","Start":"a"},{"Day":"TUE","Start":"a"}]'
    )
    assert not accepts_prefix(
        grammar, small_info, '[{"Day":"MON","Start":"a"},{"Day":"MON","Start":"b"}'
    )
    assert not accepts_prefix(
        grammar,
        small_info,
        "[" + ",".join(f'{{"Day":"{d}","Start":""}}' for d in ("MON", "TUE", "WED")) + ",",
    )
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_alternatives_that_rewrite_alike_are_one(small_compiler, small_info):
    # CloudFormation's SecurityGroupIds: string items whose anyOf branches hold only annotations
    ref = {
        "relationshipRef": {
            "typeName": "AWS::EC2::SecurityGroup",
            "propertyPath": "/properties/GroupId",
        }
    }
    schema = {
        "type": "array",
        "uniqueItems": True,
        "items": {"type": "string", "anyOf": [ref, dict(ref)]},
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert not accepts_prefix(grammar, small_info, '["a","a"')
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)
    # beside a pattern, the two branches distribute into two copies of it, one once the vendor
    # keyword is set aside: pattern strings, kept unique (the two readings of the anyOf are one)
    other = {
        "relationshipRef": {"typeName": "AWS::EC2::SecurityGroup", "propertyPath": "/properties/Id"}
    }
    schema = {
        "type": "array",
        "uniqueItems": True,
        "minItems": 1,
        "items": {
            "type": "string",
            "pattern": "^sg-[0-9a-f]{2,4}$",
            "maxLength": 7,
            "anyOf": [ref, other],
        },
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, '["sg-ab","sg-abc"]')
    assert not accepts_prefix(grammar, small_info, '["sg-ab","sg-ab"')
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)
    # alternatives that differ in a keyword JSON Schema defines stay two
    schema = {
        "type": "array",
        "items": {
            "type": "string",
            "anyOf": [{"pattern": "^a+$", **ref}, {"pattern": "^b+$", **ref}],
        },
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, '["aa","bb"]')


def test_bounded_strings_exhaust_their_prefixes():
    # the guard's count of what an item can still become (93 printable characters, here)
    chars = {bytes([c]) for c in range(0x20, 0x7F)} - {b'"', b"\\"}
    one = item_counts(bounded_string_regex(0, 1))
    assert one.total == 94 and one.completions(b"") == 94 and one.completions(b"a") == 1
    assert exhausted_prefixes({b"a", b"b"}, one) == {b"a", b"b"}  # at maxLength
    assert exhausted_prefixes(chars, one) == chars  # "" itself is still free
    assert exhausted_prefixes(chars | {b""}, one) == chars | {b""}
    exactly_two = item_counts(bounded_string_regex(2, 2))  # "a" is not a value: 93 completions
    assert b"a" not in exhausted_prefixes({b"a" + c for c in chars} - {b"ab"}, exactly_two)
    assert b"a" in exhausted_prefixes({b"a" + c for c in chars}, exactly_two)
    assert b"a" not in exhausted_prefixes(
        {b"a" + c for c in chars}, item_counts(bounded_string_regex(1, 2))
    )
    assert exhausted_prefixes({b"a" * 40}, item_counts(bounded_string_regex(1, 40))) == {b"a" * 40}
    # a pattern that can grow but not everywhere: "ab" cannot ("a", "aa", ... always can)
    grows = item_counts('"a+b?"')
    assert grows.total is None and grows.completions(b"ab") == 1
    assert exhausted_prefixes({b"ab", b"aab", b"a"}, grows) == {b"ab", b"aab"}
    # a set of strings
    colors = item_counts('(?:"red"|"green"|"grey")')
    assert colors.total == 3 and colors.completions(b"gr") == 2
    assert exhausted_prefixes({b"green", b"grey"}, colors) == {
        b"g",
        b"gr",
        b"gre",
        b"gree",
        b"green",
        b"grey",
    }


def test_a_keyed_name_keeps_what_an_allof_adds(small_compiler, small_info):
    # the name's schema as merged (the pattern from the allOf), not as listed in properties
    schema = {
        "type": "array",
        "uniqueItems": True,
        "items": {
            "type": "object",
            "properties": {"n": {"type": "string"}},
            "required": ["n"],
            "allOf": [{"properties": {"n": {"pattern": "^a+$"}}}],
        },
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert not accepts_text(grammar, small_info, '[{"n":"b"}]')
    assert not accepts_text(grammar, small_info, '[{"n":"a"},{"n":"a"}]')
    assert accepts_text(grammar, small_info, '[{"n":"a"},{"n":"aa"}]')
    for seed in range(8):
        jsonschema.validate(json.loads(random_walk(grammar, small_info, seed)[1]), schema)


def test_jump_forward_through_bounded_items(small_compiler, small_info):
    # the forced '"' after '[' is checked against the bounded items (it used to raise TypeError)
    schema = {
        "type": "array",
        "uniqueItems": True,
        "minItems": 2,
        "items": {"enum": ["xyz1", "xyz2", "xyz3"]},
    }
    matcher = small_compiler.compile(Constraint("json_schema", schema)).matcher()
    tokens = {data: i for i, data in enumerate(small_info.token_bytes)}
    assert matcher.accept_token(tokens[b"["])
    assert [small_info.token_bytes[t] for t in matcher.jump_forward_token_ids()][:1] == [b'"']


def test_bounded_strings_on_the_real_vocabulary(small_compiler, small_info):
    schema = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 2},
                "uniqueItems": True,
            },
            "people": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"login": {"type": "string", "maxLength": 20}},
                    "required": ["login"],
                },
                "uniqueItems": True,
            },
        },
        "required": ["tags", "people"],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))

    def accepts(text: str) -> bool:
        return accepts_prefix(grammar, small_info, text)

    assert accepts('{"tags":["ab","a"],"people":[{"login":"x"},{"login":"xy"}]}')
    assert not accepts('{"tags":["ab","ab')  # at maxLength: it could neither close nor grow
    assert accepts('{"tags":["ab","a')
    assert not accepts(
        '{"tags":["\\n"'
    )  # printable ASCII only: one spelling, one byte per character
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_tool_calls_guard_starts_after_the_tag():
    info = toy_info([b""] + [p.encode() for p in PIECES + ["<t>", "</t>", "x"]])
    spec = json.dumps({"schema": SET_OF_STRINGS, "open": "<t>", "close": "</t>"})
    grammar = GrammarCompiler(info).compile(Constraint("tool_calls", spec))
    assert tool_calls_regex(spec)[2] == b"<t>"
    tokens = {p: i + 1 for i, p in enumerate(PIECES + ["<t>", "</t>", "x"])}

    def accepts(*pieces) -> bool:
        matcher = grammar.matcher()
        return all(matcher.accept_token(tokens[p]) for p in pieces) and matcher.accept_token(0)

    assert accepts("x", '"a"', ",", '"a"')  # free text: not JSON, nothing to keep unique
    assert accepts("<t>", "[", '"a"', ",", '""', "]", "</t>")
    assert not accepts("<t>", "[", '"a"', ",", '"a"', "]", "</t>")


@pytest.mark.parametrize(
    "schema",
    [
        # more items than values
        {
            "type": "array",
            "items": {"type": "string", "maxLength": 0},
            "uniqueItems": True,
            "minItems": 2,
        },
        {
            "type": "array",
            "items": {"type": "string", "maxLength": 1},
            "uniqueItems": True,
            "minItems": 95,
        },
        {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 3},
        # (below: minItems 2, so not arrays of at most one item, test_one_item_arrays_where_items_cannot_be_kept_unique)
        {
            "type": "array",
            "items": {"type": "integer", "maximum": 5},
            "uniqueItems": True,
            "minItems": 2,
        },  # bounded
        {
            "type": "array",
            "items": {"type": "integer", "minimum": -5},
            "uniqueItems": True,
            "minItems": 2,
        },  # -5 cannot grow
        {"type": "object", "properties": {"t": {"anyOf": [SET_OF_STRINGS, SET_OF_INTEGERS]}}},
        # another array at the same place, whose items the guard would wrongly keep unique
        {
            "anyOf": [
                {"type": "object", "properties": {"t": SET_OF_STRINGS}, "required": ["t"]},
                {
                    "type": "object",
                    "properties": {"t": {"type": "array", "items": {"const": "a"}}},
                    "required": ["t"],
                },
            ]
        },
        {
            "anyOf": [
                {"type": "object", "properties": {"t": SET_OF_STRINGS}},
                {"type": "object", "properties": {"t": {"const": ["a", "a"]}}},
            ]
        },
        # objects: no string property that can always grow
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
            "uniqueItems": True,
            "minItems": 2,
        },
        # alternatives none of which has a key property
        {
            "type": "array",
            "items": {
                "type": "object",
                "anyOf": [
                    {
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"],
                        "additionalProperties": False,
                    },
                    {
                        "properties": {"m": {"type": "boolean"}},
                        "required": ["m"],
                        "additionalProperties": False,
                    },
                ],
            },
            "uniqueItems": True,
            "minItems": 2,
        },
    ],
)
def test_unguardable_unique_items_are_refused(schema):
    with pytest.raises(GrammarError, match="uniqueItems"):
        schema_to_guarded_regex(json.dumps(schema))


def test_the_plain_regex_refuses_a_guarded_schema():
    """schema_to_regex's callers embed the regex without the guard: they get a 400 instead."""
    with pytest.raises(GrammarError, match="uniqueItems"):
        schema_to_regex(json.dumps(SET_OF_STRINGS))
    regex, paths = schema_to_guarded_regex(
        json.dumps({"type": "object", "properties": {"s": SET_OF_STRINGS}})
    )
    assert paths == ((("s",), "string"),)
    assert re.fullmatch(regex, '{"s":["a","a"]}')  # the regex alone shapes; the guard keeps unique


def test_items_are_spelt_one_way():
    """Equal values must have equal texts, so the item regex has no \\/ and no \\u escapes."""
    regex = re.compile(schema_to_guarded_regex(json.dumps(SET_OF_STRINGS))[0])
    assert regex.fullmatch('["a/","a\\n"]')
    for text in ['["a\\/"]', '["\\u0061"]']:
        assert json.loads(text) and not regex.fullmatch(text)


def test_many_items_mask_matches_acceptance(smol_compiler, smol_info, smol_tokenizer):
    """With more items than ways to close one (SmolLM2 has 40 texts before a first quote), the
    ban looks each closing token up instead of each item; either way mask == acceptance for every
    token with a quote, inside an item, after a pending escape and between items."""
    grammar = smol_compiler.compile(
        Constraint(
            "json_schema", {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
        )
    )
    items = [f"w{i}" for i in range(60)] + ["w1\\\\", 'w1\\"x']
    bitmask = allocate_bitmask(1, smol_info.vocab_size)
    quoted = [
        t
        for t, data in enumerate(smol_info.token_bytes)
        if b'"' in data and t not in smol_info.special_ids
    ]
    for tail in ['"w1', '"w', '"w1\\', '"', ""]:
        matcher = grammar.matcher()
        text = "[" + ",".join(f'"{item}"' for item in items) + "," + tail
        assert all(
            matcher.accept_token(t) for t in smol_tokenizer.encode(text, add_special_tokens=False)
        )
        matcher.fill_bitmask(bitmask, 0)
        allowed = set(unpack_row(bitmask[0], smol_info.vocab_size).tolist())
        banned = 0
        for token in quoted:
            accepted = matcher.fork().accept_token(token)
            assert accepted == (token in allowed), (tail, smol_info.token_bytes[token])
            banned += not accepted
        assert banned > 0 or tail == ""


def test_custom_whitespace_does_not_hide_repeats():
    """A whitespace regex may allow bytes JSON does not (\\f): the guard skips them as whitespace."""
    pieces = PIECES + ["\f", '\f"']
    info = toy_info([b""] + [p.encode() for p in pieces])
    grammar = GrammarCompiler(info, whitespace=r"[ \f]{0,2}").compile(
        Constraint("json_schema", SET_OF_STRINGS)
    )
    ids = {p: i + 1 for i, p in enumerate(pieces)}

    def accepts(*parts) -> bool:
        matcher = grammar.matcher()
        return all(matcher.accept_token(ids[p]) for p in parts) and matcher.accept_token(0)

    assert accepts("[", "\f", '"a"', ",", "\f", '""', "]")
    assert not accepts("[", "\f", '"a"', ",", '\f"', 'a"', "]")
    assert not accepts("[", "\f", '"a"', "\f", ",", '"a"', "]")


@pytest.mark.parametrize("items", [{"type": "string"}, {"enum": ["a", "b"]}])
def test_a_type_list_keeps_its_other_types(items):
    """{"type": ["array", "null"], "uniqueItems": true}: the array is a placeholder, null stays."""
    schema = {
        "type": "object",
        "properties": {"x": {"type": ["array", "null"], "items": items, "uniqueItems": True}},
        "required": ["x"],
    }
    regex = re.compile(schema_to_guarded_regex(json.dumps(schema))[0])
    assert regex.fullmatch('{"x":null}') and regex.fullmatch('{"x":["a","b"]}')
    assert not regex.fullmatch('{"x":"a"}')


def test_unique_prefix_items_told_apart_by_their_schemas(small_compiler, small_info):
    """DynamoDB's KeySchema: a HASH element, then a RANGE one, at most two: the items differ by
    their schemas, so the arrays are unique as generated; overlapping prefix schemas, or items
    past the prefix, are still refused."""
    key = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 4},
            "kind": {"enum": ["HASH", "RANGE"]},
        },
        "required": ["name", "kind"],
        "additionalProperties": False,
    }
    schema = {
        "type": "array",
        "uniqueItems": True,
        "minItems": 1,
        "maxItems": 2,
        "items": key,
        "prefixItems": [
            {**key, "properties": {**key["properties"], "kind": {"const": "HASH"}}},
            {**key, "properties": {**key["properties"], "kind": {"const": "RANGE"}}},
        ],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    values = [json.loads(random_walk(grammar, small_info, seed)[1]) for seed in range(12)]
    for value in values:
        jsonschema.validate(value, schema)
    one, two = '[{"name":"a","kind":"HASH"}', ',{"name":"a","kind":"RANGE"}]'
    assert accepts_text(grammar, small_info, one + two)  # (exactly the prefix items are generated)
    assert not accepts_text(grammar, small_info, one + two.replace("RANGE", "HASH"))
    for bad in ({**schema, "maxItems": 3}, {**schema, "prefixItems": [key, key]}):
        with pytest.raises(GrammarError, match="uniqueItems"):
            schema_to_guarded_regex(json.dumps(bad))


@pytest.mark.parametrize(
    "items",
    [
        {
            "anyOf": [{"type": "string", "minLength": 1}, {"enum": ["ajax", "build"]}]
        },  # VS marketplace categories
        {
            "anyOf": [{"enum": ["activeTab", "tabs"]}, {"type": "string"}]
        },  # Chrome's optional_permissions
        {"anyOf": [{"type": "string"}, {"type": "string", "pattern": "^a"}]},
    ],
)
def test_any_of_options_another_takes_whole_are_dropped(items, small_compiler, small_info):
    """An anyOf option whose every value another option accepts adds nothing: the items are the
    wider option's strings, kept unique."""
    schema = {"type": "array", "items": items, "uniqueItems": True, "maxItems": 4}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    values = [json.loads(random_walk(grammar, small_info, seed)[1]) for seed in range(12)]
    for value in values:
        jsonschema.validate(value, schema)
    assert any(len(value) > 1 for value in values)


@pytest.mark.parametrize(
    "items",
    [
        {
            "anyOf": [{"type": "string", "maxLength": 1}, {"enum": ["ab"]}]
        },  # "ab" is too long for the first
    ],
)
def test_any_of_options_no_other_takes_whole_stay(items):
    with pytest.raises(GrammarError, match="uniqueItems"):
        schema_to_guarded_regex(
            json.dumps({"type": "array", "items": items, "uniqueItems": True, "minItems": 2})
        )


def test_objects_of_alternatives_kept_unique_by_a_shared_property(small_compiler, small_info):
    """CloudFormation's feature variations: `oneOf` of objects that each require the name (one
    pattern) and one value kind: the name is kept unique across the array, whichever alternative
    each object takes."""
    schema = {
        "type": "array",
        "uniqueItems": True,
        "maxItems": 4,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "Name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
                "Text": {"type": "string", "maxLength": 2},
                "Flag": {"type": "boolean"},
            },
            "oneOf": [{"required": ["Name", "Text"]}, {"required": ["Name", "Flag"]}],
        },
    }
    values = _keyed_walks(
        small_compiler,
        small_info,
        schema,
        lambda item: item["Name"],
        '[{"Name":"a","Text":"x"},{"Name":"b","Flag":true}]',
        '[{"Name":"a","Text":"x"},{"Name":"a","Flag":true}',
    )
    assert {k for value in values for item in value for k in item} == {"Name", "Text", "Flag"}
    different = {
        **schema,
        "items": {
            **schema["items"],
            "oneOf": [
                {"required": ["Name", "Text"]},
                {"required": ["Flag"], "properties": {"Name": {"maxLength": 1}}},
            ],
        },
    }
    # the name differs between the alternatives: the first one alone, kept unique by its name
    values = _keyed_walks(
        small_compiler,
        small_info,
        different,
        lambda item: item["Name"],
        '[{"Name":"a","Text":"x"},{"Name":"b","Text":"x"}]',
        '[{"Name":"a","Text":"x"},{"Name":"a"',
    )
    assert {k for value in values for item in value for k in item} == {"Name", "Text"}


def test_objects_of_alternatives_with_no_shared_property_kept_unique_by_the_first(
    small_compiler, small_info
):
    """CloudFormation's tags, `{Key, Value}` or `{TagKey, TagValue}`: no property every
    alternative holds, so the first alternative alone is generated, kept unique by its key."""
    tag = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "Key": {"type": "string", "maxLength": 3},
            "Value": {"type": "string", "maxLength": 2},
        },
        "required": ["Key", "Value"],
    }
    other = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"TagKey": {"type": "string"}, "TagValue": {"type": "string"}},
        "required": ["TagKey", "TagValue"],
    }
    schema = {"type": "array", "uniqueItems": True, "maxItems": 4, "items": {"oneOf": [tag, other]}}
    values = _keyed_walks(
        small_compiler,
        small_info,
        schema,
        lambda item: item["Key"],
        '[{"Key":"a","Value":"x"},{"Key":"b","Value":"x"}]',
        '[{"Key":"a","Value":"x"},{"Key":"a"',
    )
    assert all(set(item) == {"Key", "Value"} for value in values for item in value)
    # IoT's nodes, each one object property of its own (`{"Branch": {...}}` or `{"Sensor": {...}}`):
    # the first alternative, kept unique by a name inside its object property
    branch, sensor = (
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                outer: {
                    "type": "object",
                    "properties": {inner: {"type": "string", "maxLength": 3}},
                    "required": [inner],
                }
            },
        }
        for outer, inner in (("Branch", "Name"), ("Sensor", "Id"))
    )
    schema = {
        "type": "array",
        "uniqueItems": True,
        "maxItems": 4,
        "items": {"oneOf": [branch, sensor]},
    }
    values = _keyed_walks(
        small_compiler,
        small_info,
        schema,
        lambda item: item["Branch"]["Name"],
        '[{"Branch":{"Name":"a"}},{"Branch":{"Name":"b"}}]',
        '[{"Branch":{"Name":"a"}},{"Branch":{"Name":"a"}',
    )
    assert all(set(item) == {"Branch"} for value in values for item in value)


def test_objects_kept_unique_by_a_property_of_an_object_property(small_compiler, small_info):
    """CloudFormation's MSK Connect plugins: `{"CustomPlugin": {"CustomPluginArn": ..., "Revision":
    ...}}`: no property of the item can keep it unique, the ARN inside its one object property
    can (both then always generated)."""
    schema = {
        "type": "array",
        "uniqueItems": True,
        "minItems": 1,
        "maxItems": 4,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["Plugin"],
            "properties": {"Plugin": {"$ref": "#/$defs/plugin"}, "Note": {"type": "integer"}},
        },
        "$defs": {
            "plugin": {
                "type": "object",
                "additionalProperties": False,
                "required": ["Revision"],
                "properties": {
                    "Revision": {"type": "integer"},
                    "Arn": {"type": "string", "pattern": "^arn:[a-z]+$"},
                },
            }
        },
    }
    values = _keyed_walks(
        small_compiler,
        small_info,
        schema,
        lambda item: item["Plugin"]["Arn"],
        '[{"Plugin":{"Revision":1,"Arn":"arn:a"}},{"Plugin":{"Revision":1,"Arn":"arn:b"}}]',
        '[{"Plugin":{"Revision":1,"Arn":"arn:a"}},{"Plugin":{"Revision":2,"Arn":"arn:a"',
    )
    assert any(len(value) > 1 for value in values)


def _keyed_walks(compiler, info, schema: dict, key, distinct: str, repeated: str) -> list:
    """The outputs of 12 walks of a schema whose objects are kept unique by `key(item)`: each
    valid, with distinct keys; `distinct` (two objects, two keys) accepted, `repeated` (a key
    again) not."""
    grammar = compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, info, distinct) and not accepts_prefix(grammar, info, repeated)
    values = [json.loads(random_walk(grammar, info, seed)[1]) for seed in range(12)]
    for value in values:
        jsonschema.validate(value, schema)
        assert len({key(item) for item in value}) == len(value)
    return values


@pytest.mark.parametrize(
    "items",
    [
        {"type": "number"},
        {"type": "number", "minimum": 0.5},
        {"type": "number", "exclusiveMinimum": 0, "description": "a weight"},
    ],
)
def test_numbers_are_kept_unique_as_integers(items, small_compiler, small_info):
    # pydantic's set[float]: decimals have many spellings of one value (0.1, 0.10000000000000001),
    # integers one, so the items are integers within the bounds, and the guard keeps them unique
    schema = {"type": "array", "items": items, "uniqueItems": True, "minItems": 2}
    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert paths == (((), "integer"),) and not re.fullmatch(regex, "[1,2.5]")
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, "[1,2]") and not accepts_prefix(
        grammar, small_info, "[1,1]"
    )
    for seed in range(8):
        _, text = random_walk(grammar, small_info, seed)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        assert all(isinstance(v, int) for v in value)


@pytest.mark.parametrize(
    "items", [{"type": "number", "maximum": 3}, {"type": "number", "minimum": 0.2, "maximum": 0.8}]
)
def test_numbers_that_could_run_out_are_refused(items):
    # the integer subset is bounded (or empty): the refusal is uniqueItems', not the bounds'
    with pytest.raises(GrammarError, match="uniqueItems.*numbers, generated as integers"):
        schema_to_guarded_regex(
            json.dumps({"type": "array", "items": items, "uniqueItems": True, "minItems": 2})
        )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "uniqueItems": True, "minItems": 2},
        {"type": "array", "items": True, "uniqueItems": True, "minItems": 2},
        {"type": "array", "items": {"description": "any"}, "uniqueItems": True, "minItems": 2},
    ],
)
def test_items_of_any_type_are_kept_unique_as_strings(schema, small_compiler, small_info):
    # a unique array whose items may be anything (a meta-schema's `enum`, a service's arguments):
    # strings, spelt one way each (objects are not: their names can come in any order)
    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert paths == (((), "string"),) and not re.fullmatch(regex, '["a",1]')
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, '["a","b"') and not accepts_prefix(
        grammar, small_info, '["a","a"'
    )
    for seed in range(6):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        jsonschema.validate(value, schema)
        assert all(isinstance(v, str) for v in value)


@pytest.mark.parametrize(
    ("items", "kind"),
    [
        ({"type": ["string", "object"]}, "string"),
        ({"type": ["string", "array"], "items": {"type": "integer"}}, "string"),
        (
            {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {"file": {"type": "string"}},
                        "required": ["file"],
                        "additionalProperties": False,
                    },
                ]
            },
            "string",
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]},
            ("bounded", '"[ !#-\\[\\]-~]{0,3}"'),
        ),
        (
            {
                "anyOf": [
                    {"type": "string", "pattern": "^a"},
                    {"type": "string"},
                    {"type": "integer"},
                ]
            },
            "string",
        ),
    ],
)
def test_items_of_several_types_are_kept_unique_as_their_strings(
    items, kind, small_compiler, small_info
):
    # items that may be strings or something else (a plugin's name or its [name, options]): where
    # they cannot be kept unique as they are, their strings are (a subset)
    schema = {"type": "array", "items": items, "uniqueItems": True, "minItems": 2}
    regex, paths = schema_to_guarded_regex(json.dumps(schema))
    assert paths[0] == ((), kind) and not re.fullmatch(regex, '["a",{}]')
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_prefix(grammar, small_info, '["a","b"') and not accepts_prefix(
        grammar, small_info, '["a","a"'
    )
    for seed in range(6):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        jsonschema.validate(value, schema)
        assert all(isinstance(v, str) for v in value) and len(set(value)) == len(value)


@pytest.mark.parametrize(
    "items",
    [
        {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 2}]},
        {"type": ["integer", "object"]},
    ],
)
def test_items_whose_strings_cannot_be_told_apart_are_refused(items):
    with pytest.raises(GrammarError, match="uniqueItems"):
        schema_to_guarded_regex(
            json.dumps({"type": "array", "items": items, "uniqueItems": True, "minItems": 2})
        )


@pytest.mark.parametrize(
    ("items", "values"),
    [
        (
            {"type": "string", "oneOf": [{"enum": ["require"]}, {"enum": ["undefined"]}]},
            ["require", "undefined"],
        ),
        (
            {"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]},
            ["a", "c"],
        ),  # "b" is valid under neither
        ({"anyOf": [{"enum": ["a", 1]}, {"const": None}]}, ["a", 1, None]),
    ],
)
def test_unique_items_from_options_of_values(items, values):
    # a set of values written as options (jscs's allExcept): each value at most once
    schema = {"type": "array", "items": items, "uniqueItems": True}
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    for n in range(len(values) + 2):
        for chosen in itertools.product(values + ["b"], repeat=n):
            text = json.dumps(list(chosen), separators=(",", ":"))
            valid = all(v in values for v in chosen) and len({json.dumps(v) for v in chosen}) == n
            if re.fullmatch(regex, text):
                assert valid, text
                jsonschema.validate(list(chosen), schema)
    assert re.fullmatch(regex, json.dumps(values, separators=(",", ":")))


@pytest.mark.parametrize(
    "items",
    [
        {"type": "integer", "minimum": 0, "maximum": 65535},  # ports: bounded integers
        {"type": "integer", "minimum": -5},
        {"type": "number", "maximum": 3},
        # objects with no string property to keep unique (CloudFormation's number filters, step adjustments)
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "Eq": {"type": "number"},
                "Gte": {"type": "number"},
                "Lte": {"type": "number"},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["ScalingAdjustment"],
            "properties": {
                "MetricIntervalLowerBound": {"type": "number"},
                "ScalingAdjustment": {"type": "integer"},
            },
        },
        {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 2}]},
        {"type": "array", "items": {"type": "integer"}},
    ],
)
@pytest.mark.parametrize("least", [0, 1])
def test_one_item_arrays_where_items_cannot_be_kept_unique(
    items, least, small_compiler, small_info
):
    """uniqueItems over items no regex or guard keeps unique (bounded integers, numbers, objects
    with no string key, arrays): arrays of at most one item, unique by construction (a subset).
    With minItems 2 they are refused (test_unguardable_unique_items_are_refused)."""
    schema = {"type": "array", "items": items, "uniqueItems": True, "minItems": least}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    values = [json.loads(random_walk(grammar, small_info, seed)[1]) for seed in range(8)]
    for value in values:
        jsonschema.validate(value, schema)
        assert least <= len(value) <= 1
    assert any(len(value) == 1 for value in values)
    first = json.dumps(next(value[0] for value in values if value), separators=(",", ":"))
    assert accepts_prefix(grammar, small_info, "[" + first) and not accepts_prefix(
        grammar, small_info, f"[{first},"
    )

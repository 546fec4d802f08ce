"""JSON Schema constraints: every random valid walk validates; unsupported keywords are refused."""

import json
import re
import time
from datetime import datetime

import hypothesis
import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.compiler import JSON_OBJECT, GrammarCompiler
from radixgen.grammar.json_schema import schema_to_guarded_regex, schema_to_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema import values as schema_values
from tests.grammar.schemas import SUPPORTED, UNSUPPORTED
from tests.grammar.walks import accepts_text, random_walk, valid_walks

FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
WALKS = 5


def _validate(text: str, schema) -> None:
    instance = json.loads(text)
    jsonschema.validate(
        instance, schema, cls=jsonschema.Draft202012Validator, format_checker=FORMAT_CHECKER
    )
    if schema.get("format") in ("date-time",):
        datetime.fromisoformat(instance)  # jsonschema needs an extra package to check these


def test_at_least_thirty_schemas():
    assert len(SUPPORTED) >= 30


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_random_walks_validate(name, small_compiler, small_info):
    schema = SUPPORTED[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(WALKS):
        _, text = random_walk(grammar, small_info, seed)
        _validate(text, schema)


@pytest.mark.parametrize("name", ["nested", "refs", "format_datetime", "one_of_tagged", "any_of"])
def test_random_walks_validate_full_vocabulary(name, smol_compiler, smol_info):
    schema = SUPPORTED[name]
    grammar = smol_compiler.compile(Constraint("json_schema", schema))
    for seed in range(2):
        _, text = random_walk(grammar, smol_info, seed)
        _validate(text, schema)


@pytest.mark.parametrize("schema,keyword", UNSUPPORTED, ids=[k for _, k in UNSUPPORTED])
def test_unsupported_keywords_are_refused(schema, keyword, small_compiler):
    with pytest.raises(GrammarError, match=keyword.replace("$", r"\$")):
        small_compiler.compile(Constraint("json_schema", schema))


@pytest.mark.parametrize(
    ("pattern", "found", "not_found"),
    [
        ("^ab", ["ab", "abzz", "ab-1"], ["xab", "a"]),  # a prefix: any string that starts so
        ("\\.md$", [".md", "x.md", "a b.md"], [".mdx", "md"]),  # a suffix
        ("^a|b$", ["a", "azz", "zzb", "b"], ["zaz", "bz"]),  # each top-level alternative on its own
        ("^v?[0-9]|^dev-", ["v1", "1.x", "dev-9"], ["dev", "x1"]),
        ("ab", ["ab"], ["xab", "abx"]),  # no anchor: its full matches, as before
        ("^a[0-9]$", ["a1"], ["a12"]),  # both: as written
        ("\\Aa[0-9]+\\Z", ["a1", "a12"], ["xa1", "a1x"]),  # Python's string anchors, as ^ and $
        ("\\Aab", ["ab", "abzz"], ["xab"]),
        ("x\\Z", ["x", "zzx"], ["xz", "x\\Z"]),
    ],
)
def test_a_pattern_anchored_at_one_end_is_open_at_the_other(
    pattern, found, not_found, small_compiler, small_info
):
    schema = {"type": "string", "pattern": pattern}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text in found:
        assert re.search(pattern, text) and accepts_text(grammar, small_info, json.dumps(text)), (
            text
        )
    for text in not_found:
        assert not accepts_text(grammar, small_info, json.dumps(text)), text
    for seed in range(4):
        assert re.search(pattern, json.loads(random_walk(grammar, small_info, seed)[1]))
    # an enum beside such a pattern keeps the values it finds
    assert schema_to_regex(json.dumps({"enum": ["3.0", "3.1"], "pattern": "0$"})) == '("3\\.0")'


def test_a_listed_name_with_no_value_under_its_pattern_is_never_generated():
    # "xa" merges a $ref to strings with `type: integer` (2020-12: both apply): no value, so a
    # pattern's schema has nothing to merge into; optional, it is never generated, required refused
    schema = {
        "$defs": {"a": {"type": "string", "maxLength": 2}},
        "type": "object",
        "properties": {"xa": {"$ref": "#/$defs/a", "type": "integer"}, "y": {"type": "null"}},
        "patternProperties": {"^x": {"maxLength": 1}},
    }
    regex = schema_to_regex(json.dumps(schema))
    assert re.fullmatch(regex, '{"y":null}') and not re.search("xa", regex)
    with pytest.raises(GrammarError, match="can have no value"):
        schema_to_regex(json.dumps({**schema, "required": ["xa"]}))


def test_error_names_the_json_path():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer", "multipleOf": 0.3}}},
    }
    with pytest.raises(GrammarError, match=r"multipleOf.*\$\.properties\.a\.items"):
        schema_to_regex(json.dumps(schema))


def test_invalid_schema_is_a_grammar_error(small_compiler):
    with pytest.raises(GrammarError):
        small_compiler.compile(Constraint("json_schema", {"type": "strange"}))
    with pytest.raises(ValueError):  # GrammarError is a ValueError: HTTP 400
        small_compiler.compile(Constraint("json_schema", {"type": "string", "pattern": "("}))


def test_json_object_mode(small_compiler, small_info):
    grammar = small_compiler.compile(JSON_OBJECT)
    for seed in range(WALKS):
        _, text = random_walk(grammar, small_info, seed)
        assert isinstance(json.loads(text), dict)


def test_whitespace_modes():
    schema = json.dumps(SUPPORTED["flat"])
    assert "[ \\t\\n]" not in schema_to_regex(schema)
    assert "[ \\t\\n]" in schema_to_regex(schema, "flexible")


def test_property_order_follows_the_schema(small_compiler, small_info):
    grammar = small_compiler.compile(Constraint("json_schema", SUPPORTED["flat"]))
    _, text = random_walk(grammar, small_info, 0)
    assert list(json.loads(text)) == ["name", "age"]  # the schema's order, as OpenAI does


def test_huge_integer_bounds_compile_small_and_exact():
    """Integer bounds give regexes that grow with the square of their digit count at most (they
    doubled with each digit: 2^53 never finished), and match exactly the integers in range."""
    from radixgen.grammar.regex.number_ranges import number_range_regex

    gen = __import__("random").Random(0)
    for lo, hi in (
        (-(2**31), 2**31 - 1),
        (0, 2**53 - 1),
        (5, 10**22),
        (-(10**300), 10**300),
        (-7, -3),
    ):
        start = time.perf_counter()
        regex = number_range_regex(lo, hi, False, False, True)
        assert time.perf_counter() - start < 0.5 and len(regex) < 40_000
        pattern = re.compile(regex)
        width = len(str(max(abs(lo), abs(hi)))) + 1
        values = [lo, hi, lo - 1, hi + 1, 0, -1, 1] + [
            gen.randrange(-(10**width), 10**width) for _ in range(2000)
        ]
        for v in values:
            assert (pattern.fullmatch(str(v)) is not None) == (lo <= v <= hi), (lo, hi, v)
        assert pattern.fullmatch("01") is None and pattern.fullmatch("-0") is None


def test_deeply_nested_schema_is_refused():
    schema = {"type": "integer"}
    for _ in range(300):
        schema = {"type": "array", "items": schema}
    with pytest.raises(GrammarError, match="nests deeper"):
        schema_to_regex(json.dumps(schema))


DRAFT7_URI = "http://json-schema.org/draft-07/schema#"


def test_ref_siblings_hold_under_both_readings(small_compiler, small_info):
    """Draft 7 ignores keywords beside a $ref; 2020-12 (which jsonschema applies to a $schema URI
    it does not know, e.g. https://json-schema.org/draft-07/schema) applies them. Siblings that
    merge exactly are applied under either declaration, so outputs validate both ways."""
    body = {
        "definitions": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/n", "maximum": 3, "description": "x"}},
        "required": ["a"],
    }
    for declared in (None, DRAFT7_URI, "https://json-schema.org/draft-07/schema"):
        schema = body if declared is None else {"$schema": declared, **body}
        grammar = small_compiler.compile(Constraint("json_schema", schema))
        values = {json.loads(random_walk(grammar, small_info, seed)[1])["a"] for seed in range(12)}
        for validator in (jsonschema.Draft7Validator, jsonschema.Draft202012Validator):
            for value in values:
                validator(schema).validate({"a": value})
        assert values and max(values) <= 3


@pytest.mark.parametrize(
    "sibling",
    [
        {"pattern": "a(?=(?!c)b)"},  # cannot be enforced
        {"type": "integer"},  # nothing meets both
        {"not": {"const": "x"}},
    ],
)  # not supported
def test_ref_siblings_that_cannot_be_enforced_follow_the_declared_draft(sibling):
    """Under draft 7 they are ignored, as if they were not there (and nothing the abandoned
    attempt recorded, e.g. a guarded string, is left behind); under 2020-12 they are refused, or
    where nothing meets them, the property has no value."""
    defs = {"s": {"type": "string", "maxLength": 40}}
    with_sibling = {
        "$schema": DRAFT7_URI,
        "definitions": defs,
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 30, **sibling}},
    }
    without = {**with_sibling, "properties": {"a": {"$ref": "#/definitions/s"}}}
    assert schema_to_guarded_regex(json.dumps(with_sibling)) == schema_to_guarded_regex(
        json.dumps(without)
    )
    as_2020 = {k: v for k, v in with_sibling.items() if k != "$schema"}
    if sibling == {
        "type": "integer"
    }:  # nothing meets both: the optional property is never generated
        regex, _ = schema_to_guarded_regex(json.dumps(as_2020))
        assert re.fullmatch(regex, "{}") and '"a"' not in regex
        return
    with pytest.raises(GrammarError):
        schema_to_guarded_regex(json.dumps(as_2020))


def test_unique_items_behind_a_ref_with_siblings(small_compiler, small_info):
    """uniqueItems resolves its items through the $ref: siblings merged when the merge can be
    enforced (an enum narrowed, a pattern of finitely many strings), else (integers with an upper
    bound) the draft's reading."""
    defs = {
        "colour": {"enum": ["red", "green", "blue"]},
        "text": {"type": "string"},
        "count": {"type": "integer"},
    }
    narrowed = {
        "$schema": DRAFT7_URI,
        "definitions": defs,
        "type": "array",
        "uniqueItems": True,
        "items": {"$ref": "#/definitions/colour", "enum": ["red", "blue"]},
    }
    grammar = small_compiler.compile(Constraint("json_schema", narrowed))
    outputs = [json.loads(random_walk(grammar, small_info, seed)[1]) for seed in range(12)]
    assert {v for out in outputs for v in out} <= {"red", "blue"}
    for out in outputs:
        jsonschema.Draft202012Validator(narrowed).validate(out)
    patterned = {
        **narrowed,
        "items": {"$ref": "#/definitions/text", "pattern": "^[0-9]{2}$"},
    }  # 100 values
    grammar = small_compiler.compile(Constraint("json_schema", patterned))
    for seed in range(4):
        jsonschema.Draft202012Validator(patterned).validate(
            json.loads(random_walk(grammar, small_info, seed)[1])
        )
    bounded = {**narrowed, "items": {"$ref": "#/definitions/count", "maximum": 5}}  # could run out
    free = {**narrowed, "items": {"$ref": "#/definitions/count"}}
    assert schema_to_guarded_regex(json.dumps(bounded)) == schema_to_guarded_regex(json.dumps(free))
    with pytest.raises(
        GrammarError, match="uniqueItems"
    ):  # (two items: no one-item array fallback)
        schema_to_guarded_regex(
            json.dumps({k: v for k, v in bounded.items() if k != "$schema"} | {"minItems": 2})
        )


def test_nested_ref_siblings_that_fail_are_bounded():
    """Each draft-7 $ref with siblings is tried twice when the first reading fails: nested, and
    failing at the bottom, that is refused within the rewrite budget, not exponential work."""
    defs = {"d30": {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}}
    for i in range(30):
        defs[f"d{i}"] = {
            "type": "object",
            "properties": {
                "x": {"$ref": f"#/definitions/d{i + 1}", "minProperties": 1},
                "y": {"$ref": f"#/definitions/d{i + 1}", "maxProperties": 2},
            },
        }
    start = time.perf_counter()
    with pytest.raises(GrammarError):
        schema_to_guarded_regex(
            json.dumps({"$schema": DRAFT7_URI, "definitions": defs, "$ref": "#/definitions/d0"})
        )
    assert time.perf_counter() - start < 10


def test_top_level_bounded_string_compiles_fast(small_compiler, small_info):
    """A top-level bounded string ("a short answer") is a regex that starts with a literal which
    recurs inside its bounded repeat; the automaton library's unanchored search state was
    exponential in the bound for it (maxLength 20: 100 s on the full vocabulary, 24: never).
    index.token_index's start character removes that; every walk still validates."""

    schema = {"type": "string", "maxLength": 40}
    start = time.perf_counter()
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert time.perf_counter() - start < 20
    for seed in range(WALKS):
        _, text = random_walk(grammar, small_info, seed)
        _validate(text, schema)


@pytest.mark.parametrize(
    "pattern,min_length,max_length,exact",
    [
        ("^[a-c_]+$", 2, 6, True),  # one repeat of one character: exact
        ("^a[bc]*$", 0, 4, True),
        ("^a-[bc]{1,}$", 4, None, True),
        ("^(?:ab|c)*$", 2, 5, False),  # repeats of 1-2 characters: a subset
        ("^a+-c*$", 0, 5, False),  # two repeats share one count bound: a subset
        (
            "^((a{4})|(a-b-c))$",
            0,
            4,
            True,
        ),  # one group of alternatives: those that fit (CloudFormation's OwnerId)
        ("^(?:ab|())$", 1, None, True),
        (
            "\\b(a|ab)\\b",
            1,
            2,
            True,
        ),  # written out (a word boundary), then the lengths in its automaton too
    ],
)
def test_pattern_lengths_are_enforced(pattern, min_length, max_length, exact):
    """Every string a pattern with minLength/maxLength accepts matches the pattern and has a
    length in range; for one repeat of a single character, every such string is accepted."""
    import itertools

    from tests.grammar.conftest import toy_info

    alphabet = "abc_-"
    info = toy_info([b""] + [c.encode() for c in alphabet + '"'])
    schema = {"type": "string", "pattern": pattern, "minLength": min_length}
    if max_length is not None:
        schema["maxLength"] = max_length
    grammar = GrammarCompiler(info).compile(Constraint("json_schema", schema))
    accepted = 0
    for n in range(0, 8):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            matcher = grammar.matcher()
            ok = all(matcher.accept_token(1 + (alphabet + '"').index(c)) for c in f'"{text}"')
            ok = ok and matcher.accept_token(0)
            valid = re.search(pattern, text) is not None and min_length <= n <= (max_length or n)
            assert not ok or valid, text  # sound: nothing invalid is accepted
            assert ok or not valid or not exact, text  # exact: nothing valid is lost
            accepted += ok
    assert accepted > 0


def test_unique_items_over_an_enum():
    """uniqueItems over an enum: every array accepted has distinct items (1 and 1.0 are equal
    to JSON Schema), and every set of values is accepted in the enum's order."""
    import itertools

    from tests.grammar.conftest import toy_info

    values = ["a", 1, 1.0, True, None]
    pieces = ['"a"', "1", "1.0", "true", "null", ",", "[", "]"]
    info = toy_info([b""] + [p.encode() for p in pieces])
    schema = {"type": "array", "items": {"enum": values}, "uniqueItems": True}
    grammar = GrammarCompiler(info).compile(Constraint("json_schema", schema))
    accepted = set()
    for n in range(0, 5):
        for items in itertools.product(pieces[:5], repeat=n):
            text = "[" + ",".join(items) + "]"
            matcher = grammar.matcher()
            tokens = (
                [pieces.index("[") + 1]
                + [
                    t
                    for k, i in enumerate(items)
                    for t in ([pieces.index(",") + 1] if k else []) + [pieces.index(i) + 1]
                ]
                + [pieces.index("]") + 1]
            )
            if all(matcher.accept_token(t) for t in tokens) and matcher.accept_token(0):
                jsonschema.validate(json.loads(text), schema)
                accepted.add(text)
    distinct = ['"a"', "1", "true", "null"]  # 1.0 equals 1: never both
    for k in range(len(distinct) + 1):
        for subset in itertools.combinations(distinct, k):
            assert "[" + ",".join(subset) + "]" in accepted


def test_recursion_is_unrolled_to_its_exit():
    """A recursive reference required at every level is unrolled RECURSIVE_REF_DEPTH levels; the
    last level takes the null exit (outlines-core alone would drop the required property)."""
    from radixgen.grammar.rewrite.unroll import RECURSIVE_REF_DEPTH
    from tests.grammar.schemas import SUPPORTED

    schema = SUPPORTED["recursive_required_null_exit"]
    pattern = re.compile(schema_to_regex(json.dumps(schema)))

    def chain(levels: int) -> str:
        return '{"head":' + '{"n":1,"rest":' * levels + "null" + "}" * levels + "}"

    for levels in range(1, RECURSIVE_REF_DEPTH + 1):
        jsonschema.validate(json.loads(chain(levels)), schema)
        assert pattern.fullmatch(chain(levels))
    assert not pattern.fullmatch(chain(RECURSIVE_REF_DEPTH + 1))


def test_draft7_tuple_items_are_prefix_items(small_compiler, small_info):
    """Drafts 3-7 write tuples as an items array plus additionalItems; they mean 2020-12's
    prefixItems and items, and outputs validate under Draft7Validator."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "integer", "minimum": 0, "maximum": 5}, {"enum": ["a", "b"]}],
        "additionalItems": False,
        "minItems": 2,
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(WALKS):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.Draft7Validator(schema).validate(json.loads(text))
        assert len(json.loads(text)) == 2
    with pytest.raises(GrammarError, match="items"):  # 2020-12: refused by name
        small_compiler.compile(
            Constraint(
                "json_schema",
                {k: v for k, v in schema.items() if k not in ("$schema", "additionalItems")},
            )
        )


# schemas a fuzzing review found accepting invalid text (2026-12-03), with that text
_FOUND_UNSOUND = [
    (
        {
            "$defs": {"B": {"type": "integer"}},
            "allOf": [{"$ref": "#/$defs/B", "maximum": 5}, {"minimum": 0}],
        },
        "100",
    ),
    (
        {
            "$defs": {"A": {"$ref": "#/$defs/B", "maximum": 5}, "B": {"type": "integer"}},
            "$ref": "#/$defs/A",
            "minimum": 0,
        },
        "100",
    ),
    (
        {
            "$defs": {"B": {"type": "integer"}},
            "type": "integer",
            "anyOf": [{"$ref": "#/$defs/B", "maximum": 5}, {"minimum": 100}],
        },
        "50",
    ),
    (
        {
            "$defs": {"C": {"enum": ["red", "green", "blue"]}},
            "type": "array",
            "uniqueItems": True,
            "items": {"$ref": "#/$defs/C", "const": "red"},
        },
        '["green"]',
    ),
    (
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}],
            "allOf": [{"items": {"type": "string"}}],
        },
        "[0]",
    ),
    ({"type": "array", "allOf": [{"items": {"const": 1}}, {"items": {"const": True}}]}, "[1]"),
    ({"type": "string", "pattern": "^[^\\s]+$"}, '"\u00a0"'),
    ({"type": "string", "pattern": "^[^\\d]+$"}, '"\u0663"'),
    ({"type": "string", "pattern": "^a*+a$"}, '"a"'),
    ({"type": "string", "pattern": "^x?+x$"}, '"x"'),
    # number texts past an exclusive bound by less than a float resolves parse onto it
    ({"type": "number", "exclusiveMaximum": 1}, "0.99999999999999999999"),
    ({"type": "number", "exclusiveMinimum": 0}, "0." + "0" * 400 + "1"),  # underflows to 0.0
    ({"type": "number", "exclusiveMinimum": 0.1, "maximum": 1}, "0.10000000000000000001"),
    ({"type": "number", "maximum": 10**30}, "999999999999999999999999999999.9"),
    (
        {
            "$defs": {
                f"D{i}": {
                    "type": "object",
                    "properties": {"c": {"$ref": f"#/$defs/D{i + 1}"}},
                    "required": ["c"],
                }
                for i in range(70)
            }
            | {"D70": {"type": "integer"}},
            "$ref": "#/$defs/D0",
        },
        '{"c":' * 69 + "{}" + "}" * 69,
    ),
    # found by the JSON-Schema-Test-Suite (2026-12-04): unevaluatedItems sees no cousin's prefixItems
    ({"allOf": [{"prefixItems": [True]}, {"unevaluatedItems": False}]}, "[1]"),
    ({"allOf": [{"unevaluatedItems": False}, {"prefixItems": [True]}]}, "[1]"),
    (
        {
            "$defs": {"A": {"type": "array", "unevaluatedItems": False}},
            "$ref": "#/$defs/A",
            "prefixItems": [True],
        },
        "[1]",
    ),
    # found by the session-16 review: multipleOf beside integer and number; draft 4's numeric
    # exclusiveMaximum/Minimum, which its validators read as a flag on maximum/minimum
    ({"type": ["integer", "number"], "multipleOf": 1}, "1.5"),
    (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "integer",
            "maximum": 2,
            "exclusiveMaximum": 3,
        },
        "2",
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": ["integer", "null"],
            "minimum": 2,
            "exclusiveMinimum": 1,
        },
        "2",
    ),
    # minProperties above maxProperties on an object without properties (the session-16 fuzzer,
    # through a merge of a $ref's target with its draft-07 siblings)
    ({"type": "object", "minProperties": 1, "maxProperties": 0}, "{}"),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {
                "D0": {
                    "type": "object",
                    "properties": {"a": {"type": "object", "minProperties": 1}},
                }
            },
            "oneOf": [
                {
                    "$ref": "#/definitions/D0",
                    "properties": {"a": {"type": "object", "maxProperties": 0}},
                },
                {"enum": [1.0, True]},
            ],
        },
        '{"a":{}}',
    ),
]


@pytest.mark.parametrize("schema,text", _FOUND_UNSOUND, ids=range(len(_FOUND_UNSOUND)))
def test_found_unsound_cases_are_closed(schema, text):
    """Each schema is now either refused with a GrammarError or compiles to a grammar that rejects
    the invalid text; whatever it accepts validates."""
    from tests.grammar.conftest import toy_info

    pieces = [b""] + [bytes([c]) for c in range(32, 127)] + [ch.encode() for ch in "\u00a0\u0663"]
    info = toy_info(pieces)
    assert not _valid(text, schema)
    try:
        grammar = GrammarCompiler(info).compile(Constraint("json_schema", schema))
    except GrammarError:
        return
    matcher = grammar.matcher()
    data = text.encode()
    ids = []
    while data:
        piece = max((p for p in pieces[1:] if data.startswith(p)), key=len)
        ids.append(pieces.index(piece))
        data = data[len(piece) :]
    assert not (all(matcher.accept_token(t) for t in ids) and matcher.accept_token(0))


def _valid(text: str, schema) -> bool:
    """Valid under the validator the schema's `$schema` names (2020-12 without one)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=FORMAT_CHECKER).is_valid(
        json.loads(text)
    )  # (no metaschema check)


def test_shared_references_in_merges_are_bounded():
    """allOf members (or merged properties) that share a reference at every level of a chain
    would take merges 2^levels follows; past the budget the schema is a 400, at once."""

    for shape in ("allOf", "properties"):
        defs = {
            f"A{i}": (
                {"allOf": [{"$ref": f"#/$defs/A{i + 1}"}] * 2}
                if shape == "allOf"
                else {
                    "type": "object",
                    "properties": {k: {"$ref": f"#/$defs/A{i + 1}"} for k in "ab"},
                }
            )
            for i in range(20)
        } | {"A20": {"type": "integer"}}
        start = time.perf_counter()
        with pytest.raises(GrammarError, match="too large"):
            schema_to_regex(json.dumps({"$defs": defs, "allOf": [{"$ref": "#/$defs/A0"}] * 2}))
        assert time.perf_counter() - start < 5


def test_merge_crashes_are_grammar_errors():
    for schema in (
        {
            "$defs": {"A": {"type": "object", "properties": {"n": {"$ref": "#/$defs/A"}}}},
            "allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}],
        },
        {"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True},
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "allOf": [{"required": "b"}],
        },
        {"enum": [1e400]},
        {"const": {"a": 1e400}},
        {
            "$defs": {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(3000)} | {"D3000": {}},
            "$ref": "#/$defs/D0",
        },
    ):
        try:
            schema_to_regex(json.dumps(schema))
        except GrammarError as exc:
            assert "TypeError" not in str(exc), exc


def test_decimal_number_bounds_are_exact_where_generated():
    """Number bounds with fractions: every number the regex matches lies within the bounds (as
    a decimal, and as the float a validator parses), and in-range numbers with up to 6 fraction
    digits are all matched."""
    import random
    from decimal import Decimal

    from radixgen.grammar.regex.number_ranges import number_range_regex

    gen = random.Random(0)
    for _ in range(300):
        lo, hi = sorted(
            Decimal(gen.randint(-3000, 3000)) / 10 ** gen.randint(0, 3) for _ in range(2)
        )
        lo_excl, hi_excl = gen.random() < 0.5, gen.random() < 0.5
        if lo == hi:
            continue
        pattern = re.compile(number_range_regex(lo, hi, lo_excl, hi_excl, False))
        for _ in range(100):
            value = Decimal(gen.randint(-4000, 4000)) / 10 ** gen.randint(0, 3)
            text = format(value, "f")
            inside = (value > lo if lo_excl else value >= lo) and (
                value < hi if hi_excl else value <= hi
            )
            matched = pattern.fullmatch(text) is not None
            assert not matched or inside, (lo, hi, lo_excl, hi_excl, text)
            if matched:
                parsed = json.loads(text)
                assert (parsed > lo if lo_excl else parsed >= lo) and (
                    parsed < hi if hi_excl else parsed <= hi
                )
            if inside and not (text.startswith("-") and value == 0):
                assert matched, (lo, hi, lo_excl, hi_excl, text)


def test_ecma_named_groups_in_patterns(small_compiler, small_info):
    """`(?<name>...)` (ECMA-262; semver schemas use it) is a group; Python spells it (?P<name>...),
    which the validator here needs."""
    pattern = "^(?<major>0|[1-9]\\d*)\\.(?<minor>0|[1-9]\\d*)(?:-(?<pre>[a-z]+))?$"
    grammar = small_compiler.compile(
        Constraint("json_schema", {"type": "string", "pattern": pattern})
    )
    python_schema = {"type": "string", "pattern": pattern.replace("(?<", "(?P<")}
    for seed in range(WALKS):
        _, text = random_walk(grammar, small_info, seed)
        _validate(text, python_schema)
    byte_ids = {data[0]: i for i, data in enumerate(small_info.token_bytes) if len(data) == 1}

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return (
            all(matcher.accept_token(byte_ids[c]) for c in text.encode()) and matcher.is_accepting()
        )

    assert accepts('"1.20-rc"') and accepts('"0.0"')
    assert not accepts('"01.2"') and not accepts('"1.2-"')


@pytest.mark.parametrize(
    "pattern,inside,outside",
    [
        ("^[^\\n]+$", ['"a]-^["', '"x y"'], ['""']),  # no line break: any other character
        ("^[^/\\\\]+$", ['"ab"'], ['"a/b"', '"a\\\\b"']),  # no slash or backslash
        ("^a\\\\b$", ['"a\\\\b"'], ['"ab"', '"a\\\\\\\\b"']),  # a backslash, escaped in JSON
        ("^[a\\\\]+$", ['"a\\\\a"', '"\\\\"'], ['"b"']),  # a backslash in a class
        ("^x[\\\\]$", ['"x\\\\"'], ['"x"']),
        # an escaped backslash is one atom under a quantifier
        ("^\\\\+$", ['"\\\\\\\\"'], ['"\\\\\\"']),
        ("^a\\\\{2}$", ['"a\\\\\\\\"'], ['"a\\\\"']),
        ("^[\\\\]?x$", ['"x"', '"\\\\x"'], []),
        # a literal ^ next to a removed member stays a literal
        ("^[\\\\^a]+$", ['"a^"'], ['"b"']),
        ("^[\\n^a]+$", ['"a^"'], ['"b"']),
        # a negated class may list them as \u escapes and ranges (CloudFormation's descriptions)
        ("^[^\\u0000-\\u001F\\u007F]+$", ['"a b"', '"\u00e9"'], ['"\\n"', '"\x7f"', '"\\""']),
        ("^[^\\u0022\\u005c]*$", ['"ab"', '""'], ['"\\""', '"\\\\"']),
        # \u escapes of such characters in a class are dropped like \t (CloudFormation's policies)
        ("^[\\u0009\\u000A\\u000D\\u0020-\\u007E]+$", ['"a b"', '"{}"'], ['"\\t"', '"a\\nb"']),
        ('^\\{[\\w\\s:\\"]*}$', ['"{a: b}"'], ['"{\\"}"']),  # an escaped quote in a class, as \t is
        # a control escape that may repeat zero times matches nothing on strings without one (a phone number's `x \t*`)
        ("^a\\t*b\\r?$", ['"ab"'], ['"a\\tb"', '"ab\\r"']),
        ("^a\\\\t*$", ['"a\\\\tt"', '"a\\\\"'], ['"a"']),  # (a backslash, then t*)
        # ranges from or to them are kept as ranges, those characters taken out (`\\-a`: a range
        # from the backslash to "a", CloudFormation's `[\\x09-\\x0D\\x20-\\x7E]`)
        ("^[\\x09-\\x0D\\x20-\\x7E]+$", ['"a b"', '"~"'], ['"\\t"', '"\\""']),
        ("^[\\\\-a]+$", ['"]^_a"'], ['"b"', '"-"']),  # (the backslash itself is left out: a subset)
        # a negated class listing a shorthand: the printable ASCII it matches (never U+00A0 for [^\s])
        ("^[^\\s]+$", ['"a-b"', '"x"'], ['"a b"', '"\u00a0"', '""']),
        ("^[^\\s,]*$", ['"a;b"', '""'], ['"a,b"', '"\u2028"']),
        ("^[^\\d\\W]{2}$", ['"ab"', '"_Z"'], ['"a1"', '"a-"', '"\u00e9a"']),
        ("^[^\\S]+$", ['" "', '"  "'], ['"a"', '"\u00a0"']),  # (whitespace: the space alone)
        # lone surrogates listed in a class are in no string (AWS's [...\uD800\uDBFF-\uDC00\uDFFF])
        ("^[\\u0020-\\u007E\\uD800\\uDBFF-\\uDC00\\uDFFF]+$", ['"a b"'], ['"\\t"']),
        ("^[^\\uD800a]$", ['"b"'], ['"a"']),
        # an escape ending in a shorthand's letter (\u004d: "d") is one character: it may start a range
        ("^[\\u004d-z]+$", ['"Mz"', '"a"'], ['"L"', '"{"']),
        ("^[\\x4d-Z]$", ['"M"', '"Z"'], ['"A"']),
        # an unescaped "[" in a class is a character in ECMA-262 and Python (CloudFormation's
        # GroupDescription), not a nested class as in Rust
        (
            "^([a-z,A-Z,0-9,. _\\-:/()#,@[\\]+=&;\\{\\}!$*])*$",
            ['"a[b]"', '"[x] @ y"', '""'],
            ['"a|b"', '"~"'],
        ),
        ("^[[]{2}$", ['"[["'], ['"["', '"]]"']),
    ],
)
def test_patterns_with_characters_json_must_escape(
    small_compiler, small_info, pattern, inside, outside
):
    """A class that lists characters JSON strings must escape (control escapes, a backslash)
    drops them, without widening; a backslash outside a class is written as JSON's escape; a
    negated class with a shorthand keeps the printable ASCII it matches."""
    grammar = small_compiler.compile(
        Constraint("json_schema", {"type": "string", "pattern": pattern})
    )
    byte_ids = {data[0]: i for i, data in enumerate(small_info.token_bytes) if len(data) == 1}

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return (
            all(matcher.accept_token(byte_ids[c]) for c in text.encode()) and matcher.is_accepting()
        )

    validator = jsonschema.Draft202012Validator({"type": "string", "pattern": pattern})
    for text in inside:
        assert accepts(text) and validator.is_valid(json.loads(text)), text
    for text in outside:
        assert not accepts(text), text
    for seed in range(WALKS):
        assert validator.is_valid(json.loads(random_walk(grammar, small_info, seed)[1]))


@pytest.mark.parametrize(
    "pattern,words",
    [
        ("^[\\n]$", "only characters"),
        ("^[\\t-\\r]$", "only characters"),
        ("^[a-z0-9-\\\\.]$", "a range"),
        ("^[\\u0000-\\u001F]$", "must escape"),
        ("^[\\u0020-\\uD800]$", "surrogate"),
        ("^[\\p{Print}&&[^|:/]]+$", "class set"),
    ],
)  # Java's intersection
def test_classes_of_characters_json_must_escape_are_refused(pattern, words):
    with pytest.raises(GrammarError, match=words):
        schema_to_regex(json.dumps({"type": "string", "pattern": pattern}))


def test_keyed_objects_follow_their_name_rules(small_compiler, small_info):
    """propertyNames / one patternProperties pattern on a free-form object: names follow it (a
    pattern open at its end takes any rest), values follow the value schema."""
    from tests.grammar.schemas import SUPPORTED

    byte_ids = {data[0]: i for i, data in enumerate(small_info.token_bytes) if len(data) == 1}

    def accepts(name: str, text: str) -> bool:
        matcher = small_compiler.compile(Constraint("json_schema", SUPPORTED[name])).matcher()
        return (
            all(matcher.accept_token(byte_ids[c]) for c in text.encode()) and matcher.is_accepting()
        )

    assert accepts("dict_literal_keys", '{"red":1,"blue":0}') and accepts("dict_literal_keys", "{}")
    assert not accepts("dict_literal_keys", '{"purple":1}') and not accepts(
        "dict_literal_keys", '{"red":-1}'
    )
    assert accepts("pattern_properties_only", '{"x-when":"2024-02-29"}')
    assert not accepts("pattern_properties_only", '{"when":"2024-02-29"}')
    assert not accepts("pattern_properties_only", '{"x-when":"2023-02-29"}')
    assert accepts("dict_pattern_keys", '{"by_id":{"a1":{"x":9}}}')
    assert not accepts("dict_pattern_keys", '{"by_id":{}}')  # minProperties 1
    assert not accepts("dict_pattern_keys", '{"by_id":{"abcdefg":{"x":1}}}')  # maxLength 6
    assert accepts("dict_tree", '{"a":{"b":{"c":1}}}') and not accepts("dict_tree", '{"d":1}')
    assert accepts("pattern_properties_one_line", '{"a b":1}')
    assert not accepts("pattern_properties_one_line", '{"a\\nb":1}')
    assert accepts("dict_enum_keys", '{"red":1,"blue":2}') and not accepts(
        "dict_enum_keys", '{"green":1}'
    )
    assert accepts("dict_any_of_keys", '{"id":true,"x-ab":false}')
    assert not accepts("dict_any_of_keys", '{"idx":true}') and not accepts(
        "dict_any_of_keys", '{"x-1":true}'
    )


def test_type_lists_with_keywords_of_one_type(small_compiler, small_info):
    # each keyword constrains its own type and lets the others pass (Kubernetes' Time is
    # {"type": ["string", "null"], "format": "date-time"})
    schema = {"type": ["string", "null", "integer"], "format": "date", "minimum": 5, "maximum": 9}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    kinds = set()
    for seed in range(30):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        validator.validate(value)
        kinds.add(type(value))
    assert kinds == {str, type(None), int}, kinds


def test_unevaluated_items_sees_adjacent_and_in_place_annotations(small_compiler, small_info):
    # the parent's unevaluatedItems sees its allOf members' and its $ref target's prefixItems
    for schema in (
        {
            "type": "array",
            "unevaluatedItems": False,
            "allOf": [{"prefixItems": [{"type": "integer"}]}],
        },
        {
            "$defs": {"A": {"type": "array", "prefixItems": [{"type": "integer"}]}},
            "$ref": "#/$defs/A",
            "unevaluatedItems": False,
        },
    ):
        grammar = small_compiler.compile(Constraint("json_schema", schema))
        for seed in range(5):
            value = json.loads(random_walk(grammar, small_info, seed)[1])
            jsonschema.Draft202012Validator(schema).validate(value)
            assert len(value) == 1 and isinstance(value[0], int)


@pytest.mark.parametrize(
    "text,valid",
    [
        ("a.b+c@x-y.example.com", True),
        ("_a@b.co", True),
        # from the JSON-Schema-Test-Suite's email format tests, and a host label that starts with "-"
        (".a@b.co", False),
        ("a.@b.co", False),
        ("a..b@b.co", False),
        ("a@-b.co", False),
        ("a@b-.co", False),
    ],
)
def test_email_format_generates_dot_atoms_and_host_labels(text, valid):
    regex = schema_to_regex(json.dumps({"type": "string", "format": "email"}))
    assert bool(re.fullmatch(regex, json.dumps(text))) is valid


@pytest.mark.parametrize(
    "fmt,invalid",
    [
        ("uri-reference", "a b"),
        ("iri", "a b"),
        ("iri-reference", "a b"),
        ("uri-template", "a}b{"),
        ("json-pointer", "a"),
        ("relative-json-pointer", "/a"),
        ("regex", "("),
        ("color", "#12"),
    ],
)
@pytest.mark.parametrize("lengths", [{}, {"minLength": 3, "maxLength": 12}])
def test_formats_generate_valid_values(fmt, invalid, lengths, small_compiler, small_info):
    # each format's regex is a subset of what the format allows: jsonschema's checker (rfc3986 /
    # rfc3987 / uri-template / jsonpointer / re.compile) accepts every walk
    schema = {
        "type": "array",
        "items": {"type": "string", "format": fmt, **lengths},
        "minItems": 3,
        "maxItems": 3,
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    # color is checked under draft 3 only (radixgen generates CSS 2.1 colors anyway)
    format_checker = jsonschema.Draft3Validator.FORMAT_CHECKER if fmt == "color" else FORMAT_CHECKER
    checker = jsonschema.Draft202012Validator(schema, format_checker=format_checker)
    assert not format_checker.conforms(invalid, fmt)  # the checker really checks
    for seed in range(8):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        checker.validate(value)
        assert all(format_checker.conforms(v, fmt) for v in value)


@pytest.mark.parametrize(
    "schema,kept",
    [
        ({"type": "string", "minLength": 1, "enum": ["", "http", "tls"]}, ["http", "tls"]),
        (
            {
                "type": "string",
                "enum": ["gzip", "otel-2", "proxy_ip"],
                "pattern": "^[0-9a-zA-Z_]+$",
            },
            ["gzip", "proxy_ip"],
        ),
        ({"const": "create-issue", "minLength": 1, "maxLength": 20}, ["create-issue"]),
        ({"enum": [1, 2.5, 3, "x", True], "minimum": 2, "exclusiveMaximum": 3}, [2.5, "x", True]),
        ({"enum": ["2024-02-29", "2023-02-29", 7], "format": "date"}, ["2024-02-29", 7]),
        ({"enum": [4, 6, 9], "multipleOf": 3, "const": 6}, [6]),
        # a given URI is checked against RFC 3986, not against the narrow form radixgen generates
        (
            {
                "type": "string",
                "format": "uri",
                "const": "https://avatars.githubusercontent.com/u/9919?v=4",
            },
            ["https://avatars.githubusercontent.com/u/9919?v=4"],
        ),
        (
            {
                "enum": [
                    "urn:isbn:0451450523",
                    "mailto:a@b.c",
                    "http://x/%zz",
                    "no scheme",
                    "//host/p",
                ],
                "format": "uri",
            },
            ["urn:isbn:0451450523", "mailto:a@b.c"],
        ),
        (
            {"enum": ["//host/p?q#f", "a b", "x:y/z"], "format": "uri-reference"},
            ["//host/p?q#f", "x:y/z"],
        ),
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "enum": [1, 2, 3],
                "maximum": 3,
                "exclusiveMaximum": True,
            },
            [1, 2],
        ),
    ],
)
def test_enum_values_must_meet_the_keywords_beside_them(schema, kept, small_compiler, small_info):
    # string keywords apply to strings, numeric ones to numbers; each value kept validates
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=FORMAT_CHECKER)
    for value in kept:
        assert accepts_text(grammar, small_info, json.dumps(value)), value
        validator.validate(value)
    dropped = [
        v
        for v in schema.get("enum", [schema.get("const")])
        if json.dumps(v) not in map(json.dumps, kept)
    ]
    for value in dropped:
        assert not accepts_text(grammar, small_info, json.dumps(value)), value
        assert not validator.is_valid(value), value


@pytest.mark.parametrize("fmt", ["uri", "uri-reference"])
@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(data=hypothesis.strategies.data())
def test_uri_values_kept_are_ones_the_checker_accepts(fmt, data):
    value = data.draw(
        hypothesis.strategies.from_regex(schema_values._URI_VALUES[fmt], fullmatch=True)
    )
    assert FORMAT_CHECKER.conforms(value, fmt), value


def test_enum_patterns_must_match_as_ecma_reads_them_too():
    # Python's \d matches Arabic-Indic digits, ECMA-262's only 0-9: kept only if both match
    regex = schema_to_regex(json.dumps({"enum": ["12", "\u0661\u0662", "ab"], "pattern": "^\\d+$"}))
    assert regex == '("12")'


@pytest.mark.parametrize(
    "schema,regex",
    [
        # numbers compare exactly: 2**53 + 1 is not 2.0**53, inside arrays too
        ({"enum": [9007199254740992.0], "const": 9007199254740993}, None),
        ({"enum": [[9007199254740993]], "const": [9007199254740992]}, None),
        # a draft-04 URI jsonschema does not know reads as 2020-12, where a flag is no bound
        (
            {
                "$schema": "https://json-schema.org/draft-04/schema#",
                "enum": [3, 10],
                "maximum": 5,
                "exclusiveMaximum": True,
            },
            None,
        ),
        # draft 4 takes no float as an integer
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "enum": [1.0, 2],
                "type": "integer",
            },
            "(2)",
        ),
        # ECMA-262: $ does not match before a final newline, "." no line terminator, \d is ASCII
        ({"enum": ["a\n", "a"], "pattern": "^a$"}, '("a")'),
        ({"enum": ["\u2028", "b"], "pattern": "^.$"}, '("b")'),
        ({"enum": ["xa", "ya", "b"], "pattern": "a"}, '("xa"|"ya")'),  # unanchored: anywhere
    ],
)
def test_enum_values_as_every_validator_reads_them(schema, regex):
    if regex is None:
        with pytest.raises(GrammarError):
            schema_to_regex(json.dumps(schema))
    else:
        assert schema_to_regex(json.dumps(schema)) == regex


def test_a_dot_generates_no_line_terminator():
    regex = schema_to_regex(json.dumps({"type": "string", "pattern": "^.$"}))
    assert (
        re.fullmatch(regex, '"a"')
        and not re.fullmatch(regex, '"\u2028"')
        and not re.fullmatch(regex, '"\u2029"')
    )


def test_one_of_sees_every_type_of_a_split_type_list(small_compiler, small_info):
    # the first alternative generates strings too, which the second accepts (and its objects are
    # valid under the second when they lack "a"): it generates nothing, the second its objects
    schema = {
        "oneOf": [
            {
                "type": ["string", "object"],
                "minLength": 1,
                "properties": {"a": {"type": "integer"}},
                "additionalProperties": False,
            },
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_text(grammar, small_info, '{"b":1}')
    for text in ('"x"', '{"a":1}', "{}"):
        assert not accepts_text(grammar, small_info, text), text
    for seed in range(6):
        jsonschema.Draft202012Validator(schema).validate(
            json.loads(random_walk(grammar, small_info, seed)[1])
        )


def test_type_lists_with_container_keywords_split_by_type(small_compiler, small_info):
    # (after Backstage's API definition) a non-empty string, or an object with a name or two
    schema = {
        "type": "object",
        "required": ["d", "n"],
        "properties": {
            "d": {
                "type": ["string", "object"],
                "minLength": 1,
                "minProperties": 1,
                "properties": {"$text": {"type": "string"}, "$json": {"type": "string"}},
            },
            "n": {
                "type": ["integer", "array", "null"],
                "minimum": 3,
                "items": {"type": "boolean"},
                "maxItems": 1,
            },
        },
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    validator = jsonschema.Draft202012Validator(schema)
    for text in [
        '{"d":"a","n":3}',
        '{"d":{"$json":"x"},"n":[true]}',
        '{"d":{"$text":""},"n":null}',
    ]:
        assert accepts_text(grammar, small_info, text) and validator.is_valid(json.loads(text)), (
            text
        )
    for text in [
        '{"d":"","n":3}',
        '{"d":{},"n":3}',
        '{"d":"a","n":2}',
        '{"d":"a","n":[true,false]}',
    ]:
        assert not accepts_text(grammar, small_info, text) and not validator.is_valid(
            json.loads(text)
        ), text
    for seed in range(6):
        validator.validate(json.loads(random_walk(grammar, small_info, seed)[1]))


@pytest.mark.parametrize(
    "bounds,sizes",
    [
        ({"minProperties": 1, "maxProperties": 1}, {1}),
        ({"maxProperties": 2, "required": ["a"]}, {1, 2}),
        ({"maxProperties": 0}, {0}),
    ],
)
def test_max_properties_below_the_listed_ones(bounds, sizes, small_compiler, small_info):
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in "abc"}, **bounds}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert {len(value) for value in valid_walks(grammar, small_info, schema, 12)} <= sizes
    assert not accepts_text(grammar, small_info, '{"a":1,"b":2,"c":3}')


@pytest.mark.parametrize(
    "names",
    [
        {},
        {"patternProperties": {"^[a-z]+$": {"type": "integer"}}},
        {"propertyNames": {"enum": ["a", "b", "c", "d"]}},
    ],
)
def test_max_properties_of_free_form_objects(names, small_compiler, small_info):
    """At most maxProperties pairs are written (a name written twice counts once after parsing:
    never more); with 0 only the empty object."""
    schema = {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "maxProperties": 2,
        **names,
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert {len(value) for value in valid_walks(grammar, small_info, schema, 12)} <= {0, 1, 2}
    assert accepts_text(grammar, small_info, '{"a":1,"b":2}')
    assert not accepts_text(grammar, small_info, '{"a":1,"b":2,"c":3}')
    empty = small_compiler.compile(Constraint("json_schema", {**schema, "maxProperties": 0}))
    assert accepts_text(empty, small_info, "{}") and not accepts_text(empty, small_info, '{"a":1}')


def test_a_short_uri_reference_is_a_relative_path(small_compiler, small_info):
    # too short for "https://...": the relative-path branch alone
    schema = {
        "type": "array",
        "items": {"type": "string", "format": "uri-reference", "maxLength": 5},
        "minItems": 2,
        "maxItems": 2,
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    checker = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    for seed in range(6):
        checker.validate(json.loads(random_walk(grammar, small_info, seed)[1]))


def test_draft4_exclusive_flags(small_compiler, small_info):
    # draft 4: a true exclusiveMaximum makes the maximum beside it exclusive; false changes nothing
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 3, "exclusiveMaximum": True},
            "b": {"type": "integer", "minimum": 7, "maximum": 8, "exclusiveMinimum": False},
        },
        "required": ["a", "b"],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    seen = set()
    for seed in range(30):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        jsonschema.Draft4Validator(schema).validate(value)
        seen.add((value["a"], value["b"]))
    assert {a for a, _ in seen} <= {0, 1, 2} and {b for _, b in seen} == {7, 8}, seen


def test_an_optional_property_with_no_valid_value_is_never_generated(small_compiler, small_info):
    # "a" is an integer that must also be a string: no value, so a valid object never has it
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "anyOf": [{"type": "string"}]},
            "b": {"type": "boolean"},
        },
        "required": ["b"],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(5):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        jsonschema.Draft202012Validator(schema).validate(value)
        assert set(value) == {"b"}
    with pytest.raises(GrammarError, match="no value is valid"):  # required: nothing is valid
        schema_to_regex(json.dumps({**schema, "required": ["a", "b"]}))


def test_a_ref_beside_a_type_its_target_cannot_meet_has_no_value(small_compiler, small_info):
    # CloudFormation's `{"$ref": "#/definitions/DataTieringStatus", "type": "object"}` over a string
    # enum, no draft declared: read as 2020-12 (both apply), no value is valid, so the optional
    # property is never generated (required: refused); under a declared draft 7, the $ref alone
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s", "type": "object"}, "b": {"type": "null"}},
        "$defs": {"s": {"type": "string", "enum": ["x"]}},
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    assert accepts_text(grammar, small_info, '{"b":null}') and not accepts_text(
        grammar, small_info, '{"a":"x"}'
    )
    with pytest.raises(GrammarError, match=r"'\$ref' at \$\.properties\.a: it does not meet"):
        schema_to_regex(json.dumps({**schema, "required": ["a"]}))
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/s", "type": "object"}},
        "definitions": {"s": {"type": "string", "enum": ["x"]}},
    }
    assert re.fullmatch(schema_to_regex(json.dumps(draft7)), '{"a":"x"}')

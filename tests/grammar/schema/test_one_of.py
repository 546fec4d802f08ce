"""oneOf: alternatives proved exclusive (or narrowed until they are) compile, and every random
walk validates under exactly one; alternatives that may overlap are refused."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from tests.grammar.walks import accepts_text, random_walk, valid_walks

SHARED = {
    "src": {"type": "string", "maxLength": 4},
    "handle": {"enum": ["a", "b"]},
    "n": {"type": "integer"},
}

EXCLUSIVE = {
    # "exactly one of": each alternative stops generating the name the other requires
    "required_names": {
        "type": "object",
        "properties": SHARED,
        "oneOf": [{"required": ["src"]}, {"required": ["handle"]}],
    },
    # closed objects with different required names (the second never generates "path")
    "closed_objects": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 3}},
                "required": ["name"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"path": {"type": "string", "maxLength": 3}, "name": {"const": "x"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        ]
    },
    # a name one alternative always has is forbidden by the other
    "forbidden_name": {
        "$defs": {
            "ref": {
                "type": "object",
                "properties": {"$ref": {"const": "#"}},
                "required": ["$ref"],
                "additionalProperties": False,
            }
        },
        "oneOf": [
            {"$ref": "#/$defs/ref"},
            {
                "type": "object",
                "properties": {"$ref": {"type": "integer"}, "x": {"type": "boolean"}},
                "required": ["x"],
            },
        ],
    },
    # a tag both require, of types that do not meet, nested one level
    "nested_tag": {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "meta": {
                        "type": "object",
                        "properties": {"v": {"type": "string"}},
                        "required": ["v"],
                    }
                },
                "required": ["meta"],
            },
            {
                "type": "object",
                "properties": {
                    "meta": {
                        "type": "object",
                        "properties": {"v": {"type": "integer"}},
                        "required": ["v"],
                    }
                },
                "required": ["meta"],
            },
        ]
    },
    # an enum beside oneOf is distributed: each alternative keeps only the values of its type
    "typed_enum": {"enum": ["1", 1], "oneOf": [{"type": "string"}, {"type": "number"}]},
    # named values none of which the pattern matches (validators search it with Python's re)
    "values_or_pattern": {
        "oneOf": [{"enum": ["red", "blue"]}, {"type": "string", "pattern": "^#[0-9a-f]{3}$"}]
    },
    # an alternative that is itself an anyOf: the types of its options
    "nested_kinds": {
        "oneOf": [
            {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
            {"type": "boolean"},
        ]
    },
    # closed objects that require nothing ({} is valid under both): each generates one of its
    # names the other forbids
    "closed_without_required": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "c": {"type": "boolean"}},
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "c": {"type": "boolean"}},
                "additionalProperties": False,
            },
        ]
    },
    # an alternative that is itself a oneOf of tagged objects (GitHub's pull_request events: two
    # shapes of "review_requested"), beside another tag; and an anyOf on the accepting side
    "nested_one_of_tags": {
        "oneOf": [
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"act": {"const": "req"}, "user": {"type": "boolean"}},
                        "required": ["act", "user"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"act": {"const": "req"}, "team": {"type": "null"}},
                        "required": ["act", "team"],
                        "additionalProperties": False,
                    },
                ]
            },
            {"type": "object", "properties": {"act": {"const": "done"}}, "required": ["act"]},
            {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"act": {"enum": ["x", "y"]}},
                        "required": ["act"],
                    },
                    {"type": "null"},
                ]
            },
        ]
    },
    # a typed alternative whose reference holds an allOf beside its properties: its type says
    # what it generates (an HTTP client's request: a URL, or an object with an alias)
    "typed_beside_all_of": {
        "$defs": {
            "req": {
                "type": "object",
                "properties": {
                    "alias": {"type": "string", "maxLength": 3},
                    "form": {"type": "boolean"},
                },
                "allOf": [{"not": {"required": ["alias", "form"]}}],
            }
        },
        "oneOf": [
            {"type": "string", "maxLength": 3},
            {"type": "object", "$ref": "#/$defs/req", "required": ["alias"]},
        ],
    },
    # "Eq", or a range of "Gte" and/or "Lte" (CloudFormation's number filters): each alternative
    # stops generating the names the other requires (through its anyOf options)
    "required_or_any_of_required": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "Eq": {"type": "integer"},
            "Gte": {"type": "integer"},
            "Lte": {"type": "integer"},
        },
        "oneOf": [{"required": ["Eq"]}, {"anyOf": [{"required": ["Gte"]}, {"required": ["Lte"]}]}],
    },
    # Kubernetes' IntOrString: null is valid under both alternatives, so under none
    "shared_type": {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]},
    # ... also where the alternatives are an anyOf / oneOf of types (an environment query or
    # version: strings are valid under both, so under none; arrays and numbers are generated)
    "shared_type_of_options": {
        "oneOf": [
            {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
                ]
            },
            {"anyOf": [{"type": "string"}, {"type": "number"}, {"enum": [True]}]},
        ]
    },
    # arrays whose items exclude each other (WordPress block supports' margin: sides or axes):
    # [] is valid under both, so neither generates it
    "arrays_of_disjoint_items": {
        "oneOf": [
            {"type": "boolean"},
            {"type": "array", "items": {"enum": ["top", "left"]}, "maxItems": 2},
            {"type": "array", "items": {"enum": ["vertical", "horizontal"]}, "maxItems": 2},
        ]
    },
    # alternatives that are allOf a shared part and a target (GitHub's ruleset conditions): told
    # apart as the one schema each merges into (each requires a name the other never generates)
    "all_of_targets": {
        "$defs": {
            "shared": {"type": "object", "properties": {"ref": {"type": "boolean"}}},
            "by_name": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 3}},
                "required": ["name"],
            },
            "by_id": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
        },
        "type": "object",
        "oneOf": [
            {"allOf": [{"$ref": "#/$defs/shared"}, {"$ref": "#/$defs/by_name"}]},
            {"allOf": [{"$ref": "#/$defs/shared"}, {"$ref": "#/$defs/by_id"}]},
        ],
    },
}


@pytest.mark.parametrize("name", sorted(EXCLUSIVE))
def test_exclusive_alternatives_validate_under_exactly_one(small_compiler, small_info, name):
    schema = EXCLUSIVE[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    validator = jsonschema.Draft202012Validator(schema)
    chosen = set()
    for seed in range(24):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        validator.validate(value)  # oneOf fails when two alternatives match
        options = schema["oneOf"]
        matches = [
            i
            for i, option in enumerate(options)
            if jsonschema.Draft202012Validator({**schema, "oneOf": [option]}).is_valid(value)
        ]
        assert len(matches) == 1, (value, matches)
        chosen.add(matches[0])
    assert chosen == set(range(len(schema["oneOf"]))), chosen  # narrowing keeps every alternative


def test_string_alternatives_generate_what_no_other_accepts(small_compiler, small_info):
    # a list, patterns and a length range: each alternative stops generating what another
    # accepts: "^1.0" (the list and the first pattern), "" (the list and the short strings) and
    # ">=1" (the second pattern and the short strings) are valid under two, so under none
    schema = {
        "oneOf": [
            {"type": "string", "enum": ["anything", "", "^1.0"]},
            {"type": "string", "pattern": "^\\^\\d\\.\\d$"},
            {"type": "string", "pattern": "^[<>]=?\\d(\\.\\d)?$", "maxLength": 5},
            {"type": "string", "maxLength": 3},
        ]
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text in ('"anything"', '"^1.5"', '"<=1.5"', '">1.5"', '"ab"', '"x"', '"any"'):
        assert accepts_text(grammar, small_info, text), text
    for text in ('""', '"^1.0"', '">=1"', '"<1"', '"anything1"', '"abcd"', '"^1.05"'):
        assert not accepts_text(grammar, small_info, text), text
    validator = jsonschema.Draft202012Validator(schema)
    for seed in range(24):
        validator.validate(json.loads(random_walk(grammar, small_info, seed)[1]))  # exactly one


@pytest.mark.parametrize(
    ("schema", "kept", "dropped"),
    [
        (
            {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string"}]},
            ['"b"', '""', '"ba"'],
            ['"a"', '"ab"'],
        ),
        # a format's strings are the validator's to say: the date alternative may accept every string
        (
            {"oneOf": [{"type": "string", "pattern": "^2"}, {"type": "string", "format": "date"}]},
            ['"1999-01-31"'],
            ['"2020-01-31"', '"2"'],
        ),
        # (SchemaStore: a date-time, or a date of a pattern; a date-time is no date of it)
        (
            {
                "oneOf": [
                    {"type": "string", "format": "date-time"},
                    {
                        "type": "string",
                        "pattern": "^((19|20)\\d\\d)\\-(0?[1-9]|1[012])\\-(0?[1-9]|[12][0-9]|3[01])$",
                    },
                ]
            },
            ['"2020-01-01T00:00:00Z"'],
            ['"2020-01-01"', '"1999-1-1"'],
        ),
    ],
)
def test_strings_another_alternative_may_all_accept_are_not_generated(
    schema, kept, dropped, small_compiler, small_info
):
    """An alternative whose strings another one may all accept (no assertion but type, or a format
    validators need not assert) generates none; the other is narrowed away from its strings."""
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text in kept:
        assert accepts_text(grammar, small_info, text), text
    for text in dropped:
        assert not accepts_text(grammar, small_info, text), text
    checkers = [
        jsonschema.Draft202012Validator(schema),
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()),
    ]
    for seed in range(12):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        for checker in checkers:  # exactly one, whether formats are asserted or not
            checker.validate(value)


@pytest.mark.parametrize(
    ("schema", "kept", "dropped"),
    [
        # nothing required, and every name of the first is allowed by the second: {"a": 1} is valid
        # under both; the first generates nothing, the second only objects with "b"
        (
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}},
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "additionalProperties": False,
                    },
                ]
            },
            ['{"b":1}', '{"a":1,"b":2}'],
            ["{}", '{"a":1}'],
        ),
        # the second is open: it accepts the first's names
        (
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}},
                        "additionalProperties": False,
                    },
                    {"type": "object", "properties": {"b": {"type": "integer"}}},
                ]
            },
            ['{"b":1}'],
            ["{}", '{"a":1}'],
        ),
        # the first requires everything the second does: the second without "src"
        (
            {
                "type": "object",
                "properties": SHARED,
                "oneOf": [{"required": ["src", "handle"]}, {"required": ["handle"]}],
            },
            ['{"handle":"a"}', '{"handle":"b","n":1}'],
            ['{"src":"x","handle":"a"}', "{}"],
        ),
        # allOf alternatives that merge into overlapping schemas (the second accepts the first's {"a": 1})
        (
            {
                "oneOf": [
                    {
                        "allOf": [
                            {"type": "object", "properties": {"a": {"type": "integer"}}},
                            {"required": ["a"]},
                        ]
                    },
                    {"allOf": [{"type": "object"}, {"properties": {"a": {"type": "integer"}}}]},
                ]
            },
            ["{}"],
            ['{"a":1}'],
        ),
        # the names a reference's merged sibling adds are generated: the first's {x, y} is valid under
        # the second, whose {y} is not under the first
        (
            {
                "$defs": {
                    "A": {
                        "type": "object",
                        "properties": {"x": {"type": "integer"}},
                        "required": ["x"],
                    }
                },
                "oneOf": [
                    {
                        "$ref": "#/$defs/A",
                        "properties": {"y": {"type": "integer"}},
                        "required": ["y"],
                    },
                    {"type": "object", "properties": {"y": {"type": "integer"}}, "required": ["y"]},
                ],
            },
            ['{"y":1}'],
            ['{"x":1,"y":1}'],
        ),
        # an untyped object schema accepts every array: its arrays are valid under both (SchemaStore's
        # AWS resources: one resource or a list of them)
        (
            {
                "$defs": {
                    "R": {
                        "properties": {"Type": {"type": "string", "maxLength": 3}},
                        "required": ["Type"],
                    }
                },
                "oneOf": [{"$ref": "#/$defs/R"}, {"type": "array", "items": {"$ref": "#/$defs/R"}}],
            },
            ['{"Type":"a"}'],
            ["[]", '[{"Type":"a"}]'],
        ),
        # an untyped properties node accepts any string: the strings are valid under both
        (
            {
                "oneOf": [
                    {"type": "string"},
                    {"properties": {"n": {"type": "string", "maxLength": 2}}, "required": ["n"]},
                ]
            },
            ['{"n":"a"}'],
            ['"a"', '""'],
        ),
        (
            {
                "oneOf": [
                    {"properties": {"t": {"const": "a"}}, "required": ["t"]},
                    {"type": "string"},
                ]
            },
            ['{"t":"a"}'],
            ['"a"'],
        ),
        # null is valid under both (`required` asserts nothing on null): the objects alone
        (
            {
                "oneOf": [
                    {
                        "type": ["object", "null"],
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                    },
                    {"type": "null"},
                ]
            },
            ['{"id":1}'],
            ["null"],
        ),
    ],
)
def test_an_alternative_another_accepts_generates_nothing(
    schema, kept, dropped, small_compiler, small_info
):
    """Where no narrowing sets an alternative apart but its values are valid under another whose
    values it rejects (or that is narrowed away from them), it generates nothing: the others'
    outputs are valid under exactly one (a subset)."""
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text in kept:
        assert accepts_text(grammar, small_info, text), text
    for text in dropped:
        assert not accepts_text(grammar, small_info, text), text
    for value in valid_walks(grammar, small_info, schema, 12):
        jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    "schema",
    [
        # a nested option shares strings with the other alternative ("a" is valid under both)
        {
            "oneOf": [
                {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
                {"type": "string", "pattern": "^a"},
            ]
        },
        {"oneOf": [{"type": "boolean"}, {"anyOf": [{"type": "null"}, {"enum": [True, 3]}]}]},
        # arrays whose items overlap ("ab" is an item of both)
        {
            "oneOf": [
                {"type": "array", "items": {"type": "string"}},
                {"type": "array", "items": {"maxLength": 2}},
            ]
        },
        # draft 4 reads no const: {"const": "ab"} accepts every string there
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "const": "ab"}],
        },
        # two alternatives that accept each other's values, neither narrowed: both would generate nothing
        {
            "oneOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "object", "properties": {"b": {"type": "integer"}}},
                {"type": "null"},
            ]
        },
    ],
)
def test_alternatives_that_may_overlap_are_refused(schema):
    with pytest.raises(GrammarError, match="oneOf"):
        schema_to_guarded_regex(json.dumps(schema))


def test_a_merged_reference_is_narrowed_with_its_sibling_names(small_compiler, small_info):
    """2020-12: an alternative that is a $ref with properties beside it generates the merged
    names; narrowing drops the one the other alternative requires, and keeps what it must."""
    schema = {
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "oneOf": [
            {"$ref": "#/$defs/A", "properties": {"y": {"type": "boolean"}}, "required": ["x"]},
            {"type": "object", "properties": {"y": {"type": "boolean"}}, "required": ["y"]},
        ],
    }
    valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 16)


def test_an_alternatives_own_error_is_reported_first():
    schema = {
        "oneOf": [
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
            {"type": "object"},
        ]
    }
    with pytest.raises(GrammarError, match="'not'"):
        schema_to_guarded_regex(json.dumps(schema))


PROPS = {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"enum": ["x", "y"]}}


@pytest.mark.parametrize(
    "schema,absent",
    [
        (
            {
                "type": "object",
                "properties": PROPS,
                "required": ["a"],
                "not": {"required": ["a", "b"]},
            },
            {"b"},
        ),
        (
            {
                "type": "object",
                "properties": PROPS,
                "not": {"anyOf": [{"required": ["a"]}, {"required": ["c"]}]},
            },
            {"a", "c"},
        ),
        # several in allOf (GitHub workflows' `on.push`): not A and not B is not (A or B)
        (
            {
                "type": "object",
                "properties": PROPS,
                "required": ["b"],
                "allOf": [
                    {"not": {"required": ["a", "b"]}},
                    {"not": {"required": ["b", "c"]}},
                    {"not": {"required": ["c"]}},
                ],
            },
            {"a", "c"},
        ),
        # the negated schema's other keywords only make it harder to meet
        (
            {
                "type": "object",
                "properties": PROPS,
                "not": {"properties": {"b": {"const": True}}, "required": ["b"]},
            },
            {"b"},
        ),
        # mutually exclusive names, as oneOf alternatives (ansible's import_playbook spelling)
        (
            {
                "type": "object",
                "properties": PROPS,
                "oneOf": [
                    {"required": ["a"], "not": {"required": ["b"]}},
                    {"required": ["b"], "not": {"required": ["a"]}},
                ],
            },
            set(),
        ),
    ],
)
def test_not_forbidding_names(small_compiler, small_info, schema, absent):
    """`not: {required: [...]}` forbids a combination of names: one of them is never generated."""
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    seen = set().union(*valid_walks(grammar, small_info, schema, 24))
    assert not seen & absent and seen | absent == set(PROPS), seen


@pytest.mark.parametrize(
    "schema,words",
    [
        (
            {"type": "object", "properties": PROPS, "required": ["a"], "not": {"required": ["a"]}},
            "always generated",
        ),
        ({"type": "object", "properties": PROPS, "not": {"type": "object"}}, "'not'"),
        (
            {"type": "string", "maxLength": 3, "not": {"const": "x"}},
            "'not'",
        ),  # (without a length: test_exclusions)
    ],
)
def test_other_nots_are_refused(schema, words):
    with pytest.raises(GrammarError, match=words):
        schema_to_guarded_regex(json.dumps(schema))


D7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize(
    "schema,text",
    [
        # `properties` beside a type without object is dropped: that alternative generates strings
        (
            {
                "properties": {"a": {"type": "integer"}},
                "oneOf": [{"required": ["a"]}, {"type": "string"}],
            },
            '"s"',
        ),
        (
            {
                "oneOf": [
                    {"type": "string", "properties": {"t": {"const": 1}}, "required": ["t"]},
                    {"properties": {"t": {"const": 2}}, "required": ["t"]},
                ]
            },
            '"foo"',
        ),
        # draft 7 reads a oneOf option as its $ref alone, whatever is distributed into it
        (
            {
                "$schema": D7,
                "definitions": {
                    "A": {
                        "type": "object",
                        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                    }
                },
                "type": "object",
                "oneOf": [
                    {"$ref": "#/definitions/A", "additionalProperties": False},
                    {"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]},
                ],
            },
            '{"z":1}',
        ),
        # a chain whose middle sibling adds a name the merged reading lost
        (
            {
                "$schema": D7,
                "definitions": {
                    "C": {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}},
                        "required": ["a"],
                    },
                    "B": {"$ref": "#/definitions/C", "properties": {"x": {"type": "string"}}},
                },
                "oneOf": [
                    {
                        "$ref": "#/definitions/B",
                        "properties": {"x": {"type": "integer"}},
                        "minProperties": 3,
                    },
                    {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                ],
            },
            '{"x":"s","a":1}',
        ),
        # an untyped property whose merge has no object left still takes every other type
        (
            {
                "$defs": {
                    "X": {
                        "type": "object",
                        "properties": {
                            "p": {"properties": {"a": {"type": "string"}}, "required": ["a"]}
                        },
                        "additionalProperties": False,
                    }
                },
                "oneOf": [
                    {
                        "$ref": "#/$defs/X",
                        "properties": {"p": {"properties": {"a": {"type": "integer"}}}},
                    },
                    {"type": "object", "properties": {"p": {"type": "integer"}}, "required": ["p"]},
                ],
            },
            '{"p":5}',
        ),
        (
            {
                "properties": {"a": {"type": "string"}},
                "oneOf": [
                    {"type": "string"},
                    {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                ],
            },
            '"x"',
        ),
        # an integer is valid under a nested option and under the number alternative
        (
            {"oneOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "number"}]},
            "1",
        ),
        # merging A with A: a const 1 is not a const true (Python's 1 == True)
        ({"allOf": [{"const": 1}, {"const": True}]}, "1"),
        (
            {
                "type": "object",
                "properties": {"x": {"const": 1}},
                "required": ["x"],
                "allOf": [{"properties": {"x": {"const": True}}}],
            },
            '{"x":1}',
        ),
        # 1 and 1.0 are equal inside containers too
        ({"oneOf": [{"const": {"a": 1}}, {"const": {"a": 1.0}}]}, '{"a":1}'),
        # draft 4 validators do not know const: both alternatives accept everything
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "oneOf": [{"const": 1}, {"const": 2}],
            },
            "1",
        ),
        # jsonschema reads this URI as 2020-12: the sibling pattern applies, and cannot be enforced
        (
            {
                "$schema": "https://json-schema.org/draft-07/schema",
                "definitions": {"s": {"type": "string", "maxLength": 3}},
                "$ref": "#/definitions/s",
                "pattern": "a(?=(?!c)b)",
            },
            '"zz"',
        ),
    ],
)
def test_no_text_valid_under_none_or_several_is_accepted(schema, text):
    """Found in review: each schema is refused, or its regex rejects the text jsonschema rejects."""
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    assert not validator(schema).is_valid(json.loads(text))
    try:
        regex, guards = schema_to_guarded_regex(json.dumps(schema))
    except GrammarError:
        return
    assert not guards and re.fullmatch(regex, text) is None


def test_draft_3_is_refused():
    with pytest.raises(GrammarError, match="draft 3"):
        schema_to_guarded_regex(
            json.dumps(
                {
                    "$schema": "http://json-schema.org/draft-03/schema#",
                    "type": "integer",
                    "extends": {"minimum": 5},
                }
            )
        )


def test_an_any_of_brought_by_an_all_of_member_is_distributed(small_compiler, small_info):
    """tsconfig's shape: allOf of references, one of them an anyOf of objects."""
    schema = {
        "$defs": {
            "base": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "f": {"type": "boolean"},
                    "g": {"type": "boolean"},
                },
            },
            "either": {"anyOf": [{"required": ["f"]}, {"required": ["g"]}]},
        },
        "allOf": [{"$ref": "#/$defs/base"}, {"$ref": "#/$defs/either"}],
    }
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 16
    )
    assert all("f" in value or "g" in value for value in values)


def test_a_type_two_alternatives_accept_whole_is_never_generated(small_compiler, small_info):
    # null is valid under the first two, so under no alternative: the first is left with nothing,
    # the third (which constrains only its strings) stops generating null
    schema = {
        "oneOf": [
            {"type": "null"},
            {"type": ["null", "boolean"]},
            {"type": ["string", "null"], "maxLength": 3},
        ]
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    kinds = {type(value) for value in valid_walks(grammar, small_info, schema, 24)}
    assert kinds == {bool, str}, kinds


@pytest.mark.parametrize(
    "schema",
    [
        # integers are shared, the first's other numbers are not: not expressible as a type
        {"oneOf": [{"type": ["number", "null"]}, {"type": ["integer", "null"]}]},
        # the second constrains null through its enum: it does not accept null whole, so the first's null overlaps
        {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"], "enum": [1, None]}]},
    ],
)
def test_types_shared_with_constraints_are_refused(schema):
    with pytest.raises(GrammarError, match="oneOf"):
        schema_to_guarded_regex(json.dumps(schema))


def test_alternatives_none_of_which_meets_the_siblings_are_refused_as_empty():
    # Kubernetes' quantity-resource.json: a string-or-number oneOf beside "type": "object"
    from radixgen.grammar.schema.rules import NothingValid

    with pytest.raises(NothingValid, match="no alternative meets"):
        schema_to_guarded_regex(
            json.dumps({"oneOf": [{"type": "string"}, {"type": "number"}], "type": "object"})
        )
    # with an allOf as well, either may be what leaves nothing: the message names both
    with pytest.raises(NothingValid, match="anyOf and allOf together do not meet"):
        schema_to_guarded_regex(
            json.dumps({"anyOf": [{"type": "integer"}], "allOf": [{"type": "string"}]})
        )

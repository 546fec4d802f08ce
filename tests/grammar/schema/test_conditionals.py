"""if / then / else on a tag property: expanded into alternatives; every random walk validates,
and each outcome the tag allows is generated."""

import json

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from tests.grammar.walks import accepts_text, valid_walks

PROPS = {"kind": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "boolean"}}

CASES = {
    # both outcomes: kind "a" needs x, the others need y
    "then_else": (
        {
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "a"}}},
                    "then": {"required": ["x"]},
                    "else": {"required": ["y"]},
                }
            ],
        },
        {"a", "b", "c"},
    ),
    # two conditionals on one tag, the node's own if among them
    "two_tags": (
        {
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "if": {"properties": {"kind": {"enum": ["b"]}}},
            "then": {"required": ["y"]},
            "allOf": [
                {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}}
            ],
        },
        {"a", "b", "c"},
    ),
    # a free-string tag: only the passing outcome (or no tag at all) is generated
    "free_tag": (
        {
            "type": "object",
            "properties": {**PROPS, "kind": {"type": "string"}},
            "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
            "then": {"properties": {"x": {"minimum": 5}}, "required": ["x"]},
        },
        {"a"},
    ),
    # an anyOf of tests on the tag: its values' union (a deployment tool's "mysql or postgresql")
    "any_of_tags": (
        {
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "if": {
                "anyOf": [
                    {"properties": {"kind": {"const": "a"}}},
                    {"properties": {"kind": {"const": "b"}}},
                ]
            },
            "then": {"required": ["x"]},
            "else": {"required": ["y"], "properties": {"x": False}},
        },
        {"a", "b", "c"},
    ),
    # the not of a test on the tag: it holds for the tag's other values (a bundler's "webpack not false")
    "not_tag": (
        {
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "if": {"not": {"properties": {"kind": {"enum": ["a"]}}}},
            "then": {"required": ["y"]},
            "else": {"properties": {"y": False}},
        },
        {"a", "b", "c"},
    ),
    # then by reference, else false (nothing valid when the test fails)
    "ref_then": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"needs_x": {"required": ["x"], "properties": {"x": {"maximum": 3}}}},
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "if": {"properties": {"kind": {"enum": ["a", "b"]}}},
            "then": {"$ref": "#/definitions/needs_x"},
            "else": False,
        },
        {"a", "b"},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conditionals_validate(small_compiler, small_info, name):
    schema, kinds = CASES[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    seen = {value.get("kind") for value in valid_walks(grammar, small_info, schema, 30)}
    assert seen - {None} == kinds, seen


@pytest.mark.parametrize(
    "test",
    [
        {"properties": {"kind": {"minLength": 1}}},  # not a finite set, not required
        {"not": {"properties": {"x": {"minimum": 1}}, "required": ["x"]}},
        {"properties": {"kind": {"const": "a"}, "x": {"const": 1}}},  # two properties
        # the not of a test inside a property: holds where it is absent either way
        {"not": {"properties": {"x": {"properties": {"kind": {"const": "a"}}}}}},
    ],
)
def test_other_conditionals_are_refused(test):
    schema = {"type": "object", "properties": PROPS, "if": test, "then": {"required": ["y"]}}
    with pytest.raises(GrammarError, match="'if'"):
        schema_to_guarded_regex(json.dumps(schema))


def test_a_conditional_beside_other_types_is_refused():
    """A test on properties holds for strings: `then` would apply to them, unmerged."""
    schema = {
        "type": ["object", "string"],
        "properties": PROPS,
        "if": {"properties": {"kind": {"const": "a"}}},
        "then": {"minLength": 3},
    }
    with pytest.raises(GrammarError, match="'if'"):
        schema_to_guarded_regex(json.dumps(schema))


NEGATED = {
    "type": "object",
    "properties": {**PROPS, "kind": {"type": "string"}},
    "required": ["kind"],
    "allOf": [
        {
            "if": {"properties": {"kind": {"not": {"const": "a"}}}},
            "then": {"properties": {"x": False}},
        },
        {
            "if": {"properties": {"kind": {"const": "b"}}, "required": ["kind"]},
            "then": {"required": ["y"]},
            "else": {"properties": {"y": False}},
        },
    ],
}


def test_negated_tags_and_free_tags_take_the_values_the_tests_name(small_compiler, small_info):
    """A free-string tag's other values are the ones the other tests name ("a" and "b" here); a
    negated test (`not: {const}`) holds outside its values; `false` forbids a property."""
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", NEGATED)), small_info, NEGATED, 30
    )
    for value in values:
        assert ("x" not in value or value["kind"] == "a") and (
            ("y" in value) == (value["kind"] == "b")
        )
    assert {value["kind"] for value in values} == {"a", "b"}


def test_a_false_property_is_never_generated(small_compiler, small_info):
    schema = {"type": "object", "properties": {**PROPS, "additionalProperties": False}}
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 12
    )
    assert not any("additionalProperties" in value for value in values)
    with pytest.raises(GrammarError, match="no value"):
        schema_to_guarded_regex(json.dumps({**schema, "required": ["additionalProperties"]}))


D7 = "http://json-schema.org/draft-07/schema#"
TAGGED = {
    "type": "object",
    "properties": {"kind": {"enum": ["a", "b"]}, "x": {}},
    "required": ["kind", "x"],
    "then": {"properties": {"x": {"type": "integer"}}},
    "else": {"properties": {"x": {"type": "string"}}},
}


@pytest.mark.parametrize(
    "schema,text",
    [
        # a property a merge emptied stays forbidden (false) in later merges
        (
            {
                "type": "object",
                "properties": {"k": {"enum": ["a"]}},
                "allOf": [{"properties": {"k": {"enum": ["b"]}}}, {"required": ["k"]}],
            },
            '{"k":true}',
        ),
        (
            {
                "type": "object",
                "properties": {"kind": {"enum": ["a", "b"]}},
                "if": {"properties": {"kind": {"const": None}}},
                "then": {"required": ["kind"]},
            },
            '{"kind":5}',
        ),
        (
            {
                "type": "object",
                "properties": {"kind": {"type": "integer"}},
                "if": {"properties": {"kind": {"not": {"const": "a"}}}, "required": ["kind"]},
                "then": {"properties": {"kind": {"const": "b"}}},
                "else": {"properties": {"kind": {"const": "b"}}},
            },
            '{"kind":"b"}',
        ),
        # a test's values: const and enum both apply; oneOf passes values of exactly one option
        (
            {**TAGGED, "if": {"properties": {"kind": {"const": "a", "enum": ["b"]}}}},
            '{"kind":"a","x":1}',
        ),
        (
            {
                **TAGGED,
                "if": {"properties": {"kind": {"oneOf": [{"const": "a"}, {"enum": ["a", "b"]}]}}},
            },
            '{"kind":"a","x":1}',
        ),
        # a test that needs an object fails for a string: else (false) applies
        (
            {
                "if": {"type": "object", "properties": {"k": {"const": 1}}},
                "then": {"type": "string"},
                "else": False,
            },
            '"a"',
        ),
        # an object-only reading of an alternative whose then makes strings
        (
            {
                "oneOf": [
                    {
                        "properties": {"k": {"enum": [1, 2]}},
                        "required": ["k"],
                        "if": {"properties": {"k": {"const": 1}}},
                        "then": {"type": "string"},
                    },
                    {"properties": {"z": {}}, "additionalProperties": False},
                ]
            },
            '"a"',
        ),
        # draft 7 reads a test or a negated schema with a $ref as the $ref alone
        (
            {
                "$schema": D7,
                "definitions": {"T": {"properties": {"kind": {"enum": ["a", "b"]}}}},
                **TAGGED,
                "if": {"$ref": "#/definitions/T", "properties": {"kind": {"const": "a"}}},
            },
            '{"kind":"b","x":"s"}',
        ),
        (
            {
                "$schema": D7,
                "definitions": {"any": {}},
                "type": "object",
                "properties": {"a": {}, "b": {}},
                "not": {"$ref": "#/definitions/any", "required": ["a"]},
            },
            '{"b":1}',
        ),
    ],
)
def test_found_in_review_nothing_invalid_is_accepted(small_compiler, small_info, schema, text):
    validator = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )(schema)
    assert not validator.is_valid(json.loads(text))
    try:
        grammar = small_compiler.compile(Constraint("json_schema", schema))
    except GrammarError:
        return
    assert not accepts_text(grammar, small_info, text)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": PROPS, "dependentSchemas": {"x": {"required": ["y"]}}},
        {
            "$schema": D7,
            "type": "object",
            "properties": PROPS,
            "dependencies": {
                "x": {"properties": {"y": {"const": True}}, "required": ["y"]},
                "kind": ["y"],
            },
        },
    ],
)
def test_dependent_schemas(small_compiler, small_info, schema):
    """A name's schema applies when it is present: generated present with it, or absent."""
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 30
    )
    assert any("x" in value for value in values) and any("x" not in value for value in values)
    assert all("y" in value for value in values if "x" in value)


def test_an_alternative_nothing_satisfies_is_left_out(small_compiler, small_info):
    empty = {
        "type": "object",
        "properties": {"a": {}},
        "required": ["a"],
        "not": {"required": ["a"]},
    }
    schema = {"anyOf": [empty, {"type": "string", "maxLength": 3}]}
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 8
    )
    assert all(isinstance(value, str) for value in values)
    with pytest.raises(GrammarError, match="always generated"):
        schema_to_guarded_regex(json.dumps(empty))


@pytest.mark.parametrize(
    "alternative",
    [
        # b is generated for the dependency, not required: {} is valid, so this is no empty alternative
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {}},
            "dependentRequired": {"a": ["b"]},
            "not": {"required": ["b"]},
        },
        # untyped: every value that is not an object satisfies it
        {"properties": {"a": False}, "required": ["a"]},
    ],
)
def test_an_alternative_with_values_is_not_left_out_as_empty(alternative):
    with pytest.raises(GrammarError):
        schema_to_guarded_regex(json.dumps({"anyOf": [alternative, {"type": "string"}]}))


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": PROPS,
            "if": {"required": ["x"]},
            "then": {"required": ["y"]},
            "else": {"properties": {"kind": {"const": "c"}}, "required": ["kind"]},
        },
        # Cognito's user pool domains: one conditional per outcome, the second a negated presence
        {
            "type": "object",
            "properties": PROPS,
            "required": ["kind"],
            "allOf": [
                {"if": {"required": ["x"]}, "then": {"properties": {"kind": {"const": "a"}}}},
                {
                    "if": {"not": {"required": ["x"]}},
                    "then": {"properties": {"kind": {"const": "c"}}},
                },
            ],
        },
    ],
)
def test_presence_tests(small_compiler, small_info, schema):
    """A test of names being present: generated with x present (then) and with x absent (else)."""
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 30
    )
    assert any("x" in value for value in values) and any("x" not in value for value in values)
    assert all(value.get("kind") == "c" for value in values if "x" not in value)


def test_a_required_property_checked_against_an_open_schema(small_compiler, small_info):
    """DynamoDB's tables: with local indexes (a non-empty list), two key attributes. The test
    fails only with the property absent (present against the rest is not generated: a subset)."""
    schema = {
        "type": "object",
        "properties": {
            "lsi": {"type": "array", "items": {"type": "integer"}},
            "keys": {"type": "array", "items": {"type": "boolean"}},
        },
        "required": ["keys"],
        "allOf": [
            {
                "if": {
                    "properties": {"lsi": {"type": "array", "minItems": 1}},
                    "required": ["lsi"],
                },
                "then": {"properties": {"keys": {"minItems": 2}}},
            }
        ],
    }
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 30
    )
    assert any("lsi" in value for value in values) and any("lsi" not in value for value in values)
    assert all(len(value["keys"]) >= 2 and value["lsi"] for value in values if "lsi" in value)


@pytest.mark.parametrize(
    "schema, kind",
    [
        ({"type": "integer", "if": {"minimum": 3}}, int),  # no then, no else: asserts nothing
        ({"type": "object", "properties": PROPS, "allOf": [{"if": {"required": ["x"]}}]}, dict),
        (
            {
                "$schema": D7,
                "type": "object",
                "properties": PROPS,
                "required": ["x"],
                "if": {"properties": {"x": {"minimum": 2}}, "required": ["x"]},
            },
            dict,
        ),  # AWS Backup's lifecycle
    ],
)
def test_a_conditional_without_then_or_else_is_dropped(small_compiler, small_info, schema, kind):
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 8
    )
    assert all(isinstance(value, kind) for value in values)


def test_any_of_presence_tests(small_compiler, small_info):
    """A linter's rules: with pattern, patterns or pattern-regex present, one thing; with none, another.
    Here: x, or kind and y, present -> kind "c" if any; neither -> kind "a" (so y absent)."""
    schema = {
        "type": "object",
        "properties": PROPS,
        "if": {"anyOf": [{"required": ["x"]}, {"required": ["kind", "y"]}]},
        "then": {"properties": {"kind": {"const": "c"}}},
        "else": {"required": ["kind"], "properties": {"kind": {"const": "a"}}},
    }
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 40
    )
    assert any(value.get("kind") == "a" for value in values)
    assert any("x" in value or "y" in value for value in values)
    assert all(value.get("kind", "c") == "c" for value in values if "x" in value or "y" in value)


ACTION = {  # a GitHub Action's metadata: outputs differ for composite actions
    "type": "object",
    "required": ["runs"],
    "properties": {
        "runs": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"using": {"const": "composite"}, "steps": {"type": "integer"}},
                    "required": ["using", "steps"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "using": {"enum": ["node16", "node20"]},
                        "main": {"type": "boolean"},
                    },
                    "required": ["using", "main"],
                    "additionalProperties": False,
                },
            ]
        },
        "outputs": {"type": "integer"},
    },
    "if": {"properties": {"runs": {"properties": {"using": {"const": "composite"}}}}},
    "then": {"required": ["outputs"], "properties": {"outputs": {"minimum": 5}}},
    "else": {"properties": {"outputs": False}},
}


@pytest.mark.parametrize(
    "schema, inner, tag",
    [
        (ACTION, "runs", "using"),
        # the tag one object down, its values the object's own, not required
        (
            {
                "type": "object",
                "properties": {
                    "inner": {"type": "object", "properties": PROPS},
                    "x": {"type": "integer"},
                },
                "if": {"properties": {"inner": {"properties": {"kind": {"const": "a"}}}}},
                "then": {"required": ["x"]},
                "else": {"properties": {"x": False}},
            },
            "inner",
            "kind",
        ),
    ],
)
def test_a_tag_inside_a_property(small_compiler, small_info, schema, inner, tag):
    """The test holds where the property is absent, no object, or its tag has the value; it
    fails with the property an object whose tag has another (found through its oneOf)."""
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 40
    )
    tested = schema["if"]["properties"][inner]["properties"][tag]["const"]
    tags = {value[inner].get(tag) for value in values if isinstance(value.get(inner), dict)}
    assert tested in tags and tags - {tested, None}, tags

"""`not` of a value list, rewritten without the `not`: the strings but those (a written-out
pattern), the intervals between excluded numbers, the enum values left."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.unique.values import fullmatches
from tests.grammar.walks import valid_walks


def test_strings_but_the_listed_ones(small_compiler, small_info):
    """Angular's `builder`: any string but the known builders."""
    excluded = ["haxe", "all", "a.b", "x-y z"]
    schema = {"type": "string", "not": {"enum": excluded}}
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    for text in ["", "h", "hax", "haxes", "al", "alll", "axb", "a.bc", "x-y", "x-y zz", "\u00e9"]:
        assert fullmatches(regex, json.dumps(text, ensure_ascii=False).encode()), text
    for text in excluded:
        assert not fullmatches(regex, json.dumps(text, ensure_ascii=False).encode()), text
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 12
    )
    assert len(set(values)) > 1


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "not": {"enum": [0]}},  # winget's InstallerSuccessCodes
        {"type": "integer", "minimum": 0, "maximum": 7, "not": {"enum": [0, 2, 3, 7, 9, "x", 2.5]}},
        {"type": "integer", "exclusiveMinimum": -4, "not": {"const": -3}, "multipleOf": 1},
    ],
)
def test_integers_between_the_excluded_ones(schema):
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    checker = jsonschema.Draft202012Validator(schema)
    matched = 0
    for n in range(-12, 13):
        assert bool(re.fullmatch(regex, str(n))) == checker.is_valid(n), n
        matched += checker.is_valid(n)
    assert matched


def test_numbers_between_the_excluded_ones(small_compiler, small_info):
    schema = {"type": "number", "minimum": 0, "maximum": 1, "not": {"enum": [0.5, 1, "1"]}}
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert not re.fullmatch(regex, "0.5") and not re.fullmatch(regex, "1")
    assert re.fullmatch(regex, "0.49") and re.fullmatch(regex, "0.51") and re.fullmatch(regex, "0")
    valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 12)


def test_enum_values_left():
    schema = {"enum": ["a", "b", 1], "not": {"enum": ["b", True]}}
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert [t for t in ['"a"', '"b"', "1", "true"] if re.fullmatch(regex, t)] == ['"a"', "1"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "minLength": 2, "not": {"const": "ab"}},  # lengths beside it
        {"type": "string", "not": {"const": 'say "hi"'}},  # a character JSON escapes
        {"type": "integer", "minimum": 0, "maximum": 0, "not": {"const": 0}},  # nothing left
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "string",
            "not": {"const": "x"},
        },  # not {} there
    ],
)
def test_other_exclusions_are_refused(schema):
    with pytest.raises(GrammarError, match="'not'"):
        schema_to_guarded_regex(json.dumps(schema))


def test_any_value_but_the_listed_ones_is_strings_but_those(small_compiler, small_info):
    """nbformat's unrecognized cell: `cell_type: {"not": {"enum": [...]}}` with no type accepts
    any value but those; strings but those are generated (a subset)."""
    schema = {
        "type": "object",
        "properties": {"cell_type": {"not": {"enum": ["markdown", "code", "raw"]}}},
        "required": ["cell_type"],
        "additionalProperties": False,
    }
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert fullmatches(regex, b'{"cell_type":"md"}') and fullmatches(
        regex, b'{"cell_type":"codes"}'
    )
    assert not fullmatches(regex, b'{"cell_type":"code"}') and not fullmatches(
        regex, b'{"cell_type":1}'
    )
    values = valid_walks(
        small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 8
    )
    assert all(isinstance(v["cell_type"], str) for v in values)


def test_not_of_a_schema_every_value_meets_leaves_nothing(small_compiler, small_info):
    """`not: {}` (ansible-lint's removed modules): no value is valid, so an optional property
    with it is never generated, an anyOf option with it never taken, a required one refused."""
    removed = {"not": {}, "title": "use include_tasks instead"}
    schema = {
        "type": "object",
        "properties": {"include": removed, "name": {"type": "string", "maxLength": 3}},
    }
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert fullmatches(regex, b'{"name":"a"}') and not fullmatches(regex, b'{"include":"a"}')
    valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 4)
    assert (
        schema_to_guarded_regex(json.dumps({"anyOf": [removed, {"type": "boolean"}]}))[0]
        == "(true|false)"
    )
    for bad in ({**schema, "required": ["include"]}, {"not": True}):
        with pytest.raises(GrammarError, match="'not'.*no value is valid"):
            schema_to_guarded_regex(json.dumps(bad))


@pytest.mark.parametrize("definition", [False, {"not": {}}, {"not": True, "title": "removed"}])
def test_references_to_a_definition_no_value_meets_are_empty(definition):
    """ansible-lint's tasks: `include` is `{"$ref": "#/$defs/removed-include-module"}`, a `not: {}`:
    the optional properties that refer to it are never generated, a required one is refused, and
    the definition itself costs nothing."""
    schema = {
        "$defs": {"removed": definition},
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "include": {"$ref": "#/$defs/removed"},
            "n": {"type": "integer"},
            "also": {"$ref": "#/$defs/removed", "description": "a sibling"},
        },
    }
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert fullmatches(regex, b'{"n":1}') and fullmatches(regex, b"{}")
    assert not fullmatches(regex, b'{"include":1}') and not fullmatches(regex, b'{"also":"x"}')
    with pytest.raises(GrammarError, match="no value"):
        schema_to_guarded_regex(json.dumps({**schema, "required": ["include"]}))


@pytest.mark.parametrize(
    "schema",
    [
        # CloudFormation's KmsEncryptionContext: a dictionary of any names, one of which needs another
        {
            "type": "object",
            "additionalProperties": False,
            "patternProperties": {"^.*$": {"type": "string"}},
            "dependencies": {"Kms": ["KmsKeyId"]},
        },
        {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "dependentRequired": {"Kms": ["KmsKeyId"], "x": []},
        },
        {
            "type": "object",
            "patternProperties": {"^K": {"type": "string"}},
            "dependencies": {"Kms": ["KmsKeyId"]},
        },
    ],
)
def test_names_that_need_others_are_never_generated_in_dictionaries(
    schema, small_compiler, small_info
):
    """dependentRequired on an object without properties: the names that need others are left
    out of the names generated (a subset), so the rule always holds."""
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert fullmatches(regex, b'{"Km":"a","KmsKeyId":"b","Kmss":"c"}')
    assert not fullmatches(regex, b'{"Kms":"a"}') and not fullmatches(
        regex, b'{"KmsKeyId":"b","Kms":"a"}'
    )
    valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 6)


@pytest.mark.parametrize(
    "schema",
    [
        # Bitbucket Pipelines' caches: any cache name but "docker"
        {
            "type": "object",
            "patternProperties": {"^(?!-)[-a-z0-9]{0,49}[a-z0-9]$": {"type": "string"}},
            "not": {"required": ["docker"]},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "not": {"required": ["docker"]},
        },
        {
            "additionalProperties": {"type": "string"},
            "not": {
                "anyOf": [{"required": ["docker", "dockerfile"]}, {"required": ["docker", "x"]}]
            },
        },
    ],
)
def test_names_a_not_forbids_are_never_generated_in_dictionaries(
    schema, small_compiler, small_info
):
    """`not: {required: [...]}` on an object without properties: the first name of each forbidden
    combination is left out of the names generated (a subset), so the combination never occurs."""
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    assert fullmatches(regex, b'{"dock":"a","dockers":"b","x":"c"}') and fullmatches(regex, b"{}")
    assert not fullmatches(regex, b'{"docker":"a"}') and not fullmatches(
        regex, b'{"x":"b","docker":"a"}'
    )
    valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 6)


def test_a_not_of_names_an_object_requires_is_refused():
    with pytest.raises(GrammarError, match="'not'"):
        schema_to_guarded_regex(
            json.dumps(
                {
                    "type": "object",
                    "required": ["docker"],
                    "additionalProperties": {"type": "string"},
                    "not": {"required": ["docker"]},
                }
            )
        )


def test_dependencies_beside_property_names_are_refused():
    with pytest.raises(GrammarError, match="dependencies"):
        schema_to_guarded_regex(
            json.dumps(
                {"type": "object", "propertyNames": {"maxLength": 4}, "dependencies": {"a": ["b"]}}
            )
        )

"""if / then / else on a tag property: expanded into alternatives; every random walk validates,
and each outcome the tag allows is generated."""

import json

import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from tests.grammar.walks import valid_walks

PROPS = {"kind": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "boolean"}}

CASES = {
    # both outcomes: kind "a" needs x, the others need y
    "then_else": ({"type": "object", "properties": PROPS, "required": ["kind"],
                   "allOf": [{"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]},
                              "else": {"required": ["y"]}}]}, {"a", "b", "c"}),
    # two conditionals on one tag, the node's own if among them
    "two_tags": ({"type": "object", "properties": PROPS, "required": ["kind"],
                  "if": {"properties": {"kind": {"enum": ["b"]}}}, "then": {"required": ["y"]},
                  "allOf": [{"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}}]},
                 {"a", "b", "c"}),
    # a free-string tag: only the passing outcome (or no tag at all) is generated
    "free_tag": ({"type": "object", "properties": {**PROPS, "kind": {"type": "string"}},
                  "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                  "then": {"properties": {"x": {"minimum": 5}}, "required": ["x"]}}, {"a"}),
    # then by reference, else false (nothing valid when the test fails)
    "ref_then": ({"$schema": "http://json-schema.org/draft-07/schema#",
                  "definitions": {"needs_x": {"required": ["x"], "properties": {"x": {"maximum": 3}}}},
                  "type": "object", "properties": PROPS, "required": ["kind"],
                  "if": {"properties": {"kind": {"enum": ["a", "b"]}}}, "then": {"$ref": "#/definitions/needs_x"},
                  "else": False}, {"a", "b"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conditionals_validate(small_compiler, small_info, name):
    schema, kinds = CASES[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    seen = {value.get("kind") for value in valid_walks(grammar, small_info, schema, 30)}
    assert seen - {None} == kinds, seen


@pytest.mark.parametrize("test", [{"required": ["x"]},  # a presence test
                                  {"properties": {"kind": {"minLength": 1}}},  # not a finite set
                                  {"properties": {"kind": {"const": "a"}, "x": {"const": 1}}}])  # two properties
def test_other_conditionals_are_refused(test):
    schema = {"type": "object", "properties": PROPS, "if": test, "then": {"required": ["y"]}}
    with pytest.raises(GrammarError, match="'if'"):
        schema_to_guarded_regex(json.dumps(schema))


def test_a_conditional_beside_other_types_is_refused():
    """A test on properties holds for strings: `then` would apply to them, unmerged."""
    schema = {"type": ["object", "string"], "properties": PROPS,
              "if": {"properties": {"kind": {"const": "a"}}}, "then": {"minLength": 3}}
    with pytest.raises(GrammarError, match="'if'"):
        schema_to_guarded_regex(json.dumps(schema))


NEGATED = {"type": "object", "properties": {**PROPS, "kind": {"type": "string"}}, "required": ["kind"],
           "allOf": [{"if": {"properties": {"kind": {"not": {"const": "a"}}}}, "then": {"properties": {"x": False}}},
                     {"if": {"properties": {"kind": {"const": "b"}}, "required": ["kind"]},
                      "then": {"required": ["y"]}, "else": {"properties": {"y": False}}}]}


def test_negated_tags_and_free_tags_take_the_values_the_tests_name(small_compiler, small_info):
    """A free-string tag's other values are the ones the other tests name ("a" and "b" here); a
    negated test (`not: {const}`) holds outside its values; `false` forbids a property."""
    values = valid_walks(small_compiler.compile(Constraint("json_schema", NEGATED)), small_info, NEGATED, 30)
    for value in values:
        assert ("x" not in value or value["kind"] == "a") and (("y" in value) == (value["kind"] == "b"))
    assert {value["kind"] for value in values} == {"a", "b"}


def test_a_false_property_is_never_generated(small_compiler, small_info):
    schema = {"type": "object", "properties": {**PROPS, "additionalProperties": False}}
    values = valid_walks(small_compiler.compile(Constraint("json_schema", schema)), small_info, schema, 12)
    assert not any("additionalProperties" in value for value in values)
    with pytest.raises(GrammarError, match="no value"):
        schema_to_guarded_regex(json.dumps({**schema, "required": ["additionalProperties"]}))

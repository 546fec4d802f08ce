"""References into places the schema rewriter reshapes (an object with minProperties becomes an
anyOf, a guarded array or a keyed object a placeholder) and into array members: hoisted into
$defs, they compile and outputs validate; anchors and dangling references are refused by name,
in json_schema and in tool parameters alike (a 400, never a KeyError)."""

import json

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema_refs import hoist_deep_refs
from radixgen.runtime.server.errors import APIError
from radixgen.runtime.server.openai_tools import tool_constraint
from tests.grammar.walks import random_walk

INTEGER_MAP = {"type": "object", "propertyNames": {"enum": ["x", "y"]}, "additionalProperties": {"type": "integer"}}
DEEP = {
    "into_min_properties": {"type": "object", "minProperties": 1, "properties": {
        "a": {"type": "integer", "maximum": 5}, "b": {"$ref": "#/properties/a"}}},
    "into_guarded_items": {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
        "b": {"$ref": "#/properties/a/items"}}},
    "into_keyed_values": {"type": "object", "required": ["m", "n"], "properties": {
        "m": INTEGER_MAP, "n": {"$ref": "#/properties/m/additionalProperties"}}},
    "to_keyed_object": {"type": "object", "required": ["m", "n"], "properties": {
        "m": INTEGER_MAP, "n": {"$ref": "#/properties/m"}}},
    "into_pattern_properties": {"type": "object", "required": ["n"], "properties": {
        "m": {"type": "object", "patternProperties": {"^a": {"type": "boolean"}}},
        "n": {"$ref": "#/properties/m/patternProperties/%5Ea"}}},
    "to_additional_properties": {"type": "object", "properties": {"a": {"$ref": "#/additionalProperties"}},
                                 "required": ["a"], "additionalProperties": {"enum": [1, 2]}},
    "into_an_array_member": {"type": "object", "required": ["c"], "properties": {
        "c": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}]},
        "d": {"$ref": "#/properties/c/anyOf/0"}}},
    "escaped_pointer": {"$defs": {"a/b": {"type": "boolean"}}, "type": "object", "required": ["v"],
                        "properties": {"v": {"$ref": "#/$defs/a~1b"}}},
    "recursive_through_a_property": {"type": "object", "properties": {"tree": {
        "type": "object", "properties": {"kids": {"type": "array", "maxItems": 2,
                                                  "items": {"$ref": "#/properties/tree"}}}}}},
}


@pytest.mark.parametrize("name", DEEP)
def test_deep_references_compile_and_outputs_validate(name, small_compiler, small_info):
    schema = DEEP[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(15):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_hoisting_copies_targets_once_and_leaves_data_alone():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"},
                                               "c": {"$ref": "#/properties/a"}, "d": {"$ref": "#"},
                                               "e": {"const": {"$ref": "#/properties/a"}}}}
    hoisted = hoist_deep_refs(schema)
    props = hoisted["properties"]
    assert props["b"] == props["c"] == {"$ref": "#/$defs/radixgen-ref0"}
    assert hoisted["$defs"] == {"radixgen-ref0": {"type": "integer"}}
    assert props["d"] == {"$ref": "#"} and props["e"] == schema["properties"]["e"]
    assert schema["properties"]["b"] == {"$ref": "#/properties/a"}  # the input is not changed


@pytest.mark.parametrize("ref,words", [("#A", "anchor"), ("#/properties/zz", "does not resolve"),
                                       ("#/properties/a/anyOf/7", "does not resolve")])
def test_unusable_references_are_refused_by_name(ref, words, small_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": ref}}}
    with pytest.raises(GrammarError, match=words):
        small_compiler.compile(Constraint("json_schema", schema))
    with pytest.raises(APIError, match=words) as caught:  # auto: checked when the request comes
        tool_constraint("auto", {"f": schema}, parallel=True)
    assert caught.value.status == 400
    for mode in ("required", "f"):  # compiled in the grammar queue: the request fails with it
        with pytest.raises(GrammarError, match=words):
            small_compiler.compile(tool_constraint(mode, {"f": schema}, parallel=True))


@pytest.mark.parametrize("name", ["into_guarded_items", "into_keyed_values", "into_min_properties"])
def test_deep_references_in_tool_parameters(name, small_compiler, small_info):
    schema = DEEP[name]
    grammar = small_compiler.compile(tool_constraint("required", {"f": schema}, parallel=False))
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        (call,) = json.loads(text)
        jsonschema.validate(call["arguments"], schema)
    tool_constraint("auto", {"f": schema}, parallel=True)  # the auto grammar compiles too

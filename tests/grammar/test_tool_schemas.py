"""Tool parameter schemas inside the call grammar: pydantic models with nested models ($defs),
recursion ("#") and a property named like a keyword compile, and outputs validate against the
tool's own schema (no model needed: walks over the grammar)."""

import json

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.runtime.server.openai_tools import TOOL_OPEN, tool_constraint, tool_schema_error
from tests.grammar.walks import random_walk

ADDRESS = {
    "title": "Address",
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}},
    "required": ["city"],
}
PERSON = {
    "$defs": {"Address": ADDRESS},
    "title": "Person",
    "type": "object",
    "properties": {
        "home": {"$ref": "#/$defs/Address"},
        "default": {"$ref": "#/$defs/Address"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["home", "default"],
}
CHAIN = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["n", "next"],
}
DRAFT7 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {"P": ADDRESS},
    "type": "object",
    "properties": {
        "pair": {"type": "array", "items": [{"$ref": "#/definitions/P"}, {"type": "integer"}]}
    },
    "required": ["pair"],
}
TOOLS = {"save_person": PERSON, "chain": CHAIN}


class _Opened:
    """A grammar whose matchers have already accepted the tool-call opener (byte tokens)."""

    def __init__(self, grammar, info) -> None:
        self.grammar, self.info = grammar, info

    def matcher(self):
        matcher = self.grammar.matcher()
        byte_ids = {data[0]: i for i, data in enumerate(self.info.token_bytes) if len(data) == 1}
        assert all(matcher.accept_token(byte_ids[c]) for c in TOOL_OPEN.encode())
        return matcher


def _calls(text: str, mode: str) -> list:
    if mode == "auto":
        text = text[: -len("</tool_call>")]
    calls = json.loads(text)
    return calls if isinstance(calls, list) else [calls]


@pytest.mark.parametrize("mode", ["required", "auto", "save_person", "chain"])
def test_nested_and_recursive_parameters_validate(mode, small_compiler, small_info):
    constraint = tool_constraint(mode, TOOLS, parallel=True)
    grammar = small_compiler.compile(constraint)
    if mode == "auto":
        grammar = _Opened(grammar, small_info)  # the free-text answer is not what is tested here
    checked = 0
    for seed in range(30):
        _, text = random_walk(grammar, small_info, seed)
        for call in _calls(text, mode):
            jsonschema.validate(call["arguments"], TOOLS[call["name"]])
            checked += 1
    assert checked > 0


def test_draft7_parameters_keep_their_draft(small_compiler, small_info):
    constraint = tool_constraint("required", {"pairs": DRAFT7}, parallel=False)
    assert isinstance(constraint, Constraint)
    grammar = small_compiler.compile(constraint)
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        for call in _calls(text, "required"):
            jsonschema.Draft7Validator(DRAFT7).validate(call["arguments"])


def test_tool_mode_errors_name_the_tool_parameters(small_compiler):
    from radixgen.grammar.matcher import GrammarError

    bad = {
        "$defs": {"A": {"type": "string", "pattern": "a(?=b)"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "n": {"type": "integer", "multipleOf": 0.3}},
    }
    for mode in ("auto", "required", "bad"):
        with pytest.raises(GrammarError) as caught:
            small_compiler.validate(
                tool_constraint(mode, {"ok": {"type": "object"}, "bad": bad}, parallel=True)
            )
        message = tool_schema_error(str(caught.value))
        assert "tools[1].function.parameters." in message and "$defs.tool" not in message

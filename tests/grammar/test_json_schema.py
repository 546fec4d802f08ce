"""JSON Schema constraints: every random valid walk validates; unsupported keywords are refused."""

import json
from datetime import datetime

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.compiler import JSON_OBJECT
from radixgen.grammar.json_schema import schema_to_regex
from radixgen.grammar.matcher import GrammarError
from tests.grammar.schemas import SUPPORTED, UNSUPPORTED
from tests.grammar.walks import random_walk

FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
WALKS = 5


def _validate(text: str, schema) -> None:
    instance = json.loads(text)
    jsonschema.validate(instance, schema, cls=jsonschema.Draft202012Validator, format_checker=FORMAT_CHECKER)
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


def test_error_names_the_json_path():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer",
                                                                              "multipleOf": 5}}}}
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

"""References into places the schema rewriter reshapes (an object with minProperties becomes an
anyOf, a guarded array or a keyed object a placeholder) and into array members: hoisted into
$defs, they compile and outputs validate; anchors and dangling references are refused by name,
in json_schema and in tool parameters alike (a 400, never a KeyError)."""

import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema.refs import hoist_deep_refs
from radixgen.runtime.server.openai_tools import tool_constraint
from tests.grammar.walks import accepts_text, random_walk

INTEGER_MAP = {
    "type": "object",
    "propertyNames": {"enum": ["x", "y"]},
    "additionalProperties": {"type": "integer"},
}
DEEP = {
    "into_min_properties": {
        "type": "object",
        "minProperties": 1,
        "properties": {"a": {"type": "integer", "maximum": 5}, "b": {"$ref": "#/properties/a"}},
    },
    "into_guarded_items": {
        "type": "object",
        "required": ["a", "b"],
        "properties": {
            "a": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "uniqueItems": True,
            },
            "b": {"$ref": "#/properties/a/items"},
        },
    },
    "into_keyed_values": {
        "type": "object",
        "required": ["m", "n"],
        "properties": {"m": INTEGER_MAP, "n": {"$ref": "#/properties/m/additionalProperties"}},
    },
    "to_keyed_object": {
        "type": "object",
        "required": ["m", "n"],
        "properties": {"m": INTEGER_MAP, "n": {"$ref": "#/properties/m"}},
    },
    "into_pattern_properties": {
        "type": "object",
        "required": ["n"],
        "properties": {
            "m": {"type": "object", "patternProperties": {"^a": {"type": "boolean"}}},
            "n": {"$ref": "#/properties/m/patternProperties/%5Ea"},
        },
    },
    "to_additional_properties": {
        "type": "object",
        "properties": {"a": {"$ref": "#/additionalProperties"}},
        "required": ["a"],
        "additionalProperties": {"enum": [1, 2]},
    },
    "into_an_array_member": {
        "type": "object",
        "required": ["c"],
        "properties": {
            "c": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}]},
            "d": {"$ref": "#/properties/c/anyOf/0"},
        },
    },
    "escaped_pointer": {
        "$defs": {"a/b": {"type": "boolean"}},
        "type": "object",
        "required": ["v"],
        "properties": {"v": {"$ref": "#/$defs/a~1b"}},
    },
    "recursive_through_a_property": {
        "type": "object",
        "properties": {
            "tree": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "maxItems": 2, "items": {"$ref": "#/properties/tree"}}
                },
            }
        },
    },
}


@pytest.mark.parametrize("name", DEEP)
def test_deep_references_compile_and_outputs_validate(name, small_compiler, small_info):
    schema = DEEP[name]
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(15):
        _, text = random_walk(grammar, small_info, seed)
        jsonschema.validate(json.loads(text), schema)


def test_hoisting_copies_targets_once_and_leaves_data_alone():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"$ref": "#/properties/a"},
            "c": {"$ref": "#/properties/a"},
            "d": {"$ref": "#"},
            "e": {"const": {"$ref": "#/properties/a"}},
        },
    }
    hoisted = hoist_deep_refs(schema)
    props = hoisted["properties"]
    assert props["b"] == props["c"] == {"$ref": "#/$defs/radixgen-ref0"}
    assert hoisted["$defs"] == {"radixgen-ref0": {"type": "integer"}}
    assert props["d"] == {"$ref": "#"} and props["e"] == schema["properties"]["e"]
    assert schema["properties"]["b"] == {"$ref": "#/properties/a"}  # the input is not changed


@pytest.mark.parametrize(
    "ref,words",
    [
        ("#A", "anchor"),
        ("#/properties/zz", "does not resolve"),
        ("#/properties/a/anyOf/7", "does not resolve"),
    ],
)
def test_unusable_references_are_refused_by_name(ref, words, small_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": ref}}}
    with pytest.raises(GrammarError, match=words):
        small_compiler.compile(Constraint("json_schema", schema))
    for mode in ("auto", "required", "f"):  # checked when the request comes (the server's 400)
        with pytest.raises(GrammarError, match=words):
            small_compiler.validate(tool_constraint(mode, {"f": schema}, parallel=True))


@pytest.mark.parametrize("name", ["into_guarded_items", "into_keyed_values", "into_min_properties"])
def test_deep_references_in_tool_parameters(name, small_compiler, small_info):
    schema = DEEP[name]
    grammar = small_compiler.compile(tool_constraint("required", {"f": schema}, parallel=False))
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed)
        (call,) = json.loads(text)
        jsonschema.validate(call["arguments"], schema)
    tool_constraint("auto", {"f": schema}, parallel=True)  # the auto grammar compiles too


_BOOLEAN_OR_INTEGER = {
    "type": "object",
    "patternProperties": {"^a": {"type": "boolean"}},
    "additionalProperties": {"type": "integer"},
}


def test_references_qualified_by_the_root_id_are_hoisted(small_compiler, small_info):
    """ "<$id>#/properties/m/additionalProperties" is the integer schema, not what the keyed
    object's rewrite keeps at that place (the pattern's boolean values)."""
    base = "http://x.test/s"
    schema = {
        "$id": base,
        "type": "object",
        "required": ["k", "n"],
        "properties": {
            "m": _BOOLEAN_OR_INTEGER,
            "n": {"$ref": base + "#/properties/m/additionalProperties"},
            "k": {
                "type": "object",
                "propertyNames": {"enum": ["z"]},
                "minProperties": 1,
                "additionalProperties": {"$ref": base + "#/properties/m/additionalProperties"},
            },
            "r": {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
        },
    }
    byte_ids = {data[0]: i for i, data in enumerate(small_info.token_bytes) if len(data) == 1}
    grammar = small_compiler.compile(Constraint("json_schema", schema))

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return (
            all(matcher.accept_token(byte_ids[c]) for c in text.encode()) and matcher.is_accepting()
        )

    assert accepts('{"n":2,"k":{"z":1}}')  # properties come in their declared order
    assert not accepts('{"n":2,"k":{"z":true}}') and not accepts('{"n":true,"k":{"z":1}}')


def test_absolute_references_inside_nested_bases(small_compiler, small_info):
    """A reference with a scheme means the same under any base: one into the root's own URI
    resolves from inside a subschema with its own $id (Backstage's catalog-info bundles its
    kinds so); a root $id with an empty fragment ("...json#") names the same document."""
    base = "https://x.test/catalog.json"
    for root_id in (base, base + "#"):
        schema = {
            "$schema": "http://json-schema.org/draft-07/schema",
            "$id": root_id,
            "type": "object",
            "properties": {
                "api": {
                    "$id": "Api",
                    "type": "object",
                    "required": ["e"],
                    "properties": {"e": {"$ref": base + "#/definitions/entity"}},
                }
            },
            "required": ["api"],
            "definitions": {"entity": {"type": "integer", "minimum": 3}},
        }
        grammar = small_compiler.compile(Constraint("json_schema", schema))
        assert accepts_text(grammar, small_info, '{"api":{"e":3}}')
        assert not accepts_text(grammar, small_info, '{"api":{"e":2}}')
        for seed in range(3):
            jsonschema.Draft7Validator(schema).validate(
                json.loads(random_walk(grammar, small_info, seed)[1])
            )
    # a root $id with a non-empty fragment is no base validators resolve against
    with pytest.raises(GrammarError, match="not a local reference"):
        small_compiler.compile(Constraint("json_schema", {**schema, "$id": base + "#top"}))
    relative = json.loads(
        json.dumps(schema).replace(base + "#/definitions/entity", "#/definitions/entity")
    )
    with pytest.raises(
        GrammarError, match="does not resolve inside 'https://x.test/Api'"
    ):  # (Api has none)
        small_compiler.compile(Constraint("json_schema", relative))


@pytest.mark.parametrize(
    "schema,words",
    [
        (
            {
                "$defs": [],
                "type": "object",
                "properties": {"n": {"$ref": "#/properties/m"}, "m": {"type": "integer"}},
            },
            "must be an object",
        ),
        # not canonical array indexes, empty segments: pointers to nowhere
        (
            {
                "type": "object",
                "properties": {
                    "a": {"anyOf": [{"type": "integer"}]},
                    "b": {"$ref": "#/properties/a/anyOf/²"},
                },
            },
            "does not resolve",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"anyOf": [{"type": "integer"}]},
                    "b": {"$ref": "#/properties/a/anyOf/00"},
                },
            },
            "does not resolve",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties//a"}},
            },
            "does not resolve",
        ),
    ],
)
def test_references_that_cannot_keep_their_meaning_are_refused(schema, words):
    with pytest.raises(GrammarError, match=words):
        schema_to_guarded_regex(json.dumps(schema))


def test_a_property_named_id_is_no_base(small_compiler):
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "x": {"$ref": "#/properties/id"}},
    }
    small_compiler.compile(Constraint("json_schema", schema))


def test_schemas_whose_regex_would_explode_are_refused_before_building_it():
    """outlines-core writes property j of an object without required properties into n - j
    alternatives, so nested optional objects multiply; past REGEX_BUDGET the schema is refused
    up front (at hundreds of MB outlines-core's allocation aborts the process)."""
    import time

    defs = {"L3": {"type": "integer"}}  # each level uses the next 14 times: a 32 MB regex before
    for depth in (2, 1, 0):
        defs[f"L{depth}"] = {
            "type": "object",
            "properties": {f"p{i}": {"$ref": f"#/$defs/L{depth + 1}"} for i in range(14)},
        }
    started = time.perf_counter()
    with pytest.raises(GrammarError, match="too large a grammar"):
        schema_to_guarded_regex(json.dumps({"$defs": defs, "$ref": "#/$defs/L0"}))
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize(
    "leaf",
    [
        {"type": "string", "pattern": "^(?!ab)[a-z]{1,3}$"},
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        {"enum": ["a", 1, None, {"x": 1}]},
    ],
)
def test_the_size_with_placeholders_written_out_is_checked_before_writing_them(leaf, monkeypatch):
    """Subschemas the rewriter writes itself (a written-out lookahead, a guarded array, mixed
    values) are placeholders in outlines-core's regex, each copied into every place it is used:
    their written-out size is checked before the copies are made (SchemaStore's `updated` date, a
    108 GB regex, ran out of memory), and the estimate is exact."""
    import radixgen.grammar.json_schema as json_schema
    from radixgen.grammar.index import size_budget

    sizes = []
    check = json_schema.check_regex_size
    monkeypatch.setattr(json_schema, "check_regex_size", lambda n: (sizes.append(n), check(n)))
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/$defs/s"} for i in range(3)},
        "$defs": {"s": leaf},
    }
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    assert sizes == [len(regex), len(regex)]
    monkeypatch.setattr(size_budget, "REGEX_BUDGET", len(regex) - 1)
    sizes.clear()
    with pytest.raises(GrammarError, match="too large a grammar"):
        schema_to_guarded_regex(json.dumps(schema))
    assert len(sizes) <= 1  # refused before the copies (or by the estimate before outlines-core)


def test_keyed_object_values_are_sized_before_they_are_written(monkeypatch):
    """A dictionary's value regex is written into its own regex twice, with the placeholders of
    inner subschemas filled in: its size is checked first (SchemaStore's `updated`, whose
    dictionaries nest a written-out lookahead, took 150 s of string building to be refused)."""
    import radixgen.grammar.rewrite.keyed_objects as keyed
    from radixgen.grammar.index import size_budget

    leaf = {"type": "string", "pattern": "^(?!ab)[a-z]{1,3}$"}
    schema = {
        "type": "object",
        "maxProperties": 2,
        "additionalProperties": {
            "type": "object",
            "maxProperties": 2,
            "additionalProperties": leaf,
        },
    }
    sizes = []
    check = keyed.check_regex_size
    monkeypatch.setattr(keyed, "check_regex_size", lambda n: (sizes.append(n), check(n)))
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    assert len(sizes) == 2 and sizes[0] < sizes[1] < 2 * len(regex)  # inner, then outer dictionary
    monkeypatch.setattr(size_budget, "REGEX_BUDGET", sizes[0] - 1)
    sizes.clear()
    with pytest.raises(GrammarError, match="too large a grammar"):
        schema_to_guarded_regex(json.dumps(schema))
    assert len(sizes) == 1  # refused at the inner dictionary, before writing it


def test_a_fragment_id_is_no_base_in_drafts_3_to_7():
    """Drafts 3-7 read an id that is only a fragment as the subschema's name, so references
    inside it resolve against the root (jsonschema agrees); from 2019-09 on every $id is a base."""
    body = {
        "definitions": {"n": {"type": "integer", "minimum": 3, "maximum": 5}},
        "type": "object",
        "properties": {
            "a": {"$id": "#/properties/a", "type": "array", "items": {"$ref": "#/definitions/n"}}
        },
        "required": ["a"],
    }
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **body}
    regex, _ = schema_to_guarded_regex(json.dumps(draft7))
    assert re.fullmatch(regex, '{"a":[3,5]}') and not re.fullmatch(regex, '{"a":[6]}')
    jsonschema.Draft7Validator(draft7).validate({"a": [3, 5]})
    with pytest.raises(GrammarError, match="base URI"):
        schema_to_guarded_regex(json.dumps(body))


def test_only_the_drafts_own_id_keyword_sets_a_base():
    """Under a URI every validator knows, drafts 3-4 take `id` as a base and 6-7 `$id`; the other
    spelling is an unknown keyword (SchemaStore's cryproj schemas: draft-04 with nested `$id`s)."""

    def schema(draft: str, key: str) -> dict:
        return {
            "$schema": f"http://json-schema.org/draft-0{draft}/schema#",
            "definitions": {"n": {"type": "integer", "minimum": 3, "maximum": 5}},
            "type": "object",
            "properties": {
                "a": {key: "/properties/a", "type": "array", "items": {"$ref": "#/definitions/n"}}
            },
            "required": ["a"],
        }

    for draft, key, validator in (
        ("4", "$id", jsonschema.Draft4Validator),
        ("7", "id", jsonschema.Draft7Validator),
    ):
        regex, _ = schema_to_guarded_regex(json.dumps(schema(draft, key)))
        assert re.fullmatch(regex, '{"a":[3,5]}') and not re.fullmatch(regex, '{"a":[6]}')
        validator(schema(draft, key)).validate({"a": [3, 5]})
    for draft, key in (("4", "id"), ("7", "$id")):  # the draft's own keyword: a base
        with pytest.raises(GrammarError, match="base URI"):
            schema_to_guarded_regex(json.dumps(schema(draft, key)))


@pytest.mark.parametrize(
    "target, pointer, place",
    [
        ({"x": {"y": {"type": "string", "pattern": "(a)\\1"}}}, "#/x/y", "$.x.y.pattern"),
        ({"x": [{"type": "integer"}, {"not": {"type": "string"}}]}, "#/x/1", "$.x[1]"),
    ],
)
def test_refusals_inside_hoisted_copies_name_the_place_written(target, pointer, place):
    """A reference target is compiled as a copy in $defs; its refusal names the original place."""
    schema = {"type": "object", "properties": {"b": {"$ref": pointer}}, "required": ["b"], **target}
    with pytest.raises(GrammarError) as err:
        schema_to_guarded_regex(json.dumps(schema))
    assert f"at {place}" in str(err.value) and "radixgen-ref" not in str(err.value)

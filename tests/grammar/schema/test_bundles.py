"""Bundled schemas: references to subschemas by their own `$id` (AsyncAPI's published schemas,
2020-12 compound documents) are followed as validators follow them, inside the document, and
references relative to such a subschema resolve against it. Each accepted case's random walks
validate with `jsonschema` against the original schema (so the two readings agree); the cases
where the drafts disagree, or where validators would not find the resource, are refused."""

import json

import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.schema.bundles import localize_embedded_refs
from tests.grammar.walks import accepts_text, valid_walks

DRAFT_7 = "http://json-schema.org/draft-07/schema#"
# each embedded document has a "c" of its own, unlike the root's: a reference "#/definitions/c"
# inside one means its own
_A = {
    "$id": "http://x.org/a.json",
    "type": "object",
    "required": ["b", "c"],
    "additionalProperties": False,
    "properties": {"b": {"$ref": "b.json"}, "c": {"$ref": "#/definitions/c"}},
    "definitions": {"c": {"type": "integer", "minimum": 3, "maximum": 5}},
}
_B = {"$id": "http://x.org/b.json", "enum": ["q", "r"]}
BUNDLES = {
    "draft_7_by_uri": {
        "$schema": DRAFT_7,
        "$ref": "http://x.org/a.json",
        "definitions": {
            "http://x.org/a.json": _A,
            "http://x.org/b.json": _B,
            "c": {"type": "string"},
        },
    },
    "relative_ids": {
        "$schema": DRAFT_7,
        "$id": "http://x.org/root.json",
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"$ref": "a.json"}},
        "definitions": {
            "a": {**_A, "$id": "a.json"},
            "b": {**_B, "$id": "b.json"},
            "c": {"type": "null"},
        },
    },
    "defs_2020": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "minItems": 1,
        "maxItems": 2,
        "items": {"$ref": "urn:example:pair"},
        "$defs": {
            "pair": {
                "$id": "urn:example:pair",
                "type": "array",
                "prefixItems": [{"$ref": "#/$defs/flag"}, {"$ref": "#/$defs/flag"}],
                "items": False,
                "$defs": {"flag": {"type": "boolean"}},
            },
            "flag": {"type": "null"},
        },
    },
    "draft_4_id": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "required": ["p"],
        "properties": {"p": {"$ref": "http://x.org/p.json#/definitions/n"}},
        "definitions": {
            "p": {
                "id": "http://x.org/p.json",
                "definitions": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
            }
        },
    },
    # a nested base: "#/$defs/B" inside it means its own $defs (integer), not the root's
    "nested_base_2020": {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {
                "$id": "http://x.test/a",
                "$defs": {"B": {"type": "integer"}},
                "$ref": "#/$defs/B",
            }
        },
        "$defs": {"B": {"type": "string"}},
    },
    # draft 4 ignores an id (and all else) beside a $ref: the root's B (string)
    "id_beside_ref_draft_4": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {
                "id": "http://x.test/a",
                "definitions": {"B": {"type": "integer"}},
                "$ref": "#/definitions/B",
            }
        },
        "definitions": {"B": {"type": "string"}},
    },
    # draft 7 ignores an $id beside a $ref: the reference inside resolves against the root
    "id_beside_ref_ignored": {
        "$schema": DRAFT_7,
        "type": "object",
        "required": ["v"],
        "properties": {"v": {"$ref": "#/definitions/w"}},
        "definitions": {
            "w": {"$id": "http://x.org/w.json", "$ref": "#/definitions/c"},
            "c": {"const": "root"},
        },
    },
}


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_bundles_follow_references_as_validators_do(name, small_compiler, small_info):
    schema = BUNDLES[name]
    grammar = small_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    values = valid_walks(grammar, small_info, schema, walks=6)
    assert values


def test_the_embedded_document_own_definitions_win(small_compiler, small_info):
    grammar = small_compiler.compile(
        Constraint("json_schema", json.dumps(BUNDLES["draft_7_by_uri"]))
    )
    assert accepts_text(grammar, small_info, '{"b":"q","c":4}')
    assert not accepts_text(grammar, small_info, '{"b":"q","c":"x"}')  # the root's "c" is a string
    regex, _ = schema_to_guarded_regex(json.dumps(BUNDLES["defs_2020"]))
    assert "null" not in regex  # the pair's "flag" is boolean; the root's is null
    nested = small_compiler.compile(
        Constraint("json_schema", json.dumps(BUNDLES["nested_base_2020"]))
    )
    assert accepts_text(nested, small_info, '{"a":7}') and not accepts_text(
        nested, small_info, '{"a":"s"}'
    )
    ignored = small_compiler.compile(
        Constraint("json_schema", json.dumps(BUNDLES["id_beside_ref_draft_4"]))
    )
    assert accepts_text(ignored, small_info, '{"a":"s"}') and not accepts_text(
        ignored, small_info, '{"a":7}'
    )


def test_a_subschema_may_restate_the_root_draft(small_compiler, small_info):
    schema = {
        "$schema": DRAFT_7,
        "definitions": {
            "n": {"$schema": DRAFT_7.rstrip("#"), "type": "integer", "minimum": 4, "maximum": 6}
        },
        "$ref": "#/definitions/n",
    }
    grammar = small_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    assert accepts_text(grammar, small_info, "5") and not accepts_text(grammar, small_info, "7")


def test_pointers_to_embedded_documents_escape_their_keys():
    schema = {
        "$ref": "http://h/x~y%z.json",
        "definitions": {"http://h/x~y%z.json": {"$id": "http://h/x~y%z.json", "type": "boolean"}},
    }
    local = localize_embedded_refs(schema)
    assert local["$ref"] == "#/definitions/http:~1~1h~1x~0y%25z.json"
    assert "$id" not in local["definitions"]["http://h/x~y%z.json"]
    assert schema_to_guarded_regex(json.dumps(schema))[0] == "(true|false)"


@pytest.mark.parametrize(
    "schema,why",
    [
        # a URI read as draft 7 by some validators and as 2020-12 by jsonschema: an $id beside a
        # $ref is ignored by one reading and sets the base in the other
        (
            {
                "$schema": "https://json-schema.org/draft-07/schema",
                "properties": {"v": {"$ref": "#/definitions/w"}},
                "definitions": {
                    "w": {"$id": "http://x.org/w.json", "$ref": "#/definitions/c"},
                    "c": {"type": "null"},
                },
            },
            "beside a \\$ref",
        ),
        # validators do not look for resources under an unknown keyword: not found, not local
        (
            {
                "$ref": "http://x.org/hidden.json",
                "x-bundle": {"h": {"$id": "http://x.org/hidden.json", "type": "null"}},
            },
            "not a local reference",
        ),
        # two resources with one base URI: validators differ on which they take (found in review:
        # radixgen took the outer, `referencing` the inner)
        (
            {
                "$defs": {
                    "a": {
                        "$id": "http://x/t.json",
                        "$defs": {"c": {"$id": "http://x/t.json", "const": 2}},
                        "const": 1,
                    }
                },
                "$ref": "http://x/t.json",
            },
            "two subschemas have the base URI",
        ),
        # a $schema below the root switches the validator's draft there (here: the $id beside a $ref
        # that draft 7 ignores), as does draft 3's divisibleBy in an otherwise 2020-12 schema
        (
            {
                "$defs": {
                    "a": {
                        "$schema": DRAFT_7,
                        "$id": "http://y/a.json",
                        "definitions": {"s": {"$id": "http://y/sub/", "$ref": "b.json"}},
                        "allOf": [{"$ref": "#/definitions/s"}],
                    },
                    "b1": {"$id": "http://y/sub/b.json", "const": 1},
                    "b2": {"$id": "http://y/b.json", "const": 2},
                },
                "$ref": "#/$defs/a",
            },
            "below the root",
        ),
        (
            {
                "$defs": {
                    "a": {
                        "$schema": "http://json-schema.org/draft-03/schema#",
                        "type": "integer",
                        "divisibleBy": 2,
                    }
                },
                "$ref": "#/$defs/a",
            },
            "below the root",
        ),
        # another document's anchor
        (
            {
                "$ref": "http://x.org/a.json#top",
                "$defs": {"a": {"$id": "http://x.org/a.json", "type": "null"}},
            },
            "not a local reference|anchor",
        ),
    ],
)
def test_bundles_validators_might_read_otherwise_are_refused(schema, why):
    with pytest.raises(GrammarError, match=why):
        schema_to_guarded_regex(json.dumps(schema))

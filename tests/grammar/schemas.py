"""JSON Schemas radixgen must enforce exactly (SUPPORTED) or refuse by keyword (UNSUPPORTED)."""

_ADDRESS = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "maxLength": 12},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
    "required": ["street", "zip"],
}

SUPPORTED = {
    "flat": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    },
    "optional_props": {
        "type": "object",
        "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "integer"}},
        "required": ["b"],
    },
    "all_optional": {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "boolean"}},
    },
    "nested": {
        "type": "object",
        "properties": {"user": _ADDRESS, "ok": {"type": "boolean"}},
        "required": ["user", "ok"],
    },
    "array_bounds": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    "array_empty_ok": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    "array_of_objects": {"type": "array", "items": _ADDRESS, "minItems": 1, "maxItems": 2},
    "enum_strings": {"enum": ["red", "green", 'blue "quoted"']},
    "enum_mixed": {"enum": [1, "one", None, True, 2.5]},
    "enum_with_type": {"type": "string", "enum": ["a", 1, "b"]},
    "const": {
        "type": "object",
        "properties": {"kind": {"const": "point"}, "x": {"type": "number"}},
        "required": ["kind", "x"],
    },
    "any_of": {
        "anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 5}, {"type": "null"}]
    },
    "one_of_types": {"oneOf": [{"type": "boolean"}, {"type": "string", "maxLength": 4}]},
    "one_of_tagged": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"t": {"const": "a"}, "v": {"type": "integer"}},
                "required": ["t", "v"],
            },
            {
                "type": "object",
                "properties": {"t": {"const": "b"}, "w": {"type": "boolean"}},
                "required": ["t", "w"],
            },
        ]
    },
    "refs": {
        "$defs": {
            "pt": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            }
        },
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/pt"}, "b": {"$ref": "#/$defs/pt"}},
        "required": ["a"],
    },
    "definitions_ref": {
        "definitions": {"c": {"enum": ["x", "y"]}},
        "type": "array",
        "items": {"$ref": "#/definitions/c"},
        "maxItems": 3,
    },
    "recursive_optional": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer", "minimum": 0, "maximum": 9},
                    "next": {"$ref": "#/$defs/node"},
                },
                "required": ["v"],
            }
        },
        "$ref": "#/$defs/node",
    },
    # recursion whose every level is required, with an exit: unrolled, the last level exits
    "recursive_required_null_exit": {
        "$defs": {
            "cell": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 0, "maximum": 9},
                    "rest": {"anyOf": [{"$ref": "#/$defs/cell"}, {"type": "null"}]},
                },
                "required": ["n", "rest"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/cell"}},
        "required": ["head"],
    },
    "recursive_root_array_exit": {
        "type": "object",
        "properties": {
            "tag": {"enum": ["div", "p"]},
            "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
        },
        "required": ["tag", "kids"],
    },
    "format_date": {
        "type": "object",
        "properties": {"d": {"type": "string", "format": "date"}},
        "required": ["d"],
    },
    # required names without properties: generated with additionalProperties' schema
    "required_without_properties": {
        "type": "object",
        "required": ["a"],
        "additionalProperties": {"type": "integer"},
    },
    "format_datetime": {"type": "string", "format": "date-time"},
    "format_time_uuid": {
        "type": "array",
        "prefixItems": [{"type": "string", "format": "time"}, {"type": "string", "format": "uuid"}],
    },
    "format_email_ipv4": {
        "type": "object",
        "properties": {
            "e": {"type": "string", "format": "email"},
            "ip": {"type": "string", "format": "ipv4"},
        },
        "required": ["e", "ip"],
    },
    "format_uri": {"type": "string", "format": "uri"},
    "pattern": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
    "pattern_dot": {"type": "string", "pattern": "a.c|x[^0-9]+"},
    "string_lengths": {"type": "string", "minLength": 2, "maxLength": 5},
    "int_bounds": {"type": "integer", "minimum": -15, "maximum": 230},
    "int_exclusive": {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 7},
    "int_lower_only": {"type": "integer", "minimum": 42},
    "int_upper_negative": {"type": "integer", "maximum": -3},
    "number_nonneg": {"type": "number", "minimum": 0},
    "number_positive": {"type": "number", "exclusiveMinimum": 0, "maximum": 5},
    "number_range_neg": {"type": "number", "minimum": -2, "exclusiveMaximum": 1},
    "nullable": {"type": ["string", "null"], "maxLength": 3},
    "additional_schema": {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "minProperties": 1,
    },
    "additional_false": {
        "type": "object",
        "properties": {"k": {"type": "integer"}},
        "additionalProperties": False,
        "required": ["k"],
    },
    "closed_empty": {"type": "object", "additionalProperties": False},
    "prefix_items": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]},
    "json_object": {"type": "object"},
    "any_value": {},
    "annotations": {
        "title": "T",
        "description": "d",
        "type": "object",
        "properties": {"q": {"type": "string", "maxLength": 3, "default": "x", "examples": ["y"]}},
        "required": ["q"],
    },
    "all_of_single": {"allOf": [{"type": "integer", "minimum": 1, "maximum": 3}]},
    "one_of_enums": {"oneOf": [{"enum": [1, "x"]}, {"enum": [2, True]}]},
    # a brace that is no quantifier is a literal (ECMA and Python); Rust's regex needs it escaped
    "literal_braces": {"type": "string", "pattern": "^{[a-z]{1,5}}$"},
    # OpenAPI's formats are annotations validators ignore; int32 bounds stay a short regex
    "openapi_formats": {
        "type": "object",
        "properties": {
            "id": {
                "type": "integer",
                "format": "int32",
                "minimum": -2147483648,
                "maximum": 2147483647,
            },
            "secret": {"type": "string", "format": "password", "maxLength": 6},
            "ratio": {"type": "number", "format": "double", "minimum": 0, "maximum": 1},
        },
        "required": ["id", "secret", "ratio"],
    },
    # untyped tagged objects: each generates objects whose tag the other refuses; a string
    # alternative next to a typed object
    "one_of_untyped_tags": {
        "oneOf": [
            {"properties": {"t": {"const": "a"}, "n": {"type": "integer"}}, "required": ["t", "n"]},
            {"properties": {"t": {"enum": ["b", "c"]}}, "required": ["t"]},
        ]
    },
    "one_of_string_or_object": {
        "oneOf": [
            {"type": "string", "maxLength": 8},
            {
                "type": "object",
                "properties": {"n": {"type": "string", "maxLength": 8}},
                "required": ["n"],
            },
        ]
    },
    "escaped_enum_key": {
        "type": "object",
        "properties": {"k-1 ä": {"enum": ["\u00e9\n", "tab\t"]}},
        "required": ["k-1 ä"],
    },
    "number_open_interval": {"type": "number", "exclusiveMinimum": 2, "exclusiveMaximum": 3},
    "int_negative_range": {"type": "integer", "minimum": -1000, "maximum": -7},
    "pattern_anchored_alternation": {"type": "string", "pattern": "^x|y"},
    "pattern_printable": {"type": "string", "pattern": "[ -~]{2,6}"},
    # patterns and formats with lengths: repeats narrowed to fit (pydantic constr, HttpUrl)
    "pattern_lengths": {
        "type": "string",
        "pattern": "^[a-z0-9_]+$",
        "minLength": 2,
        "maxLength": 8,
    },
    "pattern_two_repeats": {"type": "string", "pattern": "x[a-z]+-[0-9]*", "maxLength": 9},
    # an allOf member restating a property of the referenced schema word for word (GitHub's
    # webhook payloads): the two oneOfs are one
    "all_of_restated": {
        "$defs": {
            "issue": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "who": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
                    "n": {"type": "integer"},
                },
            }
        },
        "allOf": [
            {"$ref": "#/$defs/issue"},
            {
                "type": "object",
                "required": ["who"],
                "properties": {
                    "who": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]}
                },
            },
        ],
    },
    "http_url": {
        "type": "object",
        "properties": {"url": {"type": "string", "format": "uri", "minLength": 1, "maxLength": 30}},
        "required": ["url"],
    },
    "format_duration_ipv6_hostname": {
        "type": "array",
        "prefixItems": [
            {"type": "string", "format": "duration"},
            {"type": "string", "format": "ipv6"},
            {"type": "string", "format": "hostname"},
        ],
        "minItems": 3,
        "maxItems": 3,
    },
    # uniqueItems over a finite set (pydantic set[Literal[...]], set[SomeEnum]): each value once
    "unique_enum_set": {
        "type": "array",
        "items": {"enum": ["read", "write", "admin", 1, 1.0, True]},
        "uniqueItems": True,
    },
    "unique_ref_enum": {
        "$defs": {"Color": {"title": "Color", "type": "string", "enum": ["red", "green", "blue"]}},
        "type": "object",
        "properties": {
            "colors": {
                "type": "array",
                "uniqueItems": True,
                "items": {"$ref": "#/$defs/Color"},
                "minItems": 1,
            }
        },
        "required": ["colors"],
    },
    "unique_booleans_or_single": {
        "type": "object",
        "properties": {
            "flags": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True},
            "one": {
                "type": "array",
                "items": {"type": "string", "maxLength": 3},
                "uniqueItems": True,
                "maxItems": 1,
            },
        },
    },
    # uniqueItems over free strings (pydantic set[str]): kept unique by unique.guard.UniqueGuard
    "unique_string_set": {
        "title": "Item",
        "type": "object",
        "properties": {
            "name": {"title": "Name", "type": "string"},
            "tags": {
                "title": "Tags",
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "minItems": 2,
            },
        },
        "required": ["name", "tags"],
    },
    "unique_integer_set": {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "integer"},
                "uniqueItems": True,
                "minItems": 3,
                "maxItems": 6,
            }
        },
        "required": ["ids"],
    },
    # minProperties one above the required count: some optional property is there (PATCH bodies)
    "min_properties_optional": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string", "maxLength": 5},
            "done": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
        "required": ["id"],
        "minProperties": 2,
        "additionalProperties": False,
    },
    # free-form objects whose names follow propertyNames (pydantic dict[Literal[...], int],
    # dict[constr(pattern=...), Model]) or one patternProperties pattern (OpenAPI's "^x-")
    # name rules beside another type (ansible's inventory hosts): one anyOf alternative per type
    "dict_or_null_short_keys": {"type": ["object", "null"], "propertyNames": {"maxLength": 3}},
    "dict_or_string_pattern_keys": {
        "type": ["object", "string"],
        "maxLength": 4,
        "patternProperties": {"^[a-c]+$": {"type": ["integer", "null"]}},
    },
    "dict_literal_keys": {
        "type": "object",
        "propertyNames": {"enum": ["red", "green", "blue"]},
        "additionalProperties": {"type": "integer", "minimum": 0},
    },
    "dict_pattern_keys": {
        "$defs": {
            "P": {
                "type": "object",
                "properties": {"x": {"type": "integer", "maximum": 9}},
                "required": ["x"],
            }
        },
        "type": "object",
        "properties": {
            "by_id": {
                "type": "object",
                "propertyNames": {"pattern": "^[a-z][a-z0-9]*$", "maxLength": 6},
                "additionalProperties": {"$ref": "#/$defs/P"},
                "minProperties": 1,
            }
        },
        "required": ["by_id"],
    },
    "pattern_properties_only": {
        "type": "object",
        "patternProperties": {"^x-": {"type": "string", "format": "date"}},
        "additionalProperties": False,
    },
    # pydantic's dict[SomeEnum, int] (draft-07 form, the enum behind a $ref) and names from
    # several rules
    "dict_enum_keys": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"Color": {"title": "Color", "enum": ["red", "blue"], "type": "string"}},
        "type": "object",
        "propertyNames": {"$ref": "#/definitions/Color"},
        "additionalProperties": {"type": "integer"},
    },
    "dict_any_of_keys": {
        "type": "object",
        "additionalProperties": {"type": "boolean"},
        "propertyNames": {"anyOf": [{"enum": ["id"]}, {"type": "string", "pattern": "^x-[a-z]+$"}]},
    },
    # "^.*$" holds for names without a line break only (it is not additionalProperties)
    "pattern_properties_one_line": {
        "type": "object",
        "patternProperties": {"^.*$": {"type": "integer"}},
        "additionalProperties": False,
    },
    "dict_tree": {
        "$defs": {
            "Node": {
                "type": "object",
                "propertyNames": {"pattern": "^[a-c]$"},
                "additionalProperties": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "integer"}]},
            }
        },
        "$ref": "#/$defs/Node",
    },
    # oneOf of an object and a const of another type (codecov's "comment": settings or false)
    "one_of_object_or_false": {
        "type": "object",
        "properties": {
            "comment": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"layout": {"type": "string", "maxLength": 8}},
                    },
                    {"const": False},
                ]
            }
        },
        "required": ["comment"],
    },
    # keywords that constrain nothing here: additionalItems without an items array, propertyNames
    # of type string, a match-all patternProperties (it is additionalProperties); and a required
    # name properties does not list, generated with additionalProperties' schema
    "idle_keywords": {
        "type": "object",
        "properties": {
            "rules": {
                "type": "object",
                "propertyNames": {"type": "string"},
                "additionalProperties": {"type": "integer", "maximum": 2},
            },
            "registries": {
                "type": "object",
                "additionalProperties": False,
                "patternProperties": {
                    ".*": {
                        "type": "object",
                        "properties": {"url": {"type": "string"}},
                        "required": ["url"],
                    }
                },
            },
            "list": {"type": "array", "items": {"type": "boolean"}, "additionalItems": False},
        },
        "additionalProperties": {"type": "string", "maxLength": 3},
        "required": ["rules", "registries", "list", "upstream"],
    },
    # keywords about names beside properties, checked against the listed names (only those are
    # generated); dependentRequired makes the names it needs required
    "name_rules": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 4},
            "x-tag": {"type": "integer"},
            "card": {"type": "boolean"},
            "billing": {"type": "boolean"},
        },
        "patternProperties": {"^x-": {"description": "extensions"}, "^[0-9]+$": {"type": "string"}},
        "propertyNames": {"pattern": "^[a-z-]+$", "maxLength": 8},
        "dependentRequired": {"card": ["billing"]},
        "additionalProperties": False,
    },
    # combinations merged into one schema (schema.merge): allOf members, $ref siblings (2020-12),
    # anyOf/oneOf beside properties or type, keywords of other types dropped
    "merged_all_of": {
        "$defs": {
            "Base": {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1}},
                "required": ["id"],
            }
        },
        "allOf": [
            {"$ref": "#/$defs/Base"},
            {
                "properties": {"id": {"maximum": 9}, "name": {"type": "string", "maxLength": 5}},
                "required": ["name"],
            },
        ],
    },
    "merged_ref_siblings": {
        "$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/n", "maximum": 3},
            "b": {"$ref": "#/$defs/n", "type": "integer"},
        },
        "required": ["a", "b"],
    },
    "merged_nested_all_of": {
        "$defs": {
            "Named": {
                "allOf": [
                    {
                        "properties": {"name": {"type": "string", "maxLength": 4}},
                        "required": ["name"],
                    },
                    {"type": "object"},
                ]
            }
        },
        "type": "object",
        "allOf": [
            {
                "allOf": [
                    {"$ref": "#/$defs/Named"},
                    {"properties": {"n": {"type": "number", "minimum": -0.3}}},
                ]
            },
            {"properties": {"n": {"exclusiveMaximum": -0.1}}, "required": ["n"]},
        ],
    },
    "distributed_any_of": {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "phone": {"type": "string", "pattern": "^[0-9]{7}$"},
        },
        "anyOf": [{"required": ["email"]}, {"required": ["phone"]}],
        "additionalProperties": False,
    },
    "distributed_type_one_of": {
        "type": "object",
        "oneOf": [
            {
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind", "x"],
            },
            {"properties": {"kind": {"const": "b"}}, "required": ["kind"]},
        ],
    },
    "inapplicable_keywords": {
        "type": "array",
        "items": {"type": "integer", "maxLength": 3},
        "minimum": 5,
        "maxItems": 2,
    },
    "enum_containers": {
        "type": "object",
        "properties": {
            "preset": {"enum": [{"w": 1, "h": 2.5}, [1, "x", None], "plain", 3]},
            "fixed": {"const": {"nested": {"ok": True}, "list": []}},
        },
        "required": ["preset", "fixed"],
    },
    "pattern_upper_shorthands": {
        "type": "string",
        "pattern": "^\\S+@\\S+\\.\\w{2,4}$|^\\D\\W\\d$",
        "maxLength": 12,
    },
    "decimal_bounds": {
        "type": "object",
        "properties": {
            "p": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 2.25},
            "q": {"type": "number", "exclusiveMinimum": -0.75, "maximum": -0.5},
            "r": {"type": "number", "minimum": -1.5, "maximum": 100.0},
            "s": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.05},
        },
        "required": ["p", "q", "r", "s"],
    },
    "date_max_length": {"type": "string", "format": "date", "minLength": 1, "maxLength": 10},
    "nested_arrays": {
        "type": "array",
        "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
        "maxItems": 2,
    },
    # at most that many pairs of any names (GitHub's metadata: 8 keys with scalar values)
    "max_properties_free": {
        "type": "object",
        "maxProperties": 3,
        "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "number"}]},
    },
    # allOf over arrays: one schema for every item (GitHub's Repository `topics`: items string
    # and items {nullable: true}); items that cannot meet leave the empty array
    "all_of_items": {
        "type": "object",
        "properties": {
            "tags": {
                "allOf": [
                    {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
                    {"items": {"type": "string", "minLength": 1}},
                ]
            },
            "none": {
                "allOf": [
                    {"type": "array", "items": {"type": "integer"}},
                    {"items": {"type": "string"}},
                ]
            },
        },
        "required": ["tags", "none"],
    },
    # CloudFormation's descriptions: not only whitespace; no whitespace at all
    "not_blank": {
        "type": "object",
        "properties": {
            "d": {"type": "string", "pattern": "^(?!\\s*$).+$", "maxLength": 12},
            "n": {"type": "string", "pattern": "^[^\\s]+$"},
        },
        "required": ["d", "n"],
    },
    # several patterns: names follow the first, values meet every pattern's schema (SageMaker's Environment)
    "pattern_properties_several": {
        "type": "object",
        "additionalProperties": False,
        "maxProperties": 3,
        "patternProperties": {
            "[\\S\\s]*": {"type": "string", "maxLength": 6},
            "^[a-z_][a-z0-9_]*$": {"type": "string", "minLength": 2},
        },
    },
    "max_properties_keyed": {
        "type": "object",
        "patternProperties": {"^x-": {"type": "integer"}},
        "minProperties": 1,
        "maxProperties": 2,
    },
    # CloudFormation's names: lookaheads that bound the length, bounded and optional repeats fitted
    # to minLength / maxLength, a search that needs a tail to reach its minLength, not only digits, alternatives fitted one by one
    "length_fitted_names": {
        "type": "object",
        "properties": {
            "repo": {
                "type": "string",
                "pattern": "^(?=.{2,12}$)([a-z0-9]+((\\.|_|-+)[a-z0-9]+)*)$",
            },
            "id": {"type": "string", "pattern": "^(?=^[a-z][a-z0-9]*(-[a-z0-9]+)*$).{1,10}$"},
            "label": {
                "type": "string",
                "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
                "minLength": 3,
                "maxLength": 12,
            },
            "key": {
                "type": "string",
                "pattern": "^[a-zA-Z0-9_-]{0,64}$",
                "minLength": 1,
                "maxLength": 8,
            },
            "arn": {"type": "string", "pattern": "\\S", "minLength": 5, "maxLength": 9},
            "name": {
                "type": "string",
                "pattern": "^(?!^[0-9]+$)([a-zA-Z0-9\\-_]+)$",
                "maxLength": 8,
            },
            "alias": {
                "type": "string",
                "pattern": "^$|^[a-z](?:-?[a-z0-9]){0,8}$",
                "minLength": 1,
                "maxLength": 9,
            },
        },
        "required": ["repo", "id", "label", "key", "arn", "name", "alias"],
    },
    # CloudFormation's lookarounds and inner anchors, written out through an automaton
    "lookarounds_written_out": {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "pattern": "^[a-zA-Z_](?!.*--)[a-zA-Z0-9_-]*$",
                "maxLength": 10,
            },
            "svc": {
                "type": "string",
                "pattern": "^(?!svc-)(?![-])(?!.*[-]$)(?!.*[-]{2})[a-z0-9-]+$",
            },
            "bucket": {"type": "string", "pattern": "^[0-9a-z.-]{0,14}(?<!\\.)$"},
            "uuid": {
                "type": "string",
                "pattern": "^(?!00000000-0000-0000-0000-000000000000)[0-9a-f]{8}-[0-9a-f]{4}-"
                "[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            },
            "s3": {
                "type": "string",
                "pattern": "(^s3://[a-z0-9]+/.+$)|(^(?=(.{4})*$)[A-Za-z0-9+/]*={0,2}$)",
                "maxLength": 16,
            },
        },
        "required": ["name", "svc", "bucket", "uuid", "s3"],
    },
    # keywords beside a `$ref` that do not apply to the type it brings (CloudFormation's Tags:
    # `"items": {"$ref": "#/definitions/Tag", "maxItems": 20}`), and one that does
    "ref_siblings_of_other_types": {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"$ref": "#/$defs/tag", "maxItems": 20},
                "maxItems": 3,
            },
            "ids": {
                "type": "array",
                "items": {"$ref": "#/$defs/idOrList", "maxItems": 2},
                "maxItems": 2,
            },
        },
        "required": ["tags", "ids"],
        "$defs": {
            "tag": {
                "type": "object",
                "properties": {"Key": {"type": "string", "maxLength": 8}},
                "required": ["Key"],
                "additionalProperties": False,
            },
            "idOrList": {"type": ["array", "string"], "items": {"type": "integer"}, "maxLength": 4},
        },
    },
    # multipleOf as real schemas use it (CloudFormation): steps 1/N spelt out where few, else the
    # integers; integer steps; a float step of 1
    "multiples": {
        "type": "object",
        "properties": {
            "canary": {"type": "number", "multipleOf": 0.1, "minimum": 0.1, "maximum": 100},
            "weight": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1},
            "ocu": {"type": "number", "multipleOf": 0.5, "minimum": 1},
            "ttl": {"type": "number", "multipleOf": 1.0, "minimum": 0},
            "minutes": {"type": "integer", "multipleOf": 15, "minimum": 0, "maximum": 1440},
            "offsets": {
                "type": "array",
                "items": {"type": "integer", "multipleOf": 8},
                "maxItems": 3,
            },
        },
        "required": ["canary", "weight", "ocu", "ttl", "minutes", "offsets"],
    },
    # a format and a pattern together (SchemaStore's `"format": "uri", "pattern": "^https://"`)
    "format_and_pattern": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "pattern": "^https://"},
            "spec": {
                "type": "string",
                "format": "uri-reference",
                "pattern": "^(https?://|/).+\\.ya?ml$",
            },
            "day": {"type": "string", "format": "date", "pattern": "^20[0-9]{2}-0"},
            "mail": {
                "type": "string",
                "format": "email",
                "pattern": "@example\\.com$",
                "maxLength": 24,
            },
        },
        "required": ["url", "spec", "day", "mail"],
    },
    # patterns of an allOf merged into one (the first as a lookahead), written out by the automaton
    "all_of_patterns": {
        "allOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]
    },
    # a pattern beside a $ref to another (2020-12: both apply)
    "pattern_beside_a_ref": {
        "$ref": "#/$defs/a",
        "pattern": "b",
        "$defs": {"a": {"type": "string", "pattern": "a"}},
    },
    # a listed name a pattern also takes: its schema and the pattern's merged ("x-a" at most
    # 3 characters; "x-b" can have no value, string and integer: never generated)
    "listed_name_under_a_pattern": {
        "type": "object",
        "properties": {
            "x-a": {"type": "string"},
            "x-b": {"type": "string"},
            "c": {"type": "boolean"},
        },
        "required": ["x-a"],
        "patternProperties": {"^x-a": {"maxLength": 3}, "^x-b": {"type": "integer"}},
    },
    # an allOf member closed to other names, whose patternProperties take a name the node lists
    # (the name stays, with both schemas; another listed name it forbids is never generated)
    "all_of_closed_by_patterns": {
        "type": "object",
        "required": ["ver"],
        "properties": {
            "ver": {"type": "string", "enum": ["3.0", "3.1"]},
            "Other": {"type": "null"},
        },
        "allOf": [
            {
                "type": "object",
                "properties": {"_kind": {"const": "dict"}},
                "additionalProperties": False,
                "patternProperties": {"^[a-z][0-9a-z]*$": {"type": "string", "pattern": "0$"}},
            }
        ],
    },
    # an anyOf beside properties distributes: "a" must match both patterns
    "patterns_met_through_any_of": {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "x"}},
        "required": ["a"],
        "anyOf": [{"properties": {"a": {"type": "string", "pattern": "y"}}}],
    },
}

# schema -> the keyword the GrammarError must name
UNSUPPORTED = [
    (
        {
            "type": "array",
            "items": {"type": "integer", "maximum": 5},
            "uniqueItems": True,
            "minItems": 2,
        },
        "uniqueItems",
    ),
    # a listed name a pattern also takes, where the two schemas do not merge into one
    (
        {
            "type": "object",
            "properties": {"x-a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "patternProperties": {"^x-": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        },
        "patternProperties",
    ),
    (
        {
            "type": "object",
            "properties": {"Bad": {"type": "string"}},
            "propertyNames": {"pattern": "^[a-z]+$"},
        },
        "propertyNames",
    ),
    (
        {"type": "array", "items": {"enum": ["a", 1, "c"]}, "uniqueItems": True, "minItems": 3},
        "uniqueItems",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "minProperties": 2,
        },
        "minProperties",
    ),  # two optional ones demanded
    ({"type": "number", "multipleOf": 0.3}, "multipleOf"),  # not 1/N: 0.3 / 0.1 fails in floats
    # unique arrays of objects that hold such an array again (CycloneDX's components): refused
    # by name, not by running out of stack
    (
        {
            "$defs": {
                "c": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "kids": {
                            "type": "array",
                            "uniqueItems": True,
                            "minItems": 2,
                            "items": {"$ref": "#/$defs/c"},
                        },
                    },
                    "required": ["id"],
                }
            },
            "$ref": "#/$defs/c",
        },
        "uniqueItems",
    ),
    ({"not": {"type": "string"}}, "not"),
    ({"type": "integer", "if": {"minimum": 3}, "then": {"maximum": 5}}, "if"),
    (
        {
            "type": "object",
            "patternProperties": {"^a": {"type": "integer"}, "^b": {"type": "string"}},
        },
        "patternProperties",
    ),  # two patterns could apply to one name, and no value meets both
    ({"type": "object", "propertyNames": {"type": "integer"}}, "propertyNames"),
    ({"type": "string", "format": "idn-email"}, "format"),
    ({"type": "number", "multipleOf": 2.5}, "multipleOf"),
    (
        {"type": "number", "multipleOf": 0.00032},
        "multipleOf",
    ),  # 1/3125, but its float is not close enough
    ({"type": "number", "minimum": 0.75, "exclusiveMaximum": 0.75}, "minimum"),  # no value left
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf"),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "required",
    ),
    ({"type": "string", "pattern": "a(?=(?!c)b)"}, "pattern"),  # a lookaround inside a lookaround
    (
        {"type": "string", "pattern": "\\Gword"},
        "pattern",
    ),  # Java's and PCRE's \G: neither ECMA-262 nor Python
    ({"type": "string", "minLength": 5, "pattern": "^ab$"}, "pattern"),  # its strings are 2 long
    ({"type": "string", "maxLength": 9, "format": "date"}, "format"),  # dates are 10 long
    (
        {"type": "string", "pattern": "^(\\d)\\1", "format": "date"},
        "format",
    ),  # a backreference: no automaton
    ({"type": "array", "contains": {"type": "integer"}}, "contains"),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "dependentRequired": {"a": ["b"]},
        },
        "dependentRequired",
    ),
    ({"$ref": "http://example.com/schema"}, "$ref"),
    (
        {
            "$defs": {
                "n": {
                    "type": "object",
                    "properties": {"c": {"$ref": "#/$defs/n"}},
                    "required": ["c"],
                }
            },
            "$ref": "#/$defs/n",
        },
        "required",
    ),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2}, "minItems"),
    ({"type": "string", "enum": [{"a": 1}]}, "enum"),  # no value of the type
    ({"oneOf": [{"enum": [1, 2]}, {"enum": [2.0, 3]}]}, "oneOf"),
    # two formatted strings may match both (their rewrites are distinct placeholder consts)
    (
        {
            "oneOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "pattern": "^[0-9-]+$"},
            ]
        },
        "oneOf",
    ),
    ({"type": "string", "maxLength": 2.5}, "maxLength"),
    # malformed keyword values are named, not crashes (HTTP 400, not 500)
    ({"type": [["string"]]}, "type"),
    ({"type": {"a": 1}}, "type"),
    ({"type": "object", "properties": {"a": {}}, "required": [["a"]]}, "required"),
    ({"type": "string", "pattern": 5}, "pattern"),
    ({"type": "string", "format": ["date"]}, "format"),
    ({"type": "string", "pattern": "^a{3,1}$"}, "pattern"),
    ({"type": "string", "pattern": "^\\ud83d$"}, "pattern"),
    # formats validators check and radixgen cannot generate exactly
    ({"type": "string", "format": "idn-hostname"}, "format"),
    ({"enum": [2**64 + 1, 3]}, "enum"),
    ({"type": "object", "properties": {'a"b': {"type": "integer"}}}, "properties"),
    ({"type": "string", "pattern": "[\\d-z]"}, "pattern"),
]

"""JSON Schemas too large for one regex, compiled to the CFG matcher (json_grammar.rules, json_grammar.tokens,
json_grammar.cfg): the atoms that type JSON tokens, the rules' language against the regex path's on the
same schemas, and a schema past the regex budget end to end through GrammarCompiler."""

import json

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.cfg.grammar import CfgGrammar
from radixgen.grammar.index.regex_matcher import RegexGrammar
from radixgen.grammar.index.size_budget import REGEX_BUDGET
from radixgen.grammar.json_grammar.cfg import compile_json_grammar
from radixgen.grammar.json_grammar.rules import PUNCTUATION, JsonGrammar, SchemaGrammar
from radixgen.grammar.json_grammar.tokens import TokenAtoms
from radixgen.grammar.json_schema import schema_to_compiled_form
from radixgen.grammar.matcher import GrammarError, RegexTooLarge
from radixgen.grammar.rewrite.outlines import ref_target
from tests.grammar.walks import accepts_text, random_walk

FREE_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"'


def _grammar(schema, info):
    return compile_json_grammar(
        SchemaGrammar(schema, {}, ref_target).build(), info, precompute=False
    )


def _lexed(atoms: TokenAtoms, text: bytes) -> list[str]:
    """The atom types maximal munch gives `text` (a JSON text without whitespace)."""
    lexer, q, out = atoms.lexer(), 1, []
    for b in text:
        if lexer.emit_rows[q][b] >= 0:
            out.append(lexer.type_names[lexer.emit_rows[q][b]])
        q = lexer.trans_rows[q][b]
        assert q != 0, f"rejected at {b!r}"
    out.append(lexer.type_names[lexer.winner[q]])
    return out


def test_atoms_split_overlapping_terminals_so_each_token_has_one_type():
    atoms = TokenAtoms(
        {"KEY": r'"name"', "STR": FREE_STRING, "LOWER": r'"[a-z]+"', "COMMA": ","}, frozenset([","])
    )
    key, string, lower = (set(atoms.atoms_of[n]) for n in ("KEY", "STR", "LOWER"))
    assert key < lower < string  # "name" is all three; "abc" lower and free; "A" free only
    assert len(key) == 1 and len(lower) == 2 and len(string) == 3
    by_text = {t: _lexed(atoms, t.encode()) for t in ('"name"', '"abc"', '"A b"')}
    assert by_text['"name"'][0] in key
    assert by_text['"abc"'][0] in lower - key
    assert by_text['"A b"'][0] in string - lower
    # a number ends where the next byte cannot go on: 12 then `,` then 3
    numbers = TokenAtoms({"INT": "-?(?:0|[1-9][0-9]*)", "ONE": "1", "COMMA": ","}, frozenset([","]))
    assert len(_lexed(numbers, b"12,1")) == 3
    assert _lexed(numbers, b"1")[0] in set(numbers.atoms_of["ONE"])


@pytest.mark.parametrize("regex", [r'\{"a":1\}', r'"a"b', r"1,2", r"[0-9]+[a-z]"])
def test_atoms_refuse_a_terminal_that_is_not_one_json_token(regex):
    with pytest.raises(GrammarError, match="more than one JSON token"):
        TokenAtoms({"X": regex})


def test_punctuation_is_exempt_from_the_token_check():
    atoms = TokenAtoms(
        {"LB": PUNCTUATION["{"], "RB": PUNCTUATION["}"]}, frozenset(PUNCTUATION.values())
    )
    assert atoms.atoms_of["LB"] != atoms.atoms_of["RB"]


SAME_AS_REGEX = [
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"],
    },
    {
        "type": "object",
        "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}},
    },
    {"type": "array", "items": {"enum": ["x", 1, None]}, "minItems": 1, "maxItems": 3},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
    {"type": "array", "prefixItems": [{"type": "null"}, {"type": "boolean"}]},
    {
        "anyOf": [
            {"type": "string", "pattern": "^[a-z]{1,3}$"},
            {"type": "integer"},
            {"type": "null"},
        ]
    },
    {"type": ["object", "null"], "properties": {"k": {"const": {"x": [1, "y"]}}}},
    {"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 1},
    {"type": "object", "maxProperties": 0},
    {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2},
                },
                "required": ["v"],
            }
        },
        "$ref": "#/$defs/n",
    },
]
TEXTS = [
    "{}",
    '{"b":""}',
    '{"a":1,"b":"x"}',
    '{"b":"x","a":1}',
    '{"a":1,"b":"x","c":true}',
    '{"a":null}',
    '{"a":null,"c":null}',
    '{"c":null,"a":null}',
    '["x"]',
    "[]",
    '["x",1,null]',
    '["x",1,null,1]',
    "[true,false]",
    "[true]",
    "[null,true]",
    "[null]",
    '"ab"',
    '"abcd"',
    "12",
    "null",
    '"AB"',
    '{"k":{"x":[1,"y"]}}',
    '{"k":{"x":[1]}}',
    '{"q":true}',
    '{"q":true,"r":false}',
    '{"v":1}',
    '{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}',
    '{"v":1,"kids":[{"v":2},{"v":3},{"v":4}]}',
    '{"kids":[]}',
]


@pytest.mark.parametrize("schema", SAME_AS_REGEX, ids=range(len(SAME_AS_REGEX)))
def test_the_grammar_reads_a_schema_as_its_regex_does(schema, small_info, small_compiler):
    """Each schema compiled both ways accepts the same texts, and the grammar's walks validate."""
    regex = small_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    assert isinstance(regex, RegexGrammar)
    grammar = _grammar(schema, small_info)
    for text in TEXTS:
        assert accepts_text(grammar, small_info, text) == accepts_text(regex, small_info, text), (
            text
        )
    assert any(accepts_text(grammar, small_info, t) for t in TEXTS)
    for seed in range(6):
        _, text = random_walk(grammar, small_info, seed, max_steps=300)
        jsonschema.validate(json.loads(text), schema)


def test_a_string_value_may_spell_a_property_name(small_info):
    """The key "name" and a free string value share an atom: "name" is still a value."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "id": {"type": "string"}},
    }
    grammar = _grammar(schema, small_info)
    assert accepts_text(grammar, small_info, '{"name":"name","id":"id"}')
    assert not accepts_text(
        grammar, small_info, '{"id":"x","name":"y"}'
    )  # properties keep their order


def _too_large_schema(width: int = 9, depth: int = 5) -> dict:
    """Objects of `width` optional properties nested `depth` levels, each level its own $defs
    member used twice: outlines-core's regex repeats each property per later one, per level."""
    defs = {
        "l0": {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(width)}}
    }
    for level in range(1, depth + 1):
        props = {f"k{i}": {"$ref": f"#/$defs/l{level - 1}"} for i in range(width - 1)}
        props["s"] = {"type": "string", "pattern": "^[a-z]+$"}
        defs[f"l{level}"] = {"type": "object", "properties": props}
    return {"$defs": defs, "$ref": f"#/$defs/l{depth}"}


def test_a_schema_past_the_regex_budget_compiles_to_a_grammar(smol_info):
    schema = _too_large_schema()
    text = json.dumps(schema)
    with pytest.raises(RegexTooLarge):
        schema_to_compiled_form(text, grammar=False)
    form, unique_paths = schema_to_compiled_form(text)
    assert isinstance(form, JsonGrammar) and unique_paths == ()
    from radixgen.grammar.compiler import GrammarCompiler

    grammar = GrammarCompiler(smol_info).compile(Constraint("json_schema", text))
    assert isinstance(grammar, CfgGrammar)
    assert accepts_text(grammar, smol_info, '{"k0":{"k1":{"s":"ab"}},"s":"x"}')
    assert not accepts_text(grammar, smol_info, '{"k0":{"k1":{"s":"AB"}}}')
    assert not accepts_text(grammar, smol_info, '{"k0":{"p0":1}}')  # p0 is four levels down
    for seed in range(8):
        _, out = random_walk(grammar, smol_info, seed, max_steps=600)
        jsonschema.validate(json.loads(out), schema)
    assert REGEX_BUDGET > 0


def _keyed_too_large_schema() -> dict:
    """A dictionary (names follow a pattern) whose values' regex alone passes the budget."""
    big = _too_large_schema()
    return {
        "$defs": big["$defs"],
        "type": "object",
        "propertyNames": {"pattern": "^[a-z]+$"},
        "additionalProperties": {"$ref": big["$ref"]},
        "maxProperties": 2,
    }


def test_a_keyed_object_whose_values_are_too_large_is_written_as_rules(small_info):
    schema = _keyed_too_large_schema()
    text = json.dumps(schema)
    with pytest.raises(RegexTooLarge):
        schema_to_compiled_form(text, grammar=False)
    from radixgen.grammar.compiler import GrammarCompiler

    grammar = GrammarCompiler(small_info).compile(Constraint("json_schema", text))
    assert isinstance(grammar, CfgGrammar)
    assert accepts_text(grammar, small_info, "{}")
    assert accepts_text(grammar, small_info, '{"ab":{"k0":{"s":"x"}},"c":{}}')
    assert not accepts_text(grammar, small_info, '{"aB":{}}')  # the names' pattern
    assert not accepts_text(grammar, small_info, '{"a":{},"b":{},"c":{}}')  # maxProperties
    assert not accepts_text(grammar, small_info, '{"a":{"k0":{"s":"X"}}}')  # the values' schema
    for seed in range(8):
        _, out = random_walk(grammar, small_info, seed, max_steps=400)
        jsonschema.validate(json.loads(out), schema)


@pytest.mark.parametrize("whitespace", ["flexible", "[ ]?"])
def test_a_too_large_schema_takes_the_configured_whitespace_once_per_gap(small_info, whitespace):
    """As on the regex path: one match of the pattern between tokens, none before or after the
    value (the walks would otherwise run on in whitespace)."""
    from radixgen.grammar.compiler import GrammarCompiler

    schema = _too_large_schema()  # (with a set of enum values: an array written as one regex)
    schema["$defs"]["l5"]["properties"]["tags"] = {
        "type": "array",
        "items": {"enum": ["a", "b", "c"]},
        "uniqueItems": True,
    }
    form, _ = schema_to_compiled_form(json.dumps(schema), whitespace=whitespace)
    assert isinstance(form, JsonGrammar) and form.whitespace
    grammar = GrammarCompiler(small_info, whitespace=whitespace).compile(
        Constraint("json_schema", json.dumps(schema))
    )

    def accepts(text: str) -> bool:
        return accepts_text(grammar, small_info, text)

    assert (
        accepts('{ "k0" : { "s" : "ab" } , "s" : "x" }') and accepts('{"k0":{}}') and accepts("{ }")
    )
    assert accepts('{"tags": ["a", "c"]}') and not accepts('{"tags": ["a", "a"]}')
    assert not accepts(' {"k0":{}}') and not accepts('{"k0":{}} ') and not accepts('{"k0":{}}\n')
    if whitespace == "flexible":
        assert accepts('{\n  "k0": {\n    "k1": {}\n  }\n}')
        assert not accepts("{" + " " * 33 + "}")
    else:
        assert (
            not accepts('{  "k0":{}}') and not accepts('{"k0"  :{}}') and not accepts('{"k0":{}  }')
        )
    for seed in range(6):
        _, out = random_walk(grammar, small_info, seed, max_steps=400)
        assert out == out.strip()
        jsonschema.validate(json.loads(out), schema)


def test_a_whitespace_pattern_a_grammar_cannot_take_is_refused_clearly(small_info):
    for pattern in ("[ a]*", "\n"):  # not only whitespace; not the empty text
        with pytest.raises(GrammarError, match="whitespace pattern"):
            from radixgen.grammar.json_grammar.cfg import check_json_grammar

            check_json_grammar(
                schema_to_compiled_form(json.dumps(_too_large_schema()), whitespace=pattern)[0]
            )


def test_an_ambiguous_schema_keeps_one_reading_and_every_prefix_completes(small_info):
    """anyOf alternatives that both accept `{}` and `{"s":...}`: the table keeps one reduction
    per conflict; what it accepts is valid and no walk is left without a way to finish."""
    schema = {
        "anyOf": [
            {"type": "object", "properties": {"s": {"type": "string"}, "a": {"type": "integer"}}},
            {"type": "object", "properties": {"s": {"type": "string"}, "b": {"type": "boolean"}}},
            {"type": "array", "items": {"type": "integer"}},
            {"type": "array", "items": {"type": "boolean"}},
        ]
    }
    grammar = _grammar(schema, small_info)
    for text in ("{}", '{"s":"x"}', "[]", '{"s":"x","a":1}'):
        assert accepts_text(grammar, small_info, text), text
    assert not accepts_text(grammar, small_info, '{"a":1,"b":true}')
    for seed in range(30):
        _, text = random_walk(grammar, small_info, seed, max_steps=200)
        jsonschema.validate(json.loads(text), schema)


def test_the_integer_lalr_construction_builds_lark_s_own_table(small_info):
    """cfg.lalr_table's table equals Lark's own analysis on the same rules, state by state (states
    named by their LR(0) items), on schema grammars and an ambiguous one."""
    from lark.common import ParserConf
    from lark.parsers.grammar_analysis import RulePtr
    from lark.parsers.lalr_analysis import LALR_Analyzer

    from radixgen.grammar.cfg.lalr_table import LalrTable
    from radixgen.grammar.json_grammar import cfg as json_cfg

    ambiguous = {
        "anyOf": [
            {"type": "object", "properties": {"s": {"type": "string"}, "a": {"type": "integer"}}},
            {"type": "object", "properties": {"s": {"type": "string"}, "b": {"type": "boolean"}}},
        ]
    }
    for schema in SAME_AS_REGEX + [_too_large_schema(4, 2), ambiguous]:
        grammar = SchemaGrammar(schema, {}, ref_target).build()
        atoms = TokenAtoms(grammar.terminals, frozenset(PUNCTUATION.values()))
        symbols = {name: found[0] for name, found in atoms.atoms_of.items()}
        conf = ParserConf(
            json_cfg._lark_rules(grammar.rules, symbols, set(atoms.type_names)), {}, ["start"]
        )
        lark = LALR_Analyzer(conf, debug=True)
        lark.compute_lalr()  # (debug: states keyed by their items, comparable across runs)
        named = {state: frozenset(map(str, state)) for state in lark.parse_table.states}
        ours = LalrTable(conf.rules, "start")
        ours_named = {
            sid: frozenset(str(RulePtr(ours.rules[k], dot)) for k, dot in items)
            for sid, items in enumerate(ours.items)
        }
        tables = [
            {
                names[state]: {
                    t: (str(kind), names[arg] if str(kind) == "Shift" else str(arg))
                    for t, (kind, arg) in row.items()
                }
                for state, row in table.states.items()
            }
            for names, table in ((named, lark.parse_table), (ours_named, ours.table))
        ]
        assert tables[0] == tables[1] and len(tables[0]) >= 3
        assert (
            named[lark.parse_table.start_states["start"]]
            == ours_named[ours.table.start_states["start"]]
        )
        assert (
            named[lark.parse_table.end_states["start"]]
            == ours_named[ours.table.end_states["start"]]
        )
    # the kernels it hands the shortest completions (cfg.items) are those cfg.items rebuilds
    compiled = compile_json_grammar(
        SchemaGrammar(_too_large_schema(4, 2), {}, ref_target).build(), small_info, precompute=False
    )
    completions = compiled.closer.completions
    rebuilt = completions._kernels(compiled.parser.start_stack[0])
    assert len(rebuilt) > 10 and all(
        set(completions.kernel[s]) == set(k) for s, k in rebuilt.items()
    )


def test_a_schema_whose_token_index_is_too_large_compiles_to_a_grammar(small_info, monkeypatch):
    from radixgen.grammar.compiler import GrammarCompiler
    from radixgen.grammar.index import size_budget

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["a"],
    }
    constraint = Constraint("json_schema", json.dumps(schema))
    assert isinstance(GrammarCompiler(small_info).compile(constraint), RegexGrammar)
    monkeypatch.setattr(size_budget, "INDEX_ENTRY_BUDGET", 1000)
    compiler = GrammarCompiler(small_info)
    compiler.validate(constraint)
    grammar = compiler.compile(constraint)
    assert isinstance(grammar, CfgGrammar)
    assert accepts_text(grammar, small_info, '{"a":"x","b":["y"]}')
    assert not accepts_text(grammar, small_info, '{"b":["y"]}')
    with pytest.raises(GrammarError, match="too large to index"):
        GrammarCompiler(small_info).compile(Constraint("regex", "[a-z]{0,40}"))


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
        }
    },
    "$ref": "#/$defs/node",
}


def test_a_recursive_guarded_schema_whose_index_is_too_large_is_unrolled_for_its_guard(
    small_info, monkeypatch
):
    """The grammar needs no unrolling, but the guard tells places apart by path: the references
    are unrolled as on the regex path, and the guard keeps sets unique at every level."""
    from radixgen.grammar import json_schema
    from radixgen.grammar.compiler import GrammarCompiler
    from radixgen.grammar.index import size_budget

    monkeypatch.setattr(size_budget, "INDEX_ENTRY_BUDGET", 1000)
    grammar = GrammarCompiler(small_info).compile(Constraint("json_schema", json.dumps(TREE)))
    assert isinstance(grammar, CfgGrammar) and grammar.guard is not None
    assert accepts_text(grammar, small_info, '{"tags":["a","b"],"kids":[{"tags":["a"]}]}')
    assert not accepts_text(grammar, small_info, '{"kids":[{"tags":["a","a"]}]}')

    class TooLarge:  # references too large to write out: refused by name, not as a RecursionError
        def __init__(self, root):
            pass

        def run(self):
            raise RegexTooLarge("too large")

    monkeypatch.setattr(json_schema, "Unroll", TooLarge)
    with pytest.raises(GrammarError, match="recurses"):
        schema_to_compiled_form(json.dumps(TREE))


def test_rust_classes_nest_and_combine_in_token_regexes():
    from radixgen.grammar.cfg.terminal_regex import parse_regex

    assert parse_regex("[[a-e]--[aeiou]]", rust=True)[0] == ("cat", [("set", [(98, 100)])])
    assert parse_regex("[a-e&&[^c]]", rust=True)[0] == ("cat", [("set", [(97, 98), (100, 101)])])
    assert parse_regex("[a-c~~b-d]", rust=True)[0] == ("cat", [("set", [(97, 97), (100, 100)])])
    assert parse_regex(r"\x{1F600}", rust=True)[0] == ("cat", [("set", [(0x1F600, 0x1F600)])])
    # Python's (Lark's) reading is unchanged: `[` and `--` are characters there
    assert parse_regex("[[a-]", rust=False)[0] == ("cat", [("set", [(45, 45), (91, 91), (97, 97)])])


PLACEHOLDER = "RGPH0000000ax0"


def _placeholder_grammar(regex: str, info):
    form = SchemaGrammar(
        {"type": "object", "properties": {"v": {"const": PLACEHOLDER}}, "required": ["v"]},
        {f'"{PLACEHOLDER}"': regex},
        ref_target,
    ).build()
    return compile_json_grammar(form, info, precompute=False)


def test_a_placeholder_for_a_whole_container_is_cut_into_tokens(small_info):
    """rewrite.rewriter's placeholders may stand for a counted array's or a keyed object's regex."""
    counted = r'\[(?:"[a-z]+"(?:,"[a-z]+"){0,2})?\]'
    grammar = _placeholder_grammar(counted, small_info)
    for text, ok in [
        ('{"v":[]}', True),
        ('{"v":["a","bc","d"]}', True),
        ('{"v":["a","b","c","d"]}', False),
        ('{"v":["A"]}', False),
        ('{"v":[,]}', False),
    ]:
        assert accepts_text(grammar, small_info, text) == ok, text
    keyed = r'\{(?:"k[0-9]+":(?:true|null)(?:,"k[0-9]+":(?:true|null))*)?\}'
    grammar = _placeholder_grammar(keyed, small_info)
    for text, ok in [
        ('{"v":{}}', True),
        ('{"v":{"k1":true,"k22":null}}', True),
        ('{"v":{"x":true}}', False),
    ]:
        assert accepts_text(grammar, small_info, text) == ok, text


def test_a_placeholder_whose_tokens_cannot_be_told_apart_is_refused(small_info):
    with pytest.raises(GrammarError, match="cannot be cut"):
        _placeholder_grammar(r'\["a(?:b",1|")\]', small_info)


def test_the_uniqueness_guard_runs_beside_a_grammar(small_info):
    from radixgen.grammar.compiler import GrammarCompiler
    from radixgen.grammar.unique.guarded_matcher import GuardedMatcher

    schema = _too_large_schema(9, 4)
    schema["$defs"]["l4"]["properties"]["tags"] = {
        "type": "array",
        "items": {"type": "string", "maxLength": 3},
        "uniqueItems": True,
        "minItems": 2,
    }
    form, unique_paths = schema_to_compiled_form(json.dumps(schema))
    assert isinstance(form, JsonGrammar) and unique_paths
    grammar = GrammarCompiler(small_info).compile(Constraint("json_schema", json.dumps(schema)))
    assert isinstance(grammar, CfgGrammar) and isinstance(grammar.matcher(), GuardedMatcher)
    assert accepts_text(grammar, small_info, '{"tags":["a","b"]}')
    assert not accepts_text(grammar, small_info, '{"tags":["a","a"]}')
    for seed in range(10):
        _, text = random_walk(grammar, small_info, seed, max_steps=150)
        jsonschema.validate(json.loads(text), schema)


def test_keep_closest_keeps_the_first_token_of_the_shortest_completion(small_info):
    import numpy as np

    grammar = _grammar(
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, small_info
    )
    matcher = grammar.matcher()
    for token in small_info.token_bytes.index(b"{"), small_info.token_bytes.index(b'"'):
        assert matcher.accept_token(token)
    words = np.full((small_info.vocab_size + 31) // 32, -1, dtype=np.int32)
    matcher.keep_closest(words)
    kept = [i for i in range(small_info.vocab_size) if words[i >> 5] >> (i & 31) & 1]
    assert len(kept) == 1 and small_info.token_bytes[kept[0]].startswith(b"a")


def test_a_schema_too_large_even_as_a_grammar_is_refused_before_its_tables(monkeypatch):
    from radixgen.grammar.json_grammar import rules as schema_grammar

    monkeypatch.setattr(schema_grammar, "ITEM_BUDGET", 300)
    with pytest.raises(GrammarError, match="too large even as a grammar"):
        schema_to_compiled_form(json.dumps(_too_large_schema(9, 5)))


def test_the_path_index_finds_what_pairwise_comparison_finds():
    """rewrite.guard_sites._PathIndex (a trie with None as a wildcard on both sides) against the
    pairwise `_overlap` it replaced, on random paths."""
    import random

    from radixgen.grammar.rewrite.guard_sites import _overlap, _PathIndex

    rng = random.Random(0)
    parts = ["a", "b", "c", None]
    for _ in range(300):
        paths = [
            tuple(rng.choice(parts) for _ in range(rng.randint(0, 3)))
            for _ in range(rng.randint(0, 8))
        ]
        index = _PathIndex()
        for i, path in enumerate(paths):
            index.add(path, i)
        for _ in range(5):
            query = tuple(rng.choice(parts) for _ in range(rng.randint(0, 3)))
            assert index.overlapping(query) == {
                i for i, p in enumerate(paths) if _overlap(query, p)
            }


def test_tool_calls_too_large_for_one_regex_offer_text_or_tagged_calls(small_info):
    """tool_choice "auto" with a schema past the regex budget: free text or the calls' grammar
    between the tags (tool_calls), decided on the first token; rollback and fork across it."""
    from radixgen.grammar.compiler import GrammarCompiler
    from radixgen.grammar.tool_calls import TextOrCallMatcher
    from radixgen.runtime.server.openai_tools import TOOL_CLOSE, TOOL_OPEN, tool_constraint

    params = _too_large_schema(
        9, 4
    )  # (with a set of strings: the guard starts after the opening tag)
    params["$defs"]["l4"]["properties"]["tags"] = {
        "type": "array",
        "items": {"type": "string", "maxLength": 3},
        "uniqueItems": True,
    }
    constraint = tool_constraint("auto", {"configure": params}, parallel=True)
    compiler = GrammarCompiler(small_info)
    compiler.validate(constraint)
    grammar = compiler.compile(constraint)
    assert isinstance(grammar.matcher(), TextOrCallMatcher)
    call = '[{"name":"configure","arguments":{"k0":{"s":"ab"}}}]'
    assert accepts_text(grammar, small_info, f"{TOOL_OPEN}{call}{TOOL_CLOSE}")
    assert accepts_text(
        grammar, small_info, "It is sunny. <b>{"
    )  # free text: anything after its first byte
    assert not accepts_text(grammar, small_info, "")  # (EOS first)
    assert not accepts_text(grammar, small_info, "<b>")
    assert not accepts_text(
        grammar,
        small_info,
        f'{TOOL_OPEN}[{{"name":"configure","arguments":{{"k0":1}}}}]{TOOL_CLOSE}',
    )
    assert not accepts_text(grammar, small_info, f"{TOOL_OPEN}{call}")
    tagged = '[{"name":"configure","arguments":{"tags":["a",%s]}}]'
    assert accepts_text(grammar, small_info, TOOL_OPEN + tagged % '"b"' + TOOL_CLOSE)
    assert not accepts_text(grammar, small_info, TOOL_OPEN + tagged % '"a"' + TOOL_CLOSE)

    tokens = small_info.token_bytes
    matcher = grammar.matcher()
    assert matcher.accept_token(tokens.index(b"It")) and matcher.is_accepting()
    assert matcher.accept_token(tokens.index(b"<"))  # (inside free text, a tag's byte is text)
    matcher.rollback(matcher.num_accepted)
    assert matcher.accept_token(tokens.index(b"<")) and not matcher.is_accepting()
    forked = matcher.fork()
    assert not matcher.accept_token(tokens.index(b"It")) and forked.accept_token(tokens.index(b"t"))

    class Tagged:  # walks that start with the opening tag
        def matcher(self):
            tagged = grammar.matcher()
            assert all(tagged.accept_token(tokens.index(bytes([b]))) for b in TOOL_OPEN.encode())
            return tagged

    for seed in range(8):
        _, text = random_walk(Tagged(), small_info, seed, max_steps=400)
        assert text.endswith(TOOL_CLOSE)
        for called in json.loads(text[: -len(TOOL_CLOSE)]):
            assert called["name"] == "configure"
            jsonschema.validate(called["arguments"], params)
    for seed in range(4):  # the first token decides, both ways
        _, text = random_walk(grammar, small_info, seed, max_steps=400)
        assert text.startswith(TOOL_OPEN) or not text.startswith("<")


def test_a_lexer_too_large_reads_each_token_among_what_can_follow(small_info, monkeypatch):
    """Two counted patterns under different keys multiply in one product automaton; read among
    the terminals that can follow the token before (a value among its key's values), the lexer
    is smaller, and compile_json_grammar falls back to it when the first is too large. Same
    texts accepted, walks valid."""
    from radixgen.grammar.cfg.lalr_table import terminal_follows
    from radixgen.grammar.json_grammar import cfg as json_cfg
    from radixgen.grammar.json_grammar import tokens as json_tokens

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^[a-z]+-[a-z]{1,30}$"},
            "b": {"type": "string", "pattern": "^[a-z-]{1,40}$"},
            "c": {"type": "array", "items": {"type": "string", "pattern": "^[a-f]{2,30}$"}},
        },
        "required": ["a"],
    }
    grammar = SchemaGrammar(schema, {}, ref_target).build()
    exempt = json_cfg._not_json_checked(grammar)
    single = TokenAtoms(grammar.terminals, exempt)
    follows = terminal_follows(grammar.rules, list(grammar.terminals), grammar.start)
    contextual = TokenAtoms(grammar.terminals, exempt, "", follows)
    assert len(contextual.rows) < len(single.rows) // 2
    plain = compile_json_grammar(grammar, small_info, precompute=False)
    monkeypatch.setattr(json_tokens, "MAX_LEXER_STATES", len(contextual.rows) + 1)
    narrow = compile_json_grammar(grammar, small_info, precompute=False)
    assert narrow.lexer.num_states == len(contextual.rows) and len(narrow.lexer.starts) > 1
    for text in [
        '{"a":"x-y"}',
        '{"a":"x-y","b":"y-"}',
        '{"a":"x-y","c":["ab","cdef"]}',
        '{"a":"x-' + "y" * 30 + '"}',
        '{"a":"x-' + "y" * 31 + '"}',
        '{"a":"x"}',
        '{"a":"x-y","c":["a"]}',
        '{"b":"y"}',
        '{"a":"x-y","b":"-"}',
        '{"a":"x-y","b":"' + "-" * 41 + '"}',
        '{"a":"x-y","c":[]}',
        '{"a":"x-y","c":["x-y"]}',
    ]:
        assert accepts_text(narrow, small_info, text) == accepts_text(plain, small_info, text), text
    for seed in range(8):
        _, out = random_walk(narrow, small_info, seed, max_steps=300)
        jsonschema.validate(json.loads(out), schema)

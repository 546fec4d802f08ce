"""Budgets checked before outlines-core builds a token index: a regex whose index would be too
large is refused (a 400 at the HTTP check) instead of taking minutes and gigabytes."""

import json
import time

import pytest

from radixgen.core import Constraint
from radixgen.grammar.index.size_budget import INDEX_ENTRY_BUDGET, index_entries, wide_states
from radixgen.grammar.matcher import GrammarError


@pytest.mark.parametrize(
    "regex,expected",
    [
        ("abc", 0),
        ("[0-9]{1,300}", 0),
        ("[a-f]{50}", 0),  # narrow classes cost little
        ('"[^"]*"', 1),
        ('"[^"]{0,99}"', 99),
        ("(a[^x]){3}", 3),
        ("(?:a|.)*", 1),
        (r"\w+", 1),
        (r"[\w-]{4}", 4),
        ("[a-z]{2,5}", 5),
        ("x{1,}[^a]{2,}", 3),
        ("a{", 0),
        (r"\{[^}]{10}\}", 10),
        ("(?:(?:[^a]){2}b){3}", 6),
        ('(?P<n>[^"]){0,7}', 7),
        (r"[\x00-\x{10FFFF}]{4}", 4),
    ],
)
def test_wide_states_counts_copies_of_wide_atoms(regex, expected):
    assert wide_states(regex) == expected


def test_index_entries_weigh_states_by_the_tokens_they_allow(smol_info):
    one_string = index_entries('"[^"]*"', smol_info)
    assert 0.5 * smol_info.vocab_size < one_string < 2 * smol_info.vocab_size
    ten = index_entries("".join(f'"k{i}":"[^"]*",' for i in range(10)), smol_info)
    assert 8 * one_string < ten < 12 * one_string
    assert (
        index_entries("(?:true|false)", smol_info) < one_string / 4
    )  # tokens starting with t or f


def test_oversized_indexes_are_refused_before_building(smol_info):
    from radixgen.grammar.compiler import GrammarCompiler

    compiler = GrammarCompiler(smol_info)
    # each character place of a free 3,000-character text allows nearly the whole vocabulary
    big = Constraint("regex", "[^\\n]{0,3000}")
    assert wide_states(big.spec) * smol_info.vocab_size > INDEX_ENTRY_BUDGET
    with pytest.raises(GrammarError, match="too large to index"):
        compiler.validate(big)
    with pytest.raises(GrammarError, match="too large to index"):
        compiler.compile(big)
    compiler.validate(Constraint("regex", "[^\\n]{0,100}"))  # 100 places: well within


def test_bounded_repeats_of_wide_classes_compile_in_linear_time(smol_compiler, smol_info):
    """The token index's start marker must not match inside a user's bounded repeat: `.{0,16}`
    took 6.5 s and doubled with each count (`.{0,24}` would take half an hour)."""
    import re
    import time

    from radixgen.grammar.regex.markers import exclude_chars
    from tests.grammar.walks import random_walk

    assert exclude_chars(r".[^\n]\W\d[a-z]", "\ue000") == (
        r"[^\n\x{e000}][[^\n]&&[^\x{e000}]][\W&&[^\x{e000}]]\d[[a-z]&&[^\x{e000}]]"
    )
    # left alone where a rewrite could change the language: verbose mode (a '[' in a comment),
    # '.' under any s flag, a class that does not end; an escaped paren is no flag group
    for regex in ("(?x)a # [\nb]", "(?s:x)a.b", "(?is)a.b", "[[]a"):
        assert exclude_chars(regex, "\ue000") == regex
    assert exclude_chars(r"\(?s.", "\ue000") == r"\(?s[^\n\x{e000}]"
    started = time.perf_counter()
    grammar = smol_compiler.compile(Constraint("regex", ".{0,24}"))
    assert time.perf_counter() - started < 60
    for seed in range(3):
        _, text = random_walk(grammar, smol_info, seed)
        assert re.fullmatch(".{0,24}", text), text


def test_cache_keeps_within_its_entry_budget(smol_info, monkeypatch):
    """Cached grammars are dropped, least recently used first, once their token indexes hold
    more than CACHE_ENTRY_BUDGET entries (not only by count: one large schema takes a GB)."""
    from radixgen.grammar import compiler as compiler_module

    monkeypatch.setattr(compiler_module, "CACHE_ENTRY_BUDGET", 3 * smol_info.vocab_size)
    compiler = compiler_module.GrammarCompiler(smol_info)
    first, second, small = (
        Constraint("regex", '"[^"]*","[^"]*"'),
        Constraint("regex", '"[^"]*",[0-9]+,"[^"]*"'),
        Constraint("regex", "(?:yes|no)"),
    )
    for constraint in (first, small, second):
        compiler.compile(constraint)
    assert compiler.cached(second) and compiler.cached(small)
    assert not compiler.cached(
        first
    )  # two free strings each, about 4 vocabularies > 3: the oldest went


def test_a_large_unique_set_is_guarded_or_refused_quickly():
    """uniqueItems over 865 values (GitHub's starter-workflow categories) built an automaton for
    over 25 minutes: strings go to the guard instead (the set is the item regex), a set of
    other values is refused by its size."""
    from radixgen.grammar.json_schema import schema_to_guarded_regex
    from radixgen.grammar.rewrite.unique_items import UNIQUE_SET_BUDGET

    values = [f"language {i:03d}" for i in range(865)]  # 14 characters with their quotes
    schema = {"type": "array", "uniqueItems": True, "items": {"enum": values}}
    start = time.perf_counter()
    _, paths = schema_to_guarded_regex(json.dumps(schema))
    assert [kind[0] for _, kind in paths] == ["bounded", "items"]  # kept unique, at most 865 items
    # with a number among them: the strings alone (a subset), kept unique the same way
    _, paths = schema_to_guarded_regex(json.dumps({**schema, "items": {"enum": values + [1]}}))
    assert [kind[0] for _, kind in paths] == ["bounded", "items"]
    with pytest.raises(GrammarError, match="too large to enforce"):
        schema_to_guarded_regex(
            json.dumps({**schema, "items": {"enum": list(range(1000, 1865))}, "minItems": 2})
        )
    assert time.perf_counter() - start < 2
    fits = int((UNIQUE_SET_BUDGET / 14) ** 0.5)
    assert (
        schema_to_guarded_regex(json.dumps({**schema, "items": {"enum": values[:fits]}}))[1] == ()
    )


def test_large_enums_merge_in_linear_time():
    """Enums intersect through a set of value keys (they were compared pairwise: a 2000-value
    tag with one `if` took 3.7 s)."""
    from radixgen.grammar.json_schema import schema_to_guarded_regex

    values = [f"v{i}" for i in range(4000)]
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": values}},
        "required": ["kind"],
        "allOf": [{"properties": {"kind": {"enum": values[::-1]}}}],
    }
    start = time.perf_counter()
    schema_to_guarded_regex(json.dumps(schema))
    assert time.perf_counter() - start < 2

"""Lookarounds and inner anchors written out through an automaton (regex.lookaround): exactly the
strings the pattern finds, end to end valid, and what cannot be written out refused."""

import itertools
import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import string_pattern_regex
from radixgen.grammar.unique.values import fullmatches
from tests.grammar.walks import random_walk

# CloudFormation's shapes, small alphabets
EXACT = [
    ("^[a-c](?!.*--)[a-c-]*$", "a-c"),  # no "--" anywhere after the first character
    (
        "^(?!ab-)(?![-])(?!.*[-]$)(?!.*[-]{2})[a-c-]+$",
        "ab-",
    ),  # a reserved prefix, no "-" at the ends or twice
    ("^[a-c.-]*(?<!\\.)$", "a.-"),  # a negative lookbehind at the end
    ("^[a-c.]+(?<!\\.ab)$", "ab."),  # ... of a literal
    ("^(?=.*[a-c])(?=.*[0-9])[a-c0-9]+$", "a0b"),  # contains a letter and a digit
    ("^(?!^[0-9]+$)[a-c0-9.]+$", "a0."),
    ("(?<!a)b", "ab"),
    ("a(?=b)", "abc"),
    ("a(?!b)", "abc"),  # searches: lookarounds see the whole string
    ("(?<=a)b$", "abc"),
    ("(^a)*b", "ab"),
    ("(a$|b)c", "abc"),
    ("^(^$|ab)", "ab"),  # anchors inside the pattern
    ("^(?=a)(?!ab)[a-c]*$|^b$", "abc"),  # lookaheads in one alternative
    ("^(\\bab\\b|[a-c0-9]+)$", "ab1-"),
    ("\\b([0-9]|[0-9][0-9])\\b", "1a -"),  # word boundaries
    ("a\\Bb|x\\b", "abx -"),
]


def _generates(regex: str, text: str) -> bool:
    """Whether the token index would let `regex` spell `text`: it ends every regex with a sentinel
    (index.token_index.OutlinesVocab), which outlines-core's leftmost-first automaton needs to keep
    `(?:ab?|ac)` from dropping "ac" once "a" has matched."""
    return fullmatches(f"(?:{regex})\\x{{1}}", text.encode() + b"\x01")


@pytest.mark.parametrize("pattern,alphabet", EXACT)
def test_written_out_strings_are_the_patterns(pattern, alphabet):
    regex = string_pattern_regex(pattern, "x")
    assert "(?=" not in regex and "(?!" not in regex and "(?<" not in regex
    for n in range(7):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            assert _generates(regex, text) == bool(re.search(pattern, text)), (pattern, text)


@pytest.mark.parametrize(
    "pattern,min_length,max_length",
    [
        ("^[a-c](?!.*--)[a-c-]*$", 2, 4),
        ("^[a-c.-]*(?<!\\.)$", 1, 3),
        # lengths of the pattern's own: a length lookahead, a counted repeat taken out of the automaton
        ("^(?=^.{2,4}$)(?!.*--)[a-c-]*$", 0, None),
        ("^(?![-b])[a-c-]{0,5}[ac]$", 0, None),
    ],
)
def test_written_out_under_lengths(pattern, min_length, max_length):
    """Under lengths the translation fits the written-out pattern's repeats (regex.lengths): a
    subset of its strings, every one of them the pattern's and of an allowed length."""
    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    generated = 0
    for n in range(7):
        for chars in itertools.product("ab-c", repeat=n):
            text = "".join(chars)
            if _generates(regex, text):
                generated += 1
                assert re.search(pattern, text) and min_length <= n <= (max_length or n), (
                    pattern,
                    text,
                )
    assert generated


def test_negated_classes_exclude_what_either_flavour_excludes():
    """Under a negation a shorthand takes every character ECMA-262 or Python puts in it: U+FEFF
    is white space in ECMA-262 only, U+0085 in Python only; neither may start the string."""
    regex = string_pattern_regex("^(?!\\s)[^,]+$", "x")
    for text, want in (
        ("ab", True),
        (" a", False),
        ("\u00a0a", False),
        ("\ufeffa", False),
        ("\u0085a", False),
        ("a\u00a0", True),
    ):
        assert _generates(regex, text) == want, repr(text)


def test_word_boundaries_hold_in_both_flavours():
    """`\\b` after a word character: the next character may be none ECMA-262 or Python counts as
    a word character (Python counts "é", ECMA-262 does not), or the end; past ASCII every
    character counts as one there (U+00A0 too: a subset)."""
    regex = string_pattern_regex("^[a-z]+\\b", "x")
    for text, want in (
        ("ab", True),
        ("ab ", True),
        ("ab-c", True),
        ("ab\u00e9", False),
        ("ab\u00a0", False),
    ):
        assert _generates(regex, text) == want, repr(text)


@pytest.mark.parametrize(
    "pattern,why",
    [
        ("^(?=(?!a)b)[a-c]+$", "inside a lookaround"),
        ("^(a)\\1$", "not supported"),
        ("^(?=\\ba)[a-c]+$", "inside a lookaround"),
        ("^(?!\\p{L})[a-z0-9]+$", "Unicode property"),
        ("^(?!a)[a-c]{1,3}(?<=^b)$", "anchor"),
        ("x(^a)", "matches no string"),
    ],
)
def test_what_cannot_be_written_out_is_refused(pattern, why):
    with pytest.raises(GrammarError, match=why):
        string_pattern_regex(pattern, "x")


def test_automata_past_the_limits_are_refused(monkeypatch):
    from radixgen.grammar.automata import lookaround_dfa
    from radixgen.grammar.automata import write_out as regex_write_out

    pattern = "^(?=.*[a-c])(?=.*[0-9])[a-c0-9]+$"
    monkeypatch.setattr(lookaround_dfa, "MAX_STATES", 3)
    with pytest.raises(GrammarError, match="more than 3 states"):
        string_pattern_regex(pattern, "x")
    monkeypatch.setattr(lookaround_dfa, "MAX_STATES", 2000)
    monkeypatch.setattr(regex_write_out, "MAX_TEXT", 20)
    with pytest.raises(GrammarError, match="over 20 characters"):
        string_pattern_regex(pattern, "x")
    monkeypatch.setattr(regex_write_out, "MAX_TEXT", 150_000)
    monkeypatch.setattr(regex_write_out, "MAX_DEPTH", 0)
    with pytest.raises(GrammarError, match="nest more than 0 deep"):
        string_pattern_regex(pattern, "x")


def test_lookarounds_end_to_end(smol_compiler, smol_info):
    names = {"type": "string", "maxLength": 24, "pattern": "^[a-z](?!.*--)[a-z0-9-]*(?<!-)$"}
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["Name", "Id", "Bucket"],
        "properties": {
            "Name": names,
            "Id": {"type": "string", "pattern": "^(?!svc-)(?![-])(?!.*[-]{2})[a-z0-9-]{1,12}$"},
            "Bucket": {"type": "string", "pattern": "^[0-9a-z.-]{3,20}(?<!\\.)$"},
        },
    }
    grammar = smol_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for seed in range(4):
        _, text = random_walk(grammar, smol_info, seed)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        assert "--" not in value["Name"] and not value["Id"].startswith("svc-"), value


@pytest.mark.parametrize(
    "patterns,alphabet",
    [
        (["^a", "b$"], "ab"),  # anchored at either end
        (["a", "b", "c"], "abc"),  # three searches: contains each
        (["^[ab]+$", "(?<!a)b"], "ab"),  # one of them with a lookbehind of its own
    ],
)
def test_patterns_of_an_all_of_are_one(patterns, alphabet):
    # an allOf of patterns (SchemaStore's `{"allOf": [{"pattern": "\\$\\{name\\}"}, {"pattern":
    # "\\$\\{i\\}"}]}`) merges into one pattern: the first ones as lookaheads, then the last
    schema = {"type": "string", "allOf": [{"pattern": p} for p in patterns]}
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    for n in range(6):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            want = all(re.search(p, text) for p in patterns)
            assert _generates(regex, json.dumps(text)) == want, (patterns, text)


def test_a_pattern_met_twice_stays_one():
    # equal patterns are not merged (two copies of a lookaround would nest one in a lookahead)
    schema = {"allOf": [{"type": "string", "pattern": "^a(?=b)"}, {"pattern": "^a(?=b)"}]}
    regex, _ = schema_to_guarded_regex(json.dumps(schema))
    assert _generates(regex, '"abc"') and not _generates(regex, '"ac"')

"""Leading negative lookaheads of literal prefixes (AWS's `^(?!aws:)[a-zA-Z0-9 _.:/=+@-]{1,128}$`)
and lookaheads that bound the length (`^(?=.{2,256}$)...`), rewritten without lookaround: the
strings the pattern allows, end to end valid (the other lookarounds: test_pattern_lookaround)."""

import itertools
import json
import re

import jsonschema
import pytest

from radixgen.core import Constraint
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import string_pattern_regex
from radixgen.grammar.regex.lookahead import length_lookahead
from radixgen.grammar.unique.values import fullmatches
from tests.grammar.walks import accepts_text, random_walk


@pytest.mark.parametrize(
    "pattern,min_length,max_length",
    [
        ("^(?!ab)(?!ca)[a-c]{0,4}$", 0, 4),  # two literals, may end before either
        ("^(?!ab)[a-c]+$", 0, None),  # unbounded
        ("^(?!a)(?!bb)[abc]*$", 0, None),  # a one-character literal
        ("^(?!abc)(?!abd)[a-d]{2,4}$", 2, 4),  # literals sharing a prefix, a least length past it
        ("^(?!ab.*)[a-c]{1,3}$", 1, 3),  # `.*` after the literal says the same
        ("(?!b)[abc]{1,3}", 1, 3),  # unanchored: the fullmatch is a subset
        ("^(?!ab)[a-c]+$", 2, 3),  # minLength / maxLength on top
        ("^(?!ab)([a-c]+)$", 0, None),  # a group around the rest (AWS's `^(?!aws:)([...]+)$`)
        ("^(?!ab)(?:[a-c]{1,3})$", 1, 3),
    ],
)
def test_exactly_the_strings_without_the_prefixes(pattern, min_length, max_length):
    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    assert "(?!" not in regex
    for n in range(6):
        for chars in itertools.product("abcd", repeat=n):
            text = "".join(chars)
            fits = min_length <= n <= (5 if max_length is None else max_length)
            want = fits and re.fullmatch(pattern.lstrip("^").rstrip("$"), text) is not None
            assert fullmatches(regex, text.encode()) == want, (pattern, text)


def test_an_open_ended_lookahead_allows_any_continuation():
    regex = string_pattern_regex("^(?!aws:.*)", "x", 0, 8)
    for text, want in (
        ("", True),
        ("aws", True),
        ("awsx:y", True),
        ("aws:", False),
        ("aws:tag", False),
        ("Aws:tag", True),
    ):
        assert fullmatches(regex, text.encode()) == want, text


def test_a_literal_with_characters_json_escapes_takes_no_raw_edge():
    regex = string_pattern_regex(
        '^(?!a\\"b)[^x]*$', "x"
    )  # after "a", the '"' edge is not taken raw
    assert fullmatches(regex, b"ab") and fullmatches(regex, b"a") and not fullmatches(regex, b'a"')


@pytest.mark.parametrize(
    "pattern,min_length,max_length",
    [("^(?!\\s*$).+$", 0, None), ("^(?![\\s]*$).+", 0, 5), ("^(?!\\s*$).*$", 3, 4)],
)
def test_not_only_whitespace(pattern, min_length, max_length):
    """CloudFormation's descriptions: spaces, a printable character that no flavour counts as
    whitespace, then anything; every such string matches the pattern, within the lengths."""
    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    assert "(?!" not in regex
    for n in range(6):
        for chars in itertools.product(" a\u00a0\t", repeat=n):
            text = "".join(chars)
            if fullmatches(regex, text.encode()):
                assert re.search(pattern, text) and min_length <= n <= (max_length or n), text
                assert text.strip(" ") and "\u00a0" not in text.lstrip(" ")[:1] and "\t" not in text
    assert any(fullmatches(regex, t) for t in (b"a", b" a", b" ab", b"abc")) and not fullmatches(
        regex, b"   "
    )


@pytest.mark.parametrize(
    "pattern,min_length,max_length",
    [
        ("^(?=.{2,4}$)[a-c]+(-[a-c]+)*$", 0, None),  # the rest of the pattern, 2..4 characters long
        ("^(?=^.{3,}$)[ab]*$", 0, None),  # open above; `^` inside the lookahead
        ("(?=^.{1,3}$)[a-c](-*[a-c])*", 0, None),  # no outer anchors (CloudFormation writes these)
        ("^(?=^[a-c]+(-[a-c])?$).{2,4}$", 0, None),  # the pattern inside, a bounded `.` after it
        ("^(?=[ab-]+$).+$", 0, None),
        ("^(?=.{1,5}$)[a-c]+$", 2, 3),  # minLength / maxLength inside the lookahead's bounds
        ("^(?=.{0,3}$).*$", 1, 8),  # `.` on both sides
    ],
)
def test_length_lookaheads_become_length_bounds(pattern, min_length, max_length):
    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    assert "(?" not in regex.replace("(?:", "")
    generated = 0
    for n in range(7):
        for chars in itertools.product("abc-", repeat=n):
            text = "".join(chars)
            if fullmatches(
                regex, text.encode()
            ):  # a subset: each string matches, within the lengths
                generated += 1
                assert re.search(pattern, text) and min_length <= n <= (max_length or n), (
                    pattern,
                    text,
                )
    assert generated


@pytest.mark.parametrize(
    "pattern,min_length,max_length,exact",
    [
        ("^(?!^[0-9]+$)([a-c0-9]+)$", 0, None, True),  # AWS's names: not only digits
        ("(?!^[0-9]+$)([a-c0-9-]+)", 0, None, False),  # unanchored (CloudFormation writes these)
        ("^(?!^\\d+$)[a-c0-9]*$", 0, None, False),  # `\d`; `*` (the empty string is left out)
        ("^(?!^[0-9]+$)([a-c0-9]+)$", 2, 4, False),  # lengths: the first character is a letter
    ],
)
def test_not_only_digits(pattern, min_length, max_length, exact):
    regex = string_pattern_regex(pattern, "x", min_length, max_length)
    assert "(?!" not in regex
    for n in range(6):
        for chars in itertools.product("ab01-", repeat=n):
            text = "".join(chars)
            fits = min_length <= n <= (max_length or n)
            want = fits and re.search(pattern, text) is not None
            got = fullmatches(regex, text.encode())
            assert not got or want, (pattern, text)  # every string generated matches
            assert got == want or not exact, (pattern, text)
    assert fullmatches(regex, b"a1") and not fullmatches(regex, b"12")


def test_not_only_a_class_that_covers_the_rest_is_refused():
    with pytest.raises(GrammarError, match="no printable character"):
        string_pattern_regex("^(?!^[a-z]+$)[a-c]+$", "x")


@pytest.mark.parametrize(
    "body,kept",
    [
        ("(?=.{20,2048}$)arn:[a-z]+", ("arn:[a-z]+", 20, 2048)),
        ("(?=^.{3}$)[a-z]+", ("[a-z]+", 3, 3)),
        ("(?=.{5,}$)\\d+", ("\\d+", 5, None)),
        ("(?=^[a-z]+$).{3,64}", ("[a-z]+", 3, 64)),
        ("(?=^[a-z]+$).*", ("[a-z]+", 0, None)),
        # what `.` excludes (a line break) the text kept could match: the bounds would not hold
        ("(?=.{1,9}$)[\\s\\S]+", None),
        ("(?=.{1,9}$)\\s+", None),
        ("(?=.{1,9}$)[^a]+", None),
        ("(?=.{1,9}$)\\D", None),
        ("(?=^[^a]+$).{1,3}", None),
        ("(?=.{1,9}$)a\\nb", None),
        # not a length bound
        ("(?=.{1,9})[a-z]+", None),
        ("(?=[a-z]{1,9}$)[a-z]+", None),
        ("(?=^[a-z]+$)[a-z]{1,3}", None),
        ("[a-z]+(?=.{1,3}$)", None),
    ],
)
def test_which_lookaheads_are_length_bounds(body, kept):
    assert length_lookahead(body) == kept


def test_aws_tag_keys_end_to_end(smol_compiler, smol_info):
    tag = {
        "type": "object",
        "additionalProperties": False,
        "required": ["Key", "Value"],
        "properties": {
            "Key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^(?!aws:)(?!memorydb:)[a-zA-Z0-9 _\\.\\/=+:\\-@]{1,128}$",
            },
            "Value": {"type": "string", "maxLength": 256},
        },
    }
    schema = {"type": "array", "items": tag, "minItems": 1, "maxItems": 3}
    grammar = smol_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for seed in range(4):
        _, text = random_walk(grammar, smol_info, seed)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        assert not any(tag["Key"].startswith(("aws:", "memorydb:")) for tag in value)


@pytest.mark.parametrize(
    "pattern, examples",
    [
        (
            "(^([0-9a-f]{2}-|)[A-F]{2}$)",
            ["AF", "0a-FF"],
        ),  # CloudFormation's ids: anchors inside the outer group
        ("^(^arn:(aws|aws-cn):kms)$", ["arn:aws:kms", "arn:aws-cn:kms"]),
        ("(^[a-z].*[0-9]$)|(^[a-z]$)", ["a1", "b"]),
        ("(?:^a|^b)c", ["ac", "bc"]),
        ("(^a|b)c", ["ac", "bc"]),
        # an end-anchored pattern: a "$" ending an alternative of groups that end the pattern
        ("^((a$|b)|c$)$", ["a", "b", "c"]),
        ("^(x(a$|b)|c)$", ["xa", "xb", "c"]),
    ],
)
def test_anchors_at_the_ends_inside_groups(pattern, examples):
    """Anchors that can only match at an end of the string are implied by the fullmatch: every
    string generated matches (outlines-core's automaton may stop at an alternative's first
    match, so not every matching string is generated: `ab1` above)."""
    regex = string_pattern_regex(pattern, "x")
    assert all(fullmatches(regex, text.encode()) for text in examples)
    pieces = ["a", "b", "c", "1", "-", "A", "F", "0a", "arn:aws:kms", "aws-cn", "arn:"]
    for n in range(4):
        for chars in itertools.product(pieces, repeat=n):
            text = "".join(chars)
            if fullmatches(regex, text.encode()):
                assert re.fullmatch(pattern, text) and re.search(pattern, text), (pattern, text)


def test_an_empty_alternative_of_inner_anchors_beside_long_repeats(small_compiler, small_info):
    """CloudFormation's "empty or an ARN", `^(^$|arn:...{0,1023})$`: the inner anchors are implied
    (the pattern is anchored at its end), so its long repeats need no writing out."""
    pattern = "^(^$|arn:aws:iam:[A-Za-z0-9_\\/.-]{0,63}:[A-Za-z0-9_\\/.-]{0,63}:[A-Za-z0-9][A-Za-z0-9:_\\/+=,@.-]{0,1023})$"
    schema = {"type": "string", "pattern": pattern}
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for text in ('""', '"arn:aws:iam:a:b:c"', '"arn:aws:iam:::x/y"'):
        assert accepts_text(grammar, small_info, text), text
    for text in ('" "', '"arn:aws:iam:a:b:"', '"arn:aws:s3:a:b:c"'):
        assert not accepts_text(grammar, small_info, text), text
    for seed in range(6):
        jsonschema.validate(json.loads(random_walk(grammar, small_info, seed)[1]), schema)


@pytest.mark.parametrize(
    "pattern, texts",
    [
        ("^((a$|b)c|d)$", ["bc", "d"]),  # a "$" before a "c": not at the end ("ac" matches nothing)
        ("^(a$|b)*$", ["", "a", "bba", "bb"]),  # in a repeated group: written out, not dropped
        ("(a$|b)", ["a", "b", "ba", "bx"]),  # not end-anchored: "b" may go on, "a" may not
    ],
)
def test_anchors_before_more_of_the_pattern_are_not_dropped(pattern, texts):
    regex = string_pattern_regex(pattern, "x")
    for n in range(4):
        for chars in itertools.product("abcdx", repeat=n):
            text = "".join(chars)
            assert bool(fullmatches(regex, text.encode())) <= bool(re.search(pattern, text)), (
                pattern,
                text,
            )
    assert all(fullmatches(regex, text.encode()) for text in texts)


@pytest.mark.parametrize("pattern", ["x(^a)", "a^b"])
def test_anchors_no_string_can_meet_are_refused(pattern):
    """(Anchors inside a pattern that some string can meet are written out: test_pattern_lookaround.)"""
    with pytest.raises(GrammarError, match="anchor.*matches no string"):
        string_pattern_regex(pattern, "x")


@pytest.mark.parametrize(
    "pattern, plain",
    [
        ("(?s).*", ".*"),
        ("(?s)^-----BEGIN [A-Z ]+-----.+$", "^-----BEGIN [A-Z ]+-----.+$"),
        ("(?m)^[a-z]+$", "^[a-z]+$"),
        ("(?su)x.y", "x.y"),
    ],
)
def test_leading_flags_that_change_nothing_here_are_dropped(pattern, plain):
    """Python's `(?s)`, `(?m)` and `(?u)` at the start: the strings generated hold no line break,
    so they translate as the pattern without them (AWS's `(?s).*`); every string generated
    matches the flagged pattern."""
    regex = string_pattern_regex(pattern, "x")
    assert regex == string_pattern_regex(plain, "x")
    matched = [
        text
        for text in ["", "abc", "x\u00e9y", "-----BEGIN KEY-----body", "a b"]
        if fullmatches(f'"{regex}"', f'"{text}"'.encode())
    ]
    assert matched and all(re.search(pattern, text) for text in matched), (pattern, matched)


@pytest.mark.parametrize("pattern", ["^(?i).+$", "(?i)abc", "a(?m)b", "(?x)a b"])
def test_other_inline_flags_are_refused(pattern):
    """Flags past the start are an error in Python's re (but `s`, `m`, `u` right after a leading
    `^`, which Java reads as at the start); `i` and `x` change what matches."""
    with pytest.raises(GrammarError, match="inline flags|not a valid regular expression"):
        string_pattern_regex(pattern, "x")

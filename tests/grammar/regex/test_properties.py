"""Unicode property escapes in patterns (`\\p{L}`, `\\P{C}`), narrowed to their printable ASCII
characters: a subset of what they name, exact on ASCII, refused where a subset would widen a
negation; AWS's tag values end to end."""

import json
import re
import string
import unicodedata

import pytest

from radixgen.core import Constraint
from radixgen.grammar.json_schema import schema_to_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.leaves import string_pattern_regex
from radixgen.grammar.regex.properties import property_members, python_view
from radixgen.grammar.unique.values import fullmatches
from tests.grammar.walks import random_walk

SAFE_ASCII = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\']
NON_ASCII = ["é", "Ω", "ß", "\u0661", "\u00a0", "\u2028", "中", "\u0301"]


def test_members_of_common_categories():
    assert (
        "".join(property_members("p", "L"))
        == "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    )
    assert "".join(property_members("p", "N")) == "0123456789"
    assert property_members("p", "Z") == [" "] and property_members("p", "M") == []
    assert property_members("P", "C") == SAFE_ASCII
    assert property_members("p", "LC") == property_members("p", "L")
    assert property_members("p", "Script=Latin") is None and property_members("p", "Greek") is None


@pytest.mark.parametrize(
    "escape",
    [
        "\\p{L}",
        "\\p{Lu}",
        "\\p{Ll}",
        "\\p{N}",
        "\\p{Nd}",
        "\\p{P}",
        "\\p{S}",
        "\\p{Sm}",
        "\\p{Z}",
        "\\P{C}",
        "\\P{L}",
        "\\pL",
        "[\\p{L}\\p{N}_-]",
        "[^\\p{C}]",
    ],
)
def test_exact_on_ascii_and_nothing_else(escape):
    regex = string_pattern_regex(f"^{escape}$", "x")
    inner = escape.strip("[]^").replace("_-", "")

    def named(ch: str) -> bool:  # the escape's meaning, from Unicode's tables
        negate = escape.startswith("[^")
        hits = []
        for m in re.finditer(r"\\([pP])\{?([A-Za-z]+)\}?", inner):
            cat = unicodedata.category(ch)
            hits.append(cat.startswith(m[2]) == (m[1] == "p"))
        hit = any(hits) or (escape.endswith("_-]") and ch in "_-")
        return hit != negate

    for ch in SAFE_ASCII:
        assert fullmatches(regex, ch.encode()) == named(ch), (escape, ch)
    for ch in NON_ASCII:
        assert not fullmatches(regex, ch.encode()), (escape, ch)  # narrowed: never outside ASCII


# POSIX names (Java, PCRE), their members as Java's ASCII reading has them (a Unicode reading
# agrees on printable ASCII)
POSIX = {
    "Graph": "".join(chr(c) for c in range(0x21, 0x7F)),
    "Print": "".join(chr(c) for c in range(0x20, 0x7F)),
    "ASCII": "".join(chr(c) for c in range(0x20, 0x7F)),
    "Alpha": string.ascii_letters,
    "Digit": string.digits,
    "Alnum": string.ascii_letters + string.digits,
    "Upper": string.ascii_uppercase,
    "Lower": string.ascii_lowercase,
    "XDigit": string.hexdigits,
    "Space": " ",
    "Blank": " ",
}


@pytest.mark.parametrize("name", sorted(POSIX))
def test_posix_names(name):
    for kind in (
        "pP" if set(SAFE_ASCII) - set(POSIX[name]) else "p"
    ):  # (\P{ASCII} has no member here)
        regex = string_pattern_regex(f"^[\\{kind}{{{name}}}]$", "x")
        for ch in SAFE_ASCII:
            assert fullmatches(regex, ch.encode()) == ((ch in POSIX[name]) == (kind == "p")), (
                kind,
                name,
                ch,
            )
        for ch in NON_ASCII:
            assert not fullmatches(regex, ch.encode())


def test_cloudformation_descriptions_and_leading_flags(small_compiler, small_info):
    schema = {
        "type": "object",
        "properties": {
            "d": {"type": "string", "pattern": "^[\\p{Graph}\\x20]*$", "maxLength": 8},
            "t": {"type": "string", "pattern": "^(?s).+$", "maxLength": 4},
        },
        "required": ["d", "t"],
    }
    grammar = small_compiler.compile(Constraint("json_schema", schema))
    for seed in range(4):
        value = json.loads(random_walk(grammar, small_info, seed)[1])
        assert re.fullmatch(r"[\x20-\x7e]*", value["d"]) and 1 <= len(value["t"]) <= 4
    # values beside a property escape: checked on its ASCII members (Python's re has no \p)
    for escape in ("\\p{Graph}", "\\p{L}"):
        assert (
            schema_to_regex(json.dumps({"enum": ["ab", "é", "a b"], "pattern": f"^{escape}+$"}))
            == '("ab")'
        )


@pytest.mark.parametrize(
    "pattern,why",
    [
        ("^[^\\p{L}a]+$", "negated"),
        ("^\\p{Punct}+$", "POSIX names"),
        ("^[^\\p{L}\\p{N}]+$", "negated"),
        ("^\\p{Script=Latin}+$", "general categories"),
        ("^\\p{M}+$", "no printable ASCII"),
    ],
)
def test_refused(pattern, why):
    with pytest.raises(GrammarError, match=why):
        string_pattern_regex(pattern, "x")


@pytest.mark.parametrize("pattern", ["^[\\p{L}||\\p{N}]+$", "^[a&&b~~c]+$"])
def test_doubled_set_operators_are_characters(pattern):
    """Without ECMA-262's v flag `||`, `&&` and `~~` in a class are two characters, as in Python's
    re (AWS writes `[\\p{L}||\\p{M}||\\p{Z}]`); they are not Rust's set operations here."""
    import warnings

    regex = string_pattern_regex(pattern, "x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # ("possible set union")
        python = re.compile(python_view(pattern))
    for text in ["ab", "a|b", "a&b", "b~c", "a1", "a-b", "a b", "|"]:
        assert fullmatches(regex, text.encode()) == bool(python.search(text)), text


def test_python_view_keeps_widths_and_ascii_meaning():
    view = python_view("^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)\\p{Lu}{2}$")
    assert re.fullmatch(view, "ab 12_:/AB") and not re.fullmatch(view, "ab é AB")
    assert re.compile(view).groups == 1


def test_aws_tag_values_end_to_end(smol_compiler, smol_info):
    pattern = "^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$"
    schema = {
        "type": "object",
        "required": ["Key", "Value"],
        "additionalProperties": False,
        "properties": {
            "Key": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": pattern},
            "Value": {"type": "string", "maxLength": 256, "pattern": pattern},
        },
    }
    grammar = smol_compiler.compile(Constraint("json_schema", json.dumps(schema)))
    for seed in range(4):
        _, text = random_walk(grammar, smol_info, seed)
        value = json.loads(text)
        assert (
            set(value) == {"Key", "Value"}
            and 1 <= len(value["Key"]) <= 128
            and len(value["Value"]) <= 256
        )
        assert all(
            re.fullmatch(python_view(pattern), v) for v in value.values()
        )  # ASCII letters, digits, ...

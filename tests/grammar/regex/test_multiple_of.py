"""multipleOf: the spelt-out multiples are exactly the canonical numbers that meet the bounds and
pass both readings (exact decimals and Python's `jsonschema`, which divides in floating point);
the integers-only subset and the window nearest zero; what is refused."""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal
from fractions import Fraction

import jsonschema
import pytest

from radixgen.grammar.json_schema import schema_to_guarded_regex
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.multiples import (
    MAX_SPELT,
    _integers_pass,
    is_multiple,
    multiple_of_regex,
)


def _canonical(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def _valid(text: str, schema: dict, checker=None) -> bool:
    value = json.loads(text)
    exact = Fraction(text) % Fraction(repr(schema["multipleOf"])) == 0
    return exact and (checker or jsonschema.Draft202012Validator(schema)).is_valid(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1},  # AWS's Weight
        {
            "type": "number",
            "multipleOf": 0.1,
            "minimum": 0.1,
            "maximum": 12,
        },  # CanaryPercent, narrowed
        {"type": "number", "multipleOf": 0.25, "exclusiveMinimum": -1, "exclusiveMaximum": 1.5},
        {"type": "number", "multipleOf": 0.05, "minimum": -0.5, "maximum": 0.5},
        {"type": "integer", "multipleOf": 60, "minimum": 0, "maximum": 3600},
        {"type": "number", "multipleOf": 15.0, "exclusiveMinimum": -45, "maximum": 400},
    ],
)
def test_spelt_multiples_are_exactly_the_valid_numbers(schema):
    """Every canonical number of four fraction digits (integer steps: every integer) around the
    bounds: the regex matches it exactly when it lies within the bounds and passes both readings
    of multipleOf."""
    bounds = {
        k: schema.get(k) for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
    }
    lo = bounds["minimum"] if bounds["minimum"] is not None else bounds["exclusiveMinimum"]
    hi = bounds["maximum"] if bounds["maximum"] is not None else bounds["exclusiveMaximum"]
    regex = multiple_of_regex(
        schema["multipleOf"],
        lo,
        hi,
        bounds["minimum"] is None,
        bounds["maximum"] is None,
        schema["type"] == "integer",
        "$",
    )
    matched, checker = 0, jsonschema.Draft202012Validator(schema)
    scale = 1 if float(schema["multipleOf"]).is_integer() else 10000
    for i in range(int((lo - 1) * scale), int((hi + 1) * scale) + 1):
        text = _canonical(Decimal(i) / scale)
        valid = _valid(text, schema, checker) and (schema["type"] == "number" or "." not in text)
        assert bool(re.fullmatch(regex, text)) == valid, text
        matched += valid
    assert matched >= 3


def test_floating_point_reading_leaves_some_decimal_multiples_out():
    regex = multiple_of_regex(0.01, 0, 1, False, False, False, "$")
    assert re.fullmatch(regex, "0.5") and re.fullmatch(regex, "1") and re.fullmatch(regex, "0.01")
    assert 0.07 / 0.01 != 7 and not re.fullmatch(
        regex, "0.07"
    )  # a decimal multiple jsonschema rejects


def test_many_multiples_become_the_integers_within_the_bounds():
    regex = multiple_of_regex(
        0.5, 1, None, False, False, False, "$"
    )  # AWS's MaxIndexingCapacityInOcu
    assert re.fullmatch(regex, "1") and re.fullmatch(regex, "2") and re.fullmatch(regex, "9" * 15)
    assert (
        not re.fullmatch(regex, "0")
        and not re.fullmatch(regex, "1.5")
        and not re.fullmatch(regex, "1" * 16)
    )
    schema = {
        "type": "number",
        "multipleOf": 0.0001,
        "minimum": 0,
        "maximum": 100,
    }  # a million multiples
    regex = multiple_of_regex(0.0001, 0, 100, False, False, False, "$")
    rng, checker = random.Random(0), jsonschema.Draft202012Validator(schema)
    for _ in range(500):
        k = rng.randrange(0, 101)
        assert re.fullmatch(regex, str(k)) and _valid(str(k), schema, checker)
    assert not re.fullmatch(regex, "101") and not re.fullmatch(regex, "0.5")


def test_integer_steps_without_bounds_take_the_multiples_nearest_zero():
    regex = multiple_of_regex(7, None, None, False, False, True, "$")
    inside = [str(7 * k) for k in range(-MAX_SPELT // 2, MAX_SPELT // 2)]
    assert all(re.fullmatch(regex, t) for t in inside)
    assert not re.fullmatch(regex, str(7 * MAX_SPELT // 2)) and not re.fullmatch(regex, "8")
    assert not re.fullmatch(regex, "-0") and not re.fullmatch(regex, "07")
    regex = multiple_of_regex(64, 128, None, False, False, True, "$")  # from the lower bound up
    assert re.fullmatch(regex, "128") and re.fullmatch(regex, str(64 * (MAX_SPELT + 1)))
    assert not re.fullmatch(regex, "64") and not re.fullmatch(regex, str(64 * (MAX_SPELT + 2)))


def test_float_steps_keep_integers_within_fifteen_digits():
    regex = multiple_of_regex(1.0, 0, None, False, False, False, "$")  # CloudFront's DefaultTTL
    assert re.fullmatch(regex, "9" * 15) and not re.fullmatch(regex, "1" + "0" * 15)
    regex = multiple_of_regex(1, 0, None, False, False, True, "$")  # an int step: exact at any size
    assert re.fullmatch(regex, "1" + "0" * 30)


@pytest.mark.parametrize("step", [0.1, 0.01, 0.001, 0.0001, 0.2, 0.05, 0.5, 0.25, 0.125, 0.00005])
def test_integers_pass_the_float_check_where_the_step_is_close_to_one_over_n(step):
    n = round(1 / Decimal(repr(step)))
    assert _integers_pass(Fraction(step), n)
    assert all(is_multiple(k, step) for k in range(-5000, 50000))


@pytest.mark.parametrize("step", [0.00032, 0.00016, 5.12e-07])
def test_steps_whose_float_is_too_far_from_one_over_n_are_refused(step):
    n = round(1 / Decimal(repr(step)))
    assert not _integers_pass(Fraction(step), n)
    assert not all(is_multiple(k, step) for k in range(1, 100))  # the reason: integers fail there
    with pytest.raises(GrammarError, match="multipleOf"):
        multiple_of_regex(step, 0, None, False, False, False, "$")


@pytest.mark.parametrize(
    "step,lo,hi,integer",
    [
        (0.3, 0, 1, False),
        (2.5, None, None, False),
        (0.7, None, None, True),
        (0.0001, 0.2, 0.5, False),
        (5, 1, 4, True),
    ],
)
def test_refused_steps_and_empty_ranges(step, lo, hi, integer):
    with pytest.raises(GrammarError, match="multipleOf"):
        multiple_of_regex(step, lo, hi, False, False, integer, "$")


@pytest.mark.parametrize("step", [0, -1, True, float("inf")])
def test_invalid_steps(step):
    with pytest.raises(GrammarError, match="multipleOf"):
        multiple_of_regex(step, None, None, False, False, False, "$")


def test_is_multiple_agrees_with_jsonschema_where_the_decimal_also_divides():
    for step in (0.1, 0.01, 0.5, 3, 2.0):
        checker = jsonschema.Draft202012Validator({"multipleOf": step})
        for i in range(-300, 300):
            for value in (i, i / 100, i / 10):
                exact = (
                    Fraction(repr(value) if isinstance(value, float) else value)
                    % Fraction(repr(step))
                    == 0
                )
                assert is_multiple(value, step) == (exact and checker.is_valid(value)), (
                    value,
                    step,
                )


@pytest.mark.parametrize(
    "schema",
    [  # found by a fuzzer: texts beyond a float's digits
        {
            "type": "number",
            "multipleOf": 0.02,
            "exclusiveMinimum": 999999999999999,
            "exclusiveMaximum": 999999999999999.5,
        },
        {
            "type": "number",
            "multipleOf": 0.001,
            "exclusiveMinimum": 1000000000000000.0,
            "maximum": 1000000000000000.5,
        },
        {
            "type": "number",
            "multipleOf": 0.5,
            "minimum": 1e16,
            "maximum": 10000000000000010,
            "not": {"const": 1e16},
        },
    ],
)
def test_spelt_multiples_meet_the_bounds_as_floats_compare(schema):
    """A long fraction text parses onto its nearest float (999999999999999.44 is
    999999999999999.5, on an exclusive bound), an integer text compares with a float bound's
    binary value: each spelt text is kept only where the parsed value meets the bounds."""
    regex = schema_to_guarded_regex(json.dumps(schema))[0]
    checker = jsonschema.Draft202012Validator(schema)
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    matched = 0
    for i in range(0, 20001):
        text = _canonical(Decimal(repr(lo)) + Decimal(i) / 1000)
        if re.fullmatch(regex, text):
            matched += 1
            assert checker.is_valid(json.loads(text)), text
    assert matched


def test_a_huge_bound_with_no_multiple_passing_is_refused():
    with pytest.raises(GrammarError, match="multipleOf"):  # 1e23 is 99999999999999991611392 exactly
        schema_to_guarded_regex(
            json.dumps({"type": "number", "multipleOf": 0.5, "minimum": 1e23, "maximum": 1e23})
        )

"""Regexes for JSON numbers that are multiples of a step (JSON Schema `multipleOf`) between
bounds, valid under both readings of the keyword: exact arithmetic (the specification), and
Python's `jsonschema`, which divides by a float step in floating point (`0.07 / 0.01` is
7.000000000000001, so 0.07 fails `multipleOf: 0.01` there; `is_multiple` checks both).

- An integer step m (`5`, or `5.0`): the multiples of m within the bounds, spelt out; m = 1 is
  every integer (the integer range regex). Where more than MAX_SPELT multiples lie within the
  bounds (or a bound is missing), the MAX_SPELT nearest zero: a subset.
- A step 1/N for an integer N (`0.5`, `0.25`, `0.1`, `0.01`): every multiple within the bounds
  that `is_multiple`, spelt out, when at most MAX_SPELT lie there; with more (or a bound
  missing), only the integers within the bounds (a subset). Each integer k is a multiple in
  both readings: k / fl(1/N) rounds to exactly kN when fl(1/N) is within 2^-54 of 1/N, as it
  is for 0.1, 0.01, 0.001, 0.0001, 0.2, 0.05 and every power of two (`_integers_pass`).
- Other steps (`0.3`, `2.5`, or a 1/N step whose float is further from 1/N) are refused.

Integer texts under a float step keep at most 15 digits: Python's `jsonschema` converts the
instance to a float to divide (an integer past 1e308 would raise) and a double holds every
integer of 15 digits.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.regex.number_ranges import number_range_regex

MAX_SPELT = 2000  # multiples spelt out as one alternation (a trie): ~10 characters each
_FLOAT_INTEGER_MAX = 10**15 - 1


def is_multiple(value, step) -> bool:
    """Whether the JSON number `value` (an int or a float, as JSON parsed it) is a multiple of
    `step` both exactly and as Python's `jsonschema` checks it (in floating point when the step
    is a float)."""
    if _decimal(value) % _decimal(step):
        return False
    if not isinstance(step, float):
        return not value % step
    try:
        quotient = value / step
        return int(quotient) == quotient
    except OverflowError:  # as jsonschema falls back: exact, on the floats' binary values
        return (Fraction(value) / Fraction(step)).denominator == 1


def _decimal(x) -> Fraction:
    """The exact value of a JSON number's text (a float's shortest decimal, not its binary value)."""
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def multiple_of_regex(step, lo, hi, lo_excl: bool, hi_excl: bool, integer: bool, path: str) -> str:
    """The regex of the JSON numbers (integer: integers) that are multiples of `step` with
    lo <(=) x <(=) hi (None: unbounded; ints or floats as JSON parsed them), as the module
    docstring says."""
    if (
        isinstance(step, bool)
        or not isinstance(step, (int, float))
        or not math.isfinite(step)
        or step <= 0
    ):
        raise GrammarError(f"invalid JSON Schema: multipleOf at {path} must be a number above 0")
    exact = Fraction(step)
    if exact.denominator == 1:
        return _integer_multiples(int(exact), step, lo, hi, lo_excl, hi_excl, path)
    n = round(1 / Decimal(repr(step)))
    if Decimal(repr(step)) * n != 1 or not _integers_pass(exact, n):
        refuse(
            "multipleOf",
            path,
            f"only integer steps and steps 1/N (0.5, 0.1, 0.01, ...) are supported, not {step}",
        )
    first, last = _index_range(Fraction(repr(step)), lo, hi, lo_excl, hi_excl)
    if not integer and first is not None and last is not None and last - first < MAX_SPELT:
        texts = [_text(Decimal(i) / n) for i in range(first, last + 1)]
        # each text as JSON parses it: a multiple in both readings, and within the bounds as Python
        # compares (an integer text against a float bound's binary value; a long fraction text
        # parses onto its nearest float, perhaps onto an exclusive bound)
        texts = [
            t
            for t in texts
            if is_multiple(_parsed(t), step) and _within(_parsed(t), lo, hi, lo_excl, hi_excl)
        ]
        if not texts:
            refuse(
                "multipleOf",
                path,
                f"no multiple of {step} within the bounds passes Python's floating-point check",
            )
        return _spelt(texts)
    # integers only: each is a multiple (a subset, unless the type is integer)
    int_lo, int_hi = _integer_bounds(lo, hi, lo_excl, hi_excl, fifteen_digits=True)
    if int_lo > int_hi:
        refuse(
            "multipleOf",
            path,
            "no integer lies within the bounds"
            if integer
            else f"more than {MAX_SPELT:,} multiples of {step} lie within the bounds (then only integers are "
            "generated) and no integer among them",
        )
    return number_range_regex(int_lo, int_hi, False, False, True)


def _integer_multiples(m: int, step, lo, hi, lo_excl: bool, hi_excl: bool, path: str) -> str:
    """Multiples of the integer `m` within the bounds (the MAX_SPELT nearest zero where more)."""
    # (a float step: instances become floats to divide, so 15 digits at most)
    int_lo, int_hi = _integer_bounds(
        lo, hi, lo_excl, hi_excl, fifteen_digits=isinstance(step, float)
    )
    if m == 1:
        if int_lo is not None and int_hi is not None and int_lo > int_hi:
            refuse("minimum", path, "the bounds leave no integer")
        return number_range_regex(int_lo, int_hi, False, False, True)
    first = None if int_lo is None else -(-int_lo // m)
    last = None if int_hi is None else int_hi // m
    if first is not None and last is not None and first > last:
        refuse("multipleOf", path, f"no multiple of {step} lies within the bounds")
    indices = _nearest_zero(first, last)
    return _spelt([str(i * m) for i in indices])


def _integer_bounds(lo, hi, lo_excl: bool, hi_excl: bool, fifteen_digits: bool) -> tuple:
    """The least and greatest integer within the bounds (None: unbounded), compared exactly with
    a float bound's binary value; `fifteen_digits`: also within +-(10^15 - 1)."""
    int_lo = None if lo is None else (math.floor(lo) + 1 if lo_excl else math.ceil(lo))
    int_hi = None if hi is None else (math.ceil(hi) - 1 if hi_excl else math.floor(hi))
    if fifteen_digits:
        int_lo = -_FLOAT_INTEGER_MAX if int_lo is None else max(int_lo, -_FLOAT_INTEGER_MAX)
        int_hi = _FLOAT_INTEGER_MAX if int_hi is None else min(int_hi, _FLOAT_INTEGER_MAX)
    return int_lo, int_hi


def _nearest_zero(first, last) -> list[int]:
    """Up to MAX_SPELT integers of [first, last] (None: unbounded) nearest zero, in order."""
    if first is not None and first >= 0:
        return list(
            range(
                first, first + MAX_SPELT if last is None else min(last, first + MAX_SPELT - 1) + 1
            )
        )
    if last is not None and last <= 0:
        return list(
            range(
                last - MAX_SPELT + 1 if first is None else max(first, last - MAX_SPELT + 1),
                last + 1,
            )
        )
    half = MAX_SPELT // 2  # zero inside: as many on each side as the bounds allow
    low = -half if first is None else max(first, -half)
    high = low + MAX_SPELT - 1 if last is None else min(last, low + MAX_SPELT - 1)
    return list(range(low, high + 1))


def _integers_pass(exact: Fraction, n: int) -> bool:
    """Whether k / fl(step) rounds to exactly k * n for every integer k (fl(step) = `exact`,
    meant as 1/n): a relative error d of the step puts the quotient within k*n*|d|/(1 - |d|)
    of k*n, and half a unit in the last place of k*n is at least k*n * 2^-54 (strictly above
    it below the top of a binade): |d| <= 2^-54 with the quotient below k*n (d >= 0), or
    |d| < 2^-54 * (1 - 2^-52) otherwise. Quotients past 2^52 are integers anyway."""
    d = exact * n - 1
    limit = Fraction(1, 2**54)
    return 0 <= d <= limit or abs(d) < limit * (1 - Fraction(1, 2**52))


def _index_range(step: Fraction, lo, hi, lo_excl: bool, hi_excl: bool) -> tuple:
    """(first, last) indices i of the multiples i * step within the bounds (None: unbounded),
    the step as its decimal (0.1 is 1/10 here, not its float)."""
    first = last = None
    if lo is not None:
        q = _decimal(lo) / step
        first = math.floor(q) + 1 if lo_excl and q.denominator == 1 else math.ceil(q)
    if hi is not None:
        q = _decimal(hi) / step
        last = math.ceil(q) - 1 if hi_excl and q.denominator == 1 else math.floor(q)
    return first, last


def _parsed(text: str):
    """A number text as JSON parsers give it: an int, or a float."""
    return int(text) if "." not in text else float(text)


def _within(value, lo, hi, lo_excl: bool, hi_excl: bool) -> bool:
    """Whether `value` meets the bounds as Python's `jsonschema` compares them."""
    return (lo is None or value > lo or (value == lo and not lo_excl)) and (
        hi is None or value < hi or (value == hi and not hi_excl)
    )


def _text(value: Decimal) -> str:
    """The shortest JSON text of `value`: an integer without a point, never -0."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _spelt(texts: list[str]) -> str:
    """An alternation of number texts as a trie (shared prefixes once)."""
    trie: dict = {}
    for text in texts:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        ends = "" in node
        alts = [("\\." if ch == "." else ch) + walk(child) for ch, child in node.items() if ch]
        if not alts:
            return ""
        if len(alts) == 1 and not ends:
            return alts[0]
        return "(?:" + "|".join(alts) + ")" + ("?" if ends else "")

    return walk(trie)

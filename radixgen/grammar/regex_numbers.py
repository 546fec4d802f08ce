"""Regexes for JSON numbers between bounds (JSON Schema minimum / maximum and their exclusive
forms), exact: every number matched lies within the bounds. No exponents are generated, integers
never get a fraction, and "-0" never appears.

- `number_range_regex`: integers or numbers between integer bounds, or number bounds with
  fractions (Decimals: the integer parts strictly between take any fraction, a bound's own
  integer part compares fraction digits);
- `integer_bound`: checks a bound's value and gives its exact Decimal for numbers.
"""

from __future__ import annotations

import math
from decimal import Decimal

from .matcher import GrammarError


def number_range_regex(lo, hi, lo_excl: bool, hi_excl: bool, integer: bool) -> str:
    """Numbers (integer=True: integers) in the interval given by integer bounds lo/hi (None:
    unbounded). No exponents; integers without fraction; never "-0"."""
    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):
        a, a_excl = (lo, lo_excl) if lo is not None and lo >= 0 else (0, False)
        parts.append(_magnitude(a, hi, a_excl, hi_excl, integer))
    if lo is None or lo < 0:
        a, a_excl = (-hi, hi_excl) if hi is not None and hi < 0 else (0, True)
        b = None if lo is None else -lo
        mag = _magnitude(a, b, a_excl, lo_excl, integer)
        if mag:
            parts.append("-" + mag)
    parts = [p for p in parts if p]
    if not parts:
        raise GrammarError(f"no {'integer' if integer else 'number'} lies within the bounds")
    return "(?:" + "|".join(parts) + ")"


def _magnitude(a, b, a_excl: bool, b_excl: bool, integer: bool) -> str:
    """Unsigned decimals m with a <(=) m <(=) b (b None: unbounded), a and b >= 0: integers,
    or Decimals for numbers."""
    if not integer and (a != int(a) or (b is not None and b != int(b))):
        return _decimal_magnitude(Decimal(a), None if b is None else Decimal(b), a_excl, b_excl)
    a, b = int(a), (None if b is None else int(b))
    frac = "" if integer else r"(?:\.[0-9]+)?"
    alts = []
    first_full = a + 1 if a_excl else a
    last_full = None if b is None else (b - 1 if (b_excl or not integer) else b)
    if last_full is None or first_full <= last_full:
        alts.append(_int_range(first_full, last_full) + frac)
    if not integer and a_excl and (b is None or a < b):
        alts.append(rf"{a}\.[0-9]*[1-9][0-9]*")
    if not integer and b is not None and not b_excl and (b > a or not a_excl):
        alts.append(rf"{b}(?:\.0+)?")
    return "(?:" + "|".join(alts) + ")" if alts else ""


def _decimal_magnitude(a: Decimal, b: Decimal | None, a_excl: bool, b_excl: bool) -> str:
    """Unsigned decimal numbers m with a <(=) m <(=) b, bounds with fractions. Integer parts
    strictly between the bounds' take any fraction; at a bound's integer part the fraction is
    compared digit by digit. When both bounds share their integer part, only fractions with
    exactly as many digits as the longer bound's are generated (a subset)."""
    ia, ib = int(a), (None if b is None else int(b))
    fa, fb = _fraction_digits(a), ("" if b is None else _fraction_digits(b))
    if ib == ia:  # fractions of 1 .. w digits between the two, w the longer bound's digits
        alts = [] if fa or a_excl else [str(ia)]
        low, high = a - ia, b - ia
        for width in range(1, max(len(fa), len(fb)) + 1):
            scale = 10 ** width
            lo, hi = math.ceil(low * scale), math.floor(high * scale)
            lo, hi = lo + (a_excl and lo == low * scale), hi - (b_excl and hi == high * scale)
            if lo <= hi:
                alts.append(rf"{ia}\.{_same_width(str(lo).zfill(width), str(hi).zfill(width))}")
        return "(?:" + "|".join(alts) + ")" if alts else ""
    alts = []
    if ib is None or ia + 1 <= ib - 1:
        alts.append(_int_range(ia + 1, None if ib is None else ib - 1) + r"(?:\.[0-9]+)?")
    if fa:  # at a's integer part: fractions above a's
        alts.append(rf"{ia}\.{_fraction_at_least(fa, a_excl)}")
    else:
        alts.append(rf"{ia}\.[0-9]*[1-9][0-9]*" if a_excl else rf"{ia}(?:\.[0-9]+)?")
    if ib is not None and fb:  # at b's integer part: ib itself, or fractions below b's
        alts.append(rf"{ib}(?:\.{_fraction_at_most(fb, b_excl)})?")
    elif ib is not None and not b_excl:  # b is an integer
        alts.append(rf"{ib}(?:\.0+)?")
    return "(?:" + "|".join(alts) + ")"


def _fraction_digits(value: Decimal) -> str:
    """The digits after the point of `value` (>= 0), without trailing zeros."""
    text = format(value, "f")
    return text.partition(".")[2].rstrip("0")


def _fraction_at_least(d: str, strict: bool) -> str:
    """Fraction digit strings F (non-empty) with 0.F >= 0.d (> when strict); d without trailing
    zeros."""
    alts = [d[:i] + f"[{int(c) + 1}-9][0-9]*" for i, c in enumerate(d) if c != "9"]
    alts.append(d + ("[0-9]*[1-9][0-9]*" if strict else "[0-9]*"))
    return "(?:" + "|".join(alts) + ")"


def _fraction_at_most(d: str, strict: bool) -> str:
    """Fraction digit strings F (non-empty) with 0.F <= 0.d (< when strict); d without trailing
    zeros, so every proper prefix of d followed by zeros is below it."""
    alts = [d[:i] + f"[0-{int(c) - 1}][0-9]*" for i, c in enumerate(d) if c != "0"]
    alts += [d[:j] + "0*" for j in range(1, len(d))]
    if not strict:
        alts.append(d + "0*")
    return "(?:" + "|".join(alts) + ")"


def _int_range(lo: int, hi) -> str:
    """Canonical decimal integers in [lo, hi] (hi None: unbounded), lo >= 0. The regex grows
    with the square of the digit count at most (a bound of 10^300 gives ~13 KB)."""
    if hi is None:
        width = len(str(lo))
        return f"(?:{_int_range(lo, 10 ** width - 1)}|[1-9][0-9]{{{width},}})"
    alts = []
    while lo <= hi:
        width = len(str(lo))
        if lo == 10 ** (width - 1) and hi >= 10 ** width - 1 and width > 1:
            # every integer of widths width .. last: one term
            last = len(str(hi)) - (hi != 10 ** len(str(hi)) - 1)
            alts.append(f"[1-9][0-9]{{{width - 1},{last - 1}}}")
            lo = 10 ** last
            continue
        top = min(hi, 10 ** width - 1)
        alts.append(_same_width(str(lo), str(top)))
        lo = top + 1
    return "(?:" + "|".join(alts) + ")"


def _same_width(x: str, y: str) -> str:
    """Digit strings between x and y (same length, x <= y). Each level adds a fixed number of
    terms and recurses once per side: full ranges (0...0 to 9...9) are one class term."""
    n = len(x)
    if x == y:
        return x
    if x == "0" * n and y == "9" * n:
        return f"[0-9]{{{n}}}" if n > 1 else "[0-9]"
    if n == 1:
        return f"[{x}-{y}]"
    if x[0] == y[0]:
        return x[0] + _same_width(x[1:], y[1:])
    n -= 1
    alts = [x[0] + _same_width(x[1:], "9" * n)]
    if int(y[0]) - int(x[0]) > 1:
        alts.append(f"[{int(x[0]) + 1}-{int(y[0]) - 1}][0-9]{{{n}}}")
    alts.append(y[0] + _same_width("0" * n, y[1:]))
    return "(?:" + "|".join(alts) + ")"


def integer_bound(value, path: str, keyword: str, integer: bool):
    """Validate a numeric bound: the value for integers (rounded later), its exact decimal
    (`Decimal(repr(float))`, the number the JSON text wrote) for numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GrammarError(f"{keyword} at {path} must be a finite number")
    return value if integer else Decimal(repr(value))

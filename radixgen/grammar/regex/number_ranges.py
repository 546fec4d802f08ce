"""Regexes for JSON numbers between bounds (JSON Schema minimum / maximum and their exclusive
forms), exact: every number matched lies within the bounds. No exponents are generated, integers
never get a fraction, and "-0" never appears.

- `number_range_regex`: integers between integer bounds, or numbers between any finite bounds
  (ints, floats or Decimals): integer texts, and texts with a bounded fraction whose float
  compares with the bound as its decimal does;
- `integer_bound`: checks a bound's value.
"""

from __future__ import annotations

import math
from decimal import Decimal

from radixgen.grammar.matcher import GrammarError


def number_range_regex(lo, hi, lo_excl: bool, hi_excl: bool, integer: bool) -> str:
    """Integers (integer=True: integer bounds lo/hi) or numbers (Decimal bounds) in the interval
    (None: unbounded). No exponents; never "-0".

    A number is generated as an integer text, compared exactly (validators parse it as an
    integer), or with 1..F fraction digits and at most 15 significant digits in all, F the most
    the bounds need (at least 6). Validators compare the float such a text parses to with the
    bound's float, and up to 15 significant digits that float is ordered as the decimal is: a
    longer text just past an exclusive bound (0.99999999999999999999 for exclusiveMaximum 1)
    would parse onto the bound."""
    if integer:
        return _signed(lo, hi, lo_excl, hi_excl, _magnitude, "integer")
    # integer texts compare exactly with the bound's exact value (a float's binary value); texts
    # with a fraction parse to floats, ordered as their decimals are against the bound's shortest
    # decimal (repr), which parses back to the bound
    short = [v if v is None or isinstance(v, Decimal) else Decimal(repr(v)) for v in (lo, hi)]
    digits = max(
        [_DEFAULT_FRACTION] + [len(_fraction_digits(abs(v))) for v in short if v is not None]
    )
    if digits > _SIGNIFICANT:
        raise GrammarError(
            f"number bounds {lo} / {hi} need more than {_SIGNIFICANT} fraction digits, "
            "beyond what a float keeps"
        )
    parts = []
    int_lo = (
        None if lo is None else (math.floor(Decimal(lo)) + 1 if lo_excl else math.ceil(Decimal(lo)))
    )
    int_hi = (
        None if hi is None else (math.ceil(Decimal(hi)) - 1 if hi_excl else math.floor(Decimal(hi)))
    )
    if int_lo is None or int_hi is None or int_lo <= int_hi:
        parts.append(number_range_regex(int_lo, int_hi, False, False, True))
    fractions = _signed(
        short[0],
        short[1],
        lo_excl,
        hi_excl,
        lambda a, b, a_excl, b_excl: _fraction_magnitude(a, b, a_excl, b_excl, digits),
        None,
    )
    if fractions:
        parts.append(fractions)
    if not parts:
        raise GrammarError("no number lies within the bounds")
    return "(?:" + "|".join(parts) + ")"


_SIGNIFICANT = 15  # decimal digits a double keeps in order (DBL_DIG)
_DEFAULT_FRACTION = 6  # fraction digits numbers get when the bounds need fewer


def _signed(lo, hi, lo_excl: bool, hi_excl: bool, magnitude, kind) -> str:
    """Both signs of magnitude(a, b, a_excl, b_excl) (unsigned a <(=) m <(=) b) within lo..hi;
    kind: what to call an empty result (None: return "")."""
    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):
        a, a_excl = (lo, lo_excl) if lo is not None and lo >= 0 else (0, False)
        parts.append(magnitude(a, hi, a_excl, hi_excl))
    if lo is None or lo < 0:
        a, a_excl = (-hi, hi_excl) if hi is not None and hi < 0 else (0, True)
        mag = magnitude(a, None if lo is None else -lo, a_excl, lo_excl)
        if mag:
            parts.append("-" + mag)
    parts = [p for p in parts if p]
    if not parts:
        if kind is None:
            return ""
        raise GrammarError(f"no {kind} lies within the bounds")
    return "(?:" + "|".join(parts) + ")"


def _magnitude(a: int, b, a_excl: bool, b_excl: bool) -> str:
    """Unsigned integers m with a <(=) m <(=) b (b None: unbounded), a and b integers >= 0."""
    first, last = a + a_excl, None if b is None else b - b_excl
    return _int_range(first, last) if last is None or first <= last else ""


def _fraction_magnitude(a, b, a_excl: bool, b_excl: bool, digits: int) -> str:
    """Unsigned numbers m with a fraction of 1..digits digits, a <(=) m <(=) b (b None:
    unbounded), whose integer part leaves the whole at most _SIGNIFICANT significant digits.
    Integer parts strictly between the bounds' take any such fraction; at a bound's integer part
    the fractions of each width are a digit range (exact)."""
    a = Decimal(a)
    b = None if b is None else Decimal(b)
    top = 10 ** (_SIGNIFICANT - digits) - 1  # the largest integer part a fraction may follow
    ia, ib = int(a), (top if b is None else min(int(b), top))
    if ia > ib:
        return ""
    alts = []

    def edge(whole: int, low: Decimal, high: Decimal, low_excl: bool, high_excl: bool) -> None:
        for width in range(1, digits + 1):
            scale = 10**width
            lo, hi = math.ceil(low * scale), math.floor(high * scale)
            lo, hi = lo + (low_excl and lo == low * scale), hi - (high_excl and hi == high * scale)
            if lo <= min(hi, scale - 1):
                alts.append(
                    rf"{whole}\.{_same_width(str(lo).zfill(width), str(min(hi, scale - 1)).zfill(width))}"
                )

    at_b = b is not None and ib == int(b)  # b's integer part can carry a fraction
    if ia == ib:
        edge(ia, a - ia, (b - ib) if at_b else Decimal(1), a_excl, b_excl if at_b else False)
        return "(?:" + "|".join(alts) + ")" if alts else ""
    edge(ia, a - ia, Decimal(1), a_excl, False)
    last_free = ib - 1 if at_b else ib
    if ia + 1 <= last_free:
        alts.append(_int_range(ia + 1, last_free) + rf"\.[0-9]{{1,{digits}}}")
    if at_b:
        edge(ib, Decimal(0), b - ib, False, b_excl)
    return "(?:" + "|".join(alts) + ")" if alts else ""


def _fraction_digits(value: Decimal) -> str:
    """The digits after the point of `value` (>= 0), without trailing zeros."""
    text = format(Decimal(value), "f")
    return text.partition(".")[2].rstrip("0")


def _int_range(lo: int, hi) -> str:
    """Canonical decimal integers in [lo, hi] (hi None: unbounded), lo >= 0. The regex grows
    with the square of the digit count at most (a bound of 10^300 gives ~13 KB)."""
    if hi is None:
        width = len(str(lo))
        return f"(?:{_int_range(lo, 10**width - 1)}|[1-9][0-9]{{{width},}})"
    alts = []
    while lo <= hi:
        width = len(str(lo))
        if lo == 10 ** (width - 1) and hi >= 10**width - 1 and width > 1:
            # every integer of widths width .. last: one term
            last = len(str(hi)) - (hi != 10 ** len(str(hi)) - 1)
            alts.append(f"[1-9][0-9]{{{width - 1},{last - 1}}}")
            lo = 10**last
            continue
        top = min(hi, 10**width - 1)
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
    """Validate a numeric bound (an int or a float, as JSON parsed it) and return it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GrammarError(f"{keyword} at {path} must be a finite number")
    return value

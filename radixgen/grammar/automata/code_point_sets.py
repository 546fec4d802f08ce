"""Sets of code points as sorted, disjoint, inclusive (lo, hi) ranges (cfg.terminal_regex,
regex.lookaround)."""

from __future__ import annotations

MAX_CP = 0x10FFFF


def normalized(ranges) -> list[tuple[int, int]]:
    """The ranges sorted, overlapping and adjacent ones merged."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def negated(ranges) -> list[tuple[int, int]]:
    """Every code point the ranges leave out."""
    out, nxt = [], 0
    for lo, hi in normalized(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out

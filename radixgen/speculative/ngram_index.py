"""An incremental n-gram -> recent occurrences index over token sequences (the radix drafter's
memory).

An occurrence of an n-gram (n in `key_lens`) is a position `end` of a sequence whose
`seq[end - n:end]` is that n-gram and `end < len(seq)`: `seq[end:]` is what followed it. It is
packed into one int, `seq_id << 32 | end`. Keys are 64-bit polynomial hashes of the n-gram
(computed vectorised with numpy when a sequence is added); a collision only yields a candidate
whose match the reader re-checks token by token (`match_len`). Each key keeps at least its `max_occurrences` most recent
occurrences (oldest first; at most twice that, trimmed in bulk), so memory per key is bounded. A
key seen once holds its occurrence as a bare int (most 4-grams occur once: ~10x smaller than a
container). Sequences are added incrementally (only new ends) and removed lazily (`drop_stale`).
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import numpy as np

_END_BITS = 32
_END_MASK = (1 << _END_BITS) - 1
_BASE = 1_000_003
_Bucket = Union[int, list[int]]  # one packed occurrence, or several, oldest first
_SMALL = 16  # fewer new ends than this: hash in plain Python (numpy's call overhead dominates)


def unpack(code: int) -> tuple[int, int]:
    """(seq_id, end) of a packed occurrence."""
    return code >> _END_BITS, code & _END_MASK


def _wrap(x: int) -> int:
    """x as a two's-complement int64 (what numpy's int64 arithmetic wraps to)."""
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


def ngram_key(tokens: Sequence[int]) -> int:
    """The index key of one n-gram (n = len(tokens))."""
    h = 0
    for t in tokens:
        h = _wrap(h * _BASE + t)
    return _wrap(h * 8 + len(tokens))


def _keys(seq: Sequence[int], first: int, stop: int, n: int) -> list[int]:
    """Keys of the n-grams ending at first..stop-1 (first >= n): `ngram_key(seq[e - n:e])`."""
    if stop - first < _SMALL:
        return [ngram_key(seq[e - n : e]) for e in range(first, stop)]
    tokens = np.asarray(seq[first - n : stop - 1], dtype=np.int64)  # [stop - first + n - 1]
    m = stop - first
    h = np.zeros(m, dtype=np.int64)
    with np.errstate(over="ignore"):
        for i in range(n):
            h = h * _BASE + tokens[i : i + m]  # wraps like _wrap
        return (h * 8 + n).tolist()


class NgramIndex:
    def __init__(self, key_lens: Sequence[int] = (1, 2, 4), max_occurrences: int = 64):
        self.key_lens = tuple(sorted(set(key_lens)))
        assert self.key_lens and self.key_lens[0] >= 1
        self.max_occurrences = max_occurrences
        self._occ: dict[int, _Bucket] = {}

    def __len__(self) -> int:
        return len(self._occ)

    def add(self, seq_id: int, seq: Sequence[int], start: int, stop: int) -> None:
        """Index the ends start..stop-1 of `seq` (stop <= len(seq)). Mutates the index."""
        occ, cap = self._occ, self.max_occurrences
        assert stop <= len(seq) and stop <= _END_MASK
        base = seq_id << _END_BITS
        for n in self.key_lens:
            first = max(start, n)
            for end, key in enumerate(_keys(seq, first, stop, n) if first < stop else (), first):
                bucket = occ.get(key)
                if bucket is None:
                    occ[key] = base | end
                elif bucket.__class__ is int:
                    occ[key] = [bucket, base | end]
                else:
                    bucket.append(base | end)
                    if len(bucket) >= 2 * cap:
                        del bucket[:-cap]

    def lookup(self, ngram: Sequence[int]) -> Sequence[int]:
        """Occurrences of `ngram` (or of a colliding one), oldest first, possibly stale."""
        bucket = self._occ.get(ngram_key(ngram), ())
        return (bucket,) if bucket.__class__ is int else bucket

    def drop_stale(self, seq: Sequence[int], is_live: Callable[[int], bool]) -> None:
        """After removing `seq`: drop stale occurrences off the old end of every bucket `seq`
        touched, deleting emptied buckets, so every remaining key has a live occurrence.
        Stale occurrences behind a live one are skipped by readers and age out (trimming)."""
        occ = self._occ
        for n in self.key_lens:
            for key in set(_keys(seq, n, len(seq), n) if n < len(seq) else ()):
                bucket = occ.get(key)
                if bucket is None:
                    continue
                codes = (bucket,) if bucket.__class__ is int else bucket
                live = next((i for i, c in enumerate(codes) if is_live(c >> _END_BITS)), None)
                if live is None:
                    del occ[key]
                elif live:
                    del bucket[:live]


def match_len(seq: Sequence[int], end: int, context: Sequence[int], limit: int) -> int:
    """How many tokens before `seq[end]` equal the context's last tokens (at most `limit`)."""
    m, ctx_len = 0, len(context)
    while m < limit and m < end and m < ctx_len and seq[end - m - 1] == context[ctx_len - m - 1]:
        m += 1
    return m


__all__ = ["NgramIndex", "match_len", "ngram_key", "unpack"]

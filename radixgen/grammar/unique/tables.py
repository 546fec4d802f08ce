"""Per-tokenizer vocabulary tables for `UniqueGuard` (built once per tokenizer, cached): which
tokens can close a string item, hold quotes or digits, pass a string's length bound, or reach an
array's separator or end."""

from __future__ import annotations

import re
import threading
import weakref

import numpy as np

from radixgen.grammar.bitmask import pack_token_ids
from radixgen.grammar.tokenizer_info import TokenizerInfo

LITERAL = frozenset(b"0123456789+-.eEtrufalsn")  # the bytes of numbers, true, false and null
_DIGIT_RUN = re.compile(rb"[0-9]+")
# from here on, a string's maxLength is kept by the guard (rewrite.rewriter writes its regex free)
LENGTH_GUARD_MIN = 16


_tables_lock = threading.Lock()
_tables: "weakref.WeakKeyDictionary[TokenizerInfo, tuple]" = weakref.WeakKeyDictionary()


def vocab_tables(info: TokenizerInfo):
    """Per tokenizer: (sorted token texts, their ids); the tokens with an unescaped quote grouped
    by the text before the first one, [(text, ids)], and the ids of all tokens with a quote; the
    ids of tokens with two or more quotes or digit runs (they may close two items), and with
    three or more (from inside a string, the first quote only ends it); the ids of
    tokens with a digit and another byte, and of all-digit tokens starting with 0; the bitmask
    row of tokens whose first byte continues a number."""
    with _tables_lock:
        cached = _tables.get(info)
        if cached is None:
            by_bytes: dict[bytes, list[int]] = {}
            for token_id, data in enumerate(info.token_bytes):
                if data and token_id not in info.special_ids:
                    by_bytes.setdefault(data, []).append(token_id)
            keys = sorted(by_bytes)
            closers: dict[bytes, list[int]] = {}
            for data, ids in by_bytes.items():
                cut = first_quote(data)
                if cut is not None:
                    closers.setdefault(data[:cut], []).extend(ids)
            with_quote, quoted, quoted_thrice = (
                np.asarray(
                    [
                        t
                        for t, data in enumerate(info.token_bytes)
                        if t not in info.special_ids
                        and (
                            data.count(b'"') >= least
                            or (least > 1 and len(_DIGIT_RUN.findall(data)) >= 2)
                        )
                    ],
                    dtype=np.int64,
                )
                for least in (1, 2, 3)
            )
            numeric = [
                (t, data)
                for t, data in enumerate(info.token_bytes)
                if t not in info.special_ids and _DIGIT_RUN.search(data)
            ]
            digits = (
                np.asarray([t for t, data in numeric if not data.isdigit()], dtype=np.int64),
                np.asarray(
                    [t for t, data in numeric if data.isdigit() and data[0] == ord("0")],
                    dtype=np.int64,
                ),
            )
            literal_first = pack_token_ids(
                np.asarray(
                    [t for t, data in enumerate(info.token_bytes) if data and data[0] in LITERAL],
                    dtype=np.int64,
                ),
                info.vocab_size,
            )
            cached = _tables[info] = (
                (keys, [by_bytes[k] for k in keys]),
                (list(closers.items()), with_quote),
                (quoted, quoted_thrice),
                digits,
                literal_first,
            )
        return cached


_length_cache: "weakref.WeakKeyDictionary[TokenizerInfo, tuple]" = weakref.WeakKeyDictionary()


def length_tables(info: TokenizerInfo):
    """Per tokenizer, for length-guarded strings: `upto[e][k]`, the bitmask row of tokens with at
    most k string characters before their first closing quote (all of them without one), from a
    start after a backslash (e = 1) or not; `short[e][k]`, the row of tokens with a closing quote
    and fewer than k characters before it (the last entry: every token with one); the ids of the
    tokens with LENGTH_GUARD_MIN or more characters after their last quote."""
    with _tables_lock:
        cached = _length_cache.get(info)
        if cached is None:
            upto, short = [], []
            for escaped in (0, 1):
                counts = [_string_characters(data, escaped) for data in info.token_bytes]
                lengths = np.asarray([n for n, _ in counts])
                closing = np.asarray([q for _, q in counts])
                top = int(lengths.max()) + 1
                upto.append(
                    [
                        pack_token_ids(np.flatnonzero(lengths <= k), info.vocab_size)
                        for k in range(top)
                    ]
                )
                short.append(
                    [
                        pack_token_ids(np.flatnonzero(closing & (lengths < k)), info.vocab_size)
                        for k in range(top + 1)
                    ]
                )
            long_openers = np.asarray(
                [
                    t
                    for t, data in enumerate(info.token_bytes)
                    if t not in info.special_ids
                    and b'"' in data
                    and _string_characters(data[data.rindex(b'"') + 1 :], 0)[0] >= LENGTH_GUARD_MIN
                ],
                dtype=np.int64,
            )
            cached = _length_cache[info] = (upto, short, long_openers)
        return cached


def _string_characters(data: bytes, escaped: int) -> tuple[int, bool]:
    """(JSON string characters in `data` before its first closing quote, whether it has one),
    reading from inside a string, after a backslash when `escaped`."""
    count = 0
    for c in data:
        if escaped:
            escaped = 0
        elif c == ord('"'):
            return count, True
        else:
            count += c == ord("\\") or c & 0xC0 != 0x80
            escaped = c == ord("\\")
    return count, False


_after_quote_cache: "weakref.WeakKeyDictionary[TokenizerInfo, dict]" = weakref.WeakKeyDictionary()


def after_last_quote(info: TokenizerInfo) -> dict[bytes, list[int]]:
    """Per tokenizer: the text after a token's last quote -> the ids of the tokens with a quote
    and that text after their last one (the tokens that can open a string and end inside it
    with that text)."""
    with _tables_lock:
        cached = _after_quote_cache.get(info)
        if cached is None:
            cached = _after_quote_cache[info] = {}
            for token_id, data in enumerate(info.token_bytes):
                if b'"' in data and token_id not in info.special_ids:
                    cached.setdefault(data[data.rindex(b'"') + 1 :], []).append(token_id)
        return cached


def first_quote(data: bytes) -> int | None:
    """Index of the first quote in `data` not escaped by a backslash before it in `data`."""
    escaped = False
    for i, c in enumerate(data):
        if escaped:
            escaped = False
        elif c == ord("\\"):
            escaped = True
        elif c == ord('"'):
            return i
    return None


_with_byte: "weakref.WeakKeyDictionary[TokenizerInfo, dict]" = weakref.WeakKeyDictionary()


def tokens_with(info: TokenizerInfo, byte: bytes) -> np.ndarray:
    """The ids of `info`'s tokens (special ones left out) holding `byte`."""
    with _tables_lock:
        cached = _with_byte.setdefault(info, {})
        if byte not in cached:
            cached[byte] = np.asarray(
                [
                    t
                    for t, data in enumerate(info.token_bytes)
                    if byte in data and t not in info.special_ids
                ],
                dtype=np.int64,
            )
        return cached[byte]

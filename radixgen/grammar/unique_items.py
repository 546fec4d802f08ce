"""uniqueItems over free strings and integers (pydantic's `set[str]`, `set[int]`): a guard beside
the regex automaton.

No regular language says "no string twice", so the schema's regex only shapes such an array, and
`UniqueGuard` enforces the rest:

- The regex spells every item value one way (`canonical_string_regex`: the only escapes are \\" \\\\ \\b
  \\f \\n \\r \\t; no \\/ and no \\u; `CANONICAL_INTEGER`: no -0), so two items are equal exactly
  when their texts are.
- The guard follows the output as JSON (`advance`, one immutable state per token, so rollback and
  fork are list operations). An array whose instance path (object keys; `None` for any key or
  index) is one of the schema's guarded paths remembers its items' texts.
- `ban` clears, from the automaton's row, every token that would close an item equal to an earlier
  one: inside an item, the tokens that spell an earlier item's remaining text and the closing
  quote (a prefix search over the sorted vocabulary); anywhere, any allowed token with two or more
  quotes (it can open and close a whole item) is run through `advance` (20 such tokens in
  SmolLM2's vocabulary). In an array of integers, every allowed token with a digit and another
  byte is run through `advance` (a token of digits only can neither end nor close an item), and
  while the item so far equals an earlier one, the tokens that would end it.

Items are free strings (no maxLength, pattern or format) or unbounded integers, so after any
prefix some other value is still possible, with one exception banned up front: an integer item
`0` cannot grow, so once 0 is an item no token may start another 0. A ban never leaves a dead end;
`schema_check` refuses the shapes where that would not hold.
"""

from __future__ import annotations

import bisect
import re
import threading
import weakref

import numpy as np

from .bitmask import numpy_rows, pack_token_ids
from .tokenizer_info import TokenizerInfo

CANONICAL_INTEGER = "(?:0|-?[1-9][0-9]*)"
_CANONICAL_CHAR = r'(?:[^"\\\x00-\x1F\x7F-\x9F]|\\["\\bfnrt])'


def canonical_string_regex(min_length: int = 0) -> str:
    """A JSON string of at least `min_length` characters, each value spelt one way."""
    return f'"{_CANONICAL_CHAR}{{{min_length},}}"' if min_length else f'"{_CANONICAL_CHAR}*"'

_LITERAL = frozenset(b"0123456789+-.eEtrufalsn")  # the bytes of numbers, true, false and null
_STRUCTURE = frozenset(b'{}[],"') | _LITERAL
_DIGIT_RUN = re.compile(rb"[0-9]+")
_OBJECT, _ARRAY = 0, 1
# container phases: expecting a key (object) or an item (array), after a key, after a value
_EXPECT, _VALUE, _AFTER = 0, 1, 2
_INACTIVE = "inactive"  # the text left the guarded JSON (after it, or a prefix mismatch)


class UniqueGuard:
    """Immutable: the guarded paths plus the vocabulary tables; shared by a grammar's matchers.

    A state is `(prefix_done, stack, lexeme, arrays)` or _INACTIVE. `prefix` is literal text
    before the JSON (the tool-call opener); text that does not start with it is never JSON, so the
    guard goes inactive. stack frames: (_OBJECT, phase, key) or (_ARRAY, phase, (instance, kind)
    | None), `instance` numbering the guarded arrays in order (`arrays` counts them) and `kind`
    their items' ("string" or "integer"). lexeme: None, ("k", text) a key, ("g", text) a guarded
    string item, ("v", b"") another string, ("n", text) a guarded integer item, or ("l", b"")
    another number or literal; a trailing backslash of a string is kept in its text (escape
    pending).
    The item texts of each guarded array live outside the state, in `seen` (instance -> set),
    kept by the matcher, so a state costs no copy of them."""

    def __init__(self, paths, info: TokenizerInfo, prefix: bytes = b"") -> None:
        """paths: (instance path, item kind) pairs, as json_schema.schema_to_guarded_regex gives."""
        encoded = [(tuple(None if p is None else p.encode() for p in path), kind) for path, kind in paths]
        self.paths = {path: kind for path, kind in encoded if isinstance(kind, str)}
        self.lengths = {path: kind[1:] for path, kind in encoded if not isinstance(kind, str)}
        self.info = info
        self.prefix = prefix
        self._sorted, self._closers, self._quoted, self._digits, self._literal_first = _vocab_tables(info)
        self._length_rows = _length_tables(info) if self.lengths else None
        if self.lengths:  # a token whose last quote opens a string with more characters than
            # LENGTH_GUARD_MIN could pass a maxLength at once: run through advance too; tokens
            # holding a whole string only matter for unique items or a minLength
            long_openers = self._length_rows[2]
            whole = self._quoted if self.paths or any(least for least, _ in self.lengths.values()) else ((), ())
            self._length_quoted = tuple(np.union1d(q, long_openers).astype(np.int64) for q in whole)

    @property
    def initial(self):
        return (0, (), None, 0)

    def advance(self, state, data: bytes, seen):
        """(state after `data`, the (instance, text) items it closed), or None when `data`
        closes a guarded item equal to an earlier one (in `seen` or earlier in `data`)."""
        closed: list = []
        for c in data:
            if state is _INACTIVE:
                break
            state = self._step(state, c, seen, closed)
            if state is None:
                return None
        return state, closed

    def ban(self, state, words: np.ndarray, seen) -> None:
        """Clear from `words` (one int32 bitmask row) the tokens that would close a repeated item."""
        if state is _INACTIVE:
            return
        _, stack, lexeme, _ = state
        # tokens that may close an item besides the one being written (or, with length guards,
        # open a string with more characters than a maxLength): run through advance
        in_string = lexeme is not None and lexeme[0] in "gkvs"
        quoted = (self._length_quoted if self.lengths else self._quoted)[in_string]
        if lexeme is not None and lexeme[0] == "s":
            self._ban_lengths(lexeme[1], words)
        top = stack[-1] if stack else None
        in_integers = top is not None and top[0] == _ARRAY and top[2] is not None and top[2][1] == "integer"
        if in_integers and (lexeme is None or lexeme[0] == "n"):
            self._ban_integers(state, words, seen)
        if lexeme is not None and lexeme[0] == "g":
            text, items = lexeme[1], seen.get(top[2][0], ())
            if text.endswith(b"\\") and not _escaped_backslash(text):
                quoted = self._closers[1]  # an escape is pending: run every token with a quote
            elif len(items) <= len(self._closers[0]):
                for item in items:
                    if item.startswith(text):
                        _clear(words, self._with_prefix(item[len(text):] + b'"'))
            else:  # more items than ways to close: look up what each closing token would close
                for before, ids in self._closers[0]:
                    if text + before in items:
                        _clear(words, ids)
        if len(quoted):
            allowed = quoted[(words[quoted >> 5] >> (quoted & 31)) & 1 == 1]
            token_bytes = self.info.token_bytes
            _clear(words, [t for t in allowed.tolist() if _repeats(self.advance(state, token_bytes[t], seen), seen)])

    def _ban_integers(self, state, words: np.ndarray, seen) -> None:
        """In an array of integers: while the item so far repeats an earlier one, the tokens that
        would end it; any allowed token with a digit that closes a repeat or makes a new item 0
        when 0 is already one (it could not grow, nor end)."""
        _, stack, lexeme, _ = state
        instance = stack[-1][2][0]
        if lexeme is not None and lexeme[1] in seen.get(instance, ()):
            words &= self._literal_first
        mixed, zero_first = self._digits
        if lexeme is None and b"0" in seen.get(instance, ()):
            _clear(words, zero_first)  # a new item 0 (all-digit tokens neither end nor close one)
        token_bytes = self.info.token_bytes
        for t in mixed[(words[mixed >> 5] >> (mixed & 31)) & 1 == 1].tolist():
            if _repeats(self.advance(state, token_bytes[t], seen), seen):
                _clear(words, [t])

    def _ban_lengths(self, string, words: np.ndarray) -> None:
        """Inside a length-guarded string: clear the tokens that would pass its maxLength or end
        it short of its minLength (one table row each)."""
        count, escaped, least, most = string
        upto, short_closers, _ = self._length_rows
        rows = upto[escaped]
        if most - count < len(rows):
            words &= rows[most - count]
        if least > count:
            rows = short_closers[escaped]
            words &= ~rows[min(least - count, len(rows) - 1)]

    def _with_prefix(self, data: bytes) -> list[int]:
        keys, ids = self._sorted
        out, i = [], bisect.bisect_left(keys, data)
        while i < len(keys) and keys[i].startswith(data):
            out.extend(ids[i])
            i += 1
        return out

    # ------------------------------------------------------------ the JSON walk

    def _step(self, state, c: int, seen, closed: list):
        done, stack, lexeme, arrays = state
        if done < len(self.prefix):
            return (done + 1, stack, lexeme, arrays) if c == self.prefix[done] else _INACTIVE
        if lexeme is not None:
            kind, text = lexeme
            if kind == "s":
                return self._length_step(state, c)
            if kind in "ln":
                if c in _LITERAL:
                    return state if kind == "l" else (done, stack, (kind, text + bytes((c,))), arrays)
                if kind == "n":
                    instance = stack[-1][2][0]
                    if text in seen.get(instance, ()) or (instance, text) in closed:
                        return None
                    closed.append((instance, text))
                state = _after_value(done, stack, arrays)
                if state is _INACTIVE:
                    return state
                done, stack, lexeme, arrays = state
            elif c != ord('"') or (text.endswith(b"\\") and not _escaped_backslash(text)):
                if kind == "v":  # only an escape still pending is kept
                    text = b"\\" if c == ord("\\") and text != b"\\" else b""
                    return (done, stack, (kind, text), arrays)
                return (done, stack, (kind, text + bytes((c,))), arrays)
            elif kind == "k":
                return (done, stack[:-1] + ((_OBJECT, _VALUE, text),), None, arrays)
            elif kind == "g":
                instance = stack[-1][2][0]
                if text in seen.get(instance, ()) or (instance, text) in closed:
                    return None
                closed.append((instance, text))
                return (done, stack[:-1] + ((_ARRAY, _AFTER, stack[-1][2]),), None, arrays)
            else:
                return _after_value(done, stack, arrays)
        if c not in _STRUCTURE:  # whitespace (a custom whitespace regex may allow more than JSON's)
            return state
        top = stack[-1] if stack else None
        if c == ord(","):
            return (done, stack[:-1] + ((top[0], _EXPECT, top[2] if top[0] == _ARRAY else None),), None, arrays)
        if c in b"}]":
            return _after_value(done, stack[:-1], arrays)
        if c == ord("{"):
            return (done, stack + ((_OBJECT, _EXPECT, None),), None, arrays)
        if c == ord("["):
            kind = _at(self.paths, stack)  # the item kind of a unique array here
            if kind is not None:
                return (done, stack + ((_ARRAY, _EXPECT, (arrays, kind)),), None, arrays + 1)
            return (done, stack + ((_ARRAY, _EXPECT, None),), None, arrays)
        if c == ord('"'):
            if top is not None and top[0] == _OBJECT and top[1] == _EXPECT:
                return (done, stack, ("k", b""), arrays)
            if top is not None and top[0] == _ARRAY and top[2] is not None and top[2][1] == "string":
                return (done, stack, ("g", b""), arrays)
            bounds = _at(self.lengths, stack)  # (minLength, maxLength) of a guarded string here
            return (done, stack, ("v", b"") if bounds is None else ("s", (0, 0, *bounds)), arrays)
        if top is not None and top[0] == _ARRAY and top[2] is not None and top[2][1] == "integer" \
                and c in b"-0123456789":
            return (done, stack, ("n", bytes((c,))), arrays)
        return (done, stack, ("l", b""), arrays)  # a number, true, false or null

    def _length_step(self, state, c: int):
        """One byte inside a length-guarded string: lexeme ("s", (characters so far, 1 after a
        backslash, minLength, maxLength)); None past maxLength or closing short of minLength."""
        done, stack, (_, (count, escaped, least, most)), arrays = state
        if escaped:  # the escape's second byte: counted with the backslash
            return (done, stack, ("s", (count, 0, least, most)), arrays)
        if c == ord('"'):
            return None if count < least else _after_value(done, stack, arrays)
        if c == ord("\\") or c & 0xC0 != 0x80:  # a backslash or a character's first byte
            count += 1
            if count > most:
                return None
        return (done, stack, ("s", (count, int(c == ord("\\")), least, most)), arrays)


def _at(table: dict, stack: tuple):
    """The entry of `table` (guarded path -> value; None in a path: any key or index) for the
    place `stack` is at, or None."""
    path = tuple(f[2] if f[0] == _OBJECT else None for f in stack)
    return next((value for p, value in table.items()
                 if len(p) == len(path) and all(a is None or a == b for a, b in zip(p, path))), None)


def _after_value(done: int, stack: tuple, arrays: int):
    """The state once a value inside `stack` ended (the whole JSON: inactive)."""
    if not stack:
        return _INACTIVE
    kind, _, info = stack[-1]
    return (done, stack[:-1] + ((kind, _AFTER, info),), None, arrays)


def _repeats(step, seen) -> bool:
    """Whether advance's result `step` closed a repeated item (None) or is stuck at a second 0."""
    return step is None or _stuck_at_zero(step, seen)


def _stuck_at_zero(step, seen) -> bool:
    """Whether `step` (advance's result) ends inside a guarded integer item 0 while 0 is already
    an item of that array: it could neither grow nor end."""
    state, closed = step
    if state is _INACTIVE or state[2] is None or state[2] != ("n", b"0"):
        return False
    instance = state[1][-1][2][0]
    return b"0" in seen.get(instance, ()) or (instance, b"0") in closed


def _escaped_backslash(text: bytes) -> bool:
    """Whether `text`'s trailing backslash is itself escaped (an even run of backslashes)."""
    run = len(text) - len(text.rstrip(b"\\"))
    return run % 2 == 0


def _clear(words: np.ndarray, ids) -> None:
    if len(ids):
        ids = np.asarray(ids, dtype=np.int64)
        bits = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
        np.bitwise_and.at(words.view(np.uint32), ids >> 5, ~bits)


_tables_lock = threading.Lock()
_tables: "weakref.WeakKeyDictionary[TokenizerInfo, tuple]" = weakref.WeakKeyDictionary()


def _vocab_tables(info: TokenizerInfo):
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
                cut = _first_quote(data)
                if cut is not None:
                    closers.setdefault(data[:cut], []).extend(ids)
            with_quote, quoted, quoted_thrice = (
                np.asarray([t for t, data in enumerate(info.token_bytes)
                            if t not in info.special_ids and (data.count(b'"') >= least
                                                              or (least > 1 and len(_DIGIT_RUN.findall(data)) >= 2))],
                           dtype=np.int64) for least in (1, 2, 3))
            numeric = [(t, data) for t, data in enumerate(info.token_bytes)
                       if t not in info.special_ids and _DIGIT_RUN.search(data)]
            digits = (np.asarray([t for t, data in numeric if not data.isdigit()], dtype=np.int64),
                      np.asarray([t for t, data in numeric if data.isdigit() and data[0] == ord("0")],
                                 dtype=np.int64))
            literal_first = pack_token_ids(np.asarray([t for t, data in enumerate(info.token_bytes)
                                                       if data and data[0] in _LITERAL], dtype=np.int64),
                                           info.vocab_size)
            cached = _tables[info] = ((keys, [by_bytes[k] for k in keys]),
                                      (list(closers.items()), with_quote), (quoted, quoted_thrice),
                                      digits, literal_first)
        return cached


_length_cache: "weakref.WeakKeyDictionary[TokenizerInfo, tuple]" = weakref.WeakKeyDictionary()


def _length_tables(info: TokenizerInfo):
    """Per tokenizer, for length-guarded strings: `upto[e][k]`, the bitmask row of tokens with at
    most k string characters before their first closing quote (all of them without one), from a
    start after a backslash (e = 1) or not; `short[e][k]`, the row of tokens with a closing quote
    and fewer than k characters before it (the last entry: every token with one); the ids of the
    tokens with LENGTH_GUARD_MIN or more characters after their last quote."""
    from .schema_check import LENGTH_GUARD_MIN

    with _tables_lock:
        cached = _length_cache.get(info)
        if cached is None:
            upto, short = [], []
            for escaped in (0, 1):
                counts = [_string_characters(data, escaped) for data in info.token_bytes]
                lengths = np.asarray([n for n, _ in counts])
                closing = np.asarray([q for _, q in counts])
                top = int(lengths.max()) + 1
                upto.append([pack_token_ids(np.flatnonzero(lengths <= k), info.vocab_size) for k in range(top)])
                short.append([pack_token_ids(np.flatnonzero(closing & (lengths < k)), info.vocab_size)
                              for k in range(top + 1)])
            long_openers = np.asarray(
                [t for t, data in enumerate(info.token_bytes) if t not in info.special_ids and b'"' in data
                 and _string_characters(data[data.rindex(b'"') + 1:], 0)[0] >= LENGTH_GUARD_MIN], dtype=np.int64)
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


def _first_quote(data: bytes) -> int | None:
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


class GuardedMatcher:
    """A RegexMatcher plus a UniqueGuard: the Matcher protocol, one guard state per token, and
    the items of the guarded arrays (instance -> set of texts) with, per token, the items it
    added (undone by rollback)."""

    __slots__ = ("_inner", "_guard", "_scans", "_seen", "_added")

    def __init__(self, inner, guard: UniqueGuard, scans: list | None = None, seen: dict | None = None,
                 added: list | None = None) -> None:
        self._inner = inner
        self._guard = guard
        self._scans = scans if scans is not None else [guard.initial]
        self._seen: dict[int, set] = seen if seen is not None else {}
        self._added: list = added if added is not None else []

    @property
    def num_accepted(self) -> int:
        return self._inner.num_accepted

    def accept_token(self, token_id: int) -> bool:
        if not self._inner.accept_token(token_id):
            return False
        data = self._guard.info.token_bytes[token_id] if token_id < len(self._guard.info.token_bytes) else b""
        step = self._guard.advance(self._scans[-1], data, self._seen)
        if _repeats(step, self._seen):
            self._inner.rollback(1)
            return False
        scan, closed = step
        for instance, text in closed:
            self._seen.setdefault(instance, set()).add(text)
        self._scans.append(scan)
        self._added.append(closed)
        return True

    def fill_bitmask(self, bitmask, row: int) -> None:
        self._inner.fill_bitmask(bitmask, row)
        if not self._inner.is_terminated():
            self._guard.ban(self._scans[-1], numpy_rows(bitmask)[row], self._seen)

    def rollback(self, num_tokens: int) -> None:
        self._inner.rollback(num_tokens)
        for _ in range(num_tokens):
            self._scans.pop()
            for instance, text in self._added.pop():
                self._seen[instance].discard(text)

    def fork(self) -> "GuardedMatcher":
        return GuardedMatcher(self._inner.fork(), self._guard, list(self._scans),
                              {k: set(v) for k, v in self._seen.items()}, list(self._added))

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    def is_accepting(self) -> bool:
        return self._inner.is_accepting()

    def reset(self) -> None:
        self._inner.reset()
        del self._scans[1:]
        self._seen.clear()
        self._added.clear()

    def jump_forward_token_ids(self) -> list[int]:
        """The inner matcher's forced tokens, up to the first the guard would reject (never
        expected: a forced token does not close a free string)."""
        scan, out, closed = self._scans[-1], [], set()
        seen = _Overlay(self._seen, closed)
        for token_id in self._inner.jump_forward_token_ids():
            step = self._guard.advance(scan, self._guard.info.token_bytes[token_id], seen)
            if _repeats(step, seen):
                break
            scan = step[0]
            closed.update(step[1])
            out.append(token_id)
        return out

    def jump_forward_string(self) -> str:
        return self._inner.jump_forward_string()


class _Overlay:
    """`seen` plus (instance, text) items closed since, for a walk ahead that must not change it."""

    def __init__(self, seen: dict, closed: set) -> None:
        self.seen, self.closed = seen, closed

    def get(self, instance, default=()):
        return _Items(self.seen.get(instance, ()), instance, self.closed)


class _Items:
    def __init__(self, items, instance, closed) -> None:
        self.items, self.instance, self.closed = items, instance, closed

    def __contains__(self, text) -> bool:
        return text in self.items or (self.instance, text) in self.closed

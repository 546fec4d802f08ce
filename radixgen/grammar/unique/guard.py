"""uniqueItems over strings and integers (pydantic's `set[str]`, `set[int]`) and over objects by
one of their properties: a guard beside the regex automaton.

No regular language says "no string twice", so the schema's regex only shapes such an array, and
`UniqueGuard` enforces the rest:

- The regex spells every item value one way (`canonical_string_regex`: the only escapes are
  \\" \\\\ \\b \\f \\n \\r \\t; no \\/ and no \\u; `CANONICAL_INTEGER`: no -0), so two items are
  equal exactly when their texts are.
- The guard follows the output as JSON (`advance`, in unique.walk: one immutable state per token,
  so rollback and fork are list operations). An array whose instance path (object keys; `None`
  for any key or index) is one of the schema's guarded paths remembers its items' texts.
- `ban` clears, from the automaton's row, every token that would close an item equal to an earlier
  one: inside an item, the tokens that spell an earlier item's remaining text and the closing
  quote (a prefix search over the sorted vocabulary); anywhere, any allowed token with two or more
  quotes (it can open and close a whole item) is run through `advance` (20 such tokens in
  SmolLM2's vocabulary). In an array of integers, every allowed token with a digit and another
  byte is run through `advance` (a token of digits only can neither end nor close an item), and
  while the item so far equals an earlier one, the tokens that would end it.

Items are free strings, strings of a pattern or format that can always grow
(`grows_wherever_it_closes`), or integers with no upper bound and either no lower bound or one
at 0 or above (`integer_grows`), so after any prefix some other value is still possible, with
one exception banned up front: an integer item `0` cannot grow, so once 0 is an item no token
may start another 0.

Strings that can run out of values (a maxLength, generated as printable ASCII; a pattern such
as `^[a-z]{2}$`; a format such as date; a set of strings) are "bounded" items: `ItemCounts`
counts, per state of the item's byte automaton, how many item texts it can still complete, and
a prefix is exhausted when that many earlier items start with it (an item at maxLength equal to
an earlier one; with enough items, shorter prefixes). `ban` also clears the tokens that would
end inside an item at an exhausted prefix (exact spellings of the rest of one, and the tokens
after whose last quote one follows, run through `advance`), and the array's maxItems is capped
at the number of values (rewrite.guarded), so a new item is always possible.

Arrays of objects are kept unique by one required string property of the objects (a subset):
the guarded path's kind is ("key", names, item kind), names the property's name (or the names of
an object property and its property), and the property's value in each object of the array is
kept unique like an item.

A ban never leaves a dead end; `rewrite.rewriter` refuses the shapes where that would not hold.
"""

from __future__ import annotations

import bisect

import numpy as np

from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.grammar.unique.tables import (
    after_last_quote,
    length_tables,
    tokens_with,
    vocab_tables,
)
from radixgen.grammar.unique.values import exhausted_prefixes, is_exhausted, item_counts
from radixgen.grammar.unique.walk import (
    ARRAY,
    INACTIVE,
    JsonWalk,
    escaped_backslash,
    guarded_item,
    keyed_bounded,
)


class UniqueGuard(JsonWalk):
    """The guarded paths plus the vocabulary tables (and a memo of exhausted prefixes); shared by
    a grammar's matchers.

    A state is `(prefix_done, stack, lexeme, arrays)` or INACTIVE. `prefix` is literal text
    before the JSON (the tool-call opener); text that does not start with it is never JSON, so the
    guard goes inactive. stack frames: (OBJECT, phase, key) or (ARRAY, phase, (instance, kind)
    | None, (separators so far, maxItems) | None), `instance` numbering the guarded arrays in
    order (`arrays` counts them), `kind` their items' ("string", "integer", ("bounded",
    ItemCounts), or ("key", name, one of those) for objects kept unique by a property), the last
    part set where the guard keeps the array's maxItems (a separator past it: None). lexeme:
    None, ("k", text) a key, ("g", text) a guarded string item (or key value), ("v", b"") another
    string, ("n", text) a guarded integer item, or ("l", b"") another number or literal; a
    trailing backslash of a string is kept in its text (escape pending).
    The item texts of each guarded array live outside the state, in `seen` (instance -> set),
    kept by the matcher, so a state costs no copy of them."""

    def __init__(self, paths, info: TokenizerInfo, prefix: bytes = b"") -> None:
        """paths: (instance path, item kind) pairs, as json_schema.schema_to_guarded_regex gives."""
        encoded = [
            (tuple(None if p is None else p.encode() for p in path), kind) for path, kind in paths
        ]
        # item kinds of unique arrays: "string", "integer", ("bounded", ItemCounts), or
        # ("key", name, item kind) for objects kept unique by one property
        self.paths = {
            path: _item_kind(kind)
            for path, kind in encoded
            if isinstance(kind, str) or kind[0] in ("key", "bounded")
        }
        self.lengths = {
            path: kind[1:]
            for path, kind in encoded
            if not isinstance(kind, str) and kind[0] == "length"
        }
        self.counts = {
            path: kind[1]
            for path, kind in encoded
            if not isinstance(kind, str) and kind[0] == "items"
        }
        fewest = min(self.counts.values(), default=None)
        self._long_openers = np.asarray(
            []
            if fewest is None
            else [
                t
                for t in tokens_with(info, b"[").tolist()
                if info.token_bytes[t].count(b",") >= fewest
            ],
            dtype=np.int64,
        )
        self.info = info
        self.prefix = prefix
        self._sorted, self._closers, self._quoted, self._digits, self._literal_first = vocab_tables(
            info
        )
        self._length_rows = length_tables(info) if self.lengths else None
        bounded = any(_bounded(kind) for kind in self.paths.values())
        self._exhausted: dict = {}  # (items, kind) -> exhausted_prefixes, shared by the matchers
        self._after_quote = after_last_quote(info) if bounded else None
        # tokens that can close one item and open the next: what the next one reaches can
        # depend on the item just closed
        self._two_quotes = np.asarray(
            [t for t in self._closers[1].tolist() if info.token_bytes[t].count(b'"') >= 2]
            if bounded
            else [],
            dtype=np.int64,
        )
        if self.lengths:  # a token whose last quote opens a string with more characters than
            # LENGTH_GUARD_MIN could pass a maxLength at once: run through advance too; tokens
            # holding a whole string only matter for unique items or a minLength
            long_openers = self._length_rows[2]
            whole = (
                self._quoted
                if self.paths or any(least for least, _ in self.lengths.values())
                else ((), ())
            )
            self._length_quoted = tuple(np.union1d(q, long_openers).astype(np.int64) for q in whole)

    def ban(self, state, words: np.ndarray, seen) -> None:
        """Clear from `words` (one int32 bitmask row) the tokens that would close a repeated
        item."""
        if state is INACTIVE:
            return
        _, stack, lexeme, _ = state
        # tokens that may close an item besides the one being written (or, with length guards,
        # open a string with more characters than a maxLength): run through advance
        in_string = lexeme is not None and lexeme[0] in "gkvs"
        quoted = (self._length_quoted if self.lengths else self._quoted)[in_string]
        if lexeme is not None and lexeme[0] == "s":
            self._ban_lengths(lexeme[1], words)
        guarded = guarded_item(stack)
        if guarded is not None and guarded[1] == "integer" and (lexeme is None or lexeme[0] == "n"):
            self._ban_integers(state, words, seen)
        bounded = guarded if guarded is not None and not isinstance(guarded[1], str) else None
        if bounded is None and lexeme is not None and lexeme[0] == "k":
            bounded = keyed_bounded(stack)  # a name being written: `":"a` could reach a value
        if bounded is not None:  # ("bounded", ItemCounts) items
            openers = self._ban_exhausted_prefixes(bounded, lexeme, words, seen)
            quoted = np.union1d(quoted, np.union1d(self._two_quotes, openers))
        if lexeme is not None and lexeme[0] == "g":
            text, items = lexeme[1], seen.get(guarded[0], ())
            if text.endswith(b"\\") and not escaped_backslash(text):
                quoted = self._closers[1]  # an escape is pending: run every token with a quote
            elif len(items) <= len(self._closers[0]):
                for item in items:
                    if item.startswith(text):
                        _clear(words, self._with_prefix(item[len(text) :] + b'"'))
            else:  # more items than ways to close: look up what each closing token would close
                for before, ids in self._closers[0]:
                    if text + before in items:
                        _clear(words, ids)
        if self.counts:  # tokens that would reach a separator or end an array cannot count
            quoted = self._count_candidates(stack, quoted)
        if len(quoted):
            allowed = quoted[(words[quoted >> 5] >> (quoted & 31)) & 1 == 1]
            token_bytes = self.info.token_bytes
            _clear(
                words,
                [
                    t
                    for t in allowed.tolist()
                    if repeats(self.advance(state, token_bytes[t], seen), seen)
                ],
            )

    def _ban_exhausted_prefixes(self, guarded, lexeme, words: np.ndarray, seen) -> np.ndarray:
        """Bounded items (a maxLength, a finite pattern, format or set): clear the tokens that end
        the item being written at an exhausted prefix (every value it could still become is an
        earlier item: at maxLength, one equal to an earlier item); return the tokens that could
        open an item and end inside it at one (advance decides)."""
        instance, kind = guarded
        items = frozenset(seen.get(instance, ()))
        prefixes = self._exhausted.get((items, kind))
        if prefixes is None:  # items change only when one closes: masks in between reuse it
            if len(self._exhausted) >= 64:
                self._exhausted.clear()
            prefixes = self._exhausted[items, kind] = exhausted_prefixes(items, kind[1])
        if lexeme is not None and lexeme[0] == "g":
            text = lexeme[1]
            for prefix in prefixes:
                if len(prefix) > len(text) and prefix.startswith(text):
                    _clear(words, self._exact(prefix[len(text) :]))
        return np.asarray(
            [t for prefix in prefixes for t in self._after_quote.get(prefix, ())], dtype=np.int64
        )

    def _ban_integers(self, state, words: np.ndarray, seen) -> None:
        """In an array of integers: while the item so far repeats an earlier one, the tokens that
        would end it; any allowed token with a digit that closes a repeat or makes a new item 0
        when 0 is already one (it could not grow, nor end)."""
        _, stack, lexeme, _ = state
        instance = guarded_item(stack)[0]
        if lexeme is not None and lexeme[1] in seen.get(instance, ()):
            words &= self._literal_first
        mixed, zero_first = self._digits
        if lexeme is None and b"0" in seen.get(instance, ()):
            _clear(words, zero_first)  # a new item 0 (all-digit tokens neither end nor close one)
        token_bytes = self.info.token_bytes
        for t in mixed[(words[mixed >> 5] >> (mixed & 31)) & 1 == 1].tolist():
            if repeats(self.advance(state, token_bytes[t], seen), seen):
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

    def _count_candidates(self, stack: tuple, quoted: np.ndarray) -> np.ndarray:
        """`quoted` plus the tokens with a comma while an array of the stack is at its last
        item, and the tokens that could open a counted array and pass its maxItems at once (a
        '[' and as many commas): they are run through advance."""
        if any(
            frame[0] == ARRAY and frame[3] is not None and frame[3][0] + 1 >= frame[3][1]
            for frame in stack
        ):
            quoted = np.union1d(quoted, tokens_with(self.info, b",")).astype(np.int64)
        return (
            np.union1d(quoted, self._long_openers).astype(np.int64)
            if len(self._long_openers)
            else quoted
        )

    def _exact(self, data: bytes) -> list[int]:
        keys, ids = self._sorted
        i = bisect.bisect_left(keys, data)
        return ids[i] if i < len(keys) and keys[i] == data else []

    def _with_prefix(self, data: bytes) -> list[int]:
        keys, ids = self._sorted
        out, i = [], bisect.bisect_left(keys, data)
        while i < len(keys) and keys[i].startswith(data):
            out.extend(ids[i])
            i += 1
        return out


def _bounded(kind) -> bool:
    """Whether a guarded path's kind holds strings that can run out of values (items or the
    values of objects' keeping property)."""
    return isinstance(kind, tuple) and (
        kind[0] == "bounded" or kind[0] == "key" and _bounded(kind[2])
    )


def _item_kind(kind):
    """A kind as json_schema gives it ("string", "integer", ("bounded", item regex), ("key",
    name, kind)), for the guard: a bounded kind carries its item's ItemCounts, a name is bytes."""
    if isinstance(kind, str):
        return kind
    if kind[0] == "key":
        names = (kind[1],) if isinstance(kind[1], str) else kind[1]
        return ("key", tuple(name.encode() for name in names), _item_kind(kind[2]))
    return ("bounded", item_counts(kind[1]))


def repeats(step, seen) -> bool:
    """Whether advance's result `step` closed a repeated item (None) or is stuck: at a second 0,
    or inside a bounded string item at an exhausted prefix (at maxLength, equal to an earlier
    one)."""
    return step is None or _stuck_at_zero(step, seen) or _stuck_at_exhausted_prefix(step, seen)


def _stuck_at_exhausted_prefix(step, seen) -> bool:
    """Whether `step` (advance's result) ends inside a bounded string item at an exhausted
    prefix."""
    state, closed = step
    if state is INACTIVE or state[2] is None or state[2][0] != "g":
        return False
    instance, kind = guarded_item(state[1])
    if isinstance(kind, str):
        return False
    items = set(seen.get(instance, ())) | {text for i, text in closed if i == instance}
    return is_exhausted(state[2][1], items, kind[1])


def _stuck_at_zero(step, seen) -> bool:
    """Whether `step` (advance's result) ends inside a guarded integer item 0 while 0 is already
    an item of that array: it could neither grow nor end."""
    state, closed = step
    if state is INACTIVE or state[2] is None or state[2] != ("n", b"0"):
        return False
    instance = guarded_item(state[1])[0]
    return b"0" in seen.get(instance, ()) or (instance, b"0") in closed


def _clear(words: np.ndarray, ids) -> None:
    if len(ids):
        ids = np.asarray(ids, dtype=np.int64)
        bits = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
        np.bitwise_and.at(words.view(np.uint32), ids >> 5, ~bits)

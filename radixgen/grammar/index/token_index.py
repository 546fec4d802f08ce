"""A regex compiled to a token-level automaton (outlines-core `Index`) plus per-state tables.

`TokenIndex` wraps one outlines-core Index and precomputes, for every automaton state, what the
matcher needs on the hot path:

- the allowed-token bitmask row (deduplicated: states with the same allowed set share a row;
  EOS bits are those of `TokenizerInfo.eos_ids`, set exactly in accepting states),
- the single allowed token, for states that admit exactly one (jump-forward),
- the longest byte prefix every allowed token shares (the forced text, `jump_forward_string`),
- how many tokens the shortest way from each state to a complete match takes (`distance`), so a
  matcher can keep to the tokens that still finish within `max_new_tokens` (`row_within`).

Tables are built once per compiled grammar, off the scheduler thread (compilation is async), so
`fill_bitmask` is one row copy. A grammar with too many transitions to tabulate eagerly falls back
to building rows lazily into an LRU-bounded cache.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from outlines_core import Index, Vocabulary

from radixgen.grammar.bitmask import pack_token_ids, unpack_row
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.tokenizer_info import TokenizerInfo

EAGER_STATE_LIMIT = 8192  # tabulate every state when the automaton has at most this many
LAZY_CACHE_ROWS = 2048  # LRU bound on lazily built rows (6 KiB each for a 49k vocabulary)
# an automaton with at most this many (estimated) transitions is read in one call
# (get_transitions: fast, but ~110 bytes of Python objects per transition); a larger one a
# state at a time
BULK_ENTRY_LIMIT = 2_000_000
WITHIN_CACHE_ROWS = 256  # LRU bound on rows narrowed to a token budget (row_within)

_vocab_lock = threading.Lock()
_by_bytes: "weakref.WeakKeyDictionary[TokenizerInfo, dict]" = weakref.WeakKeyDictionary()
_first: "weakref.WeakKeyDictionary[TokenizerInfo, np.ndarray]" = weakref.WeakKeyDictionary()
_vocabularies: "weakref.WeakKeyDictionary[TokenizerInfo, OutlinesVocab]" = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class OutlinesVocab:
    """An outlines-core Vocabulary for one tokenizer, plus an end sentinel.

    outlines-core 0.2.14 builds its automaton with leftmost-first match semantics: once a state
    accepts, continuations that pass through non-accepting states are dropped (for "a(bc)*" it
    forbids "b" after "a"). Every regex is therefore compiled as `(?:regex)<sentinel>`, where the
    sentinel is a private-use character that no real token contains, spelt by a fake token id
    beyond the vocabulary: the only match is then at the very end, nothing is dropped, and a state
    accepts the user's regex exactly when the sentinel token leads to a final state.

    The automaton library also builds an unanchored start state (a search for the regex anywhere
    in the text), and for a regex that starts with one literal that can recur inside a bounded
    repeat, that search's DFA is exponential in the bound: `"[^"]{0,20}"` (a top-level
    `maxLength: 20` string) took 100 s to compile, the same field inside an object 0.3 s. Every
    regex therefore also starts with a second private-use character, `start`, that nothing else
    in it contains; the search then has only one place to start, and the matcher's initial state
    is the one after `start`."""

    vocabulary: Vocabulary
    sentinel: str  # the character appended to every regex
    sentinel_id: int  # its fake token id (>= vocab_size: never in a bitmask)
    start: str  # the character prepended to every regex
    start_id: int  # its fake token id (> sentinel_id)
    eos_id: int  # the EOS id outlines-core requires (fake too; the matcher handles real EOS)


def outlines_vocabulary(info: TokenizerInfo) -> OutlinesVocab:
    """The outlines-core Vocabulary of `info`, cached per tokenizer.

    Tokens are given as raw bytes so outlines-core matches the regex over exactly the bytes each
    token decodes to. Special tokens, EOS and empty tokens are left out: they never spell grammar
    text; the matcher allows `info.eos_ids` itself in accepting states."""
    with _vocab_lock:
        if info in _vocabularies:
            return _vocabularies[info]
        skip = set(info.eos_ids) | set(info.special_ids)
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(info.token_bytes):
            if data and token_id not in skip:
                by_bytes.setdefault(data, []).append(token_id)
        unused = (
            chr(c)
            for c in range(0xE000, 0xF8FF)
            if not any(chr(c).encode() in data for data in by_bytes)
        )
        sentinel, start = next(unused), next(unused)
        sentinel_id = max(info.vocab_size, len(info.token_bytes))
        by_bytes[sentinel.encode()] = [sentinel_id]
        by_bytes[start.encode()] = [sentinel_id + 1]
        # real byte tokens may spell the start of `start`; outlines-core refuses a state without
        # transitions, so fake tokens finish every partial spelling (those states are never used)
        fake_id = sentinel_id + 2
        for cut in range(1, len(start.encode())):
            if start.encode()[cut:] not in by_bytes:
                by_bytes[start.encode()[cut:]] = [fake_id]
                fake_id += 1
        vocab = OutlinesVocab(
            Vocabulary(fake_id, by_bytes), sentinel, sentinel_id, start, sentinel_id + 1, fake_id
        )
        _vocabularies[info] = vocab
        return vocab


def build_index(regex: str, info: TokenizerInfo, entries: int | None = None) -> "TokenIndex":
    """Compile `regex` (Rust regex syntax, matched against the whole output) over `info`'s
    vocabulary. Raises GrammarError when the regex is invalid or no token can follow a state.
    `entries`: the estimated transitions (index.size_budget), which decide how the automaton is read."""
    vocab = outlines_vocabulary(info)
    try:
        index = Index(f"{vocab.start}(?:{regex}){vocab.sentinel}", vocab.vocabulary)
    except (ValueError, RuntimeError) as exc:
        raise GrammarError(f"cannot compile regex: {exc}") from None
    return TokenIndex(index, info, vocab, bulk=entries is not None and entries <= BULK_ENTRY_LIMIT)


class TokenIndex:
    """Immutable after construction except for the lazy caches (guarded by a lock).

    Live states: a real token may also spell the sentinel's bytes one by one; the states such a
    spelling passes through can never reach an accepting state, so they are dead, and a token is
    allowed only when it leads to a live state (one from which an accepting state is reachable)."""

    def __init__(
        self, index: Index, info: TokenizerInfo, vocab: OutlinesVocab, bulk: bool = False
    ) -> None:
        self.index = index
        self.info = info
        self.initial_state: int = index.get_next_state(index.get_initial_state(), vocab.start_id)
        self._final = frozenset(index.get_final_states())  # outlines' (after the sentinel)
        self._sentinel_id = vocab.sentinel_id
        self._eos_ids = np.asarray(info.eos_ids, dtype=np.int64)
        self._row_of: dict[int, int] = {}  # state -> row of self.rows
        self._single: dict[int, int] = {}  # state -> its only allowed token (non-accepting states)
        self._forced: dict[int, bytes] = {}  # state -> byte prefix shared by all allowed tokens
        self._lazy: OrderedDict[int, np.ndarray] = OrderedDict()
        self._within: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._first_byte = _first_bytes(info)
        self._accepting: dict[int, bool] = {}
        successors, eager = self._explore(
            _bulk_moves(index.get_transitions()) if bulk else self._moves
        )
        self._distance = _distances(successors, self._accepting)
        self._live = frozenset(self._distance)
        # per state, the longest of its tokens' distances: a budget above it narrows nothing
        self._farthest = {
            s: max((self._distance.get(n, 0) for n in successors[s].tolist()), default=0)
            for s in self._live
        }
        self._dead = np.fromiter((s for s in successors if s not in self._live), dtype=np.int64)
        self.num_states = len(self._live)
        self.rows = np.zeros((0, 0), dtype=np.int32)
        if eager:  # rows were built before the dead states were known: redo those that lead there
            for state in [s for s in self._row_of if np.isin(successors[s], self._dead).any()]:
                self._single.pop(state, None)
                self._forced.pop(state, None)
                self._row_of[state] = self._intern(self._analyse(state, *self._live_moves(state)))
            self._row_of = {s: k for s, k in self._row_of.items() if s in self._live}
            for state in self._dead.tolist():
                self._single.pop(state, None)
                self._forced.pop(state, None)
            self.rows = np.stack(self._table)
        del self._table, self._seen_rows

    def _explore(self, moves_of) -> tuple[dict[int, np.ndarray], bool]:
        """Every state reachable from the initial one, with its distinct successors (`moves_of`:
        a state's tokens and next states, from outlines-core's get_transitions for a small
        automaton; for a large one a state at a time, as get_transitions would build every
        transition as Python ints at once: 10 GB at the index budget's 100 M). Records which
        states accept and, if there are at most EAGER_STATE_LIMIT states (then True is returned
        with them), each state's row (beyond, rows are built lazily)."""
        self._table: list[np.ndarray] = []
        self._seen_rows: dict[bytes, int] = {}
        successors: dict[int, np.ndarray] = {}
        stack, found, eager = [self.initial_state], {self.initial_state}, True
        while stack:
            state = stack.pop()
            ids, nxt = moves_of(state)
            self._accepting[state] = bool(
                np.isin(nxt[ids == self._sentinel_id], list(self._final)).any()
            )
            real = ids < self._sentinel_id
            ids, nxt = ids[real], nxt[real]
            successors[state] = np.unique(nxt)
            for n in successors[state].tolist():
                if n not in found:
                    found.add(n)
                    stack.append(n)
            eager = eager and len(found) <= EAGER_STATE_LIMIT
            if eager:
                self._row_of[state] = self._intern(self._analyse(state, ids, nxt))
        if not eager:
            for table in (self._row_of, self._single, self._forced, self._table):
                table.clear()
        return successors, eager

    def _moves(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """All tokens outlines-core allows in `state` (the fake ones too) and the states they lead to."""
        ids = np.asarray(self.index.get_allowed_tokens(state), dtype=np.int64)
        step = self.index.get_next_state
        nxt = np.fromiter(
            (-1 if (n := step(state, t)) is None else n for t in ids.tolist()),
            dtype=np.int64,
            count=len(ids),
        )
        return ids[nxt >= 0], nxt[nxt >= 0]  # (outlines' own EOS leads nowhere)

    def _live_moves(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """The real tokens allowed in `state` that lead to live states, and those states."""
        ids, nxt = self._moves(state)
        keep = ids < self._sentinel_id
        if len(self._dead):
            keep &= ~np.isin(nxt, self._dead)
        return ids[keep], nxt[keep]

    def _intern(self, row: np.ndarray) -> int:
        """The index of `row` in the table being built (equal rows shared)."""
        k = self._seen_rows.setdefault(row.tobytes(), len(self._table))
        if k == len(self._table):
            self._table.append(row)
        return k

    def next_state(self, state: int, token_id: int) -> int | None:
        """The state after `token_id`, or None when the grammar rejects it (EOS excluded)."""
        if token_id >= self._sentinel_id:
            return None
        nxt = self.index.get_next_state(state, token_id)
        return nxt if nxt in self._live else None

    def is_accepting(self, state: int) -> bool:
        """True when the text that led to `state` is a complete match (EOS allowed)."""
        return self._accepting.get(state, False)

    def distance(self, state: int) -> int:
        """How many tokens the shortest way from `state` to a complete match takes (0 when it is
        one; EOS not counted). `state` must be live."""
        return self._distance[state]

    def row_within(self, state: int, budget: int) -> np.ndarray | None:
        """`row(state)` narrowed to the tokens after which a complete match is still at most
        `budget - 1` tokens away, so that the output can finish within `budget` tokens (EOS, which
        ends it, stays allowed in an accepting state); None when that is every token of the row.
        Where no token can finish in time (the budget is already below the state's distance),
        the tokens that come closest. A view, never to be mutated."""
        if budget > self._farthest[state]:
            return None
        key = (state, budget)
        with self._lock:
            row = self._within.get(key)
            if row is None:
                ids, dist = self._move_distances(state)
                ids = ids[dist <= max(budget - 1, int(dist.min()) if len(dist) else 0)]
                if self.is_accepting(state):
                    ids = np.concatenate([ids, self._eos_ids])
                row = self._within[key] = pack_token_ids(ids, self.info.vocab_size)
                if len(self._within) > WITHIN_CACHE_ROWS:
                    self._within.popitem(last=False)
            self._within.move_to_end(key)
            return row

    def keep_closest(self, state: int, words: np.ndarray) -> None:
        """Narrow the bitmask row `words` (tokens allowed in `state`, int32, in place) to the
        tokens after which a complete match is nearest: the way to finish when no token can
        finish in time any more."""
        ids, dist = self._move_distances(state)
        allowed = np.isin(ids, unpack_row(words, self.info.vocab_size))
        if allowed.any():
            ids, dist = ids[allowed], dist[allowed]
            words[:] = pack_token_ids(ids[dist == dist.min()], self.info.vocab_size)

    def _move_distances(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """The real tokens allowed in `state` that lead to live states, and the distance of
        the state each leads to."""
        ids, nxt = self._live_moves(state)
        targets, at = np.unique(nxt, return_inverse=True)
        return ids, np.asarray([self._distance[n] for n in targets.tolist()], dtype=np.int64)[at]

    def token_ids_of(self, data: bytes) -> list[int]:
        """Ids of the (non-special) tokens that spell exactly `data`."""
        return _ids_by_bytes(self.info).get(data, [])

    def row(self, state: int) -> np.ndarray:
        """The bitmask row (int32 [words]) of `state`: a view, never to be mutated."""
        k = self._row_of.get(state)
        if k is not None:
            return self.rows[k]
        return self._lazy_row(state)

    def single_token(self, state: int) -> int | None:
        """The only token allowed in `state` (None if several, or if EOS is also allowed)."""
        if state not in self._row_of:
            self._lazy_row(state)
        return self._single.get(state)

    def forced_bytes(self, state: int) -> bytes:
        """Bytes every allowed token of a non-accepting `state` starts with (b"" if none)."""
        if state not in self._row_of:
            self._lazy_row(state)
        return self._forced.get(state, b"")

    # ------------------------------------------------------------ table construction

    def _lazy_row(self, state: int) -> np.ndarray:
        with self._lock:
            row = self._lazy.get(state)
            if row is None:
                row = self._analyse(state, *self._live_moves(state))
                self._lazy[state] = row
                if len(self._lazy) > LAZY_CACHE_ROWS:
                    self._lazy.popitem(last=False)
            self._lazy.move_to_end(state)
            return row

    def _analyse(self, state: int, ids: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """Build `state`'s row from its real transitions (token ids -> next states); record its
        single token and forced bytes on the way."""
        accepting = self.is_accepting(state)
        if not accepting:
            if len(ids) == 1:
                self._single[state] = int(ids[0])
            forced = self._shared_prefix(ids)
            if forced:
                self._forced[state] = forced
        if accepting and len(self._eos_ids):
            ids = np.concatenate([ids, self._eos_ids])
        return pack_token_ids(ids, self.info.vocab_size)

    def _shared_prefix(self, ids: np.ndarray) -> bytes:
        if len(ids) == 0:
            return b""
        first = self._first_byte[ids]
        if (first != first[0]).any() or first[0] < 0:
            return b""
        tokens = [self.info.token_bytes[i] for i in ids]
        prefix = min(tokens, key=len)
        for data in tokens:
            while not data.startswith(prefix):
                prefix = prefix[:-1]
        return prefix


def _bulk_moves(transitions: dict):
    """`_moves` read from outlines-core's whole transition table."""

    def moves_of(state: int) -> tuple[np.ndarray, np.ndarray]:
        moves = transitions.get(state, {})
        return (
            np.fromiter(moves.keys(), dtype=np.int64, count=len(moves)),
            np.fromiter(moves.values(), dtype=np.int64, count=len(moves)),
        )

    return moves_of


def _distances(successors: dict, accepting: dict) -> dict[int, int]:
    """For every state from which an accepting state is reachable (a live state), the fewest
    tokens that reach one: a breadth-first search backwards over the edges."""
    parents: dict[int, set] = {}
    for state, following in successors.items():
        for nxt in following.tolist():
            parents.setdefault(nxt, set()).add(state)
    distance = {s: 0 for s, acc in accepting.items() if acc}
    level, steps = list(distance), 0
    while level:
        steps += 1
        following = []
        for state in level:
            for parent in parents.get(state, ()):
                if parent not in distance:
                    distance[parent] = steps
                    following.append(parent)
        level = following
    return distance


def _ids_by_bytes(info: TokenizerInfo) -> dict[bytes, list[int]]:
    cached = _by_bytes.get(info)
    if cached is None:
        cached = {}
        for token_id, data in enumerate(info.token_bytes):
            if data and token_id not in info.special_ids:
                cached.setdefault(data, []).append(token_id)
        _by_bytes[info] = cached
    return cached


def _first_bytes(info: TokenizerInfo) -> np.ndarray:
    """First byte of every token (-1 for empty tokens), cached per TokenizerInfo."""
    cached = _first.get(info)
    if cached is None:
        cached = np.full(max(info.vocab_size, len(info.token_bytes)), -1, dtype=np.int16)
        for i, data in enumerate(info.token_bytes):
            if data:
                cached[i] = data[0]
        _first[info] = cached
    return cached

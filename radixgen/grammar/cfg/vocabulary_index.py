"""Per-lexer-state vocabulary index: what each token does from a given lexer state.

Lexing is context-free (cfg.lexer), so from lexer state q every token deterministically yields
(the terminals it completes, the set of types its trailing partial terminal may still become).
`VocabLexer.index(q)` lexes the whole vocabulary from q at once (in C, kernels/cpu_vocab_lexer:
~0.3 ms for 49k tokens; without a C compiler numpy, one gather per byte position: ~3 ms) and
groups token ids by that outcome into a `SeqTrie`: a trie over completed-terminal sequences
(ignored terminals dropped) whose nodes hold `(possible types, token ids)` groups.
A token is then allowed for a parser stack iff the parser accepts its terminal sequence and one
of its possible trailing types is acceptable afterwards (or ignored, where some terminal may
still follow): `SeqTrie.collect` walks the trie with the parser and prunes a whole subtree at the
first terminal the parser rejects. Its output is short id arrays and packed rows (for the few
large groups) whose union is the mask. The walk is what a mask's first visit costs (~15 us to
~0.5 ms in Python), so it is written for few Python-level operations per node: see `collect`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from radixgen.grammar.cfg.lexer import DEAD, LexerDfa
from radixgen.grammar.cfg.parser import LalrTables, Stack
from radixgen.kernels import cpu_vocab_lexer

_SHORT = 6


# A node's allowed tokens for one parser stack are a union of parts: (short id list or None,
# packed row or None, number of ids). Groups of at least _ROW_MIN ids (a few hundred per grammar,
# ~99% of all ids: identifier and keyword-prefix tokens) keep a packed bitmask row, so a mask is a
# few row ORs plus one scatter of the remaining short id lists, not a scatter of ~20k ids. A short
# list is the raw bytes of an intp array: a mask gathers ~70 of them, and `b"".join` of bytes is
# several times cheaper than `np.concatenate` of small arrays (see `ids_of`).
Part = tuple[bytes | None, np.ndarray | None, int]
_ROW_MIN = 256

# A node's groups are checked inline when it has one (most nodes); with more (up to ~90: the
# keyword-prefix variety right after a completed terminal), the selection for one acceptable set
# is computed once and kept: (short id arrays, packed rows, number of ids).
Selection = tuple[tuple[bytes, ...], tuple[np.ndarray, ...], int]
_SELECTIONS_LIMIT = 256  # per node


@dataclass(eq=False, slots=True)  # slots: ~50k nodes per grammar, fewer objects for the GC
class SeqTrie:
    """A node = one sequence of completed terminals. Its tokens are grouped by the set of types
    their trailing partial terminal may still become: group g is allowed iff the parser accepts
    one of `group_types[g]`, or `always[g]` (one of them is ignored: whitespace) and some
    terminal may still follow."""

    children: dict[str, "SeqTrie"] = field(default_factory=dict)
    group_types: tuple[frozenset[str], ...] = ()  # non-ignored types per group
    always: tuple[bool, ...] = ()
    group_parts: tuple[Part, ...] = ()
    whole: Part | None = None  # all groups (a row when >= _ROW_MIN ids)
    num_groups: int = 0
    # (num_groups > 1) the groups by type: (all their types, type -> indices of the groups
    # that may become it, indices of the `always` groups); shared by nodes with equal groups
    by_type: tuple[frozenset[str], dict[str, tuple[int, ...]], tuple[int, ...]] | None = None
    selections: dict | None = None  # (num_groups > 1) acceptable terminals -> Selection

    def child(self, name: str) -> "SeqTrie":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = SeqTrie()
        return node

    def fill(
        self,
        groups: list[tuple[int, np.ndarray]],
        kept_types: list[frozenset[str]],
        ignorable: list[bool],
        num_words: int,
        shared: dict,
    ) -> None:
        """Set this node's tokens: (trailing type set index, int32 ids) per group, in ascending
        set order; per set, its non-ignored types and whether it has an ignored one. Equal type
        tuples are shared across nodes through `shared` (fewer objects for the cyclic GC)."""
        present = [i for i, _ in groups]
        group_types = tuple(kept_types[i] for i in present)
        self.group_types = shared.setdefault(group_types, group_types)
        self.always = tuple(ignorable[i] for i in present)
        self.group_parts = tuple(_part(ids, num_words) for _, ids in groups)
        self.whole = (
            self.group_parts[0]
            if len(groups) == 1
            else _part(np.concatenate([ids for _, ids in groups]), num_words)
        )
        self.num_groups = len(present)
        if len(present) > 1:
            key = ("by_type", tuple(present))
            if key not in shared:
                by_type: dict[str, list[int]] = {}
                for g, types in enumerate(group_types):
                    for t in types:
                        by_type.setdefault(t, []).append(g)
                shared[key] = (
                    frozenset(by_type),
                    {t: tuple(gs) for t, gs in by_type.items()},
                    tuple(g for g, a in enumerate(self.always) if a),
                )
            self.by_type = shared[key]

    def collect(
        self, parser: LalrTables, stack: Stack, small: list[bytes], rows: list[np.ndarray]
    ) -> int:
        """Append to `small` / `rows` the short id lists / packed rows of every group the
        parser allows from `stack`, descending only into children whose terminal the parser
        accepts (`acceptable` is exact); returns the number of ids appended.

        The hot loop of a mask's first visit (up to ~100 nodes), so it is flat: an explicit
        worklist instead of recursion, shifts (most steps) and reduction-free parser states
        handled inline instead of through `feed` / `acceptable`, a single group checked inline
        (`partial_allowed`), and several groups' selection looked up by the acceptable set
        (the parser's memo hands back the same frozenset objects, and a frozenset caches its
        hash, so a hit is one dict lookup)."""
        acceptable_of, feed = parser.acceptable, parser.feed
        shift_to, shift_only = parser.shift_to, parser.shift_only
        count, todo = 0, [(self, stack)]
        pop, push = todo.pop, todo.append
        while todo:
            node, stack = pop()
            top = stack[-1]
            num_groups = node.num_groups
            if not num_groups:  # a path only: feed its children's terminals, no acceptable set
                shifts = shift_to[top]
                for term, child in node.children.items():
                    state = shifts.get(term)
                    if state is not None:
                        push((child, stack + (state,)))
                    else:
                        fed = feed(stack, term)
                        if fed is not None:
                            push((child, fed))
                continue
            acceptable = shift_only.get(top)
            if acceptable is None:
                acceptable = acceptable_of(stack)
            if num_groups == 1:
                if not node.group_types[0].isdisjoint(acceptable) or (
                    node.always[0] and acceptable
                ):
                    ids, row, num = node.whole
                    count += num
                    if ids is None:
                        rows.append(row)
                    else:
                        small.append(ids)
            else:
                selections = node.selections
                selected = None if selections is None else selections.get(acceptable)
                if selected is None:
                    selected = node.select(acceptable)
                if selected[2]:
                    small += selected[0]
                    rows += selected[1]
                    count += selected[2]
            children = node.children
            if children and acceptable:
                shifts = shift_to[top]
                if len(children) <= len(acceptable):
                    for term, child in children.items():
                        if term in acceptable:
                            state = shifts.get(term)
                            push(
                                (
                                    child,
                                    stack + (state,) if state is not None else feed(stack, term),
                                )
                            )
                else:  # e.g. the root: a child per terminal, few of them acceptable
                    for term in acceptable:
                        child = children.get(term)
                        if child is not None:
                            state = shifts.get(term)
                            push(
                                (
                                    child,
                                    stack + (state,) if state is not None else feed(stack, term),
                                )
                            )
        return count

    def select(self, acceptable: frozenset[str]) -> Selection:
        """This node's allowed groups for a stack that accepts `acceptable` (a pure function of
        the set: computed once per set and kept in `selections`)."""
        types, by_type, always = self.by_type  # partial_allowed per group, by type
        hit = set(always) if acceptable else set()
        for t in types.intersection(acceptable):
            hit.update(by_type[t])
        parts = self.group_parts
        selected = [self.whole] if len(hit) == len(parts) else [parts[g] for g in sorted(hit)]
        out = (
            tuple([ids for ids, _, _ in selected if ids is not None]),
            tuple([row for _, row, _ in selected if row is not None]),
            sum([n for _, _, n in selected]),
        )
        if self.selections is None or len(self.selections) >= _SELECTIONS_LIMIT:
            self.selections = {}  # a bound on memory; a grammar has few distinct sets
        self.selections[acceptable] = out
        return out


def partial_allowed(types: frozenset[str], ignorable: bool, acceptable: frozenset[str]) -> bool:
    """May text end in a partial terminal of one of `types` (`ignorable`: or of an ignored one)
    when the parser accepts `acceptable` next? Ignored text (whitespace) only where some terminal
    may still follow it, so a finished parse continues with EOS alone."""
    return not types.isdisjoint(acceptable) or (ignorable and bool(acceptable))


def _part(ids: np.ndarray, num_words: int) -> Part:
    if len(ids) >= _ROW_MIN:
        return None, pack_ids(ids, num_words), len(ids)
    return ids.astype(np.intp).tobytes(), None, len(ids)


def ids_of(small: list[bytes]) -> np.ndarray:
    """The ids of short id lists (`Part`s' first items), as one intp array."""
    return np.frombuffer(b"".join(small), dtype=np.intp)


def pack_ids(ids: np.ndarray, num_words: int) -> np.ndarray:
    """uint32 [num_words] bitmask row (bit i of word i // 32 = id i allowed) of `ids`."""
    bits = np.zeros(num_words * 32, dtype=np.uint8)  # uint8, not bool: a cheaper scatter
    bits[ids] = 1
    return np.packbits(bits, bitorder="little").view("<u4")


class VocabLexer:
    """The vocabulary as a byte matrix, rows sorted by length (longest first), lexed per state."""

    def __init__(
        self,
        lexer: LexerDfa,
        token_bytes: tuple[bytes, ...],
        special_ids: frozenset[int],
        num_words: int,
    ) -> None:
        self.lexer = lexer
        self.num_words = num_words  # of the packed rows (>= the vocabulary's bits)
        ids = sorted(
            (i for i, b in enumerate(token_bytes) if b and i not in special_ids),
            key=lambda i: -len(token_bytes[i]),
        )
        self.ids = np.array(ids, dtype=np.int32)
        self.row_of = np.full(len(token_bytes), -1, dtype=np.int64)  # token id -> row (-1: none)
        self.row_of[self.ids] = np.arange(len(ids))
        width = len(token_bytes[ids[0]]) if ids else 0
        matrix = np.zeros((len(ids), width), dtype=np.uint8)  # [num_tokens, max_len]
        lengths = np.array([len(token_bytes[i]) for i in ids], dtype=np.int64)
        for row, i in enumerate(ids):
            matrix[row, : lengths[row]] = np.frombuffer(token_bytes[i], dtype=np.uint8)
        # rows still running at byte position k: the first active[k] rows
        self.active = [int(np.count_nonzero(lengths > k)) for k in range(width)]
        self.columns = [matrix[:n, k].astype(np.int32) for k, n in enumerate(self.active)]
        self.ignored_type = np.array([n in lexer.ignored for n in lexer.type_names] + [True])
        sets = {s: i for i, s in enumerate(dict.fromkeys(lexer.winnable))}
        self.kept_types = [s - lexer.ignored for s in sets]
        self._shared: dict[tuple, tuple] = {}
        self.ignorable = [not s.isdisjoint(lexer.ignored) for s in sets]
        self.state_set = np.array([sets[s] for s in lexer.winnable], dtype=np.int16)
        self.token_bytes = token_bytes
        self.base = len(lexer.type_names) + 1  # a completed sequence: digits t + 1 in this base
        self.limit = min(_SHORT, int(62 / np.log2(self.base + 1)))  # base ** limit fits in an int64
        self._kernel: cpu_vocab_lexer.VocabLexerKernel | bool | None = None  # False: numpy
        self._identity: np.ndarray | None = (
            None  # int16 [num_states]: final_outcomes groups by state
        )

    def index(self, q: int) -> SeqTrie:
        """Lex every token from lexer state q and group the ids by outcome."""
        root, names = SeqTrie(), self.lexer.type_names
        groups = self._kernel_groups(q) if self.uses_kernel() else self._numpy_groups(q)
        for seq, parts in groups:
            node = root
            for t in seq:
                node = node.child(names[t])
            node.fill(parts, self.kept_types, self.ignorable, self.num_words, self._shared)
        return root

    def uses_kernel(self) -> bool:
        """Whether `index` lexes in C (kernels/cpu_vocab_lexer); sets the C lexer up on the
        first call (its tables: ~10 ms, so compile-time callers make that call)."""
        if self._kernel is None:
            self._kernel = False
            if cpu_vocab_lexer.available():
                tokens = [self.token_bytes[i] for i in self.ids.tolist()]
                self._kernel = cpu_vocab_lexer.VocabLexerKernel(
                    self.lexer.trans,
                    self.lexer.emit,
                    self.ignored_type[:-1],
                    self.state_set,
                    tokens,
                    self.limit,
                )
        return self._kernel is not False

    def _kernel_groups(self, q: int):
        """(completed type ids, [(set index, ids)] in ascending set order) per distinct
        completed sequence, from the C lexer; rows completing more than `limit` types (runs
        of brackets) are lexed here."""
        found = self._kernel.lex(q)
        by_seq: dict[int | tuple, list[tuple[int, np.ndarray]]] = {}
        bounds = found.start.tolist()
        for g, (key, set_index) in enumerate(zip(found.key.tolist(), found.sets.tolist())):
            by_seq.setdefault(key, []).append(
                (set_index, self.ids[found.order[bounds[g] : bounds[g + 1]]])
            )
        long_rows: dict[tuple, list[int]] = {}  # (sequence, set index) -> rows
        for row in np.flatnonzero(found.row_group == cpu_vocab_lexer.LONG_ROW).tolist():
            state, seq = self._lex_row(q, row)
            long_rows.setdefault((tuple(seq), int(self.state_set[state])), []).append(row)
        for (seq, set_index), rows in long_rows.items():
            by_seq.setdefault(seq, []).append((set_index, self.ids[rows]))
        for key, parts in by_seq.items():
            parts.sort(key=lambda part: part[0])
            yield (list(key) if isinstance(key, tuple) else self._digits(key)), parts

    def _lex_row(self, q: int, row: int) -> tuple[int, list[int]]:
        """One live row's final state and completed non-ignored types."""
        trans, emit, ignored, seq = (
            self.lexer.trans_rows,
            self.lexer.emit_rows,
            self.ignored_type,
            [],
        )
        for b in self.token_bytes[int(self.ids[row])]:
            e, q = emit[q][b], trans[q][b]
            if e >= 0 and not ignored[e]:
                seq.append(e)
        return q, seq

    def final_outcomes(self, q: int) -> tuple[np.ndarray, list[tuple[int, tuple[int, ...]]]]:
        """Per row, the index of its outcome from lexer state q; the outcomes as (final lexer
        state, completed non-ignored type ids). Dead rows share (DEAD, ())."""
        if (
            not self.uses_kernel() or self.lexer.num_states > np.iinfo(np.int16).max
        ):  # (states as int16 sets)
            states, seqs, counts = self.outcomes(q)
            seq_ids, found = self.sequence_ids(states, seqs, counts)
            _, first, outcome_of = np.unique(
                seq_ids * self.lexer.num_states + states, return_index=True, return_inverse=True
            )
            return outcome_of.reshape(-1), [
                (int(states[r]), tuple(found[seq_ids[r]]) if seq_ids[r] >= 0 else ())
                for r in first.tolist()
            ]
        if self._identity is None:
            self._identity = np.arange(self.lexer.num_states, dtype=np.int16)
        found = self._kernel.lex(q, self._identity)
        outcomes = [
            (s, tuple(self._digits(k))) for k, s in zip(found.key.tolist(), found.sets.tolist())
        ]
        outcome_of = np.full(
            len(self.ids), len(outcomes), dtype=np.int64
        )  # dead rows: the next one
        outcome_of[found.order] = np.repeat(np.arange(len(outcomes)), np.diff(found.start))
        outcomes.append((DEAD, ()))
        extra: dict[tuple, int] = {}
        for row in np.flatnonzero(found.row_group == cpu_vocab_lexer.LONG_ROW).tolist():
            state, seq = self._lex_row(q, row)
            outcome_of[row] = extra.setdefault((state, tuple(seq)), len(outcomes) + len(extra))
        return outcome_of, outcomes + list(extra)

    def _digits(self, key: int) -> list[int]:
        """The type ids a sequence key stands for (cpu_vocab_lexer.sequence_key inverted)."""
        seq = []
        while key:
            key, digit = divmod(key, self.base)
            seq.append(digit - 1)
        return seq[::-1]

    def _numpy_groups(self, q: int):
        states, seqs, counts = self.outcomes(q)
        for seq, rows in self.sequences(states, seqs, counts):
            yield seq, self._by_set(rows, states[rows])

    def _by_set(self, rows: np.ndarray, states: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Rows (ascending) ending in `states`, as (set index, ids) in ascending set order."""
        ids, sets = self.ids[rows], self.state_set[states]
        return [(int(i), ids[sets == i]) for i in np.flatnonzero(np.bincount(sets))]

    def sequence_ids(
        self, states: np.ndarray, seqs: np.ndarray, counts: np.ndarray
    ) -> tuple[np.ndarray, list[list[int]]]:
        """(per row, the index of its completed sequence among the distinct ones, -1 for dead
        rows; those sequences). Rows completing at most `limit` terminals are keyed by one int64
        (digits in base number of types + 1); the rare longer ones (runs of brackets, dashes,
        ...) go through a dict and come after them."""
        alive, base = states != DEAD, self.base
        limit = self.limit
        short = np.flatnonzero(alive & (counts <= limit))
        keys = np.zeros(len(short), dtype=np.int64)
        for j in range(limit):
            keys = keys * base + (seqs[short, j].astype(np.int64) + 1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        ids = np.full(len(states), -1, dtype=np.int64)
        ids[short] = inverse.reshape(-1)
        found = [seqs[row, : counts[row]].tolist() for row in short[first].tolist()]
        long_ids: dict[tuple, int] = {}
        for row in np.flatnonzero(alive & (counts > limit)).tolist():
            seq = tuple(seqs[row, : counts[row]].tolist())
            if seq not in long_ids:
                long_ids[seq] = len(found)
                found.append(list(seq))
            ids[row] = long_ids[seq]
        return ids, found

    def sequences(self, states: np.ndarray, seqs: np.ndarray, counts: np.ndarray):
        """Yield (completed type ids, row indices) per distinct completed sequence
        (`sequence_ids`), rows in ascending order."""
        ids, found = self.sequence_ids(states, seqs, counts)
        order = np.argsort(ids, kind="stable")
        bounds = np.searchsorted(ids[order], np.arange(len(found) + 1))
        for g, seq in enumerate(found):
            yield seq, order[bounds[g] : bounds[g + 1]]

    def outcomes(self, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: the final lexer state, the completed non-ignored types (-1 padded) and
        their number."""
        trans, emit = self.lexer.trans.ravel(), self.lexer.emit.ravel()
        num_rows = len(self.ids)
        states = np.full(num_rows, q, dtype=np.int32)
        counts = np.zeros(num_rows, dtype=np.int32)
        events: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (rows, slot, type)
        for k, n in enumerate(self.active):
            flat = (states[:n] << 8) | self.columns[k]
            emitted = emit[flat]
            states[:n] = trans[flat]
            hit = np.flatnonzero(~self.ignored_type[emitted])  # -1 (no emit) maps to True
            if hit.size:
                events.append((hit, counts[hit], emitted[hit]))
                counts[hit] += 1
        seqs = np.full(
            (num_rows, max(_SHORT, int(counts.max()) if num_rows else 1)), -1, dtype=np.int16
        )
        for rows, slots, types in events:
            seqs[rows, slots] = types
        return states, seqs, counts

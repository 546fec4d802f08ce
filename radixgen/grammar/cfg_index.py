"""Per-lexer-state vocabulary index: what each token does from a given lexer state.

Lexing is context-free (cfg_lexer), so from lexer state q every token deterministically yields
(the terminals it completes, the set of types its trailing partial terminal may still become).
`VocabLexer.index(q)` lexes the whole vocabulary from q at once (numpy, one gather per byte
position) and groups token ids by that outcome into a `SeqTrie`: a trie over completed-terminal
sequences (ignored terminals dropped) whose nodes hold `(possible types, token ids)` groups.
A token is then allowed for a parser stack iff the parser accepts its terminal sequence and one
of its possible trailing types is acceptable afterwards (or ignored): `SeqTrie.collect` walks the
trie with the parser and prunes a whole subtree at the first terminal the parser rejects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from radixgen.grammar.cfg_lexer import DEAD, LexerDfa
from radixgen.grammar.cfg_parser import LalrTables, Stack

_SHORT = 6


@dataclass
class SeqTrie:
    """A node = one sequence of completed terminals. Its tokens are grouped by the set of types
    their trailing partial terminal may still become: group g allows `type_names[j]` iff
    `group_types[g, j]`; `always[g]` if one of them is ignored (whitespace)."""

    children: dict[str, "SeqTrie"] = field(default_factory=dict)
    type_names: tuple[str, ...] = ()
    group_types: np.ndarray | None = None  # bool [num_groups, num_type_names]
    always: np.ndarray | None = None  # bool [num_groups]
    always_first: bool = False
    ids: np.ndarray | None = None  # int32 [num_ids]: the node's token ids
    row_group: np.ndarray | None = None  # uint16 [num_ids]: group of each id (None: one group)

    def child(self, name: str) -> "SeqTrie":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = SeqTrie()
        return node

    def fill(self, ids: np.ndarray, set_ids: np.ndarray, type_sets: list[frozenset[str]],
             ignored: frozenset[str]) -> None:
        """Set this node's tokens: ids with, per id, the index of its trailing type set."""
        present = np.bincount(set_ids, minlength=len(type_sets)) > 0
        row_group = (np.cumsum(present) - 1)[set_ids]  # renumber the set ids present, 0..
        sets = [type_sets[i] for i in np.flatnonzero(present).tolist()]
        self.type_names = tuple(sorted(set().union(*sets) - ignored))
        col = {n: i for i, n in enumerate(self.type_names)}
        self.group_types = np.zeros((len(sets), len(col)), dtype=bool)
        for g, types in enumerate(sets):
            self.group_types[g, [col[t] for t in types if t in col]] = True
        self.always = np.array([not t.isdisjoint(ignored) for t in sets], dtype=bool)
        self.always_first = bool(self.always[0])
        self.ids = ids.astype(np.int32)
        self.row_group = row_group.astype(np.uint16) if len(sets) > 1 else None

    def collect(self, parser: LalrTables, stack: Stack, out: list[np.ndarray]) -> None:
        """Append to `out` the ids of every group the parser allows from `stack`. Only a
        terminal whose top-state action is a reduction needs simulating (memoised)."""
        actions = parser.actions[stack[-1]]
        if self.ids is not None:  # a node may be only a path to deeper ones
            # ignored text (whitespace) only where a terminal may still follow it
            may_ignore = parser.can_continue(stack)
            if self.row_group is None:  # one group (the common case): no numpy
                if (self.always_first and may_ignore) or any(parser.accepts(stack, t) for t in self.type_names):
                    out.append(self.ids)
            else:
                ok = np.fromiter((parser.accepts(stack, t) for t in self.type_names),
                                 dtype=bool, count=len(self.type_names))
                selected = (self.always & may_ignore) | (self.group_types & ok).any(axis=1)
                if selected.all():
                    out.append(self.ids)
                elif selected.any():
                    out.append(self.ids[selected[self.row_group]])
        for term, child in self.children.items():
            if term in actions:
                nxt = parser.feed(stack, term)
                if nxt is not None:
                    child.collect(parser, nxt, out)


class VocabLexer:
    """The vocabulary as a byte matrix, rows sorted by length (longest first), lexed per state."""

    def __init__(self, lexer: LexerDfa, token_bytes: tuple[bytes, ...],
                 special_ids: frozenset[int]) -> None:
        self.lexer = lexer
        ids = sorted((i for i, b in enumerate(token_bytes) if b and i not in special_ids),
                     key=lambda i: -len(token_bytes[i]))
        self.ids = np.array(ids, dtype=np.int32)
        width = len(token_bytes[ids[0]]) if ids else 0
        matrix = np.zeros((len(ids), width), dtype=np.uint8)  # [num_tokens, max_len]
        lengths = np.array([len(token_bytes[i]) for i in ids], dtype=np.int64)
        for row, i in enumerate(ids):
            matrix[row, :lengths[row]] = np.frombuffer(token_bytes[i], dtype=np.uint8)
        # rows still running at byte position k: the first active[k] rows
        self.active = [int(np.count_nonzero(lengths > k)) for k in range(width)]
        self.columns = [matrix[:n, k].astype(np.int32) for k, n in enumerate(self.active)]
        self.ignored_type = np.array([n in lexer.ignored for n in lexer.type_names] + [True])
        sets = {s: i for i, s in enumerate(dict.fromkeys(lexer.winnable))}
        self.type_sets = list(sets)
        self.state_set = np.array([sets[s] for s in lexer.winnable], dtype=np.int16)

    def index(self, q: int) -> SeqTrie:
        """Lex every token from lexer state q and group the ids by outcome."""
        states, seqs, counts = self._run(q)
        root, names = SeqTrie(), self.lexer.type_names
        set_ids = self.state_set[states]
        for seq, rows in self._nodes(states, seqs, counts):
            node = root
            for t in seq:
                node = node.child(names[t])
            node.fill(self.ids[rows], set_ids[rows], self.type_sets, self.lexer.ignored)
        return root

    def _nodes(self, states: np.ndarray, seqs: np.ndarray, counts: np.ndarray):
        """Yield (completed type ids, row indices) per distinct completed sequence. Rows
        completing at most `limit` terminals are keyed by one int64 (digits in base number of
        types + 1); the rare longer ones (runs of brackets, dashes, ...) go through a dict."""
        alive = states != DEAD
        base = len(self.lexer.type_names) + 1
        limit = min(_SHORT, int(62 / np.log2(base + 1)))  # base ** limit fits in an int64
        short = np.flatnonzero(alive & (counts <= limit))
        keys = np.zeros(len(short), dtype=np.int64)
        for j in range(limit):
            keys = keys * base + (seqs[short, j].astype(np.int64) + 1)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        order = np.argsort(inverse.reshape(-1), kind="stable")
        bounds = np.searchsorted(inverse.reshape(-1)[order], np.arange(len(uniq) + 1))
        for g, row in enumerate(short[first].tolist()):
            yield seqs[row, :counts[row]].tolist(), short[order[bounds[g]:bounds[g + 1]]]
        long_rows: dict[tuple, list[int]] = {}
        for row in np.flatnonzero(alive & (counts > limit)).tolist():
            long_rows.setdefault(tuple(seqs[row, :counts[row]].tolist()), []).append(row)
        for seq, rows in long_rows.items():
            yield list(seq), np.array(rows, dtype=np.int64)

    def _run(self, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        seqs = np.full((num_rows, max(_SHORT, int(counts.max()) if num_rows else 1)), -1, dtype=np.int16)
        for rows, slots, types in events:
            seqs[rows, slots] = types
        return states, seqs, counts

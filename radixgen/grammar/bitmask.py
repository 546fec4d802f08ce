"""Token bitmasks: int32 `[batch, ceil(vocab / 32)]`, bit (t % 32) of word (t // 32) = token t.

The runtime allocates one bitmask per batch (`allocate_bitmask`), lets each constrained request's
matcher fill its row, fills the rows of unconstrained requests with `fill_all`, and masks the
logits with `apply_bitmask` before sampling.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

import numpy as np
import torch

from radixgen.kernels import apply_token_bitmask


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words that hold one row of `vocab_size` bits."""
    return (vocab_size + 31) // 32


def allocate_bitmask(batch: int, vocab_size: int, pin_memory: bool = False) -> torch.Tensor:
    """A CPU int32 bitmask `[batch, ceil(vocab_size / 32)]` with every bit set.
    `pin_memory=True` (with CUDA available) lets `apply_bitmask` copy it asynchronously."""
    pin = pin_memory and torch.cuda.is_available()
    return torch.full((batch, bitmask_words(vocab_size)), -1, dtype=torch.int32, pin_memory=pin)


def fill_all(bitmask: torch.Tensor, row: int | None = None) -> None:
    """Allow every token in `row` (every row when None): the rows of unconstrained requests, so
    one `apply_bitmask` over the whole batch leaves their logits unchanged."""
    if row is None:
        bitmask.fill_(-1)
    else:
        bitmask[row].fill_(-1)


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set disallowed logits to -inf in place. logits `[batch, vocab]` (CPU: torch reference;
    CUDA: the Triton kernel, the bitmask is copied to the GPU); bitmask int32 `[batch, words]`.
    Columns beyond 32 * words are disallowed. Raises ValueError on shape/dtype mismatch."""
    apply_token_bitmask(logits, bitmask)


_last_view: list = [None, 0, None]  # weakref to the last bitmask seen, its data_ptr, its numpy view


def numpy_rows(bitmask: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU int32 bitmask, cached for the last tensor seen: matchers fill one
    row per request per step, and `Tensor.numpy()` costs more than the row copy itself."""
    ref, ptr, view = _last_view
    if ref is not None and ref() is bitmask and ptr == bitmask.data_ptr():
        return view
    view = bitmask.numpy()
    _last_view[:] = [weakref.ref(bitmask), bitmask.data_ptr(), view]
    return view


class RowMasker:
    """Masks CPU logits one row at a time from bitmask rows, without unpacking the whole batch.

    `apply_bitmask` on the CPU expands every row into 32 x words booleans through several
    full-batch temporaries; at batch 48 and a 49k vocabulary that costs tens of ms per decode step
    on these machines (mostly page faults of fresh allocations). Grammar rows repeat (a JSON-schema
    automaton has a few hundred distinct rows, visited again and again), so this caches, per
    distinct row, the shorter of its allowed and its banned id lists, and masks a row with that:
    `index_fill_` of the banned ids, or save the allowed logits, fill the row with -inf and put
    them back. The result is exactly `apply_bitmask`'s (same -inf positions, other logits
    untouched, columns beyond 32 x words banned). The cache is LRU-bounded by bytes."""

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._cache: OrderedDict[tuple[bytes, int], tuple[bool, torch.Tensor]] = OrderedDict()
        self._bytes = 0

    def ids(self, words: np.ndarray, width: int) -> tuple[bool, torch.Tensor]:
        """(True, allowed ids) or (False, banned ids) of one bitmask row over `width` logit
        columns, whichever list is shorter."""
        key = (words.tobytes(), width)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        bits = np.unpackbits(
            np.ascontiguousarray(words, dtype="<i4").view(np.uint8), bitorder="little"
        )
        allowed = np.zeros(width, dtype=bool)
        n = min(width, bits.shape[0])
        allowed[:n] = bits[:n].view(bool)
        num_allowed = int(np.count_nonzero(allowed))
        keep = num_allowed <= width - num_allowed
        ids = torch.from_numpy(np.flatnonzero(allowed if keep else ~allowed).astype(np.int64))
        self._cache[key] = (keep, ids)
        self._bytes += ids.numel() * 8 + len(key[0])
        while self._bytes > self.max_bytes and len(self._cache) > 1:
            (old, _), (_, old_ids) = self._cache.popitem(last=False)
            self._bytes -= old_ids.numel() * 8 + len(old)
        return keep, ids

    def apply_row(self, logits_row: torch.Tensor, words: np.ndarray) -> None:
        """Set the disallowed entries of one CPU logits row (1-D) to -inf in place."""
        keep, ids = self.ids(words, logits_row.shape[0])
        if not keep:
            if ids.numel():
                logits_row.index_fill_(0, ids, float("-inf"))
        elif ids.numel() == 0:
            logits_row.fill_(float("-inf"))
        else:
            kept = logits_row.index_select(0, ids)
            logits_row.fill_(float("-inf"))
            logits_row.index_copy_(0, ids, kept)


def pack_token_ids(token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """One bitmask row (int32 `[words]`) with exactly `token_ids` set (ids < vocab_size)."""
    bits = np.zeros(bitmask_words(vocab_size) * 32, dtype=bool)
    bits[token_ids] = True
    return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32, copy=False)


def unpack_row(row: torch.Tensor | np.ndarray, vocab_size: int) -> np.ndarray:
    """The allowed token ids of one bitmask row (ascending), for tests and debugging."""
    words = np.asarray(row, dtype=np.int32).astype("<i4", copy=False)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)

"""Lex the whole vocabulary from one lexer state, in C (`csrc/vocab_lexer.c`).

The grammar's vocabulary index (grammar/cfg_index.py) needs, per lexer state, every token's
outcome: the types its bytes complete and the winnable-set index of the state it ends in.
`VocabLexerKernel.lex(q)` walks each token once (stopping where it dies) and groups the live
tokens by (completed sequence, final set) with a hash table: ~0.3 ms for SmolLM2's 49k tokens,
against ~3 ms for numpy's column-at-a-time lexing, which stays the fallback. `lex_vocab_ref` is
the same in plain Python, for tests.

The library is compiled once per machine on first use (the C compiler `cc`, ~0.1 s) into the
radixgen cache directory, keyed by the source, the flags and the CPU's feature flags. Without a
compiler, or with RADIXGEN_CPU_KERNELS=0, `available()` is False and callers keep numpy.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np

from radixgen.kernels.cpu_build import build_dir, load_once

_SOURCE = Path(__file__).with_name("csrc") / "vocab_lexer.c"
_CFLAGS = ["-O3", "-march=native", "-shared", "-fPIC"]
DEAD_ROW, LONG_ROW = (
    -1,
    -2,
)  # row_group values: the token dies; it completes more than `limit` types
_state: dict[str, object] = {}
_lock = threading.Lock()


class Groups(NamedTuple):
    """Tokens (vocabulary rows) grouped by outcome. Group g = rows order[start[g]:start[g+1]]
    (ascending), which complete the sequence keyed `key[g]` and end in a state of set `sets[g]`.
    row_group [num_rows]: each row's group, DEAD_ROW or LONG_ROW (the caller keys those)."""

    row_group: np.ndarray  # int64 [num_rows]
    key: np.ndarray  # int64 [num_groups]
    sets: np.ndarray  # int32 [num_groups]
    start: np.ndarray  # int64 [num_groups + 1]
    order: np.ndarray  # int32 [number of grouped rows]


def sequence_key(types: list[int], base: int) -> int:
    """The int64 key of a completed sequence of type ids (digits t + 1 in `base`)."""
    key = 0
    for t in types:
        key = key * base + t + 1
    return key


class VocabLexerKernel:
    """A lexer's tables and a vocabulary, checked once, for `lex` from any state.

    trans int32 [num_states, 256] (0: dead), emit int16 [num_states, 256] (the type a byte
    completes, or -1), ignored bool [num_types], state_set int16 [num_states], tokens: one
    bytes object per row. Sequences keep their first `limit` types in an int64 key, so
    (num_types + 1) ** limit must stay below 2 ** 63."""

    def __init__(
        self,
        trans: np.ndarray,
        emit: np.ndarray,
        ignored: np.ndarray,
        state_set: np.ndarray,
        tokens: list[bytes],
        limit: int,
    ) -> None:
        num_states, num_types = trans.shape[0], len(ignored)
        if (
            trans.shape != (num_states, 256)
            or emit.shape != trans.shape
            or state_set.shape != (num_states,)
        ):
            raise ValueError("trans and emit must be [num_states, 256], state_set [num_states]")
        if num_states and (trans.min() < 0 or trans.max() >= num_states):
            raise ValueError(f"trans must lie in [0, {num_states})")
        if num_states and (emit.min() < -1 or emit.max() >= num_types):
            raise ValueError(f"emit must lie in [-1, {num_types})")
        if limit < 0 or (num_types + 1) ** limit >= 2**63:
            raise ValueError(f"(num_types + 1) ** limit must fit in an int64, got limit {limit}")
        self.trans = np.ascontiguousarray(trans, dtype=np.int32)
        self.emit = np.ascontiguousarray(emit, dtype=np.int16)
        self.ignored = np.ascontiguousarray(ignored, dtype=np.uint8)
        self.state_set = np.ascontiguousarray(state_set, dtype=np.int16)
        self.data = np.frombuffer(b"".join(tokens) or b"\0", dtype=np.uint8)
        self.offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        self.offsets[1:] = np.cumsum([len(t) for t in tokens])
        self.num_rows, self.base, self.limit = len(tokens), num_types + 1, limit
        self.table_size = 1 << max(4, (2 * len(tokens)).bit_length())

    def lex(self, q: int, state_set: np.ndarray | None = None) -> Groups:
        """Groups of the tokens lexed from state q; `state_set`: another int16 [num_states]
        to group final states by (an identity: by the state itself)."""
        if not 0 <= q < len(self.state_set):
            raise ValueError(f"lexer state {q} out of range")
        if state_set is None:
            state_set = self.state_set
        elif (
            state_set.dtype != np.int16
            or state_set.shape != self.state_set.shape
            or not state_set.flags.c_contiguous
        ):
            raise ValueError("state_set must be a contiguous int16 [num_states]")
        if not available():
            raise RuntimeError(f"the C vocabulary lexer is not available: {_state.get('error')}")
        n = self.num_rows
        row_group = np.empty(n, dtype=np.int64)
        key, sets = np.empty(n + 1, dtype=np.int64), np.empty(n + 1, dtype=np.int32)
        start, order = np.empty(n + 2, dtype=np.int64), np.empty(n, dtype=np.int32)
        table = np.full(self.table_size, -1, dtype=np.int32)
        ptr = ctypes.c_void_p
        num_groups = _state["lib"].lex_vocab(
            ptr(self.trans.ctypes.data),
            ptr(self.emit.ctypes.data),
            ptr(self.ignored.ctypes.data),
            ptr(state_set.ctypes.data),
            ptr(self.data.ctypes.data),
            ptr(self.offsets.ctypes.data),
            n,
            q,
            self.base,
            self.limit,
            ptr(row_group.ctypes.data),
            ptr(key.ctypes.data),
            ptr(sets.ctypes.data),
            ptr(start.ctypes.data),
            ptr(order.ctypes.data),
            ptr(table.ctypes.data),
            self.table_size,
        )
        return Groups(
            row_group,
            key[:num_groups],
            sets[:num_groups],
            start[: num_groups + 1],
            order[: start[num_groups]],
        )


def lex_vocab_ref(kernel: VocabLexerKernel, q: int, state_set: np.ndarray | None = None) -> Groups:
    """`VocabLexerKernel.lex` in plain Python (one row at a time)."""
    state_set = kernel.state_set if state_set is None else state_set
    row_group, found, rows_of = [], {}, []
    for r in range(kernel.num_rows):
        s, types = q, []
        for b in kernel.data[kernel.offsets[r] : kernel.offsets[r + 1]].tolist():
            e, s = int(kernel.emit[s, b]), int(kernel.trans[s, b])
            if s == 0:
                break
            if e >= 0 and not kernel.ignored[e]:
                types.append(e)
        if s == 0 or len(types) > kernel.limit:
            row_group.append(DEAD_ROW if s == 0 else LONG_ROW)
            continue
        g = found.setdefault((sequence_key(types, kernel.base), int(state_set[s])), len(found))
        if g == len(rows_of):
            rows_of.append([])
        rows_of[g].append(r)
        row_group.append(g)
    sizes = np.array([0] + [len(rows) for rows in rows_of], dtype=np.int64)
    return Groups(
        np.array(row_group, dtype=np.int64),
        np.array([k for k, _ in found], dtype=np.int64),
        np.array([s for _, s in found], dtype=np.int32),
        np.cumsum(sizes),
        np.array([r for rows in rows_of for r in rows], dtype=np.int32),
    )


def available() -> bool:
    """True once the library is compiled and loaded (compiles it on the first call)."""
    return load_once(_state, _lock, "C vocabulary lexer", "numpy", _load)


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(_build()))
    lib.lex_vocab.restype = ctypes.c_int64
    lib.lex_vocab.argtypes = (
        [ctypes.c_void_p] * 6
        + [ctypes.c_int64, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]
        + [ctypes.c_void_p] * 6
        + [ctypes.c_int64]
    )
    return lib


def _build() -> Path:
    """Compile into the cache (to a temporary name, then renamed: another process may build
    the same library at the same time) unless it is there."""
    folder = build_dir("vocab_lexer", _SOURCE.read_bytes(), " ".join(_CFLAGS).encode())
    library = folder / "vocab_lexer.so"
    if library.exists():
        return library
    compiler = (
        os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    )
    if compiler is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"vocab_lexer.{os.getpid()}.{threading.get_ident()}.so"
    done = subprocess.run(
        [compiler, *_CFLAGS, "-o", str(partial), str(_SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode:
        raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
    os.replace(partial, library)
    return library

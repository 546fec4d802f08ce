"""Paged decode attention on the CPU (a C++ kernel, `csrc/cpu_decode_attention.cpp`).

One query token per request attends over KV rows read straight from a float32 / bfloat16 pool
through slot lists: no gather copy of the KV (the torch path copies every row it attends to,
then SDPA reads the copy again), GQA folded in, softmax in float32. A request's keys are its
own slots plus, optionally, the shared segments of the groups it belongs to (`SharedSegments`:
a system prompt many requests point at). A shared segment is read once for its whole group, its
members' queries scored against it as one small GEMM, and merged with each member's own part
inside the kernel (cascade attention, see runtime/cascade.py for the merge math). Returns the
output and the log-sum-exp of the scaled scores.

The kernel is compiled once per machine on first use (torch.utils.cpp_extension, g++ with
-march=native, ~30-60 s on 2 cores) into the radixgen cache directory, keyed by the CPU's
feature flags and the torch version. Without a compiler, or with RADIXGEN_CPU_KERNELS=0,
`available()` is False and callers keep the torch path.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import torch

from radixgen.kernels.cpu_build import build_dir, load_once

_SOURCE = Path(__file__).with_name("csrc") / "cpu_decode_attention.cpp"
_CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno"]
_MAX_GROUP, _MAX_HEAD_DIM = 16, 256  # the head shapes the kernel is built and tested for
_DTYPES = (torch.float32, torch.bfloat16)
_state: dict[str, object] = {}
_lock = threading.Lock()


def available() -> bool:
    """True once the kernel is compiled and loaded (compiles it on the first call)."""
    return load_once(_state, _lock, "CPU decode kernel", "the torch path", _load)


class SharedSegments(NamedTuple):
    """Shared KV segments as CSR: segment i is slots[slot_offsets[i]:slot_offsets[i+1]], read by
    the batch rows members[member_offsets[i]:member_offsets[i+1]]. All int64."""

    slots: torch.Tensor
    slot_offsets: torch.Tensor
    members: torch.Tensor
    member_offsets: torch.Tensor

    @classmethod
    def build(cls, segments: list[tuple[torch.Tensor, torch.Tensor]]) -> "SharedSegments":
        """From (slots, members) pairs."""

        def csr(parts):
            lens = torch.tensor([len(p) for p in parts], dtype=torch.int64)
            flat = (
                torch.cat([p.reshape(-1).to(torch.int64) for p in parts])
                if parts
                else torch.empty(0, dtype=torch.int64)
            )
            return flat.cpu().contiguous(), torch.cat([lens.new_zeros(1), lens.cumsum(0)])

        slots, slot_offsets = csr([s for s, _ in segments])
        members, member_offsets = csr([m for _, m in segments])
        return cls(slots, slot_offsets, members, member_offsets)


NO_SEGMENTS = SharedSegments.build([])


def cpu_decode_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    slots: torch.Tensor,
    lens: torch.Tensor,
    scale: float | None = None,
    shared: SharedSegments = NO_SEGMENTS,
    validate: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, Hq, D] over the pool rows slots[b, :lens[b]] of k_pool / v_pool [num_slots, Hkv, D],
    plus the shared segments row b is a member of -> output [B, Hq, D] (q's dtype) and
    log-sum-exp [B, Hq] (float32; -inf where a row has no keys at all). validate=False skips
    the input checks (for a caller that checked the same slots and shapes once per forward)."""
    if validate:
        _check(q, k_pool, v_pool, slots, lens)
        _check_shared(shared, q.shape[0], k_pool.shape[0])
    if not available():
        raise RuntimeError(f"the CPU decode kernel is not available: {_state.get('error')}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return torch.ops.radixgen_cpu.decode_attention(q, k_pool, v_pool, slots, lens, *shared, scale)


def cpu_decode_attention_ref(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    slots: torch.Tensor,
    lens: torch.Tensor,
    scale: float | None = None,
    shared: SharedSegments = NO_SEGMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same in float64 torch (each row's keys gathered into one list, masked softmax)."""
    if len(shared.slot_offsets) > 1:
        rows = [slots[i, : int(n)] for i, n in enumerate(lens)]
        for i in range(len(shared.slot_offsets) - 1):
            seg = shared.slots[shared.slot_offsets[i] : shared.slot_offsets[i + 1]]
            for r in shared.members[
                shared.member_offsets[i] : shared.member_offsets[i + 1]
            ].tolist():
                rows[r] = torch.cat([seg, rows[r]])
        lens = torch.tensor([len(r) for r in rows], dtype=torch.int64)
        slots = torch.zeros(len(rows), max(1, int(lens.max())), dtype=torch.int64)
        for i, r in enumerate(rows):
            slots[i, : len(r)] = r
    b, hq, d = q.shape
    group = hq // k_pool.shape[1]
    scale = d**-0.5 if scale is None else float(scale)
    keys = k_pool[slots].double().repeat_interleave(group, dim=2)  # [B, L, Hq, D]
    values = v_pool[slots].double().repeat_interleave(group, dim=2)
    scores = torch.einsum("bhd,blhd->bhl", q.double(), keys) * scale
    valid = torch.arange(slots.shape[1])[None, :] < lens[:, None]  # [B, L]
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # [B, Hq]
    probs = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    out = torch.einsum("bhl,blhd->bhd", probs, values)
    return out.to(q.dtype), lse.float()


def _check(q, k_pool, v_pool, slots, lens) -> None:
    if any(t.device.type != "cpu" for t in (q, k_pool, v_pool, slots, lens)):
        raise ValueError("cpu_decode_attention takes CPU tensors")
    if q.dtype not in _DTYPES or k_pool.dtype != q.dtype or v_pool.dtype != q.dtype:
        raise ValueError(
            f"q, k_pool, v_pool must share one dtype of {_DTYPES}, got "
            f"{q.dtype}, {k_pool.dtype}, {v_pool.dtype}"
        )
    if q.dim() != 3 or q.stride(2) != 1:
        raise ValueError(f"q must be [B, Hq, D] with a contiguous last dim, got {tuple(q.shape)}")
    if (
        k_pool.dim() != 3
        or k_pool.shape != v_pool.shape
        or not (k_pool.is_contiguous() and v_pool.is_contiguous())
    ):
        raise ValueError("k_pool and v_pool must be contiguous [num_slots, Hkv, D] of one shape")
    b, hq, d = q.shape
    hkv = k_pool.shape[1]
    if k_pool.shape[2] != d or hq % hkv or hq // hkv > _MAX_GROUP or d > _MAX_HEAD_DIM:
        raise ValueError(
            f"unsupported heads: q {tuple(q.shape)}, pool {tuple(k_pool.shape)} "
            f"(Hq a multiple of Hkv, at most {_MAX_GROUP}x; D <= {_MAX_HEAD_DIM})"
        )
    if (
        slots.dtype != torch.int64
        or slots.dim() != 2
        or slots.shape[0] != b
        or slots.stride(1) != 1
    ):
        raise ValueError(
            f"slots must be int64 [B, L] with contiguous rows, got {slots.dtype} {tuple(slots.shape)}"
        )
    if lens.dtype != torch.int64 or lens.shape != (b,) or not lens.is_contiguous():
        raise ValueError(f"lens must be contiguous int64 [B], got {lens.dtype} {tuple(lens.shape)}")
    if b and (int(lens.min()) < 0 or int(lens.max()) > slots.shape[1]):
        raise ValueError("lens must lie in [0, slots.shape[1]]")
    if slots.numel() and (int(slots.min()) < 0 or int(slots.max()) >= k_pool.shape[0]):
        raise ValueError(f"slots must lie in [0, {k_pool.shape[0]})")


def _check_shared(shared: SharedSegments, batch: int, num_slots: int) -> None:
    if any(
        t.dtype != torch.int64 or t.dim() != 1 or not t.is_contiguous() or t.device.type != "cpu"
        for t in shared
    ):
        raise ValueError("shared segments must be contiguous 1-D int64 CPU tensors")
    for flat, offsets, bound, what in (
        (shared.slots, shared.slot_offsets, num_slots, "slots"),
        (shared.members, shared.member_offsets, batch, "members"),
    ):
        if (
            len(offsets) != len(shared.slot_offsets)
            or int(offsets[0]) != 0
            or int(offsets[-1]) != len(flat)
            or bool((offsets.diff() < 0).any())
        ):
            raise ValueError(
                f"shared segment {what} offsets must run from 0 to {len(flat)}, one per segment"
            )
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= bound):
            raise ValueError(f"shared segment {what} must lie in [0, {bound})")


def _load() -> None:
    from torch.utils.cpp_extension import load

    _find_ninja()
    build = _build_dir()
    build.mkdir(parents=True, exist_ok=True)
    load(
        name="radixgen_cpu_decode",
        sources=[str(_SOURCE)],
        extra_cflags=_CFLAGS,
        extra_ldflags=["-fopenmp"],
        build_directory=str(build),
        is_python_module=False,
        verbose=False,
    )


def _find_ninja() -> None:
    """torch runs `ninja` from PATH; the `ninja` wheel puts it beside this Python, which is not on
    PATH when the venv's python is run without activating the venv."""
    bindir = os.path.dirname(sys.executable)
    if shutil.which("ninja") is None and shutil.which("ninja", path=bindir):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def _build_dir() -> Path:
    """Per source, flags, torch version and CPU features (cpu_build.build_dir)."""
    return build_dir(
        "cpu_kernels", _SOURCE.read_bytes(), " ".join(_CFLAGS).encode(), torch.__version__.encode()
    )

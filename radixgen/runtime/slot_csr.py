"""The CSR of a batch's KV slots that the paged attention kernels read: per pool part (a mixed
pool's prefix and branch, or the whole pool), each request's slots in that part, rebased to the
part's first slot. `slot_csr` builds it from the lengths the host knows; `slot_csr_padded`
from lengths on the device with fixed shapes only, so a CUDA graph can capture it
(runtime/cuda_graph.py).
"""

from __future__ import annotations

import torch


def pool_parts(pool) -> list[tuple[object, int, int]]:
    """(sub-pool, first slot, end slot) of each precision a pool holds."""
    if hasattr(pool, "boundary"):  # MixedKVPool
        return [(pool.prefix, 0, pool.boundary), (pool.branch, pool.boundary, pool.num_slots)]
    return [(pool, 0, pool.num_slots)]


def slot_csr(
    rows: torch.Tensor, lens: list[int], lo: int, hi: int, whole: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR (indptr [B+1], indices) of the slots in [lo, hi) among each request's first lens[b]
    slots of rows [B, L] (padded), rebased to lo, in request order. whole: every slot lies in
    [lo, hi) (one pool), so the CSR follows from the lengths the host knows: a gather, no device
    sync. Else the fixed-shape selection of slot_csr_padded, cut to its size: a single sync for the
    whole batch (per request, it was one per request and pool part)."""
    device, width = rows.device, rows.shape[1]
    lens_t = torch.tensor(lens, dtype=torch.int64)
    if whole:
        total = int(lens_t.sum())
        starts = torch.arange(len(lens), dtype=torch.int64) * width  # each row's first flat index
        before = torch.cumsum(lens_t, 0) - lens_t  # each request's first CSR position
        flat = torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(
            starts - before, lens_t, output_size=total
        )
        indptr = torch.cat([lens_t.new_zeros(1), lens_t.cumsum(0)])
        return indptr.to(device), rows.reshape(-1)[flat.to(device)] - lo
    indptr, indices = slot_csr_padded(rows, lens_t.to(device), lo, hi)
    return indptr, indices[: int(indptr[-1])]


def slot_csr_padded(
    rows: torch.Tensor, lens: torch.Tensor, lo: int, hi: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """slot_csr with the lengths on the device and only fixed shapes, for CUDA-graph capture: the
    same indptr [B+1], and indices with B * L + 1 entries whose first indptr[B] are slot_csr's (the
    rest is scratch, never read)."""
    b, width = rows.shape
    picked = (
        (torch.arange(width, device=rows.device)[None, :] < lens[:, None])
        & (rows >= lo)
        & (rows < hi)
    )
    counts = picked.sum(1)
    indptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    dest = torch.where(picked, indptr[:-1, None] + picked.cumsum(1) - 1, b * width)
    indices = rows.new_empty(b * width + 1).scatter_(0, dest.reshape(-1), (rows - lo).reshape(-1))
    return indptr, indices


def batch_slot_csr(batch, lo: int, hi: int, whole: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The CSR of a ForwardBatch's slots in [lo, hi): from its device lengths with fixed shapes
    where it has them (a CUDA graph's static decode batch, whose seq_lens are only the context
    bucket), else from the host's lengths (whole: see slot_csr)."""
    if batch.device_seq_lens is None:
        return slot_csr(batch.kv_slots, batch.seq_lens, lo, hi, whole)
    return slot_csr_padded(batch.kv_slots, batch.device_seq_lens, lo, hi)

"""KV memory: token-slot allocator, per-layer KV pools and the request-to-token table.

A KV slot is one token's K and V in every layer. Slots are handed out by `SlotAllocator`,
owned by a request or by the radix cache, and written by `KVPool.store`.
"""

from __future__ import annotations

import torch


class SlotAllocator:
    """Free list of KV slot indices (int64). `alloc` prefers the lowest free slots, so a fresh
    pool hands out contiguous runs."""

    def __init__(self, num_slots: int, device: torch.device | str = "cpu"):
        self.num_slots = num_slots
        self.device = torch.device(device)
        self._free = torch.arange(num_slots, dtype=torch.int64)
        self._pending: list[torch.Tensor] = []  # freed since the last merge (merged when needed)
        self._num_pending = 0  # their total: num_free is called several times a step

    def num_free(self, tier: int | None = None) -> int:
        """Free slots (one tier only: `tier` is accepted for TieredSlotAllocator's interface)."""
        return len(self._free) + self._num_pending

    def alloc(self, n: int, tier: int = 0) -> torch.Tensor | None:
        """Take n slots; None (and nothing taken) when fewer than n are free."""
        if n > len(self._free):
            self._merge_pending()
            if n > len(self._free):
                return None
        out, self._free = self._free[:n], self._free[n:]
        return out.to(self.device)

    def free(self, slots: torch.Tensor) -> None:
        """Return slots to the pool (copied: callers may pass views of rows they reuse). The
        caller must own them (no double free)."""
        if slots.numel():
            self._pending.append(slots.to("cpu", torch.int64, copy=True).flatten())
            self._num_pending += self._pending[-1].numel()

    def free_slots(self, tier: int | None = None) -> torch.Tensor:
        """All free slots (a copy), for accounting checks."""
        return torch.cat([self._free, *self._pending])

    def _merge_pending(self) -> None:
        if self._pending:
            self._free = torch.cat([self._free, *self._pending]).sort().values
            self._pending, self._num_pending = [], 0


class KVPool:
    """Per-layer K and V buffers [num_slots, num_kv_heads, head_dim] in one dtype.
    Quantized pools (FP8, NVFP4) implement the same store/gather interface."""

    def __init__(
        self,
        num_slots: int,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
        compute_dtype: torch.dtype | None = None,
    ):
        # one spare row past the last slot: padding rows of CUDA-graph decode batches write there
        shape = (num_slots + 1, num_kv_heads, head_dim)
        self.num_slots, self.dtype = num_slots, dtype
        self.pad_slot = num_slots
        self.compute_dtype = compute_dtype or dtype  # what gather returns
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v [n, Hkv, D] at `slots` [n] of `layer`."""
        self.k[layer].index_copy_(0, slots, k.to(self.dtype))
        self.v[layer].index_copy_(0, slots, v.to(self.dtype))

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V at `slots` (any shape S) of `layer`: two tensors [*S, Hkv, D].
        (index_select on the flat index: ~5x faster than advanced indexing on the CPU.)"""
        flat = slots.reshape(-1)
        shape = (*slots.shape, *self.k[layer].shape[1:])
        return (
            self._out(self.k[layer].index_select(0, flat).view(shape)),
            self._out(self.v[layer].index_select(0, flat).view(shape)),
        )

    def gather_segment(
        self, layer: int, slots: torch.Tensor, span: tuple[int, int] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Like gather for a 1-D slot list; when the slots are the ascending run span=(a, b),
        views of the pool are returned instead of copies."""
        if span is not None:
            return self._out(self.k[layer][span[0] : span[1]]), self._out(
                self.v[layer][span[0] : span[1]]
            )
        return self.gather(layer, slots)

    def kv_buffers(self, layer: int):
        """This layer's buffers as the attention kernels take them."""
        from radixgen.kernels import KVBuffers

        return KVBuffers(self.k[layer], self.v[layer])

    def _out(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.dtype == self.compute_dtype else x.to(self.compute_dtype)


class ReqToTokenTable:
    """Row r holds the KV slots of the request using row r, position by position."""

    def __init__(self, max_requests: int, max_context_len: int, device: torch.device | str = "cpu"):
        self.table = torch.zeros((max_requests, max_context_len), dtype=torch.int64, device=device)
        self._free_rows = list(range(max_requests - 1, -1, -1))
        self.max_context_len = max_context_len

    def alloc_row(self) -> int | None:
        return self._free_rows.pop() if self._free_rows else None

    def free_row(self, row: int) -> None:
        self._free_rows.append(row)

    def write(self, row: int, start: int, slots: torch.Tensor) -> None:
        self.table[row, start : start + len(slots)] = slots

    def write_positions(self, rows: list[int], positions: list[int], slots: torch.Tensor) -> None:
        """table[rows[i], positions[i]] = slots[i] for all i, in one indexed write."""
        index = torch.tensor([rows, positions], dtype=torch.int64).to(self.table.device)
        self.table[index[0], index[1]] = slots.to(self.table.device)

    def read(self, row: int, end: int, start: int = 0) -> torch.Tensor:
        return self.table[row, start:end]

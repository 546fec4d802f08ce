"""What one forward needs to add each row's adapter delta to a projection's output.

`LoraBatch.add(layer, proj, x, y)` does y += (x @ A[slot].T) @ B[slot].T per row, B carrying
the scaling, for every output slice of the fused projection. Three ways, one result:
- on CUDA, a batch with prefill rows: SGMV over the batch's segments (runs of rows on one slot);
- on CUDA, a decode batch: BGMV over `row_slots` (a CUDA graph's static buffer when replayed);
- on the CPU: one matmul per (slot, group of rows), at the adapter's own rank (the pool pads to
  the largest; the padding is zeros and is skipped here).
Rows of slot 0 (the base model) are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from radixgen.runtime.lora.pool import LoraPool


@dataclass
class LoraBatch:
    pool: LoraPool
    row_slots: torch.Tensor  # int32 [num_tokens] on the device: each row's slot
    # host-side runs of one slot (start, length, slot), slot != 0; None in a replayed graph
    runs: list[tuple[int, int, int]] | None = None
    segments: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # SGMV, on device
    max_run: int = 0

    @classmethod
    def from_rows(cls, pool: LoraPool, slots: list[int], decode: bool) -> "LoraBatch":
        """The batch of per-row `slots` (host list, one per token row); `decode`: one row per
        request, served by BGMV on CUDA."""
        runs, start = [], 0
        for i in range(1, len(slots) + 1):
            if i == len(slots) or slots[i] != slots[start]:
                if slots[start]:
                    runs.append((start, i - start, slots[start]))
                start = i
        device = pool.device
        row_slots = torch.tensor(slots, dtype=torch.int32).to(device, non_blocking=True)
        segments = None
        if device.type == "cuda" and not decode and runs:
            starts, lens, run_slots = zip(*runs)
            segments = tuple(
                torch.tensor(v, dtype=torch.int32).to(device) for v in (starts, lens, run_slots)
            )
        return cls(pool, row_slots, runs, segments, max((n for _, n, _ in runs), default=0))

    def add(self, layer: int, proj: str, x: torch.Tensor, y: torch.Tensor) -> None:
        """y [T, out] += every row's adapter delta of projection `proj` of `layer` (x [T, in])."""
        w = self.pool.weights.get(proj)
        if w is None:  # no adapter targets this projection
            return
        a, b = w.a[layer], w.b[layer]  # [slots, S*R, in], [slots, out, R]
        if x.device.type != "cuda":
            self._add_cpu(a, b, w.slices, x, y)
            return
        from radixgen.kernels.lora import bgmv, sgmv

        if not x.is_contiguous():
            x = x.contiguous()
        h = torch.empty((x.shape[0], a.shape[1]), dtype=x.dtype, device=x.device)
        big_r = self.pool.max_rank
        if self.segments is not None:
            sgmv(x, a, h, self.segments, self.max_run)
            for i, (start, size) in enumerate(w.slices):
                sgmv(h, b[:, start : start + size], y, self.segments, self.max_run, i * big_r,
                     start, accumulate=True)  # fmt: skip
        else:
            bgmv(x, a, h, self.row_slots)
            for i, (start, size) in enumerate(w.slices):
                bgmv(h, b[:, start : start + size], y, self.row_slots, i * big_r, start, True)

    def _add_cpu(self, a, b, slices, x: torch.Tensor, y: torch.Tensor) -> None:
        big_r = self.pool.max_rank
        for slot, rows in self._groups():
            r = self.pool.ranks[slot]
            h = x[rows] @ a[slot].T  # [n, S * R]: every slice's shrink in one matmul
            for i, (start, size) in enumerate(slices):
                delta = h[:, i * big_r : i * big_r + r] @ b[slot, start : start + size, :r].T
                if isinstance(rows, slice):
                    y[rows, start : start + size] += delta
                else:
                    y[:, start : start + size].index_add_(0, rows, delta)

    def _groups(self) -> list[tuple[int, slice | torch.Tensor]]:
        """(slot, its rows) per slot: a slice when the slot's rows are one run, else indices."""
        runs = self.runs
        if runs is None:  # a static-buffer forward (cuda_graph.py run eagerly): read the slots
            runs = LoraBatch.from_rows(self.pool, self.row_slots.tolist(), True).runs
        by_slot: dict[int, list[tuple[int, int]]] = {}
        for start, n, slot in runs:
            by_slot.setdefault(slot, []).append((start, n))
        out = []
        for slot, runs in by_slot.items():
            if len(runs) == 1:
                out.append((slot, slice(runs[0][0], runs[0][0] + runs[0][1])))
            else:
                rows = torch.cat([torch.arange(s, s + n) for s, n in runs])
                out.append((slot, rows))
        return out

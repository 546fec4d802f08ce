"""The device-side adapter pool: a fixed number of slots, each adapter's A and B stacked per
fused projection and layer, padded to the largest rank.

Per projection p with S output slices (qkv: q, k, v; gate_up: gate, up; o and down: one):
    a[p] [num_layers, num_slots + 1, S * max_rank, in]   A of slice s in rows s*R .. s*R + r
    b[p] [num_layers, num_slots + 1, out, max_rank]      B (scaling folded in) in its slice's rows
Slot 0 is the base model: never written, all zeros, and skipped by the kernels. A slot is
written in place (zeroed, then filled), so the tensors never move: CUDA graphs captured over
them stay valid across loads. When every slot is taken, the least recently used adapter that
no request of the batch being built needs, and that is not pinned, is evicted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from radixgen.runtime.lora.adapter import TARGET_PROJECTION, LoraAdapter, projection_shapes
from radixgen.runtime.model.arch import ModelArch


@dataclass(frozen=True)
class ProjectionWeights:
    """One fused projection's stacked weights, and where each slice goes in its output."""

    a: torch.Tensor  # [num_layers, num_slots + 1, S * max_rank, in]
    b: torch.Tensor  # [num_layers, num_slots + 1, out, max_rank]
    slices: tuple[tuple[int, int], ...]  # (output start, size) per slice


class LoraPool:
    def __init__(
        self,
        arch: ModelArch,
        num_slots: int,
        max_rank: int,
        targets: tuple[str, ...],
        dtype: torch.dtype,
        device: torch.device,
    ):
        self.num_slots, self.max_rank, self.targets = num_slots, max_rank, targets
        self.device = device
        projections = {TARGET_PROJECTION[t][0] for t in targets}
        self.weights: dict[str, ProjectionWeights] = {}
        for proj, (in_size, slices) in projection_shapes(arch).items():
            if proj not in projections:
                continue
            out = slices[-1][0] + slices[-1][1]
            shape_a = (arch.num_layers, num_slots + 1, len(slices) * max_rank, in_size)
            shape_b = (arch.num_layers, num_slots + 1, out, max_rank)
            self.weights[proj] = ProjectionWeights(
                torch.zeros(shape_a, dtype=dtype, device=device),
                torch.zeros(shape_b, dtype=dtype, device=device),
                tuple(slices),
            )
        self.resident: OrderedDict[str, int] = OrderedDict()  # cache key -> slot, LRU first
        self.ranks = [0] * (num_slots + 1)  # rank of each slot's adapter (0: empty)
        self.pinned: set[str] = set()  # cache keys never evicted
        self.num_loads = 0

    @property
    def num_bytes(self) -> int:
        return sum(w.a.nbytes + w.b.nbytes for w in self.weights.values())

    def acquire(self, adapters: list[LoraAdapter]) -> dict[str, int]:
        """The slot of each adapter (cache key -> slot), loading those not resident into free
        or evicted slots. The caller keeps the distinct adapters of one batch within
        num_slots (LoraManager.admissible); raises RuntimeError otherwise."""
        needed = {a.cache_key: a for a in adapters}
        if len(needed) > self.num_slots:
            raise RuntimeError(
                f"{len(needed)} adapters in one batch; the pool has {self.num_slots}"
            )
        slots = {}
        for key, adapter in needed.items():
            if key in self.resident:
                self.resident.move_to_end(key)
            else:
                self._load(adapter, self._free_slot(set(needed)))
            slots[key] = self.resident[key]
        return slots

    def evict(self, cache_key: str) -> None:
        """Forget an adapter (unloaded): its slot is free for the next one."""
        slot = self.resident.pop(cache_key, None)
        self.pinned.discard(cache_key)
        if slot is not None:
            self.ranks[slot] = 0

    def _free_slot(self, keep: set[str]) -> int:
        used = set(self.resident.values())
        free = [s for s in range(1, self.num_slots + 1) if s not in used]
        if free:
            return free[0]
        victim = next(
            (k for k in self.resident if k not in keep and k not in self.pinned), None
        )  # LRU first
        if victim is None:
            raise RuntimeError("every adapter slot is pinned or used by this batch")
        slot = self.resident.pop(victim)
        self.ranks[slot] = 0
        return slot

    def _load(self, adapter: LoraAdapter, slot: int) -> None:
        """Write `adapter` into `slot` in place (the pool's tensors keep their addresses)."""
        for w in self.weights.values():
            w.a[:, slot].zero_()
            w.b[:, slot].zero_()
        r, big_r = adapter.rank, self.max_rank
        for (layer, target), (a, b) in adapter.weights.items():
            proj, index = TARGET_PROJECTION[target]
            w = self.weights[proj]
            start, size = w.slices[index]
            w.a[layer, slot, index * big_r : index * big_r + r].copy_(a, non_blocking=True)
            w.b[layer, slot, start : start + size, :r].copy_(b, non_blocking=True)
        self.resident[adapter.cache_key] = slot
        self.ranks[slot] = r
        self.num_loads += 1

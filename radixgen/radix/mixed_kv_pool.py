"""Mixed-precision KV: a prefix pool and a branch pool behind one slot index space.

Slots [0, B) live in the prefix pool (tier 0: tokens a request brought, FP8 by default on a GPU),
slots [B, B + N_branch) in the branch pool (tier 1: tokens the model generated, NVFP4 by
default). A slot's tier is its pool, so the radix cache, the request-to-token table and the
attention backends keep handling plain slot ids; `MixedKVPool` routes each slot to its pool.
"""

from __future__ import annotations

import torch

from radixgen.radix.kv_pool import SlotAllocator

PREFIX_TIER, BRANCH_TIER = 0, 1


class TieredSlotAllocator:
    """One `SlotAllocator` per tier over disjoint slot ranges: tier 0 holds [0, boundary),
    tier 1 holds [boundary, boundary + num_branch)."""

    def __init__(self, num_prefix: int, num_branch: int, device: torch.device | str = "cpu"):
        self.boundary, self.num_slots = num_prefix, num_prefix + num_branch
        self.capacity = (num_prefix, num_branch)
        self.device = torch.device(device)
        self._tiers = (SlotAllocator(num_prefix, device), SlotAllocator(num_branch, device))

    def alloc(self, n: int, tier: int = PREFIX_TIER) -> torch.Tensor | None:
        """n slots of `tier`; None (and nothing taken) when fewer are free."""
        got = self._tiers[tier].alloc(n)
        return got if got is None or tier == PREFIX_TIER else got + self.boundary

    def free(self, slots: torch.Tensor) -> None:
        """Return slots of either tier (copied)."""
        if slots.numel():
            slots = slots.to(
                "cpu", torch.int64
            )  # split on the host: one copy, no device selections
            branch = slots >= self.boundary
            self._tiers[PREFIX_TIER].free(slots[~branch])
            self._tiers[BRANCH_TIER].free(slots[branch] - self.boundary)

    def num_free(self, tier: int | None = None) -> int:
        if tier is None:
            return sum(t.num_free() for t in self._tiers)
        return self._tiers[tier].num_free()

    def free_slots(self, tier: int | None = None) -> torch.Tensor:
        """Free slots (of `tier`, or all), for accounting checks."""
        prefix = self._tiers[PREFIX_TIER].free_slots()
        branch = self._tiers[BRANCH_TIER].free_slots() + self.boundary
        return {None: torch.cat([prefix, branch]), PREFIX_TIER: prefix, BRANCH_TIER: branch}[tier]


class MixedKVPool:
    """A prefix pool and a branch pool (any two of bf16 / fp8_e4m3 / nvfp4) behind the KVPool
    store / gather interface; gather returns one tensor in slot order, dequantized."""

    def __init__(self, prefix_pool, branch_pool, boundary: int):
        self.prefix, self.branch, self.boundary = prefix_pool, branch_pool, boundary
        self.num_slots = boundary + branch_pool.num_slots
        self.dtype = getattr(prefix_pool, "compute_dtype", prefix_pool.dtype)

    @property
    def masked_store(self) -> bool:
        """Both pools pick their own rows on the device (no host sync in store)."""
        return getattr(self.prefix, "masked_store", False) and getattr(
            self.branch, "masked_store", False
        )

    @property
    def pad_slot(self) -> int | None:
        """-1 (skipped by both pools' stores) where the store is host-sync-free, else None."""
        return -1 if self.masked_store else None

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v [n, Hkv, D] at `slots` [n], each into the pool its slot belongs to."""
        if self.masked_store:
            # both pools pick their own rows on the device: no host sync (a pool with no rows
            # here leaves its scales alone)
            self.prefix.store_range(layer, slots, k, v, 0, self.boundary)
            self.branch.store_range(layer, slots, k, v, self.boundary, self.num_slots)
            return
        branch = slots >= self.boundary
        if bool(branch.all()):
            self.branch.store(layer, slots - self.boundary, k, v)
        elif not bool(branch.any()):
            self.prefix.store(layer, slots, k, v)
        else:
            self.prefix.store(layer, slots[~branch], k[~branch], v[~branch])
            self.branch.store(layer, slots[branch] - self.boundary, k[branch], v[branch])

    def demote(self, layer: int, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy this layer's KV of prefix-pool slots `src` to branch-pool slots `dst` (both in
        the shared slot space): dequantized from one pool, quantized into the other, with no
        per-slot routing (and no host sync on the device store path)."""
        k, v = self.prefix.gather(layer, src)
        self.branch.store(layer, dst - self.boundary, k, v)

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V at `slots` (any shape S): [*S, Hkv, D] each, from whichever pool holds them."""
        flat = slots.reshape(-1)
        branch = flat >= self.boundary
        if not bool(branch.any()):
            return self.prefix.gather(layer, slots)
        if bool(branch.all()):
            return self.branch.gather(layer, slots - self.boundary)
        pk, pv = self.prefix.gather(layer, flat[~branch])
        bk, bv = self.branch.gather(layer, flat[branch] - self.boundary)
        k = pk.new_empty((flat.numel(), *pk.shape[1:]))
        v = torch.empty_like(k)
        k[~branch], v[~branch], k[branch], v[branch] = pk, pv, bk, bv
        shape = (*slots.shape, *pk.shape[1:])
        return k.view(shape), v.view(shape)

    def gather_segment(
        self, layer: int, slots: torch.Tensor, span: tuple[int, int] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gather(layer, slots)

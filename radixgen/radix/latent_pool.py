"""Multi-head latent attention's KV cache on the ordinary KV pools.

An MLA model caches, per token and layer, one latent vector of `kv_lora_rank + rope_dim` values
(c_kv, then the roped key k_pe) instead of K and V per head. `LatentPool` stores that vector in
any pool with K and V planes (KVPool, FP8KVPool, NVFP4KVPool, MixedKVPool): the vector is cut
into 2G groups of `width` values, the first G written as the K plane's "heads" and the last G as
the V plane's. Nothing is stored twice, every group has its own quantization scale (the rope key
never shares one with the latent: `width` divides both parts), and slots, the allocator, the
radix cache and the branch window's demotion see a pool like any other.
"""

from __future__ import annotations

import math

import torch


def latent_groups(kv_lora_rank: int, rope_dim: int) -> tuple[int, int]:
    """(G, width): the pool shape (heads per plane, head dim) that holds one latent vector as
    2G groups of `width` values; the widest groups that divide both parts evenly in two planes."""
    total = kv_lora_rank + rope_dim
    if total % 2:
        raise ValueError(f"an MLA latent of {total} values cannot be split over K and V planes")
    width = math.gcd(kv_lora_rank, rope_dim)
    while (total // width) % 2:
        width //= 2
    return total // width // 2, width


class LatentPool:
    """A view of `pool` (planes [num_slots, G, width]) as an MLA latent cache: one KV "head" of
    latent_dim = 2 * G * width values per token, returned as both K and V by `gather` (the values
    of absorbed MLA are the latent itself; model/mla.py keeps the first kv_lora_rank of each
    output). The view holds no state: build one per forward."""

    def __init__(self, pool, groups: int, width: int):
        self.pool, self.groups, self.width = pool, groups, width
        self.latent_dim = 2 * groups * width

    def store(
        self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None = None
    ) -> None:
        """Write the latents k [n, 1, latent_dim] at `slots` [n] (v, the same values, is not
        stored again)."""
        groups = k.reshape(k.shape[0], 2 * self.groups, self.width)
        self.pool.store(
            layer,
            slots,
            groups[:, : self.groups].contiguous(),
            groups[:, self.groups :].contiguous(),
        )

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The latents at `slots` (any shape S): [*S, 1, latent_dim], as (K, V)."""
        return self._join(*self.pool.gather(layer, slots), slots.shape)

    def gather_segment(
        self, layer: int, slots: torch.Tensor, span: tuple[int, int] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """gather() of a 1-D slot list (span: see KVPool.gather_segment)."""
        return self._join(*self.pool.gather_segment(layer, slots, span), slots.shape)

    def _join(self, k: torch.Tensor, v: torch.Tensor, shape) -> tuple[torch.Tensor, torch.Tensor]:
        latent = torch.cat([k, v], dim=-2).reshape(*shape, 1, self.latent_dim)
        return latent, latent

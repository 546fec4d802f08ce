"""SlotAllocator and TieredSlotAllocator accounting: num_free counts freed slots at once (they
wait in a pending list until an alloc needs them), every slot is handed out once, and a
tiered free splits device or host slot tensors between the tiers."""

import torch

from radixgen.radix.kv_pool import SlotAllocator
from radixgen.radix.mixed_kv_pool import TieredSlotAllocator


def test_num_free_tracks_pending_frees():
    alloc = SlotAllocator(100)
    held = [alloc.alloc(n) for n in (30, 30, 30)]
    assert alloc.num_free() == 10 and alloc.alloc(11) is None
    alloc.free(held[1][:7])
    alloc.free(held[1][7:])
    assert alloc.num_free() == 40
    got = alloc.alloc(35)  # needs the pending frees: merged
    assert got is not None and alloc.num_free() == 5
    taken = torch.cat([held[0], held[2], got])
    assert taken.unique().numel() == taken.numel() == 95
    rest = alloc.free_slots()
    assert rest.numel() == 5 and not (rest[:, None] == taken[None, :]).any()


def test_tiered_free_splits_by_tier():
    alloc = TieredSlotAllocator(50, 20)
    prefix, branch = alloc.alloc(10, 0), alloc.alloc(5, 1)
    assert bool((branch >= 50).all()) and alloc.num_free() == 55
    alloc.free(torch.cat([prefix[:4], branch[:2], prefix[4:6]]))
    assert (alloc.num_free(0), alloc.num_free(1), alloc.num_free()) == (46, 17, 63)
    assert set(alloc.free_slots(1).tolist()) == set(range(50, 70)) - set(branch[2:].tolist())

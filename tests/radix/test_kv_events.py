"""KV events of the radix tree: replaying the published events gives exactly the blocks the tree
holds, after any sequence of inserts, evictions (with locks) and resets; the wire format is
vLLM's (decoded here with the types vLLM's own subscriber example declares)."""

from __future__ import annotations

import hashlib
import itertools
import struct
from typing import Any

import msgspec
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixgen.radix import RadixCache
from radixgen.radix.kv_events import (
    AllBlocksCleared,
    BlockEventRecorder,
    KVEventBatch,
    block_hashes,
    namespace_seed,
)
from radixgen.radix.tree_node import iter_subtree


class VllmEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """vLLM's subscriber-side types (examples/online_serving/kv_events_subscriber.py)."""

    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class VllmEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class VllmBlockStored(VllmEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class VllmBlockRemoved(VllmEvent, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: str | None


class VllmAllBlocksCleared(VllmEvent, tag="AllBlocksCleared"):
    pass


class VllmKVEventBatch(VllmEventBatch):
    events: list[VllmBlockStored | VllmBlockRemoved | VllmAllBlocksCleared]


class Replica:
    """The block set a subscriber rebuilds from the events, checking each one on the way."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.blocks: set[int] = set()

    def apply(self, event: Any) -> None:
        """radixgen's event types or the vLLM subscriber's (Vllm*), by name."""
        kind = type(event).__name__.removeprefix("Vllm")
        if kind == "AllBlocksCleared":
            self.blocks.clear()
        elif kind == "BlockStored":
            assert event.block_size == self.block_size
            assert len(event.token_ids) == len(event.block_hashes) * self.block_size
            assert event.parent_block_hash is None or event.parent_block_hash in self.blocks
            assert not self.blocks & set(event.block_hashes), "a block stored twice"
            self.blocks |= set(event.block_hashes)
        else:
            assert kind == "BlockRemoved", event
            assert set(event.block_hashes) <= self.blocks, "removal of a block never stored"
            self.blocks -= set(event.block_hashes)


def tree_blocks(cache: RadixCache, block_size: int) -> set[int]:
    """Every whole block of every cached path, hashed from the tree itself."""
    blocks: set[int] = set()
    for namespace, root in cache._roots.items():
        for node in iter_subtree(root):
            path, n = [], node
            while n.parent is not None:
                path[:0] = n.key
                n = n.parent
            blocks |= set(block_hashes(path, namespace, block_size, len(path) // block_size))
    return blocks


def make(page_size: int, block_size: int) -> tuple[RadixCache, BlockEventRecorder]:
    recorder = BlockEventRecorder(block_size, "CPU")
    return RadixCache(page_size, lambda slots: None, events=recorder), recorder


def publish(recorder: BlockEventRecorder, replica: Replica) -> None:
    for event in recorder.to_events(recorder.take()):
        replica.apply(event)


OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.lists(st.integers(0, 3), min_size=1, max_size=24),  # few ids: shared prefixes
            st.sampled_from([None, "v2"]),
        ),
        st.tuples(st.just("evict"), st.integers(1, 20), st.booleans()),
        st.tuples(st.just("reset")),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, sizes=st.sampled_from([(1, 1), (1, 4), (2, 4), (4, 4), (2, 6)]))
def test_replayed_events_equal_the_tree_blocks(ops, sizes):
    page_size, block_size = sizes
    cache, recorder = make(page_size, block_size)
    replica, slot_ids, locked = Replica(block_size), itertools.count(), []
    for op in ops:
        if op[0] == "insert":
            ids = op[1]
            cache.insert(ids, torch.tensor([next(slot_ids) for _ in ids]), op[2])
        elif op[0] == "evict":
            if op[2]:  # a running request holds some path while others are evicted
                hit = cache.match_prefix(ops[0][1] if ops[0][0] == "insert" else [0])
                cache.lock(hit.node)
                locked.append(hit.node)
            cache.evict(op[1])
        else:
            for node in locked:
                cache.unlock(node)
            locked.clear()
            cache.reset()
        publish(recorder, replica)  # one batch per step, as the scheduler publishes
        assert replica.blocks == tree_blocks(cache, block_size)


def test_stored_event_chains_its_blocks_from_the_parent():
    cache, recorder = make(1, 4)
    cache.insert(list(range(10)), torch.arange(10))  # blocks 0, 1 (tokens 8, 9: partial)
    cache.insert(list(range(13)), torch.arange(13))  # extends the path: block 2 only
    first, second = recorder.to_events(recorder.take())
    assert first.parent_block_hash is None and first.token_ids == list(range(8))
    assert second.parent_block_hash == first.block_hashes[-1]
    assert second.token_ids == list(range(8, 12))
    assert second.block_hashes == list(block_hashes(range(13), None, 4, 3))[2:]


def test_namespaces_hash_apart_and_eviction_reports_the_block_it_cuts():
    cache, recorder = make(1, 4)
    cache.insert([1, 2, 3, 4], torch.arange(4))
    cache.insert([1, 2, 3, 4], torch.arange(4, 8), "v2")
    a, b = recorder.to_events(recorder.take())
    assert a.block_hashes != b.block_hashes and namespace_seed("v2") != namespace_seed(None)
    cache.insert([1, 2, 3, 4, 5, 6, 7, 8, 9], torch.arange(9))  # a leaf of tokens 4..8
    (stored,) = recorder.to_events(recorder.take())
    cache.insert([1, 2, 7, 7, 7], torch.arange(5))  # splits the first edge after token 2
    recorder.take()
    hit = cache.match_prefix([1, 2, 7, 7, 7])
    cache.lock(hit.node)
    cache.evict(100)  # everything unlocked: [3, 4] and [5..9] under [1, 2], and the v2 path
    cache.unlock(hit.node)
    removed = [h for e in recorder.to_events(recorder.take()) for h in e.block_hashes]
    assert sorted(removed) == sorted(a.block_hashes + b.block_hashes + stored.block_hashes)


def test_reset_clears_and_drops_what_was_pending():
    cache, recorder = make(1, 2)
    cache.insert([1, 2, 3], torch.arange(3))
    cache.reset()
    assert [type(e) for e in recorder.to_events(recorder.take())] == [AllBlocksCleared]


def test_wire_format_is_what_a_vllm_subscriber_decodes():
    cache, recorder = make(1, 2)
    cache.insert([5, 6, 7, 8], torch.arange(4))
    cache.evict(10)
    cache.reset()
    batch = KVEventBatch(ts=1.5, events=recorder.to_events(recorder.take()))
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(batch), type=VllmKVEventBatch)
    assert decoded.ts == 1.5 and decoded.data_parallel_rank is None
    (cleared,) = decoded.events  # the reset supersedes the store and the removal
    assert isinstance(cleared, VllmAllBlocksCleared)
    cache.insert([5, 6, 7, 8], torch.arange(4))
    cache.evict(10)
    raw = msgspec.msgpack.decode(
        msgspec.msgpack.encode(KVEventBatch(ts=2.0, events=recorder.to_events(recorder.take())))
    )
    stored, removed = raw[1]  # arrays: [tag, fields...], as vLLM's array_like structs encode
    hashes = list(block_hashes([5, 6, 7, 8], None, 2, 2))
    # lora_name (vLLM's newer field) last: a subscriber declaring the older fields ignores it
    assert stored == ["BlockStored", hashes, None, [5, 6, 7, 8], 2, None, "CPU", None]
    assert removed == ["BlockRemoved", hashes, "CPU"]
    old = msgspec.msgpack.decode(msgspec.msgpack.encode(raw), type=VllmKVEventBatch)
    assert old.events[0].block_hashes == hashes and old.events[0].token_ids == [5, 6, 7, 8]


def test_bad_block_size_raises():
    with pytest.raises(ValueError, match="block_size"):
        BlockEventRecorder(0, None)


def test_block_hash_is_the_documented_formula():
    def spec(parent: int, block: list[int]) -> int:
        data = parent.to_bytes(8, "big") + struct.pack(f"<{len(block)}i", *block)
        return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")

    ids = [7, 49151, 0, 3, 12, 5]
    h0 = spec(0, ids[:3])
    assert list(block_hashes(ids, None, 3, 2)) == [h0, spec(h0, ids[3:])]
    seed = int.from_bytes(hashlib.sha256(repr("v2").encode()).digest()[:8], "big")
    assert next(block_hashes(ids, "v2", 3, 1)) == spec(seed, ids[:3])

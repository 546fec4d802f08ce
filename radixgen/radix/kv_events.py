"""KV cache events: what the radix tree stores and drops, as fixed-size token blocks, in vLLM's
KV-events format (what KV-aware routers such as Dynamo and llm-d read).

Blocks. A cached path (a namespace root down to a node) is cut into blocks of `block_size`
tokens from its start; block k holds tokens [k*B, (k+1)*B) and exists while the path is cached
at least (k+1)*B long. So an insert that grows a path from `prefix_len` to `cached_len` stores
blocks prefix_len//B .. cached_len//B - 1, and evicting a leaf that held path tokens
[start, end) removes blocks start//B .. end//B - 1 (a block ending past `start` loses its
tail). A partial trailing block is never reported.

Block hashes (64-bit unsigned): h(k) = the first 8 bytes, big-endian, of
sha256(h(k-1) as 8 big-endian bytes || block k's token ids as int32 little-endian), with
h(-1) = 0 in the default namespace and the first 8 bytes of sha256(repr(namespace)) in any
other (a weight version or adapter), so equal tokens under different weights never share a
hash. A hash thus names a block and its whole prefix, as a radix-tree path does.

Cost. The tree calls a `CacheEvents`; `NoCacheEvents` (the default) does nothing. The
recorder only appends raw records on the scheduler's thread (a tuple per insert, the evicted
path's tokens per removed leaf, each only when a whole block changed); `to_events` (on the
publisher's thread) hashes and builds the events."""

from __future__ import annotations

import array
import hashlib
import itertools
import sys
from typing import Any, Hashable, Iterator, Protocol, Sequence

import msgspec

from radixgen.radix.tree_node import TreeNode

ROOT_HASH = 0


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    """Base of the events; encoded as [tag, field, ...] (vLLM's msgspec layout)."""


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: int | None  # None: the first block is the path's first
    token_ids: list[int]  # every stored block's tokens, in order
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float  # seconds since the epoch, when the step that produced the events ended
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


class CacheEvents(Protocol):
    """What the radix tree reports; every method is called before the change is visible to
    any other caller and must not touch the tree."""

    def stored(
        self, token_ids: tuple[int, ...], prefix_len: int, cached_len: int, namespace: Hashable
    ) -> None:
        """A path was cached from `prefix_len` to `cached_len` tokens of `token_ids`."""

    def removed(self, leaf: TreeNode) -> None:
        """`leaf` is about to be unlinked (its parent chain still intact)."""

    def cleared(self) -> None:
        """Every cached path was dropped (a flush)."""


class NoCacheEvents:
    """The null object: events off, nothing recorded."""

    def stored(self, token_ids, prefix_len, cached_len, namespace) -> None:
        pass

    def removed(self, leaf) -> None:
        pass

    def cleared(self) -> None:
        pass


class BlockEventRecorder:
    """Raw records of the tree's changes, taken (and turned into events) once per step."""

    def __init__(self, block_size: int, medium: str | None):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.medium = medium
        self._pending: list[tuple[Any, ...]] = []

    def stored(self, token_ids, prefix_len, cached_len, namespace) -> None:
        if cached_len // self.block_size > prefix_len // self.block_size:
            self._pending.append(("stored", token_ids, prefix_len, cached_len, namespace))

    def removed(self, leaf: TreeNode) -> None:
        keys, node = [], leaf
        while node.parent is not None:
            keys.append(node.key)
            node = node.parent
        path_ids = tuple(itertools.chain.from_iterable(reversed(keys)))
        start = len(path_ids) - leaf.size
        if len(path_ids) // self.block_size > start // self.block_size:
            self._pending.append(("removed", path_ids, start, leaf.namespace))

    def cleared(self) -> None:
        self._pending = [("cleared",)]  # what was pending is moot: every block is gone

    def take(self) -> list[tuple[Any, ...]]:
        """The records since the last take (the list is handed over, not copied)."""
        pending, self._pending = self._pending, []
        return pending

    def to_events(self, records: list[tuple[Any, ...]]) -> list[KVCacheEvent]:
        """The events of `take()`'s records, in order (pure: safe on another thread)."""
        return [self._event(r) for r in records]

    def _event(self, record: tuple[Any, ...]) -> KVCacheEvent:
        if record[0] == "cleared":
            return AllBlocksCleared()
        B = self.block_size
        if record[0] == "stored":
            _, ids, prefix_len, cached_len, namespace = record
            first, end = prefix_len // B, cached_len // B
            hashes = list(block_hashes(ids, namespace, B, end))
            return BlockStored(
                block_hashes=hashes[first:],
                parent_block_hash=hashes[first - 1] if first else None,
                token_ids=list(ids[first * B : end * B]),
                block_size=B,
                lora_id=None,
                medium=self.medium,
            )
        _, path_ids, start, namespace = record
        hashes = list(block_hashes(path_ids, namespace, B, len(path_ids) // B))
        return BlockRemoved(block_hashes=hashes[start // B :], medium=self.medium)


def namespace_seed(namespace: Hashable) -> int:
    """h(-1) of a namespace's paths (see the module docstring)."""
    if namespace is None:
        return ROOT_HASH
    return int.from_bytes(hashlib.sha256(repr(namespace).encode()).digest()[:8], "big")


def block_hashes(
    token_ids: Sequence[int], namespace: Hashable, block_size: int, num_blocks: int
) -> Iterator[int]:
    """h(0) .. h(num_blocks - 1) of the path `token_ids` (see the module docstring)."""
    ids = array.array("i", token_ids[: num_blocks * block_size])  # C int: 4 bytes
    if sys.byteorder == "big":
        ids.byteswap()
    raw, step = memoryview(ids).cast("B"), 4 * block_size
    parent = namespace_seed(namespace).to_bytes(8, "big")
    for k in range(num_blocks):
        digest = hashlib.sha256(parent)
        digest.update(raw[k * step : (k + 1) * step])
        parent = digest.digest()[:8]
        yield int.from_bytes(parent, "big")

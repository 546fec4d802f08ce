"""Prefix caches: token ids -> KV slots, shared between requests (RadixAttention).

`RadixCache` keeps a radix tree per namespace; `NoPrefixCache` is the null object used with
--disable-radix-cache. Both satisfy `PrefixCache`, the contract the scheduler relies on.

Ownership: every slot stored in the tree belongs to the cache, which gives slots back only
through `free_slots` (from `evict` and `reset`), each exactly once. Keys are compared page by
page, so every matched or cached length is a multiple of `page_size`.

Tiers (mixed-precision KV): with `tier_boundary=B`, slots >= B live in the branch pool (tier 1),
the others in the prefix pool (tier 0). Every node holds slots of one tier (insert splits a new
edge where the tier changes), sizes are kept per tier, and `evict(n, tier)` frees the least
recently used leaves of that tier.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Hashable, NamedTuple, Protocol, Sequence, runtime_checkable

import torch

from radixgen.radix.kv_events import CacheEvents, NoCacheEvents
from radixgen.radix.tree_node import (
    TreeNode,
    check_node,
    common_prefix_len,
    iter_subtree,
    split_node,
)

FreeSlots = Callable[[torch.Tensor], None]


@dataclass(frozen=True)
class MatchResult:
    slots: torch.Tensor  # int64 [length]: KV slots of the matched prefix, in token order
    node: Any = None  # opaque handle of the last matched node, for lock/unlock

    @property
    def length(self) -> int:
        return self.slots.numel()


class InsertResult(NamedTuple):
    prefix_len: int  # tokens of the offered sequence the cache held before the call
    cached_len: int  # tokens it holds after: the offered length rounded down to a page


@runtime_checkable
class PrefixCache(Protocol):
    page_size: int

    def match_prefix(self, token_ids: Sequence[int], namespace: Hashable = None) -> MatchResult:
        """Longest cached prefix of `token_ids` within `namespace`, a multiple of page_size
        long. Mutates the tree's shape (an edge the match ends inside is split there) and the
        access times along the path; never slots or locks. The slots stay valid while the
        returned node is locked; unlocked, a later `evict` may free them."""

    def insert(
        self, token_ids: Sequence[int], slots: torch.Tensor, namespace: Hashable = None
    ) -> InsertResult:
        """Cache the page-aligned prefix of `token_ids` (slots: int64 [len(token_ids)]).
        Takes ownership of `slots[prefix_len:cached_len]` (copied); the rest stay the caller's,
        and `slots[:prefix_len]` are duplicates unless they are the tree's own. Never replaces
        slots already in the tree. Mutates the tree and access times along the path."""

    def lock(self, node: Any) -> None:
        """Protect `node` and its ancestors from eviction (one more lock on each). Mutates lock
        counts and the protected/evictable sizes. None is a no-op."""

    def unlock(self, node: Any) -> None:
        """Undo one `lock(node)`: mutates lock counts and sizes. None is a no-op."""

    def evict(self, num_tokens: int, tier: int | None = None) -> int:
        """Free least-recently-used unlocked leaves (of `tier`, or any) until at least
        `num_tokens` are freed or nothing is evictable; hands their slots to free_slots.
        Returns the tokens freed."""

    def evictable_size(self, tier: int | None = None) -> int:
        """Tokens in unlocked nodes (of `tier`, or all): what `evict` could free. Mutates
        nothing."""

    def protected_size(self, tier: int | None = None) -> int:
        """Tokens in locked nodes (of `tier`, or all). Mutates nothing."""

    def total_size(self, tier: int | None = None) -> int:
        """Tokens (= slots) the cache holds (of `tier`, or all). Mutates nothing."""

    def all_slots(self) -> torch.Tensor:
        """Every slot the cache holds, int64 [total_size()]. Mutates nothing."""

    def reset(self) -> None:
        """Drop everything, handing every slot to free_slots. Nothing may be locked."""

    def check_integrity(self) -> None:
        """Recompute every invariant; raise AssertionError on a mismatch. Mutates nothing."""


def _as_ids(token_ids: Sequence[int] | torch.Tensor) -> tuple[int, ...]:
    return tuple(token_ids.tolist() if isinstance(token_ids, torch.Tensor) else token_ids)


def _empty_slots() -> torch.Tensor:
    return torch.empty(0, dtype=torch.int64)


class RadixCache:
    """Radix tree per namespace over token ids, edges holding their tokens' KV slots. Protocol
    methods are documented on `PrefixCache`."""

    def __init__(
        self,
        page_size: int = 1,
        free_slots: FreeSlots | None = None,
        tier_boundary: int | None = None,
        events: CacheEvents | None = None,
    ):
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if free_slots is None:
            raise TypeError("RadixCache needs free_slots, the callback that takes evicted slots")
        if tier_boundary is not None and page_size != 1:
            raise ValueError("mixed-precision KV tiers need page_size 1")
        self.page_size = page_size
        self.tier_boundary = tier_boundary
        self._free_slots = free_slots
        self.events = events or NoCacheEvents()  # told of every insert, eviction and reset
        self._clock = itertools.count(1)
        self._init_tree()

    def _init_tree(self) -> None:
        self._roots: dict[Hashable, TreeNode] = {}
        self._leaves: set[TreeNode] = set()  # non-root nodes without children
        self._evictable = [0, 0]  # per tier
        self._protected = [0, 0]

    def _root(self, namespace: Hashable) -> TreeNode:
        root = self._roots.get(namespace)
        if root is None:
            root = self._roots[namespace] = TreeNode((), _empty_slots(), None, namespace)
        return root

    def _walk(
        self, ids: tuple[int, ...], limit: int, namespace: Hashable
    ) -> tuple[list[TreeNode], int]:
        """Follow `ids[:limit]` down from the namespace root, splitting the edge the walk ends
        inside. Returns the path (root first) and the matched length; touches the path."""
        node, pos, page = self._root(namespace), 0, self.page_size
        path = [node]
        while pos < limit:
            child = node.children.get(ids[pos : pos + page])
            if child is None:
                break
            n = common_prefix_len(child.key, ids, pos, limit, page)
            if n < child.size:
                child = split_node(child, n, page)
            node, pos = child, pos + n
            path.append(node)
        tick = next(self._clock)
        for visited in path:
            visited.last_access = tick
        return path, pos

    def match_prefix(self, token_ids: Sequence[int], namespace: Hashable = None) -> MatchResult:
        """See `PrefixCache.match_prefix`; mutates splits and access times."""
        ids = _as_ids(token_ids)
        path, _ = self._walk(ids, len(ids) - len(ids) % self.page_size, namespace)
        slots = torch.cat([n.slots for n in path[1:]]) if len(path) > 1 else _empty_slots()
        return MatchResult(slots, path[-1])

    def insert(
        self, token_ids: Sequence[int], slots: torch.Tensor, namespace: Hashable = None
    ) -> InsertResult:
        """See `PrefixCache.insert`; mutates the tree, sizes and access times."""
        ids = _as_ids(token_ids)
        if slots.dim() != 1 or slots.numel() != len(ids):
            raise ValueError(
                f"slots must be 1-D with one slot per token ({len(ids)}), "
                f"got shape {tuple(slots.shape)}"
            )
        cached_len = len(ids) - len(ids) % self.page_size
        path, prefix_len = self._walk(ids, cached_len, namespace)
        if prefix_len < cached_len:
            new_slots = slots[prefix_len:cached_len].to(torch.int64, copy=True)
            node, start = path[-1], prefix_len
            for tier, run in self._tier_runs(new_slots):  # one node per run of one tier
                node = self._add_leaf(node, ids[start : start + len(run)], run, tier)
                start += len(run)
            self.events.stored(ids, prefix_len, cached_len, namespace)
        return InsertResult(prefix_len, cached_len)

    def _tier_runs(self, slots: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
        """Split slots into maximal runs of one tier: [(tier, slots of the run)]."""
        if self.tier_boundary is None:
            return [(0, slots)]
        tiers = (slots >= self.tier_boundary).to(torch.int64)
        cuts = (torch.nonzero(tiers[1:] != tiers[:-1])[:, 0] + 1).tolist()
        bounds = [0, *cuts, len(slots)]
        return [(int(tiers[a]), slots[a:b]) for a, b in zip(bounds, bounds[1:])]

    def _add_leaf(
        self, parent: TreeNode, key: tuple[int, ...], slots: torch.Tensor, tier: int
    ) -> TreeNode:
        leaf = TreeNode(key, slots, parent, parent.namespace, parent.last_access, tier)
        parent.children[key[: self.page_size]] = leaf
        self._leaves.discard(parent)
        self._leaves.add(leaf)
        self._evictable[tier] += leaf.size
        return leaf

    def lock(self, node: TreeNode | None) -> None:
        """See `PrefixCache.lock`; mutates lock counts and sizes."""
        for n in self._ancestry(node):
            if n.lock_count == 0:
                self._evictable[n.tier] -= n.size
                self._protected[n.tier] += n.size
            n.lock_count += 1

    def unlock(self, node: TreeNode | None) -> None:
        """See `PrefixCache.unlock`; mutates lock counts and sizes."""
        for n in self._ancestry(node):
            assert n.lock_count > 0, f"unlock of an unlocked node: {n}"
            n.lock_count -= 1
            if n.lock_count == 0:
                self._evictable[n.tier] += n.size
                self._protected[n.tier] -= n.size

    def _ancestry(self, node: TreeNode | None) -> list[TreeNode]:
        """`node` and its ancestors up to (excluding) the root; asserts the node is still in
        this cache's tree (not evicted, not from before a reset)."""
        path: list[TreeNode] = []
        while node is not None and node.parent is not None:
            path.append(node)
            node = node.parent
        assert node is None or self._roots.get(node.namespace) is node, (
            f"stale node handle (evicted or reset): {path[:1] or node}"
        )
        return path

    def evict(self, num_tokens: int, tier: int | None = None) -> int:
        """See `PrefixCache.evict`; mutates the tree and sizes, calls free_slots. For a tier:
        its least-recently-used unlocked leaves first; then, if that is not enough, unlocked
        leaves of the other tier that hang below an unlocked node of this tier (a cached second
        turn below a first turn's branch), so every node `evictable_size(tier)` counts can go."""
        freed: list[torch.Tensor] = []
        num_freed = self._evict_leaves(
            num_tokens, tier, freed, lambda n: tier is None or n.tier == tier
        )
        if tier is not None and num_freed < num_tokens:
            num_freed += self._evict_leaves(
                num_tokens - num_freed,
                tier,
                freed,
                lambda n: n.tier == tier or self._above_unlocked(n, tier),
            )
        if freed:
            self._free_slots(torch.cat(freed))
        return num_freed

    def _evict_leaves(
        self, num_tokens: int, tier: int | None, freed: list[torch.Tensor], wanted
    ) -> int:
        """Pop unlocked leaves passing `wanted` in LRU order (parents that become such leaves
        join) until num_tokens of `tier` (or any, for None) are freed; their slots go to freed."""
        ok = lambda n: n.lock_count == 0 and wanted(n)
        heap = [(n.last_access, n.uid, n) for n in self._leaves if ok(n)]
        heapq.heapify(heap)
        num_freed = 0
        while num_freed < num_tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = self._remove_leaf(leaf)
            freed.append(leaf.slots)
            if tier is None or leaf.tier == tier:
                num_freed += leaf.size
            if parent in self._leaves and ok(parent):
                heapq.heappush(heap, (parent.last_access, parent.uid, parent))
        return num_freed

    @staticmethod
    def _above_unlocked(node: TreeNode, tier: int) -> bool:
        """An unlocked node of `tier` lies on node's path up (locks hold whole paths, so the
        walk stops at the first locked node)."""
        n = node.parent
        while n is not None and n.parent is not None and n.lock_count == 0:
            if n.tier == tier:
                return True
            n = n.parent
        return False

    def _remove_leaf(self, leaf: TreeNode) -> TreeNode:
        """Unlink an unlocked leaf; returns its former parent (now maybe a leaf itself)."""
        parent = leaf.parent
        assert parent is not None and not leaf.children and leaf.lock_count == 0, leaf
        self.events.removed(leaf)
        del parent.children[leaf.key[: self.page_size]]
        leaf.parent = None
        self._leaves.discard(leaf)
        self._evictable[leaf.tier] -= leaf.size
        if not parent.children and parent.parent is not None:
            self._leaves.add(parent)
        return parent

    def evictable_size(self, tier: int | None = None) -> int:
        return sum(self._evictable) if tier is None else self._evictable[tier]

    def protected_size(self, tier: int | None = None) -> int:
        return sum(self._protected) if tier is None else self._protected[tier]

    def total_size(self, tier: int | None = None) -> int:
        return self.evictable_size(tier) + self.protected_size(tier)

    def all_slots(self) -> torch.Tensor:
        """Every slot the cache holds (for accounting checks); mutates nothing."""
        slots = [n.slots for root in self._roots.values() for n in iter_subtree(root)]
        return torch.cat(slots) if slots else _empty_slots()

    def reset(self) -> None:
        """See `PrefixCache.reset`; empties the tree and calls free_slots once."""
        assert self.protected_size() == 0, f"reset with {self._protected} locked tokens"
        slots = self.all_slots()
        self._init_tree()
        self.events.cleared()
        if slots.numel():
            self._free_slots(slots)

    def check_integrity(self) -> None:
        """See `PrefixCache.check_integrity`; mutates nothing."""
        evictable, protected = [0, 0], [0, 0]
        leaves, slots = set(), []
        for namespace, root in self._roots.items():
            assert root.parent is None and root.size == 0 and root.namespace == namespace, root
            assert root.lock_count == 0, f"root of {namespace!r} is locked"
            for node in iter_subtree(root):
                check_node(node, self.page_size)
                evictable[node.tier] += 0 if node.lock_count else node.size
                protected[node.tier] += node.size if node.lock_count else 0
                assert [t for t, _ in self._tier_runs(node.slots)] == [node.tier], f"{node}: tier"
                leaves.update(() if node.children else (node,))
                slots.append(node.slots)
        assert (evictable, protected) == (self._evictable, self._protected), (
            f"sizes: walked {(evictable, protected)}, tracked {(self._evictable, self._protected)}"
        )
        assert leaves == self._leaves, "leaf set out of date"
        all_slots = torch.cat(slots) if slots else _empty_slots()
        assert all_slots.unique().numel() == all_slots.numel(), "a slot is held twice"


class NoPrefixCache:
    """The null prefix cache (--disable-radix-cache): caches nothing, matches nothing."""

    def __init__(self, page_size: int = 1, free_slots: FreeSlots | None = None):
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.page_size = page_size

    def match_prefix(self, token_ids: Sequence[int], namespace: Hashable = None) -> MatchResult:
        return MatchResult(_empty_slots(), None)

    def insert(
        self, token_ids: Sequence[int], slots: torch.Tensor, namespace: Hashable = None
    ) -> InsertResult:
        return InsertResult(0, 0)

    def lock(self, node: Any) -> None:
        pass

    def unlock(self, node: Any) -> None:
        pass

    def evict(self, num_tokens: int, tier: int | None = None) -> int:
        return 0

    def evictable_size(self, tier: int | None = None) -> int:
        return 0

    def protected_size(self, tier: int | None = None) -> int:
        return 0

    def total_size(self, tier: int | None = None) -> int:
        return 0

    def all_slots(self) -> torch.Tensor:
        return _empty_slots()

    def reset(self) -> None:
        pass

    def check_integrity(self) -> None:
        pass

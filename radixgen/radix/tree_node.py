"""Radix-tree node and the page-aligned helpers `RadixCache` is built from.

A node's edge holds `key` (token ids) and `slots` (one KV slot per token, int64 [len(key)]).
Both are a positive multiple of the page size long, except on a namespace root, where they are
empty. Children are keyed by the first page of their edge, so siblings never share a page.
"""

from __future__ import annotations

import itertools
from typing import Hashable, Iterator

import torch

_uids = itertools.count()


class TreeNode:
    """One edge of the radix tree. `lock_count` counts the locks held on this node or on any
    node below it; `last_access` is a logical clock tick (larger means more recent)."""

    __slots__ = (
        "key",
        "slots",
        "parent",
        "children",
        "namespace",
        "lock_count",
        "last_access",
        "uid",
        "tier",
    )

    def __init__(
        self,
        key: tuple[int, ...],
        slots: torch.Tensor,
        parent: TreeNode | None,
        namespace: Hashable,
        last_access: int = 0,
        tier: int = 0,
    ):
        self.key = key
        self.slots = slots  # int64 [len(key)]
        self.parent = parent
        self.children: dict[tuple[int, ...], TreeNode] = {}
        self.namespace = namespace
        self.lock_count = 0
        self.last_access = last_access
        self.uid = next(_uids)  # creation order: a deterministic tie-break for the LRU heap
        self.tier = tier  # which KV pool all of this edge's slots live in (0: prefix, 1: branch)

    @property
    def size(self) -> int:
        return len(self.key)

    def __repr__(self) -> str:
        return (
            f"TreeNode(uid={self.uid}, key={self.key}, lock_count={self.lock_count}, "
            f"last_access={self.last_access}, children={len(self.children)})"
        )


def common_prefix_len(
    key: tuple[int, ...], ids: tuple[int, ...], start: int, end: int, page_size: int
) -> int:
    """Length of the common prefix of `key` and `ids[start:end]`, compared page by page, so
    the result is a multiple of `page_size` (a partial last page never matches)."""
    limit = min(len(key), end - start)
    limit -= limit % page_size
    n = 0
    while n < limit and key[n : n + page_size] == ids[start + n : start + n + page_size]:
        n += page_size
    return n


def split_node(node: TreeNode, at: int, page_size: int) -> TreeNode:
    """Split `node`'s edge after `at` tokens (page aligned, 0 < at < node.size) and return the
    new upper node. Mutates `node` (it keeps the lower part of the edge, so handles to it still
    end at the same position) and its old parent's children. The new node copies `node`'s lock
    count and access time, so locks and sizes stay as they were."""
    assert 0 < at < node.size and at % page_size == 0, (at, node.size, page_size)
    parent = node.parent
    assert parent is not None
    upper = TreeNode(
        node.key[:at], node.slots[:at].clone(), parent, node.namespace, node.last_access, node.tier
    )
    upper.lock_count = node.lock_count
    parent.children[node.key[:page_size]] = upper
    node.key, node.slots, node.parent = node.key[at:], node.slots[at:].clone(), upper
    upper.children[node.key[:page_size]] = node
    return upper


def iter_subtree(root: TreeNode) -> Iterator[TreeNode]:
    """Every node below `root` (root excluded), parents before children."""
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


def check_node(node: TreeNode, page_size: int) -> None:
    """Assert the local invariants of one non-root node: edge shape and alignment, links to its
    parent and children, lock counts and access times that dominate the children's."""
    parent = node.parent
    assert parent is not None, f"{node} has no parent"
    assert node.size > 0 and node.size % page_size == 0, f"{node}: edge not page aligned"
    assert node.slots.dtype == torch.int64 and node.slots.shape == (node.size,), (
        f"{node}: slots {node.slots.dtype} {tuple(node.slots.shape)} vs key length {node.size}"
    )
    assert parent.children.get(node.key[:page_size]) is node, f"{node}: parent link broken"
    assert node.namespace == parent.namespace, f"{node}: namespace differs from its parent's"
    assert node.lock_count >= 0, f"{node}: negative lock count"
    child_locks = sum(child.lock_count for child in node.children.values())
    assert node.lock_count >= child_locks, f"{node}: fewer locks than its children hold"
    for first_page, child in node.children.items():
        assert child.key[:page_size] == first_page, f"{child}: keyed by {first_page}"
        assert child.last_access <= node.last_access, f"{child}: accessed after its parent"

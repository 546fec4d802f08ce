"""KV computed under one (weight version, adapter) is never matched under another: a property
test over the radix tree keyed by CacheNamespace, with inserts, matches and evictions in any
order."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixgen.radix import RadixCache
from radixgen.runtime.weights.version import CacheNamespace

NAMESPACES = st.builds(
    CacheNamespace, st.sampled_from(["default", "v1", "v2"]), st.sampled_from([None, "adapter-a"])
)
IDS = st.lists(st.integers(0, 3), min_size=1, max_size=8)  # few tokens: prefixes collide often
OPS = st.lists(
    st.tuples(st.sampled_from(["insert", "match", "evict"]), NAMESPACES, IDS),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops=OPS, page_size=st.sampled_from([1, 2]))
def test_no_prefix_is_matched_under_another_namespace(ops, page_size):
    owner: dict[int, CacheNamespace] = {}  # slot -> the namespace whose insert gave it to the tree
    cache = RadixCache(page_size=page_size, free_slots=lambda s: [owner.pop(x) for x in s.tolist()])
    next_slot = 0
    for op, namespace, ids in ops:
        if op == "evict":
            cache.evict(len(ids))
            continue
        match = cache.match_prefix(ids, namespace)
        assert all(owner[s] == namespace for s in match.slots.tolist()), (namespace, ids)
        if op == "insert":  # computed KV for the rest, on fresh slots
            new = torch.arange(next_slot, next_slot + len(ids), dtype=torch.int64)
            next_slot += len(ids)
            slots = torch.cat([match.slots, new[match.length :]])
            result = cache.insert(ids, slots, namespace)
            for s in slots[result.prefix_len : result.cached_len].tolist():
                owner[s] = namespace
        cache.check_integrity()
    assert set(owner) == {s for root in cache._roots.values() for s in _tree_slots(root)}


def _tree_slots(node):
    yield from node.slots.tolist()
    for child in node.children.values():
        yield from _tree_slots(child)

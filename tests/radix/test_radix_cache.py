"""RadixCache / NoPrefixCache: unit tests, then a stateful property test against a reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixgen.radix import InsertResult, MatchResult, NoPrefixCache, PrefixCache, RadixCache


class Freed:
    """free_slots callback that records every slot it is handed."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, slots: torch.Tensor) -> None:
        assert slots.dtype == torch.int64
        self.calls.append(slots.tolist())

    @property
    def slots(self) -> list[int]:
        return sorted(s for call in self.calls for s in call)


def make(page_size: int = 1) -> tuple[RadixCache, Freed]:
    freed = Freed()
    return RadixCache(page_size=page_size, free_slots=freed), freed


def slots(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def num_nodes(cache: RadixCache) -> int:
    return sum(1 for root in cache._roots.values() for _ in _walk(root))


def _walk(node):
    for child in node.children.values():
        yield child
        yield from _walk(child)


# ---- unit tests ------------------------------------------------------------------------------


def test_insert_then_match_returns_slots_in_order():
    cache, _ = make()
    assert cache.insert([1, 2, 3], slots(10, 11, 12)) == InsertResult(0, 3)
    m = cache.match_prefix([1, 2, 3, 4])
    assert m.slots.tolist() == [10, 11, 12] and m.length == 3
    assert cache.match_prefix([9]).length == 0
    assert cache.match_prefix([]).length == 0
    cache.check_integrity()


def test_match_inside_an_edge_splits_it():
    cache, _ = make()
    cache.insert([1, 2, 3, 4], slots(0, 1, 2, 3))
    assert num_nodes(cache) == 1
    m = cache.match_prefix([1, 2, 9])
    assert m.slots.tolist() == [0, 1]
    assert num_nodes(cache) == 2 and m.node.key == (1, 2)
    cache.check_integrity()
    assert cache.match_prefix([1, 2, 3, 4]).slots.tolist() == [0, 1, 2, 3]
    assert cache.match_prefix([1, 2]).node is m.node  # already split: no new node
    assert num_nodes(cache) == 2


def test_insert_diverging_inside_an_edge_splits_and_keeps_tree_slots():
    cache, freed = make()
    cache.insert([1, 2, 3, 4], slots(0, 1, 2, 3))
    assert cache.insert([1, 2, 7, 8], slots(20, 21, 22, 23)) == InsertResult(2, 4)
    assert num_nodes(cache) == 3
    assert cache.match_prefix([1, 2, 7, 8]).slots.tolist() == [0, 1, 22, 23]
    assert cache.total_size() == 6
    cache.check_integrity()
    cache.reset()
    assert freed.slots == [0, 1, 2, 3, 22, 23]  # the caller keeps 20, 21 (duplicates)


def test_insert_never_replaces_and_reports_prefix_len():
    cache, _ = make()
    cache.insert([1, 2, 3], slots(0, 1, 2))
    assert cache.insert([1, 2, 3], slots(5, 6, 7)) == InsertResult(3, 3)
    assert cache.insert([1, 2], slots(5, 6)) == InsertResult(2, 2)
    assert cache.match_prefix([1, 2, 3]).slots.tolist() == [0, 1, 2]
    assert cache.total_size() == 3


def test_insert_copies_slots_and_match_result_is_a_copy():
    cache, _ = make()
    src = slots(0, 1, 2)
    cache.insert([1, 2, 3], src)
    src.fill_(-1)
    m = cache.match_prefix([1, 2, 3])
    m.slots.fill_(-7)
    assert cache.match_prefix([1, 2, 3]).slots.tolist() == [0, 1, 2]


def test_token_ids_may_be_a_tensor_or_tuple():
    cache, _ = make()
    cache.insert(torch.tensor([4, 5, 6]), slots(0, 1, 2))
    assert cache.match_prefix((4, 5)).length == 2
    assert cache.match_prefix(torch.tensor([4, 5, 6])).length == 3


def test_namespaces_never_match_each_other():
    cache, freed = make()
    cache.insert([1, 2, 3], slots(0, 1, 2), namespace="v1")
    assert cache.match_prefix([1, 2, 3]).length == 0
    assert cache.match_prefix([1, 2, 3], "v2").length == 0
    assert cache.insert([1, 2, 3], slots(3, 4, 5)) == InsertResult(0, 3)
    assert cache.match_prefix([1, 2, 3], "v1").slots.tolist() == [0, 1, 2]
    assert cache.match_prefix([1, 2, 3], None).slots.tolist() == [3, 4, 5]
    cache.check_integrity()
    cache.reset()
    assert freed.slots == [0, 1, 2, 3, 4, 5]


def test_lock_protects_path_from_eviction_and_tracks_sizes():
    cache, freed = make()
    cache.insert([1, 2, 3, 4], slots(0, 1, 2, 3))
    cache.insert([1, 2, 5], slots(9, 9, 4))
    m = cache.match_prefix([1, 2, 3, 4])
    cache.lock(m.node)
    assert (cache.protected_size(), cache.evictable_size()) == (4, 1)
    assert cache.evict(100) == 1 and freed.slots == [4]
    assert cache.match_prefix([1, 2, 3, 4]).length == 4
    cache.lock(m.node)
    cache.unlock(m.node)
    assert cache.evict(100) == 0
    cache.unlock(m.node)
    assert (cache.protected_size(), cache.evictable_size()) == (0, 4)
    assert cache.evict(1) == 2  # the leaf (3, 4) goes whole
    assert cache.evict(100) == 2 and freed.slots == [0, 1, 2, 3, 4]
    assert cache.total_size() == 0
    cache.check_integrity()


def test_lock_of_a_prefix_node_then_split_below_keeps_counts():
    cache, _ = make()
    cache.insert([1, 2, 3, 4], slots(0, 1, 2, 3))
    m = cache.match_prefix([1, 2, 3, 4])
    cache.lock(m.node)
    cache.match_prefix([1, 2, 9])  # splits the locked edge
    cache.check_integrity()
    assert cache.protected_size() == 4
    cache.unlock(m.node)
    assert (cache.protected_size(), cache.evictable_size()) == (0, 4)
    cache.check_integrity()


def test_unlock_below_zero_and_stale_handles_assert():
    cache, _ = make()
    cache.insert([1, 2], slots(0, 1))
    node = cache.match_prefix([1, 2]).node
    with pytest.raises(AssertionError):
        cache.unlock(node)
    cache.evict(2)
    with pytest.raises(AssertionError):
        cache.lock(node)  # evicted


def test_root_and_none_handles_lock_as_no_ops():
    cache, _ = make()
    root = cache.match_prefix([1]).node
    cache.lock(root)
    cache.lock(None)
    cache.unlock(root)
    cache.unlock(None)
    assert cache.protected_size() == 0
    cache.check_integrity()


def test_evict_takes_least_recently_used_first():
    cache, freed = make()
    cache.insert([1, 1], slots(0, 1))
    cache.insert([2, 2], slots(2, 3))
    cache.insert([3, 3], slots(4, 5))
    cache.match_prefix([1, 1])  # now [2, 2] is the oldest
    assert cache.evict(1) == 2 and freed.slots == [2, 3]
    assert cache.evict(1) == 2 and freed.slots == [2, 3, 4, 5]
    assert cache.match_prefix([1, 1]).length == 2


def test_parent_becomes_evictable_after_its_children():
    cache, freed = make()
    cache.insert([1, 2, 3], slots(0, 1, 2))
    cache.insert([1, 2, 4], slots(0, 1, 3))
    cache.insert([5], slots(4))
    cache.match_prefix([5])  # the shared (1, 2) branch is older than (5,)
    assert cache.evict(4) == 4
    assert freed.slots == [0, 1, 2, 3]
    assert cache.match_prefix([5]).length == 1
    cache.check_integrity()


def test_page_size_4_rounds_down_and_compares_whole_pages():
    cache, freed = make(page_size=4)
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert cache.insert(ids, torch.arange(10)) == InsertResult(0, 8)
    assert cache.total_size() == 8
    assert cache.match_prefix(ids).slots.tolist() == list(range(8))
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7, 9]).length == 4  # second page differs
    assert cache.match_prefix([1, 2, 3]).length == 0  # partial page never matches
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7]).length == 4
    assert cache.insert([1, 2, 3, 4, 5, 6, 7, 0, 1], torch.arange(20, 29)) == InsertResult(4, 8)
    cache.check_integrity()
    cache.reset()
    assert freed.slots == [0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27]


def test_page_size_4_siblings_share_first_token_but_not_first_page():
    cache, _ = make(page_size=4)
    cache.insert([1, 2, 3, 4, 5, 5, 5, 5], torch.arange(8))
    cache.insert([1, 2, 3, 4, 5, 5, 5, 6], torch.arange(10, 18))
    assert cache.match_prefix([1, 2, 3, 4, 5, 5, 5, 6]).slots.tolist() == [
        0,
        1,
        2,
        3,
        14,
        15,
        16,
        17,
    ]
    cache.check_integrity()


def test_reset_frees_everything_and_requires_no_locks():
    cache, freed = make()
    cache.insert([1, 2], slots(0, 1), namespace="a")
    cache.insert([3], slots(2))
    node = cache.match_prefix([1, 2], "a").node
    cache.lock(node)
    with pytest.raises(AssertionError):
        cache.reset()
    cache.unlock(node)
    cache.reset()
    assert freed.slots == [0, 1, 2] and cache.total_size() == 0
    assert cache.match_prefix([1, 2], "a").length == 0
    with pytest.raises(AssertionError):
        cache.lock(node)  # from before the reset
    cache.check_integrity()


def test_check_integrity_detects_corruption():
    cache, _ = make()
    cache.insert([1, 2, 3], slots(0, 1, 2))
    cache.insert([1, 4], slots(0, 3))
    node = cache.match_prefix([1, 2, 3]).node
    node.slots = slots(0)
    with pytest.raises(AssertionError):
        cache.check_integrity()
    node.slots = slots(1, 2)
    cache.check_integrity()
    cache._evictable[0] += 1
    with pytest.raises(AssertionError):
        cache.check_integrity()


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        RadixCache(page_size=0, free_slots=Freed())
    with pytest.raises(TypeError):
        RadixCache(page_size=1)
    cache, _ = make()
    with pytest.raises(ValueError):
        cache.insert([1, 2, 3], slots(0, 1))


def test_no_prefix_cache_is_a_null_object():
    cache = NoPrefixCache(page_size=4, free_slots=Freed())
    m = cache.match_prefix([1, 2, 3, 4])
    assert isinstance(m, MatchResult) and m.length == 0 and m.node is None
    assert cache.insert([1, 2, 3, 4], torch.arange(4)) == InsertResult(0, 0)
    cache.lock(m.node)
    cache.unlock(m.node)
    assert cache.evict(10) == 0
    assert (cache.total_size(), cache.evictable_size(), cache.protected_size()) == (0, 0, 0)
    cache.reset()
    cache.check_integrity()


def test_both_caches_satisfy_the_protocol():
    assert isinstance(RadixCache(free_slots=Freed()), PrefixCache)
    assert isinstance(NoPrefixCache(), PrefixCache)


# ---- stateful property test ------------------------------------------------------------------

NAMESPACES = st.sampled_from([None, "lora-a"])


def common_len(a, b, page_size: int) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n - n % page_size


class RadixMachine(RuleBasedStateMachine):
    """Reference: `entries` lists (namespace, ids, tree slots) of inserted sequences, each cut
    back to the part still cached. Every slot the cache takes must come back exactly once."""

    @initialize(page_size=st.sampled_from([1, 2, 4]))
    def setup(self, page_size):
        self.page = page_size
        self.cache = RadixCache(page_size=page_size, free_slots=self.on_free)
        self.entries: list[tuple[object, tuple[int, ...], list[int]]] = []
        self.locks: list[tuple[object, object, tuple[int, ...], list[int]]] = []
        self.taken: set[int] = set()
        self.freed: set[int] = set()
        self.just_freed: list[int] = []
        self.next_slot = 0
        self.clock = 0
        self.last_access: dict[int, int] = {}  # cached slot -> clock of its last match/insert

    def on_free(self, slots: torch.Tensor) -> None:
        for s in slots.tolist():
            assert s in self.taken, f"freed slot {s} the cache never took"
            assert s not in self.freed, f"double free of {s}"
            self.freed.add(s)
            self.just_freed.append(s)

    def expected(self, namespace, ids) -> list[int]:
        best: list[int] = []
        for ns, e_ids, e_slots in self.entries:
            n = common_len(e_ids, ids, self.page) if ns == namespace else 0
            if n > len(best):
                best = e_slots[:n]
        return best

    def draw_ids(self, data) -> tuple[int, ...]:
        """Random ids over a 3-token vocabulary, often extending a cached sequence."""
        head: tuple[int, ...] = ()
        if self.entries and data.draw(st.booleans()):
            _, e_ids, _ = data.draw(st.sampled_from(self.entries))
            head = e_ids[: data.draw(st.integers(0, len(e_ids)))]
        return head + tuple(data.draw(st.lists(st.integers(0, 2), max_size=10)))

    def touch(self, touched: list[int]) -> None:
        self.clock += 1
        self.last_access.update((s, self.clock) for s in touched)

    def match_and_check(self, ids, namespace) -> MatchResult:
        m = self.cache.match_prefix(ids, namespace)
        assert m.slots.tolist() == self.expected(namespace, ids)
        self.touch(m.slots.tolist())
        return m

    def unlocked_leaf_ends(self) -> list[int]:
        """Slot of each cached sequence's last token when nothing cached extends it and no
        lock covers it: these are the tree's evictable leaves."""
        locked = {s for _, _, _, lock_slots in self.locks for s in lock_slots}
        ends = []
        for ns, ids, e_slots in self.entries:
            extended = any(
                o_ns == ns and len(o_ids) > len(ids) and o_ids[: len(ids)] == ids
                for o_ns, o_ids, _ in self.entries
            )
            if not extended and e_slots[-1] not in locked:
                ends.append(e_slots[-1])
        return ends

    def fresh(self, n: int) -> list[int]:
        self.next_slot += n
        return list(range(self.next_slot - n, self.next_slot))

    @rule(data=st.data(), namespace=NAMESPACES, reuse_match=st.booleans())
    def insert(self, data, namespace, reuse_match):
        ids = self.draw_ids(data)
        want = self.expected(namespace, ids)
        head = self.match_and_check(ids, namespace).slots.tolist() if reuse_match else []
        offered = head + self.fresh(len(ids) - len(head))
        src = torch.tensor(offered, dtype=torch.int64)
        res = self.cache.insert(ids, src, namespace)
        src.fill_(-1)  # the cache must have copied what it took
        assert res == InsertResult(len(want), len(ids) - len(ids) % self.page)
        took = offered[res.prefix_len : res.cached_len]
        assert not self.taken.intersection(took)
        self.taken.update(took)
        self.touch(want + took)
        if res.cached_len:
            self.entries.append((namespace, ids[: res.cached_len], want + took))

    @rule(data=st.data(), namespace=NAMESPACES)
    def match(self, data, namespace):
        self.match_and_check(self.draw_ids(data), namespace)

    @rule(data=st.data(), namespace=NAMESPACES)
    def lock(self, data, namespace):
        ids = self.draw_ids(data)
        m = self.match_and_check(ids, namespace)
        self.cache.lock(m.node)
        self.locks.append((m.node, namespace, tuple(ids[: m.length]), m.slots.tolist()))

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data):
        i = data.draw(st.integers(0, len(self.locks) - 1))
        self.cache.unlock(self.locks.pop(i)[0])

    @rule(num_tokens=st.integers(0, 12))
    def evict(self, num_tokens):
        before = self.cache.evictable_size()
        self.just_freed = []
        num_freed = self.cache.evict(num_tokens)
        assert num_freed == len(self.just_freed) <= before
        assert num_freed >= num_tokens or self.cache.evictable_size() == 0
        assert num_freed == 0 or num_tokens > 0
        locked = {s for _, _, _, lock_slots in self.locks for s in lock_slots}
        assert not locked.intersection(self.just_freed), "evicted a locked slot"
        self.truncate_entries(set(self.just_freed))
        if self.just_freed:  # least recently used first: nothing older survives
            newest_freed = max(self.last_access.pop(s) for s in self.just_freed)
            assert all(self.last_access[s] >= newest_freed for s in self.unlocked_leaf_ends())

    def truncate_entries(self, gone: set[int]) -> None:
        kept = []
        for ns, ids, e_slots in self.entries:
            n = next((i for i, s in enumerate(e_slots) if s in gone), len(e_slots))
            assert n % self.page == 0 and gone.issuperset(e_slots[n:]), "not leaf-first"
            if n:
                kept.append((ns, ids[:n], e_slots[:n]))
        self.entries = kept

    @precondition(lambda self: not self.locks)
    @rule()
    def reset(self):
        self.cache.reset()
        self.entries, self.last_access = [], {}
        assert self.freed == self.taken

    @invariant()
    def consistent(self):
        self.cache.check_integrity()
        cached = {s for _, _, e_slots in self.entries for s in e_slots}
        assert self.cache.total_size() == len(cached) == len(self.taken) - len(self.freed)
        locked = {s for _, _, _, lock_slots in self.locks for s in lock_slots}
        assert self.cache.protected_size() == len(locked)
        assert self.cache.evictable_size() == len(cached) - len(locked)
        for _, namespace, ids, lock_slots in self.locks:
            assert self.expected(namespace, ids) == lock_slots, "a locked path lost tokens"

    def teardown(self):
        for node, *_ in self.locks:
            self.cache.unlock(node)
        self.cache.reset()
        assert self.freed == self.taken, "leaked slots"
        assert self.cache.total_size() == 0


RadixMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_radix_cache_against_reference = RadixMachine.TestCase


def test_tiers_split_nodes_and_evict_per_tier():
    """Mixed-precision KV: slots >= the boundary are branch-pool (tier 1) slots; every node
    holds one tier and sizes and eviction are per tier."""
    freed = Freed()
    cache = RadixCache(free_slots=freed, tier_boundary=100)
    # a prompt (prefix pool) then generated tokens (branch pool) then a second user turn
    cache.insert([1, 2, 3, 4, 5, 6], slots(0, 1, 100, 101, 2, 3))
    cache.check_integrity()
    assert [cache.total_size(t) for t in (0, 1)] == [4, 2] and num_nodes(cache) == 3
    assert cache.match_prefix([1, 2, 3, 4, 5, 6]).slots.tolist() == [0, 1, 100, 101, 2, 3]
    cache.insert([7, 8], slots(102, 103))
    lock = cache.match_prefix([1, 2, 3, 4, 5, 6]).node
    cache.lock(lock)
    assert cache.evictable_size(1) == 2 and cache.protected_size(1) == 2
    assert cache.evict(5, tier=0) == 0  # the only tier-0 leaf is locked
    assert cache.evict(1, tier=1) == 2 and sorted(freed.slots) == [102, 103]
    cache.unlock(lock)
    assert cache.evict(2, tier=0) == 2  # the tier-0 leaf [2, 3]; its tier-1 parent stays
    assert cache.total_size(1) == 2 and cache.total_size(0) == 2
    # more than the tier's leaves hold: the tier-1 node below [0, 1] goes too, so [0, 1] can
    assert cache.evictable_size(0) == 2 and cache.evict(10, tier=0) == 2
    assert cache.total_size(0) == 0 and cache.total_size(1) == 0
    cache.check_integrity()


def test_evicting_a_tier_takes_what_hangs_below_its_unlocked_nodes():
    """A first turn's branch (tier 1) with a cached second turn (tier 0) below it: evicting
    tier 1 frees the tier-0 leaf first, then the branch (everything evictable_size promised);
    a locked path is never touched."""
    freed = Freed()
    cache = RadixCache(free_slots=freed, tier_boundary=100)
    cache.insert([1, 2, 3, 4, 5, 6, 7], slots(0, 1, 100, 101, 102, 2, 3))  # prompt, branch, turn 2
    cache.insert([9, 8, 7, 6], slots(4, 5, 103, 6))  # another conversation
    keep = cache.match_prefix([9, 8, 7, 6]).node
    cache.lock(keep)
    assert cache.evictable_size(1) == 3
    assert cache.evict(3, tier=1) == 3
    assert sorted(freed.slots) == [2, 3, 100, 101, 102]
    assert cache.total_size(1) == 1 and cache.match_prefix([9, 8, 7, 6]).length == 4
    assert cache.evict(5, tier=1) == 0  # the rest is locked
    cache.unlock(keep)
    cache.check_integrity()
    with pytest.raises(ValueError, match="page_size 1"):
        RadixCache(page_size=2, free_slots=freed, tier_boundary=10)

"""Request-level KV bookkeeping between the radix cache, the slot allocator and the
request-to-token table. Invariant (checked in tests), per pool (tier): every slot is exactly
one of free, held by the radix cache, or owned by one request:
    allocator.num_free(t) + cache.total_size(t) + sum(owned slots of t) == capacity[t]

Tiers: with mixed-precision KV, prompt positions get prefix-pool slots (tier 0) and generated
positions branch-pool slots (tier 1); with one pool both are tier 0.
"""

from __future__ import annotations

from typing import Callable

import torch

from radixgen.radix import PrefixCache
from radixgen.radix.kv_pool import ReqToTokenTable, SlotAllocator
from radixgen.runtime.request import Request


class KVManager:
    def __init__(self, cache: PrefixCache, allocator: SlotAllocator, table: ReqToTokenTable,
                 mixed: bool = False, on_insert: Callable[[list[int], int], None] | None = None):
        self.cache, self.allocator, self.table = cache, allocator, table
        self.branch_tier = 1 if mixed else 0
        self.on_insert = on_insert  # (token ids, how many the tree held before): a drafter learns

    def _insert(self, req: Request, ids: list[int], slots: torch.Tensor):
        res = self.cache.insert(ids, slots, req.namespace)
        if self.on_insert is not None:
            self.on_insert(ids, res.prefix_len)
        return res

    def available(self, tier: int | None = None) -> int:
        """Slots obtainable now (of `tier`, or all): free ones plus what eviction could release."""
        return self.allocator.num_free(tier) + self.cache.evictable_size(tier)

    def fits(self, prompt_tokens: int, generated_tokens: int) -> bool:
        """Could `prompt_tokens` prompt positions and `generated_tokens` generated positions get
        slots now (counting eviction)?"""
        if self.branch_tier == 0:
            return prompt_tokens + generated_tokens <= self.available()
        return prompt_tokens <= self.available(0) and generated_tokens <= self.available(1)

    def fits_when_empty(self, req: Request, capacity: tuple[int, ...]) -> bool:
        """Could req's whole sequence plus its next token fit the empty pools?"""
        prompt, generated = len(req.input_ids), req.seq_len + 1 - len(req.input_ids)
        if self.branch_tier == 0:
            return prompt + generated <= sum(capacity)
        return prompt <= capacity[0] and generated <= capacity[1]

    def hits_by_tier(self, req: Request) -> tuple[int, int]:
        """req's cached prompt tokens (its first kv_len slots after admission) per pool."""
        if self.branch_tier == 0:
            return req.kv_len, 0
        branch = int((self.table.read(req.row, req.kv_len) >= self.allocator.boundary).sum())
        return req.kv_len - branch, branch

    def split_positions(self, req: Request, start: int, n: int) -> tuple[int, int]:
        """How many of req's positions [start, start + n) are prompt / generated positions."""
        prompt = max(min(start + n, len(req.input_ids)) - start, 0)
        return prompt, n - prompt

    def alloc_positions(self, req: Request, start: int, n: int) -> torch.Tensor | None:
        """Slots for req's positions [start, start + n), each from its tier's pool; None (and
        nothing taken) if they cannot be had."""
        prompt, generated = self.split_positions(req, start, n)
        if not prompt:  # only generated positions (a retracted request prefilled again)
            return self.alloc(generated, self.branch_tier)
        head = self.alloc(prompt, 0)
        if head is None or not generated:
            return head
        tail = self.alloc(generated, self.branch_tier)
        if tail is None:
            self.allocator.free(head)
            return None
        return torch.cat([head, tail])

    def match(self, req: Request) -> int:
        """Cached prefix length for req (see Request.max_cached_len)."""
        return self.cache.match_prefix(req.all_ids[:req.max_cached_len], req.namespace).length

    def admit(self, req: Request) -> bool:
        """Give req a table row and its cached prefix (locked). False if no row is free."""
        row = self.table.alloc_row()
        if row is None:
            return False
        m = self.cache.match_prefix(req.all_ids[:req.max_cached_len], req.namespace)
        self.cache.lock(m.node)
        self.table.write(row, 0, m.slots)
        req.row, req.node, req.tree_len, req.kv_len = row, m.node, m.length, m.length
        return True

    def alloc(self, n: int, tier: int = 0) -> torch.Tensor | None:
        """n fresh slots of `tier`, evicting cached prefixes of that tier if needed; None if
        even that is not enough."""
        short = n - self.allocator.num_free(tier)
        if short > 0:
            self.cache.evict(short, tier if self.branch_tier else None)
        return self.allocator.alloc(n, tier)

    def cache_unfinished(self, req: Request) -> None:
        """Share req's computed tokens through the tree while it keeps running; req then uses
        the tree's slots for them (its duplicates are freed)."""
        ids = req.all_ids[:req.kv_len]
        # a view of the row: insert and free both copy what they keep, before the row is rewritten
        slots = self.table.read(req.row, req.kv_len)
        res = self._insert(req, ids, slots)
        self.allocator.free(slots[req.tree_len:res.prefix_len])
        m = self.cache.match_prefix(ids[:res.cached_len], req.namespace)
        assert m.length == res.cached_len, (m.length, res)
        self.table.write(req.row, 0, m.slots)
        self.cache.lock(m.node)
        self.cache.unlock(req.node)
        req.node, req.tree_len = m.node, m.length

    def release(self, req: Request) -> None:
        """Req is done with its KV (finished or retracted): computed tokens go to the tree,
        everything else back to the allocator; the row is freed."""
        ids = req.all_ids[:req.kv_len]
        slots = self.table.read(req.row, req.kv_len)
        res = self._insert(req, ids, slots)
        self.allocator.free(slots[req.tree_len:res.prefix_len])
        self.allocator.free(slots[max(res.cached_len, req.tree_len):])
        self._drop_row(req)

    def _drop_row(self, req: Request) -> None:
        """Unlock req's cached prefix and free its table row."""
        self.cache.unlock(req.node)
        self.table.free_row(req.row)
        req.reset_kv_state()

    def release_tree(self, req: Request, slots: torch.Tensor, paths: list[tuple[list[int], list[int]]]) -> None:
        """Req (admitted, nothing computed past its cached prefix) ran a token tree whose rows
        wrote KV into `slots`: cache each path, given as (token ids from position 0, the rows
        for positions kv_len on); free the rows no path handed to the tree, and req's row."""
        prefix = self.table.read(req.row, req.kv_len)
        taken = torch.zeros(len(slots), dtype=torch.bool, device=slots.device)
        for ids, rows in paths:
            rows_t = torch.tensor(rows, dtype=torch.int64, device=slots.device)
            res = self._insert(req, ids, torch.cat([prefix, slots[rows_t]]))
            taken[rows_t[max(res.prefix_len - req.kv_len, 0):max(res.cached_len - req.kv_len, 0)]] = True
        self.allocator.free(slots[~taken])
        self._drop_row(req)

    def keep_rows(self, req: Request, slots: torch.Tensor, keep: list[int]) -> None:
        """After a verify forward wrote KV for the tree rows into `slots`: req's next positions
        take slots[keep] in order (the root and the accepted path), the others are freed."""
        keep_t = torch.tensor(keep, dtype=torch.int64, device=slots.device)
        dropped = torch.ones(len(slots), dtype=torch.bool, device=slots.device)
        dropped[keep_t] = False
        self.allocator.free(slots[dropped])
        self.table.write(req.row, req.kv_len, slots[keep_t])
        req.kv_len += len(keep)

    def truncate(self, req: Request, kv_len: int) -> None:
        """Free req's own slots of positions [kv_len, req.kv_len) (kv_len >= req.tree_len)."""
        if kv_len < req.kv_len:
            assert kv_len >= req.tree_len, (kv_len, req.tree_len)
            self.allocator.free(self.table.read(req.row, req.kv_len, start=kv_len))
            req.kv_len = kv_len

    def owned_slots(self, req: Request) -> int:
        return req.kv_len - req.tree_len if req.row is not None else 0

"""Request-level KV bookkeeping between the radix cache, the slot allocator and the
request-to-token table. Invariant (checked in tests), per pool (tier): every slot is exactly
one of free, held by the radix cache, or owned by one request:
    allocator.num_free(t) + cache.total_size(t) + sum(owned slots of t) == capacity[t]

Tiers: with mixed-precision KV, prompt positions get prefix-pool slots (tier 0) and generated
positions branch-pool slots (tier 1); with one pool both are tier 0.

Branch window (mixed KV, `window=(S, N)`): a request's first S generated tokens and its newest N
keep the prefix precision. New tokens are written to the prefix pool; once a token is older than
the newest N (checked in batches of DEMOTE_BATCH tokens) its KV is moved into the branch pool
(`move_kv`: dequantize, re-quantize) and its prefix slot freed. Only slots the request owns move:
positions already in the radix tree stay as they are.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from radixgen.radix import PrefixCache
from radixgen.radix.kv_pool import ReqToTokenTable, SlotAllocator
from radixgen.runtime.request import Request

DEMOTE_BATCH = 8  # move a request's tokens that left its window in batches (fewer KV copies)


class KVManager:
    def __init__(
        self,
        cache: PrefixCache,
        allocator: SlotAllocator,
        table: ReqToTokenTable,
        mixed: bool = False,
        on_insert: Callable[[list[int], int, Any], None] | None = None,
        window: tuple[int, int] | None = None,
        move_kv: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
    ):
        self.cache, self.allocator, self.table = cache, allocator, table
        self.branch_tier = 1 if mixed else 0
        # (token ids, how many the tree held before, the request's adapter): a drafter learns
        self.on_insert = on_insert
        if mixed and window is not None and move_kv is None:
            raise ValueError("a branch window needs move_kv to move KV between the pools")
        self.window = window if mixed else None  # (sink, recent) generated tokens kept in tier 0
        self.move_kv = move_kv  # (from slots, to slots): copy every layer's KV across pools

    @property
    def new_token_tier(self) -> int:
        """The pool a newly generated token's KV is written to."""
        return 0 if self.window else self.branch_tier

    def _insert(self, req: Request, ids: list[int], slots: torch.Tensor):
        res = self.cache.insert(ids, slots, req.namespace)
        if self.on_insert is not None:
            self.on_insert(ids, res.prefix_len, req.adapter_key)
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
        first, second = self.split_positions(req, 0, req.seq_len + 1)
        if self.branch_tier == 0:
            return first + second <= sum(capacity)
        return first <= capacity[0] and second <= capacity[1]

    def generated_need(self, tokens: int) -> tuple[int, int]:
        """(tier 0, tier 1) slots that `tokens` more generated tokens of one request may need at
        once (with a window: the window's share in tier 0, and every token in tier 1 at worst)."""
        if self.window:
            return min(tokens, sum(self.window) + DEMOTE_BATCH), tokens
        return 0, tokens

    def hits_by_tier(self, req: Request) -> tuple[int, int]:
        """req's cached prompt tokens (its first kv_len slots after admission) per pool."""
        if self.branch_tier == 0:
            return req.kv_len, 0
        branch = int((self.table.read(req.row, req.kv_len) >= self.allocator.boundary).sum())
        return req.kv_len - branch, branch

    def _position_tiers(self, req: Request, start: int, n: int) -> torch.Tensor:
        """The pool (tier) of each of req's positions [start, start + n): bool, True = tier 1.
        Prompt positions are tier 0; generated ones the branch tier, except inside the window."""
        pos = torch.arange(start, start + n)
        gen = pos - len(req.input_ids)  # generated-token index (negative: a prompt position)
        tiers = gen >= 0 if self.branch_tier else torch.zeros(n, dtype=torch.bool)
        if self.window:
            sink, recent = self.window
            tiers &= (gen >= sink) & (gen < len(req.output_ids) - recent)
        return tiers

    def split_positions(self, req: Request, start: int, n: int) -> tuple[int, int]:
        """How many of req's positions [start, start + n) need tier-0 / tier-1 slots (prompt /
        generated positions, unless a branch window keeps some generated ones in tier 0)."""
        prompt = max(min(start + n, len(req.input_ids)) - start, 0)
        if not self.window:
            return prompt, n - prompt
        second = int(self._position_tiers(req, start, n).sum())
        return n - second, second

    def alloc_positions(self, req: Request, start: int, n: int) -> torch.Tensor | None:
        """Slots for req's positions [start, start + n), each from its tier's pool; None (and
        nothing taken) if they cannot be had."""
        tiers = self._position_tiers(req, start, n)
        parts = []  # (positions of the tier, their slots)
        for tier, mask in ((0, ~tiers), (1, tiers)):
            count = int(mask.sum())
            if count:
                got = self.alloc(count, tier)
                if got is None:
                    for _, taken in parts:
                        self.allocator.free(taken)
                    return None
                parts.append((mask, got))
        if len(parts) != 2:
            return parts[0][1] if parts else self.alloc(0, 0)
        out = torch.empty(n, dtype=parts[0][1].dtype, device=parts[0][1].device)
        for mask, got in parts:
            out[mask.to(got.device)] = got
        return out

    def demote(self, reqs: list[Request]) -> int:
        """Branch window: move each request's owned tokens that left its window from tier 0 to
        tier 1 (in batches of DEMOTE_BATCH per request). Returns the tokens moved; 0 (nothing
        changed) if tier 1 cannot give the slots now."""
        if not self.window:
            return 0
        sink, recent = self.window
        rows, positions, ends = [], [], []
        for req in reqs:
            if req.row is None:
                continue
            first = max(req.demoted_upto, req.tree_len, len(req.input_ids) + sink)
            end = min(req.kv_len, len(req.input_ids) + len(req.output_ids) - recent)
            if end - first < DEMOTE_BATCH:
                continue
            rows.append(torch.full((end - first,), req.row, dtype=torch.int64))
            positions.append(torch.arange(first, end))
            ends.append((req, end))
        if not ends:
            return 0
        device = self.table.table.device
        rows_t, pos_t = torch.cat(rows).to(device), torch.cat(positions).to(device)
        slots = self.table.table[rows_t, pos_t]
        keep = torch.nonzero(slots < self.allocator.boundary)[:, 0]  # one sync for the batch
        rows_t, pos_t, old = rows_t[keep], pos_t[keep], slots[keep]
        if len(old):  # else the ranges were in tier 1 already (placed there by a re-prefill)
            new = self.alloc(len(old), 1)
            if new is None:
                return 0
            self.move_kv(old, new)
            self.table.table[rows_t, pos_t] = new
            self.allocator.free(old)
        for req, end in ends:
            req.demoted_upto = end
        return len(old)

    def _match(self, req: Request):
        """req's cached prefix (see Request.max_cached_len), cut before its first branch-pool
        slot for a request that reuses only the prefix pool (Request.prefix_pool_only)."""
        ids = req.all_ids[: req.max_cached_len]
        m = self.cache.match_prefix(ids, req.namespace)
        if req.prefix_pool_only and self.branch_tier and m.length:
            branch = torch.nonzero(m.slots >= self.allocator.boundary)
            if len(branch):
                m = self.cache.match_prefix(ids[: int(branch[0, 0])], req.namespace)
        return m

    def match(self, req: Request) -> int:
        """Cached prefix length for req."""
        return self._match(req).length

    def admit(self, req: Request) -> bool:
        """Give req a table row and its cached prefix (locked). False if no row is free."""
        row = self.table.alloc_row()
        if row is None:
            return False
        m = self._match(req)
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
        ids = req.all_ids[: req.kv_len]
        # a view of the row: insert and free both copy what they keep, before the row is rewritten
        slots = self.table.read(req.row, req.kv_len)
        res = self._insert(req, ids, slots)
        self.allocator.free(slots[req.tree_len : res.prefix_len])
        m = self.cache.match_prefix(ids[: res.cached_len], req.namespace)
        assert m.length == res.cached_len, (m.length, res)
        self.table.write(req.row, 0, m.slots)
        self.cache.lock(m.node)
        self.cache.unlock(req.node)
        req.node, req.tree_len = m.node, m.length

    def release(self, req: Request) -> None:
        """Req is done with its KV (finished or retracted): computed tokens go to the tree,
        everything else back to the allocator; the row is freed."""
        ids = req.all_ids[: req.kv_len]
        slots = self.table.read(req.row, req.kv_len)
        res = self._insert(req, ids, slots)
        self.allocator.free(slots[req.tree_len : res.prefix_len])
        self.allocator.free(slots[max(res.cached_len, req.tree_len) :])
        self._drop_row(req)

    def _drop_row(self, req: Request) -> None:
        """Unlock req's cached prefix and free its table row."""
        self.cache.unlock(req.node)
        self.table.free_row(req.row)
        req.reset_kv_state()

    def release_tree(
        self, req: Request, slots: torch.Tensor, paths: list[tuple[list[int], list[int]]]
    ) -> None:
        """Req (admitted, nothing computed past its cached prefix) ran a token tree whose rows
        wrote KV into `slots`: cache each path, given as (token ids from position 0, the rows
        for positions kv_len on); free the rows no path handed to the tree, and req's row."""
        prefix = self.table.read(req.row, req.kv_len)
        taken = torch.zeros(len(slots), dtype=torch.bool, device=slots.device)
        for ids, rows in paths:
            rows_t = torch.tensor(rows, dtype=torch.int64, device=slots.device)
            res = self._insert(req, ids, torch.cat([prefix, slots[rows_t]]))
            taken[
                rows_t[max(res.prefix_len - req.kv_len, 0) : max(res.cached_len - req.kv_len, 0)]
            ] = True
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

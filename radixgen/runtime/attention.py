"""Attention over a paged KV pool, behind one backend interface.

`TorchAttention` is the portable reference path (plain PyTorch SDPA over gathered KV). The
kernels issue plugs Triton / flashinfer backends in behind the same two methods.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F

from radixgen.kernels.cpu_decode_attention import SharedSegments, cpu_decode_attention
from radixgen.kernels.cpu_decode_attention import available as cpu_kernel_available
from radixgen.radix.kv_pool import KVPool
from radixgen.runtime.cascade import (
    MIN_SHARED_PREFIX,
    CausalExtendPlan,
    DecodePlan,
    PrefixGroup,
    attention_with_lse,
    merge_states,
    plan_causal_extend,
    plan_decode,
)
from radixgen.runtime.forward_batch import ForwardBatch


class AttentionBackend(Protocol):
    def begin(self, batch: ForwardBatch) -> None:
        """Precompute per-forward metadata (masks, gather indices); valid until the next begin."""

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pool: KVPool
    ) -> torch.Tensor:
        """Write k, v [T, Hkv, D] into `pool` at the batch's out_slots, then attend q [T, Hq, D]
        over each request's cached + new KV. Returns [T, Hq, D]."""


class TorchAttention:
    """SDPA over KV gathered from the pool; GQA folded into the query dimension. Decode reads
    shared prefixes once per group of requests (cascade, see runtime/cascade.py) unless
    `cascade=False`."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, cascade: bool = True):
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.group = num_heads // num_kv_heads
        self.cascade = cascade
        self.batch: ForwardBatch | None = None
        self.plan: DecodePlan | None = None
        self.ext_batch: ForwardBatch | None = None  # the extend part of the current batch
        self.dec_batch: ForwardBatch | None = None  # the decode part
        self.ext_plan: _ExtendPlan | None = None

    def begin(self, batch: ForwardBatch) -> None:
        self.batch = batch
        self.ext_batch, self.dec_batch = batch.parts()
        self.plan = self.ext_plan = None  # planned at the first layer, once the pool is known

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pool: KVPool
    ) -> torch.Tensor:
        pool.store(layer, self.batch.out_slots, k, v)
        return self._attend_stored(layer, q, pool)

    def _attend_stored(self, layer: int, q: torch.Tensor, pool: KVPool) -> torch.Tensor:
        """attend() once the batch's KV is in `pool`."""
        if self.ext_batch is None:
            return self._decode(layer, q, pool)
        if self.dec_batch is None:
            return self._extend(layer, q, pool)
        t_ext = sum(self.ext_batch.extend_lens)
        return torch.cat(
            [self._extend(layer, q[:t_ext], pool), self._decode(layer, q[t_ext:], pool)]
        )

    def _decode(self, layer: int, q: torch.Tensor, pool: KVPool) -> torch.Tensor:
        if self.plan is None:
            self.plan = plan_decode(
                self.dec_batch.kv_slots,
                self.dec_batch.seq_lens,
                MIN_SHARED_PREFIX if self.cascade else None,
            )
        plan, b, hkv, d = self.plan, self.dec_batch.batch_size, self.num_kv_heads, self.head_dim
        if _reads_pool_directly(
            pool, q
        ):  # the C++ kernel: rows read in place, groups merged inside
            if plan.shared is None:
                plan.shared = SharedSegments.build([(g.slots, g.members) for g in plan.groups])
            out, _ = cpu_decode_attention(
                q,
                pool.k[layer],
                pool.v[layer],
                plan.suffix_slots,
                plan.suffix_lens,
                shared=plan.shared,
                validate=layer == 0,
            )
            return out
        q4 = q.view(b, hkv, self.group, d)
        keys, values = pool.gather(layer, plan.suffix_slots)  # [B, S, Hkv, D] each
        k, v = keys.transpose(1, 2), values.transpose(1, 2)  # [B, Hkv, S, D]
        if not plan.groups:
            out = F.scaled_dot_product_attention(q4, k, v, attn_mask=plan.suffix_mask)
            return out.reshape(b, self.num_heads, d)
        out, lse = attention_with_lse(q4, k, v, plan.suffix_bias)  # [B, Hkv, G, D], [B, Hkv, G]
        for level in range(max(g.level for g in plan.groups) + 1):
            shared_out = torch.zeros_like(out)
            shared_lse = torch.full_like(lse, float("-inf"))  # rows outside every group: empty
            for group in (g for g in plan.groups if g.level == level):
                shared_out[group.members], shared_lse[group.members] = self._shared(
                    layer, q4, group, pool
                )
            out, lse = merge_states(out, lse, shared_out, shared_lse)
        return out.reshape(b, self.num_heads, d)

    def _shared(
        self, layer: int, q4: torch.Tensor, group: PrefixGroup, pool: KVPool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The group members' queries over their shared segment, read once:
        [m, Hkv, G, D] and log-sum-exp [m, Hkv, G]."""
        m, hkv, d = len(group.members), self.num_kv_heads, self.head_dim
        keys, values = pool.gather_segment(layer, group.slots, group.span)  # [P, Hkv, D]
        qg = q4[group.members].permute(1, 0, 2, 3).reshape(1, hkv, m * self.group, d)
        po, plse = attention_with_lse(qg, keys.transpose(0, 1)[None], values.transpose(0, 1)[None])
        po = po.view(hkv, m, self.group, d).transpose(0, 1)
        return po, plse.reshape(hkv, m, self.group).transpose(0, 1)

    def _extend(self, layer: int, q: torch.Tensor, pool: KVPool) -> torch.Tensor:
        if self.ext_plan is None:
            self.ext_plan = _ExtendPlan.plan(self.ext_batch, _reads_pool_directly(pool, q))
        batch, plan = self.ext_batch, self.ext_plan
        if plan.kernel is not None:
            c, shared = plan.kernel
            whole = len(c.token_rows) == q.shape[0]  # every token through the kernel: no copies
            o, _ = cpu_decode_attention(
                q if whole else q[c.token_rows],
                pool.k[layer],
                pool.v[layer],
                c.own_slots,
                c.own_lens,
                shared=shared,
                validate=layer == 0,
            )
            if whole:
                return o
        out = torch.empty_like(q)
        if plan.kernel is not None:
            out[c.token_rows] = o
        if plan.short is not None:
            out[plan.short.token_rows] = plan.short.attend(layer, q, pool)
        for i, mask in plan.masks.items():
            start, ext = plan.starts[i], batch.extend_lens[i]
            keys, values = pool.gather(layer, batch.kv_slots[i, : batch.seq_lens[i]])  # [L, Hkv, D]
            qi = q[start : start + ext].transpose(0, 1).unsqueeze(0)  # [1, Hq, ext, D]
            o = F.scaled_dot_product_attention(
                qi,
                keys.transpose(0, 1).unsqueeze(0),
                values.transpose(0, 1).unsqueeze(0),
                attn_mask=mask,
                is_causal=mask is None,
                enable_gqa=True,
            )  # [1, Hq, ext, D]
            out[start : start + ext] = o[0].transpose(0, 1)
        return out


class _ExtendPlan:
    """How each extend request of a batch is attended: causal ones through the C++ kernel when
    it reads the pool (blocked causal segments, cascade.plan_causal_extend); the rest, token
    trees included, short ones together (_ShortExtends) and long ones one SDPA call each."""

    def __init__(
        self,
        kernel: tuple[CausalExtendPlan, SharedSegments] | None,
        short: "_ShortExtends | None",
        masks: dict[int, torch.Tensor | None],
        starts: list[int],
    ):
        self.kernel, self.short, self.masks = kernel, short, masks
        self.starts = starts  # each request's first token row (ForwardBatch.extend_starts)

    @classmethod
    def plan(cls, batch: ForwardBatch, kernel_reads_pool: bool) -> "_ExtendPlan":
        todo, kernel, starts = list(range(batch.batch_size)), None, batch.extend_starts
        if kernel_reads_pool:
            causal = [i for i in todo if batch.tree_mask(i) is None]
            if causal:
                c = plan_causal_extend(
                    batch.kv_slots, batch.prefix_lens, batch.extend_lens, starts, causal
                )
                kernel = (c, SharedSegments.build(c.segments))
                todo = [i for i in todo if batch.tree_mask(i) is not None]
        short = _ShortExtends.plan(batch, todo)
        device = batch.kv_slots.device
        masks = {
            i: _extend_mask(batch.prefix_lens[i], batch.extend_lens[i], batch.tree_mask(i), device)
            for i in todo
            if short is None or i not in short.members
        }
        return cls(kernel, short, masks, starts)


class _ShortExtends:
    """Extends of a few tokens (speculative token trees, jump-forward runs) attended in one
    padded SDPA call instead of one call per request: queries [B, E] x keys [B, S] with a mask
    that shows each row its prefix and its causal or tree-visible new tokens."""

    MAX_TOKENS = 32  # longer extends (prefill chunks) are attended one request at a time

    def __init__(
        self,
        members: list[int],
        token_rows: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        pad_index: tuple[torch.Tensor, torch.Tensor],
    ):
        self.members, self.token_rows, self.slots, self.mask = members, token_rows, slots, mask
        self.pad_index = pad_index  # (request, row) of each member token in the padded queries

    @classmethod
    def plan(cls, batch: ForwardBatch, candidates: list[int]) -> "_ShortExtends | None":
        lens = batch.extend_lens
        members = [i for i in candidates if lens[i] <= cls.MAX_TOKENS]
        if len(members) < 2:
            return None
        device = batch.kv_slots.device
        starts = batch.extend_starts
        ext = torch.tensor([lens[i] for i in members])
        prefix = torch.tensor([batch.prefix_lens[i] for i in members])
        e_max, s_max = int(ext.max()), int((prefix + ext).max())
        rows = torch.arange(e_max)[None, :, None]  # [1, E, 1]
        col = (
            torch.arange(s_max)[None, None, :] - prefix[:, None, None]
        )  # [B, 1, S] new-token index
        mask = (col < 0) | ((col <= rows) & (col < ext[:, None, None]))  # prefix, then causal
        for b, i in enumerate(members):
            tree = batch.tree_mask(i)
            if tree is not None:
                p, e = int(prefix[b]), int(ext[b])
                mask[b, :e, p : p + e] = tree.to(torch.bool).cpu()
        mask &= rows < ext[:, None, None]
        mask[:, :, 0] |= ~(rows[0, :, 0][None, :] < ext[:, None])  # padding rows see key 0: no NaN
        req = torch.cat([torch.full((lens[i],), b) for b, i in enumerate(members)])
        row = torch.cat([torch.arange(lens[i]) for i in members])
        token_rows = torch.cat([torch.arange(starts[i], starts[i] + lens[i]) for i in members])
        return cls(
            members,
            token_rows.to(device),
            batch.kv_slots[members, :s_max],
            mask[:, None].to(device),
            (req.to(device), row.to(device)),
        )

    def attend(self, layer: int, q: torch.Tensor, pool: KVPool) -> torch.Tensor:
        """Outputs [member tokens, Hq, D] in `token_rows` order."""
        b, s = self.slots.shape
        e = self.mask.shape[2]
        keys, values = pool.gather(layer, self.slots)  # [B, S, Hkv, D]
        qp = q.new_zeros(b, e, *q.shape[1:])
        qp[self.pad_index] = q[self.token_rows]
        out = F.scaled_dot_product_attention(
            qp.transpose(1, 2),
            keys.transpose(1, 2),
            values.transpose(1, 2),
            attn_mask=self.mask,
            enable_gqa=True,
        )  # [B, Hq, E, D]
        return out.transpose(1, 2)[self.pad_index]


def _reads_pool_directly(pool: KVPool, q: torch.Tensor) -> bool:
    """Decode through the CPU kernel: a plain float32 / bfloat16 pool of q's dtype on the CPU
    (quantized pools dequantize through `gather`), once the kernel has compiled."""
    return (
        type(pool) is KVPool
        and q.device.type == "cpu"
        and q.dtype in _DIRECT_DTYPES
        and pool.dtype == pool.compute_dtype == q.dtype
        and cpu_kernel_available()
    )


_DIRECT_DTYPES = (torch.float32, torch.bfloat16)


def _extend_mask(
    prefix_len: int, extend_len: int, tree: torch.Tensor | None, device: torch.device
) -> torch.Tensor | None:
    """[extend_len, prefix_len + extend_len] bool: new token i sees the whole prefix and new
    token j iff j <= i (causal) or tree[i, j]. None for plain causal attention without prefix."""
    if tree is not None:
        seen = torch.ones(extend_len, prefix_len, dtype=torch.bool, device=device)
        return torch.cat([seen, tree.to(device=device, dtype=torch.bool)], dim=1)
    if prefix_len == 0:
        return None
    rows = torch.arange(extend_len, device=device)[:, None] + prefix_len
    return torch.arange(prefix_len + extend_len, device=device)[None, :] <= rows

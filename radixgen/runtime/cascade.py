"""Cascade (shared-prefix) decode attention in plain PyTorch.

Requests that share a cached prefix (a system prompt, tool schemas) point at the same KV slots
for it. Instead of gathering that prefix once per request, each group of requests reads it
once: attention is split into the shared part and each request's own suffix, and the two
partial results are merged by log-sum-exp state merging (FlashInfer's `merge_state`):
    m = max(s_A, s_B);  w_X = exp(s_X - m)
    v = (w_A v_A + w_B v_B) / (w_A + w_B);  s = m + log(w_A + w_B)
where s_X is the log-sum-exp of the scores over part X and v_X its attention output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_SHARED_PREFIX = 32  # shorter shared prefixes are read per request (not worth a group)


@dataclass
class PrefixGroup:
    members: torch.Tensor  # [m] batch rows sharing the prefix
    prefix_slots: torch.Tensor  # [prefix_len] KV slots of the shared prefix


@dataclass
class DecodePlan:
    groups: list[PrefixGroup]
    suffix_slots: torch.Tensor  # [batch, max_suffix_len] each request's KV after its group's prefix
    suffix_mask: torch.Tensor  # [batch, 1, 1, max_suffix_len] True where a key is valid


def plan_decode(kv_slots: torch.Tensor, seq_lens: list[int],
                min_shared: int | None = MIN_SHARED_PREFIX) -> DecodePlan:
    """Group requests whose slot rows start with the same >= min_shared slots (no groups when
    min_shared is None)."""
    lens = torch.tensor(seq_lens)
    prefix_lens = torch.zeros_like(lens)
    groups = []
    first = kv_slots[:, 0]
    values, counts = first.unique(return_counts=True)
    for value in values[counts > 1].tolist() if min_shared is not None else []:
        members = (first == value).nonzero()[:, 0]
        width = int(lens[members].min()) - 1  # the newest token always stays in the suffix
        rows = kv_slots[members, :width]
        shared = int((rows == rows[0]).all(0).int().cumprod(0).sum())
        if shared >= min_shared:
            groups.append(PrefixGroup(members, kv_slots[members[0], :shared]))
            prefix_lens[members] = shared
    suffix_lens = lens - prefix_lens
    span = torch.arange(int(suffix_lens.max()))
    cols = (prefix_lens[:, None] + span[None, :]).clamp(max=kv_slots.shape[1] - 1)
    suffix_slots = kv_slots.gather(1, cols)
    suffix_mask = (span[None, :] < suffix_lens[:, None])[:, None, None, :]
    return DecodePlan(groups, suffix_slots, suffix_mask)


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, H, Lq, D], k/v [B, H, Lk, D], mask bool broadcastable to [B, H, Lq, Lk]
    -> output [B, H, Lq, D] and log-sum-exp of the scaled scores [B, H, Lq] (float32)."""
    float_mask = None
    if mask is not None:
        float_mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill_(~mask, float("-inf"))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=float_mask)
    return out, lse.float()


def merge_states(v_a: torch.Tensor, s_a: torch.Tensor, v_b: torch.Tensor,
                 s_b: torch.Tensor) -> torch.Tensor:
    """Merge two partial attention results (see module docstring). v [..., D], s [...]."""
    m = torch.maximum(s_a, s_b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # two empty parts: no NaN
    w_a, w_b = torch.exp(s_a - m), torch.exp(s_b - m)
    total = (w_a + w_b).clamp_min(torch.finfo(torch.float32).tiny)
    merged = (v_a.float() * w_a[..., None] + v_b.float() * w_b[..., None]) / total[..., None]
    return merged.to(v_a.dtype)

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
    members: torch.Tensor  # [m] batch rows sharing the segment
    slots: torch.Tensor  # [segment_len] KV slots of the shared segment
    span: tuple[int, int] | None  # (first, last + 1) when the slots are one ascending run
    level: int = 0  # nesting depth: groups of one level have disjoint members


@dataclass
class DecodePlan:
    groups: list[PrefixGroup]  # shared segments; a request may be in several (nested prefixes)
    suffix_slots: torch.Tensor  # [batch, max_suffix_len] each request's KV after its segments
    suffix_mask: torch.Tensor  # [batch, 1, 1, max_suffix_len] True where a key is valid
    suffix_bias: torch.Tensor  # the same as an additive mask: 0 where valid, -inf elsewhere
    suffix_lens: torch.Tensor  # [batch] int64: valid entries of each suffix_slots row
    shared: object = None  # the groups in the form a backend's kernel takes, built by that backend


def plan_segments(
    kv_slots: torch.Tensor, limits: torch.Tensor, min_shared: int | None = MIN_SHARED_PREFIX
) -> tuple[list[PrefixGroup], torch.Tensor]:
    """Shared segments of the batch's KV (each read once for its whole group) and, per
    request, where its own part starts. Request i may share at most its first limits[i]
    tokens. Walks the trie of the slot rows; a shared run shorter than min_shared is not a
    group of its own but is read again by each subgroup below it. No groups if min_shared is
    None."""
    own_start = torch.zeros_like(limits)
    groups: list[PrefixGroup] = []
    if min_shared is not None and len(limits) >= 2:
        _visit(kv_slots, limits, torch.arange(len(limits)), 0, 0, 0, min_shared, groups, own_start)
    return groups, own_start


def plan_decode(
    kv_slots: torch.Tensor, seq_lens: list[int], min_shared: int | None = MIN_SHARED_PREFIX
) -> DecodePlan:
    """Segments for decode (the newest token always stays in the request's own suffix) and
    the padded suffix slot table."""
    device, kv_slots = kv_slots.device, kv_slots.cpu()  # planning is small host work
    lens = torch.tensor(seq_lens)
    groups, prefix_lens = plan_segments(kv_slots, lens - 1, min_shared)
    suffix_lens = lens - prefix_lens
    span = torch.arange(int(suffix_lens.max()))
    cols = (prefix_lens[:, None] + span[None, :]).clamp(max=kv_slots.shape[1] - 1)
    suffix_slots = kv_slots.gather(1, cols).to(device)
    suffix_mask = (span[None, :] < suffix_lens[:, None])[:, None, None, :].to(device)
    for group in groups:
        group.members, group.slots = group.members.to(device), group.slots.to(device)
    return DecodePlan(
        groups,
        suffix_slots,
        suffix_mask,
        additive_mask(suffix_mask, device),
        suffix_lens.to(device),
    )


EXTEND_BLOCK = 64  # new tokens that share one segment in a causal extend (plan_causal_extend)


@dataclass
class CausalExtendPlan:
    """Causal extend attention as decode-style rows for a cascade kernel (see plan_causal_extend)."""

    token_rows: torch.Tensor  # [T] rows of the extend part's tokens the plan covers, in row order
    own_slots: (
        torch.Tensor
    )  # [T, EXTEND_BLOCK] each token's own keys (the start of its block to itself)
    own_lens: torch.Tensor  # [T] int64
    segments: list[tuple[torch.Tensor, torch.Tensor]]  # (KV slots, member rows into token_rows)


def plan_causal_extend(
    kv_slots: torch.Tensor,
    prefix_lens: list[int],
    extend_lens: list[int],
    starts: list[int],
    requests: list[int],
    block: int = EXTEND_BLOCK,
) -> CausalExtendPlan:
    """Token t of request i, in block c = t // block of its new tokens, attends over the segment
    kv_slots[i, :prefix + c * block] (shared by the block's tokens: one GEMM-like pass) and its
    own keys kv_slots[i, prefix + c * block : prefix + t + 1] (at most `block`). starts[i]: the
    row of request i's first new token (ForwardBatch.extend_starts)."""
    kv_slots = kv_slots.cpu()
    rows, own, lens, segments, first = [], [], [], [], 0
    for i in requests:
        p, e = prefix_lens[i], extend_lens[i]
        t = torch.arange(e)
        own_start = p + t // block * block
        cols = (own_start[:, None] + torch.arange(block)[None, :]).clamp(max=kv_slots.shape[1] - 1)
        own.append(kv_slots[i][cols])
        lens.append(p + t + 1 - own_start)
        rows.append(t + starts[i])
        for c in range((e + block - 1) // block):
            if p + c * block:
                members = torch.arange(first + c * block, first + min(e, (c + 1) * block))
                segments.append((kv_slots[i, : p + c * block], members))
        first += e
    return CausalExtendPlan(torch.cat(rows), torch.cat(own), torch.cat(lens), segments)


def _visit(
    kv: torch.Tensor,
    limits: torch.Tensor,
    members: torch.Tensor,
    seg_start: int,
    start: int,
    level: int,
    min_shared: int,
    groups: list[PrefixGroup],
    own_start: torch.Tensor,
) -> None:
    """`members` share slot columns [0, start); [seg_start, start) is not yet in a group."""
    if len(members) < 2:
        own_start[members] = seg_start
        return
    width = int(limits[members].min())
    rows = kv[members, start:width]
    end = start + (int((rows == rows[0]).all(0).int().cumprod(0).sum()) if width > start else 0)
    if end - seg_start >= min_shared:
        groups.append(_group(members, kv[members[0], seg_start:end], level))
        seg_start, level = end, level + 1
    done = limits[members] <= end
    own_start[members[done]] = seg_start
    rest = members[~done]
    if len(rest):
        column = kv[rest, end]
        values, inverse, counts = column.unique(return_inverse=True, return_counts=True)
        alone = counts[inverse] == 1  # no one to share with from here on
        own_start[rest[alone]] = seg_start
        for value in values[counts > 1].tolist():
            _visit(
                kv,
                limits,
                rest[column == value],
                seg_start,
                end + 1,
                level,
                min_shared,
                groups,
                own_start,
            )


def _group(members: torch.Tensor, slots: torch.Tensor, level: int) -> PrefixGroup:
    first, last = int(slots[0]), int(slots[-1])
    is_run = last - first == len(slots) - 1 and bool((slots.diff() == 1).all())
    return PrefixGroup(members, slots, (first, last + 1) if is_run else None, level)


def additive_mask(mask: torch.Tensor, device: torch.device) -> torch.Tensor:
    """bool mask (True = attend) -> float32 0 / -inf."""
    return torch.zeros(mask.shape, device=device).masked_fill_(~mask, float("-inf"))


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, H, Lq, D], k/v [B, H, Lk, D], additive mask broadcastable to [B, H, Lq, Lk]
    -> output [B, H, Lq, D] and log-sum-exp of the scaled scores [B, H, Lq] (float32)."""
    if q.device.type != "cpu":  # the fused op below is CPU-only; the kernels issue brings GPU ones
        return _attention_with_lse_math(q, k, v, bias)
    if bias is not None and bias.dtype != q.dtype:
        bias = bias.to(q.dtype)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=bias)
    return out, lse.float()


def _attention_with_lse_math(q, k, v, bias):
    """The same in plain float32 math (any device)."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * q.shape[-1] ** -0.5
    if bias is not None:
        scores = scores + bias.float()
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None]).nan_to_num_(0.0)  # fully masked rows: zeros
    return torch.matmul(probs, v.float()).to(q.dtype), lse


def merge_states(
    v_a: torch.Tensor, s_a: torch.Tensor, v_b: torch.Tensor, s_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two partial attention results (see module docstring): v [..., D], s [...] ->
    merged v and s."""
    m = torch.maximum(s_a, s_b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # two empty parts: no NaN
    w_a, w_b = torch.exp(s_a - m), torch.exp(s_b - m)
    total = (w_a + w_b).clamp_min(torch.finfo(torch.float32).tiny)
    merged = (v_a.float() * w_a[..., None] + v_b.float() * w_b[..., None]) / total[..., None]
    return merged.to(v_a.dtype), m + torch.log(total)

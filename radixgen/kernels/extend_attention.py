"""Extend (prefill) attention of new tokens over a paged KV pool, with causal or custom masks.

Request b has queries q[qo_indptr[b]:qo_indptr[b+1]] and keys at the slots
kv_indices[kv_indptr[b]:kv_indptr[b+1]] of ONE pool (any format of kv_layout.py). The last
num_new[b] keys are the new tokens, which the queries are (so the query count equals num_new[b]);
query i sees every earlier key, and new key j iff j <= i (causal, custom_mask None) or
custom_mask[i, j] (a tree mask for speculative verification: per request a num_new x num_new
row-major bool block at mask_indptr[b]). num_new[b] = 0 is a pass over cached-prefix keys only:
every query sees every key (pair it with merge_state to combine pools). A query that sees no
key gets o = 0, lse = -inf.

One program per (query tile, request, KV head): the tile holds BLOCK_M tokens x the whole query
group of the KV head (rows = token * G_P2 + group member), so each KV row is read once per tile.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, check_kernel_tensor, store_rne
from .kv_layout import (
    KVBuffers,
    attend_ref,
    check_index,
    compute_dtype,
    head_factor,
    kernel_flags,
    load_kv_tile,
    output_buffers,
    prepare_q,
    written_out,
)

LOG2E = 1.4426950408889634
ROWS, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 64, 8, 3  # rows = query tokens x group per tile


@triton.jit
def _extend_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    kb_ptr,
    vb_ptr,
    kf_ptr,
    vf_ptr,
    qo_indptr,
    kv_indptr,
    kv_indices,
    num_new_ptr,
    mask_ptr,
    mask_indptr,
    o_ptr,
    lse_ptr,
    scale_log2,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    G_P2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
    PRESCALE: tl.constexpr,
    USE_ASM: tl.constexpr,
    PREC: tl.constexpr,
    HAS_MASK: tl.constexpr,
):
    tile, b, h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    q_start = tl.load(qo_indptr + b).to(tl.int64)
    n_q = tl.load(qo_indptr + b + 1).to(tl.int64) - q_start
    kv_start = tl.load(kv_indptr + b).to(tl.int64)
    kv_len = tl.load(kv_indptr + b + 1).to(tl.int64) - kv_start
    n_new = tl.load(num_new_ptr + b).to(tl.int64)
    n_old = kv_len - n_new  # keys every query sees
    r = tl.arange(0, BLOCK_M * G_P2)
    tok = tile * BLOCK_M + r // G_P2  # [R] query index within the request
    g = r % G_P2
    row_ok = (tok < n_q) & (g < G)
    heads = h * G + g
    d = tl.arange(0, D)
    q_rows = (q_start + tok) * HQ + heads  # [R]
    q = tl.load(q_ptr + q_rows[:, None] * D + d[None, :], mask=row_ok[:, None], other=0.0)
    q, inv_c = prepare_q(q.to(tl.float32), PRESCALE, CDT)
    k_mult = head_factor(kf_ptr, h, FMT) * inv_c * scale_log2
    if HAS_MASK:
        kv_end = kv_len
        mask_start = tl.load(mask_indptr + b).to(tl.int64)
    else:  # causal: new keys up to the tile's last query
        kv_end = n_old + tl.minimum(n_new, tile * BLOCK_M + BLOCK_M)
    kv_end = tl.where(tile * BLOCK_M < n_q, kv_end, 0)
    m_i = tl.full([BLOCK_M * G_P2], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M * G_P2], tl.float32)
    acc = tl.zeros([BLOCK_M * G_P2, D], tl.float32)
    # blocks of cached keys only: every query sees every key, no mask to build or load
    split = tl.minimum(n_old // BLOCK_N * BLOCK_N, kv_end)
    for n0 in range(0, split, BLOCK_N):
        offs = n0 + tl.arange(0, BLOCK_N)
        slots = tl.load(kv_indices + kv_start + offs).to(tl.int64)
        k = load_kv_tile(k_ptr, kb_ptr, slots, offs < split, h, HKV, D, BLOCK_N, FMT, CDT, USE_ASM)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * k_mult  # [R, BLOCK_N]
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = load_kv_tile(v_ptr, vb_ptr, slots, offs < split, h, HKV, D, BLOCK_N, FMT, CDT, USE_ASM)
        acc = acc * alpha[:, None] + tl.dot(p.to(CDT), v, input_precision=PREC)
        m_i = m_new
    # the rest: the block where the cached keys end and the new keys (causal or custom mask)
    for n0 in range(split, kv_end, BLOCK_N):
        offs = n0 + tl.arange(0, BLOCK_N)
        valid = offs < kv_end
        slots = tl.load(kv_indices + kv_start + offs, mask=valid, other=0).to(tl.int64)
        k = load_kv_tile(k_ptr, kb_ptr, slots, valid, h, HKV, D, BLOCK_N, FMT, CDT, USE_ASM)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * k_mult  # [R, BLOCK_N]
        j = offs - n_old  # [BLOCK_N] index among the new keys; < 0 for earlier keys
        if HAS_MASK:
            bits = tl.load(
                mask_ptr + mask_start + tok[:, None] * n_new + j[None, :],
                mask=row_ok[:, None] & (j >= 0)[None, :] & valid[None, :],
                other=0,
            )
            vis = (j < 0)[None, :] | (bits != 0)
        else:
            vis = j[None, :] <= tok[:, None]
        s = tl.where(vis & valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(s - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = load_kv_tile(v_ptr, vb_ptr, slots, valid, h, HKV, D, BLOCK_N, FMT, CDT, USE_ASM)
        acc = acc * alpha[:, None] + tl.dot(p.to(CDT), v, input_precision=PREC)
        m_i = m_new
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    o = acc * (head_factor(vf_ptr, h, FMT) / l_safe)[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    store_rne(o_ptr + q_rows[:, None] * D + d[None, :], o, row_ok[:, None])
    tl.store(lse_ptr + q_rows, lse, mask=row_ok)


# ---------------------------------------------------------------- launcher


def _check_extend(
    q, kv: KVBuffers, qo_indptr, kv_indptr, kv_indices, num_new, custom_mask, mask_indptr, out_dtype
) -> torch.dtype:
    if not isinstance(q, torch.Tensor) or q.ndim != 3 or q.dtype not in FLOAT_DTYPES:
        raise ValueError("q must be a float32/float16/bfloat16 tensor [T, Hq, D]")
    kv.check()
    if q.shape[2] != kv.head_dim or q.shape[1] % kv.num_kv_heads:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit a pool with {kv.num_kv_heads} KV heads of dim {kv.head_dim}"
        )
    if kv.k.device != q.device:
        raise ValueError(f"q is on {q.device} but the pool on {kv.k.device}")
    check_index(qo_indptr, "qo_indptr", q.device)
    batch = qo_indptr.numel() - 1
    check_index(kv_indptr, "kv_indptr", q.device, batch + 1)
    check_index(kv_indices, "kv_indices", q.device)
    check_index(num_new, "num_new", q.device, batch)
    if custom_mask is not None:
        if (
            not isinstance(custom_mask, torch.Tensor)
            or custom_mask.dtype != torch.bool
            or custom_mask.ndim != 1
        ):
            raise ValueError("custom_mask must be a flat bool tensor")
        if custom_mask.device != q.device:
            raise ValueError(f"custom_mask is on {custom_mask.device}, expected {q.device}")
        if mask_indptr is None:
            raise ValueError("custom_mask needs mask_indptr [B+1]")
        check_index(mask_indptr, "mask_indptr", q.device, batch + 1)
    compute_dtype(q.dtype, kv)  # raises for a float pool of another dtype than q
    out_dtype = q.dtype if out_dtype is None else out_dtype
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
    return out_dtype


def _check_lengths(q, qo_indptr, kv_indptr, num_new, custom_mask, mask_indptr) -> int:
    """Value checks (one host sync); returns the longest query run."""
    qo_len, kv_len, new = qo_indptr.diff().cpu(), kv_indptr.diff().cpu(), num_new.cpu()
    if qo_indptr[0].item() != 0 or qo_indptr[-1].item() != q.shape[0] or (qo_len < 0).any():
        raise ValueError("qo_indptr must rise from 0 to the number of query tokens")
    if (new < 0).any() or (new > kv_len).any() or ((new > 0) & (new != qo_len)).any():
        raise ValueError(
            "num_new[b] must be 0 or the query count of request b, and at most its key count"
        )
    if custom_mask is not None:
        if (mask_indptr.diff().cpu() != new * new).any() or mask_indptr[
            -1
        ].item() > custom_mask.numel():
            raise ValueError(
                "mask_indptr must give each request a num_new x num_new block of custom_mask"
            )
    return int(qo_len.max()) if qo_len.numel() else 0


def extend_attention(
    q: torch.Tensor,
    kv: KVBuffers,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    num_new: torch.Tensor,
    sm_scale: float,
    custom_mask: torch.Tensor | None = None,
    mask_indptr: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype | None = None,
    max_qo_len: int | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
):
    """Attend the new tokens' queries q [T, Hq, D] over each request's keys in one pool (masks: module
    docstring). qo_indptr, kv_indptr [B+1], kv_indices, num_new [B]: int32/int64; custom_mask: flat
    bool with mask_indptr [B+1]. Returns (o [T, Hq, D] out_dtype (default q.dtype), lse [T, Hq] float32,
    natural log), new or written into `out`. Without max_qo_len (the longest query run) the index
    values are cross-checked (one host sync). Raises ValueError for bad inputs."""
    out_dtype = _check_extend(
        q, kv, qo_indptr, kv_indptr, kv_indices, num_new, custom_mask, mask_indptr, out_dtype
    )
    if max_qo_len is None:
        max_qo_len = _check_lengths(q, qo_indptr, kv_indptr, num_new, custom_mask, mask_indptr)
    kv.check_kernel()
    for name, t in dict(
        q=q,
        qo_indptr=qo_indptr,
        kv_indptr=kv_indptr,
        kv_indices=kv_indices,
        num_new=num_new,
        custom_mask=custom_mask,
        mask_indptr=mask_indptr,
    ).items():
        if t is not None:
            check_kernel_tensor(t, name)
    (t_q, hq, d), hkv, batch = q.shape, kv.num_kv_heads, num_new.numel()
    o, lse = output_buffers(out, (t_q, hq, d), out_dtype, q.device)  # [T, Hq, D], [T, Hq]
    g_p2 = triton.next_power_of_2(hq // hkv)
    block_m = max(1, ROWS // g_p2)  # rows = block_m * g_p2 >= 16, as tl.dot needs
    if min(t_q, batch, max_qo_len) == 0:
        return o, lse
    mask, mask_ptr = (
        (num_new, num_new) if custom_mask is None else (custom_mask.view(torch.uint8), mask_indptr)
    )
    _extend_kernel[(triton.cdiv(max_qo_len, block_m), batch, hkv)](
        q,
        *kv.kernel_args(),
        qo_indptr,
        kv_indptr,
        kv_indices,
        num_new,
        mask,
        mask_ptr,
        o,
        lse,
        sm_scale * LOG2E,
        HQ=hq,
        HKV=hkv,
        D=d,
        G_P2=g_p2,
        BLOCK_M=block_m,
        BLOCK_N=BLOCK_N,
        HAS_MASK=custom_mask is not None,
        num_warps=NUM_WARPS,
        num_stages=NUM_STAGES,
        **kernel_flags(q.dtype, kv),
    )
    return o, lse


# ---------------------------------------------------------------- torch reference


def _visible(n_q: int, n_old: int, n_new: int, block: torch.Tensor | None, device) -> torch.Tensor:
    """[n_q, n_old + n_new] bool: earlier keys always, new keys causally or by `block` [n_new, n_new]."""
    if n_new == 0:
        return torch.ones(n_q, n_old, dtype=torch.bool, device=device)
    new = (
        torch.ones(n_new, n_new, dtype=torch.bool, device=device).tril() if block is None else block
    )
    return torch.cat([torch.ones(n_q, n_old, dtype=torch.bool, device=device), new], dim=1)


def extend_attention_ref(
    q,
    kv: KVBuffers,
    qo_indptr,
    kv_indptr,
    kv_indices,
    num_new,
    sm_scale: float,
    custom_mask=None,
    mask_indptr=None,
    *,
    out_dtype=None,
    max_qo_len: int | None = None,
    out=None,
):
    """Plain-torch extend_attention (float32 math; max_qo_len is accepted and ignored)."""
    out_dtype = _check_extend(
        q, kv, qo_indptr, kv_indptr, kv_indices, num_new, custom_mask, mask_indptr, out_dtype
    )
    _check_lengths(q, qo_indptr, kv_indptr, num_new, custom_mask, mask_indptr)
    qb, kb, new = qo_indptr.tolist(), kv_indptr.tolist(), num_new.tolist()
    mb = mask_indptr.tolist() if custom_mask is not None else None
    o = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device)
    for b in range(len(new)):
        n_q, n_kv, n_new = qb[b + 1] - qb[b], kb[b + 1] - kb[b], new[b]
        if n_q == 0 or n_kv == 0:
            continue
        block = (
            None if mb is None or n_new == 0 else custom_mask[mb[b] : mb[b + 1]].view(n_new, n_new)
        )
        k, v = kv.dequantize(kv_indices[kb[b] : kb[b + 1]])
        visible = _visible(n_q, n_kv - n_new, n_new, block, q.device)
        o[qb[b] : qb[b + 1]], lse[qb[b] : qb[b + 1]] = attend_ref(
            q[qb[b] : qb[b + 1]].float(), k, v, visible, sm_scale
        )
    return written_out(out, o.to(out_dtype), lse)

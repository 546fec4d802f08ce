"""Decode attention of multi-head latent attention (MLA, absorbed form) over a latent KV pool.

Every query head h of request b attends over the same cached vector per token, the latent
[c_kv, k_pe] of W = 2P values, held as two pool planes (radix/latent_pool.py): the K plane has
latent dims [0, P) and the V plane [P, 2P) of each slot, each plane G groups of `group` values
with one scale per group (bf16/fp16/fp32, FP8 or NVFP4 pools: kv_layout.py). The output is the
softmax-weighted latent's first `v_dim` values (c_kv): o [B, H, v_dim] and lse [B, H].

One program per (request, block of BLOCK_H heads): a tile of BLOCK_N slots is read once for all
those heads, dequantized in registers (never the pool), scored against each plane in one or two
power-of-two chunks (P = PA + PB: 288 = 256 + 32 at DeepSeek's 512 + 64), and accumulated into
the output with an online softmax. Requests are independent; no split-KV (one wave at batch
sizes where decode is bandwidth-bound needs B * H / BLOCK_H >= the SM count).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import check_kernel_tensor
from .kv_layout import (
    KVBuffers,
    _e2m1_pairs,
    _pair_scales,
    check_index,
    dot_config,
    interpreting,
)

LOG2E = 1.4426950408889634
# sm_90 (ptxas -v on the compiled kernel, DeepSeek's 288-value planes): 8 warps over 32-slot
# tiles keep every format free of register spills; 4 warps spill 180-500 bytes a thread
BLOCK_N, BLOCK_H = 32, 16
NUM_WARPS = 8
MIN_SPLIT_TOKENS = 256  # decode_splits: a split gets at least this many slots


@triton.jit
def _latent_chunk(
    plane_ptr,
    bscale_ptr,
    slots,
    valid,
    OFF: tl.constexpr,
    PART: tl.constexpr,
    P: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
    USE_ASM: tl.constexpr,
):
    """Raw values (kv_layout.py: exact in CDT) of plane dims [OFF, OFF + PART) of `slots`
    [BLOCK_N] -> [BLOCK_N, PART]; rows not `valid` read as 0. The value is raw * _factor."""
    if FMT == 2:
        half = OFF // 2 + tl.arange(0, PART // 2)
        codes = tl.load(
            plane_ptr + slots[:, None] * (P // 2) + half[None, :], mask=valid[:, None], other=0
        )
        blocks = OFF // 16 + tl.arange(0, PART // 16)
        bits = tl.load(
            bscale_ptr + slots[:, None] * (P // 16) + blocks[None, :], mask=valid[:, None], other=0
        )
        even, odd = _e2m1_pairs(codes, _pair_scales(bits, BLOCK_N, PART), USE_ASM)
        return tl.reshape(tl.join(even, odd), (BLOCK_N, PART)).to(CDT)
    ptrs = plane_ptr + slots[:, None] * P + OFF + tl.arange(0, PART)[None, :]
    if FMT == 1:
        bits = tl.load(ptrs, mask=valid[:, None], other=0)
        return bits.to(tl.float8e4nv, bitcast=True).to(CDT)
    return tl.load(ptrs, mask=valid[:, None], other=0.0).to(CDT)


@triton.jit
def _factor(
    scale_ptr, OFF: tl.constexpr, PART: tl.constexpr, GROUP: tl.constexpr, FMT: tl.constexpr
):
    """[PART] float32: value / raw of plane dims [OFF, OFF + PART) (one scale per group:
    fp8's scale, nvfp4's s_T * 2^8, 1 for float pools). Folded into the query before the loop
    and into the output after it, so the loop converts codes and nothing else."""
    factor = tl.full((PART,), 1.0, tl.float32)
    if FMT != 0:  # (one return: every return of a jitted function must have one type)
        factor = tl.load(scale_ptr + (OFF + tl.arange(0, PART)) // GROUP).to(tl.float32)
        if FMT == 2:
            factor = factor * 256.0
    return factor


@triton.jit
def _query_chunk(
    q_row,
    ok,
    scale_ptr,
    Q_OFF: tl.constexpr,
    OFF: tl.constexpr,
    PART: tl.constexpr,
    GROUP: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
):
    """q[rows, Q_OFF:Q_OFF + PART] (plane dims from OFF) times their factors, in CDT."""
    q = tl.load(q_row + Q_OFF + tl.arange(0, PART)[None, :], mask=ok, other=0.0).to(tl.float32)
    return (q * _factor(scale_ptr, OFF, PART, GROUP, FMT)[None, :]).to(CDT)


@triton.jit
def _store_chunk(o_ptr, acc, inv_l, rows, heads_ok, OFF: tl.constexpr, PART: tl.constexpr, R):
    """o[rows, OFF:OFF + PART] = acc / l where the latent dim is below R (c_kv's)."""
    dims = OFF + tl.arange(0, PART)
    tl.store(
        o_ptr + rows[:, None] * R + dims[None, :],
        acc * inv_l[:, None],
        mask=heads_ok[:, None] & (dims[None, :] < R),
    )


@triton.jit
def _mla_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    kb_ptr,
    vb_ptr,
    ks_ptr,
    vs_ptr,
    indptr_ptr,
    indices_ptr,
    o_ptr,
    lse_ptr,
    sm_scale,
    num_heads,
    R,
    P: tl.constexpr,
    PA: tl.constexpr,
    PB: tl.constexpr,
    PB_TILE: tl.constexpr,  # max(PB, 16): the unused second chunk's placeholder shapes
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
    PREC: tl.constexpr,
    USE_ASM: tl.constexpr,
):
    b = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    heads_ok = heads < num_heads
    rows = b * num_heads + heads  # [BLOCK_H] rows of q [B * H, 2P] and o [B * H, R]
    q_row = q_ptr + rows[:, None] * (2 * P)
    ok = heads_ok[:, None]
    q_ka = _query_chunk(q_row, ok, ks_ptr, 0, 0, PA, GROUP, FMT, CDT)
    q_va = _query_chunk(q_row, ok, vs_ptr, P, 0, PA, GROUP, FMT, CDT)
    if PB > 0:
        q_kb = _query_chunk(q_row, ok, ks_ptr, PA, PA, PB, GROUP, FMT, CDT)
        q_vb = _query_chunk(q_row, ok, vs_ptr, P + PA, PA, PB, GROUP, FMT, CDT)
    start, end = tl.load(indptr_ptr + b), tl.load(indptr_ptr + b + 1)
    split = tl.program_id(2)  # this program's share of the request's slots (split-KV)
    per_split = tl.cdiv(end - start, tl.num_programs(2))
    start = start + split * per_split
    end = tl.minimum(end, start + per_split)
    o_ptr += split * tl.num_programs(0) * num_heads * R  # partials [splits, B * H, R]
    lse_ptr += split * tl.num_programs(0) * num_heads
    m = tl.full((BLOCK_H,), float("-inf"), tl.float32)
    l_sum = tl.zeros((BLOCK_H,), tl.float32)
    acc_ka = tl.zeros((BLOCK_H, PA), tl.float32)
    acc_va = tl.zeros((BLOCK_H, PA), tl.float32)
    acc_kb = tl.zeros((BLOCK_H, PB_TILE), tl.float32)
    acc_vb = tl.zeros((BLOCK_H, PB_TILE), tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # exp2 below
    for n0 in range(start, end, BLOCK_N):
        idx = n0 + tl.arange(0, BLOCK_N)
        valid = idx < end
        slots = tl.load(indices_ptr + idx, mask=valid, other=0).to(tl.int64)
        t_ka = _latent_chunk(k_ptr, kb_ptr, slots, valid, 0, PA, P, BLOCK_N, FMT, CDT, USE_ASM)
        t_va = _latent_chunk(v_ptr, vb_ptr, slots, valid, 0, PA, P, BLOCK_N, FMT, CDT, USE_ASM)
        s = tl.dot(q_ka, tl.trans(t_ka), input_precision=PREC)
        s = tl.dot(q_va, tl.trans(t_va), s, input_precision=PREC)
        if PB > 0:
            t_kb = _latent_chunk(k_ptr, kb_ptr, slots, valid, PA, PB, P, BLOCK_N, FMT, CDT, USE_ASM)
            t_vb = _latent_chunk(v_ptr, vb_ptr, slots, valid, PA, PB, P, BLOCK_N, FMT, CDT, USE_ASM)
            s = tl.dot(q_kb, tl.trans(t_kb), s, input_precision=PREC)
            s = tl.dot(q_vb, tl.trans(t_vb), s, input_precision=PREC)
        s = tl.where(valid[None, :], s * qk_scale, float("-inf"))  # [BLOCK_H, BLOCK_N], log2
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, 1)
        pc = p.to(CDT)
        acc_ka = tl.dot(pc, t_ka, acc_ka * alpha[:, None], input_precision=PREC)
        acc_va = tl.dot(pc, t_va, acc_va * alpha[:, None], input_precision=PREC)
        if PB > 0:
            acc_kb = tl.dot(pc, t_kb, acc_kb * alpha[:, None], input_precision=PREC)
            acc_vb = tl.dot(pc, t_vb, acc_vb * alpha[:, None], input_precision=PREC)
        m = m_new
    has_keys = l_sum > 0  # a request without keys: o = 0, lse = -inf
    l_safe = tl.where(has_keys, l_sum, 1.0)
    inv_l = tl.where(has_keys, 1.0 / l_safe, 0.0)
    acc_ka *= _factor(ks_ptr, 0, PA, GROUP, FMT)[None, :]
    acc_va *= _factor(vs_ptr, 0, PA, GROUP, FMT)[None, :]
    _store_chunk(o_ptr, acc_ka, inv_l, rows, heads_ok, 0, PA, R)
    _store_chunk(o_ptr, acc_va, inv_l, rows, heads_ok, P, PA, R)
    if PB > 0:
        acc_kb *= _factor(ks_ptr, PA, PB, GROUP, FMT)[None, :]
        acc_vb *= _factor(vs_ptr, PA, PB, GROUP, FMT)[None, :]
        _store_chunk(o_ptr, acc_kb, inv_l, rows, heads_ok, PA, PB, R)
        _store_chunk(o_ptr, acc_vb, inv_l, rows, heads_ok, P + PA, PB, R)
    lse = tl.where(has_keys, (m + tl.log2(l_safe)) / 1.4426950408889634, float("-inf"))
    tl.store(lse_ptr + rows, lse, mask=heads_ok)


def plane_chunks(plane_width: int) -> tuple[int, int]:
    """(PA, PB): a plane of P values read as a power-of-two chunk and a second one (or none):
    PA the largest power of two <= P. Raises ValueError where P - PA is not a power of two of
    at least 16 (tl.dot's smallest K)."""
    pa = 1 << (plane_width.bit_length() - 1)
    pb = plane_width - pa
    if pa < 16 or (pb and (pb < 16 or pb & (pb - 1))):
        raise ValueError(
            f"the MLA decode kernel reads a latent plane of {plane_width} values as two "
            "power-of-two chunks of at least 16; this width does not split so"
        )
    return pa, pb


def _check(q, kv: KVBuffers, kv_indptr, kv_indices, v_dim: int) -> None:
    kv.check_kernel()
    if q.ndim != 3 or q.shape[2] != 2 * kv.num_kv_heads * kv.head_dim:
        raise ValueError(
            f"q {tuple(q.shape)} must be [B, H, {2 * kv.num_kv_heads * kv.head_dim}] "
            "(the latent of both planes)"
        )
    if not 0 < v_dim <= q.shape[2]:
        raise ValueError(f"v_dim must be in 1..{q.shape[2]}, got {v_dim}")
    check_kernel_tensor(q, "q")
    check_index(kv_indptr, "kv_indptr", q.device, q.shape[0] + 1)
    check_index(kv_indices, "kv_indices", q.device)
    plane_chunks(kv.num_kv_heads * kv.head_dim)


def mla_decode(
    q: torch.Tensor,
    kv: KVBuffers,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    v_dim: int,
    num_splits: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA decode: q [B, H, 2P] (contiguous) over the latents of request b's slots
    kv_indices[kv_indptr[b]:kv_indptr[b+1]] (any order, not range-checked) in the planes of `kv`
    ([num_slots, G, group] each, G * group = P). Returns o [B, H, v_dim] (q's dtype) = softmax(
    sm_scale * q . latent) @ latent[:v_dim] and lse [B, H] float32 (natural log); a request
    without keys gets o = 0, lse = -inf. `num_splits` programs share each request's slots
    (split-KV: small batches fill the GPU), their partial states merged by log-sum-exp (see
    decode_splits). No host sync. Raises ValueError for bad inputs."""
    _check(q, kv, kv_indptr, kv_indices, v_dim)
    if not isinstance(num_splits, int) or num_splits < 1:
        raise ValueError(f"num_splits must be a positive int, got {num_splits!r}")
    b, h, _ = q.shape
    groups, group = kv.num_kv_heads, kv.head_dim
    p = groups * group
    pa, pb = plane_chunks(p)
    o = torch.empty(num_splits, b, h, v_dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(num_splits, b, h, dtype=torch.float32, device=q.device)
    if b == 0:
        return o[0].to(q.dtype), lse[0]
    tl_cdt, prec = dot_config(q.dtype)  # quantized tiles are dequantized to q's dtype
    k, v, kb, vb, ks, vs = kv.kernel_args()
    grid = (b, triton.cdiv(h, BLOCK_H), num_splits)
    _mla_decode_kernel[grid](
        q, k, v, kb, vb, ks, vs, kv_indptr, kv_indices, o, lse,
        float(sm_scale), h, v_dim,
        P=p, PA=pa, PB=pb, PB_TILE=max(pb, 16), GROUP=group, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N,
        FMT=kv.fmt, CDT=tl_cdt, PREC=prec, USE_ASM=not interpreting(),
        num_warps=NUM_WARPS,
    )  # fmt: skip
    if num_splits == 1:
        return o[0].to(q.dtype), lse[0]
    return _merge_splits(o, lse, q.dtype)


def _merge_splits(o: torch.Tensor, lse: torch.Tensor, dtype: torch.dtype):
    """Merge split partials o [S, B, H, R], lse [S, B, H] (empty splits: lse -inf)."""
    top = lse.amax(0)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    weights = torch.exp(lse - top)  # [S, B, H]
    total = weights.sum(0)
    merged = (o * weights[..., None]).sum(0) / total.clamp_min(1e-30)[..., None]
    merged_lse = torch.where(total > 0, top + torch.log(total), torch.full_like(top, -torch.inf))
    return merged.to(dtype), merged_lse


def decode_splits(batch: int, num_heads: int, max_len: int, num_sms: int) -> int:
    """A split count that gives about two programs per SM, each at least MIN_SPLIT_TOKENS."""
    programs = batch * triton.cdiv(num_heads, BLOCK_H)
    return max(1, min(triton.cdiv(2 * num_sms, programs), max_len // MIN_SPLIT_TOKENS))


def mla_decode_ref(
    q: torch.Tensor,
    kv: KVBuffers,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    v_dim: int,
    num_splits: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """mla_decode in plain torch (float32 math over the dequantized slots; num_splits, a
    scheduling choice, changes nothing here)."""
    kv.check()
    if q.shape[0] == 0:
        return q.new_zeros(0, q.shape[1], v_dim), q.new_zeros(0, q.shape[1], dtype=torch.float32)
    bounds = kv_indptr.tolist()
    outs, lses = [], []
    for b in range(q.shape[0]):
        slots = kv_indices[bounds[b] : bounds[b + 1]]
        k, v = kv.dequantize(slots)  # [L, G, group] each
        latent = torch.cat([k.flatten(1), v.flatten(1)], dim=1)  # [L, 2P]
        scores = q[b].float() @ latent.T * sm_scale  # [H, L]
        lse = torch.logsumexp(scores, dim=-1)
        probs = torch.exp(scores - lse[:, None]).nan_to_num(0.0)
        outs.append(probs @ latent[:, :v_dim])
        lses.append(lse)
    return torch.stack(outs).to(q.dtype), torch.stack(lses)


__all__ = ["mla_decode", "mla_decode_ref", "plane_chunks", "decode_splits"]

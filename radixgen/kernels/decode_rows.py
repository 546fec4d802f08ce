"""Decode attention kernel that reads whole slot rows: one program per (request, split) covers all
KV heads (used by decode_attention.py, which documents the contract).

A tile is BLOCK_N tokens x HKV heads = R rows (row r: token r // HKV, KV head r % HKV), so the
bytes of one slot (Hkv * D values, contiguous in every pool format) are read together. All Hq
query heads form the M dimension of one dot against the R rows; pairs of a query head and a row
of another KV head are masked out, trading 8x spare tensor-core and exp work (idle units in a
memory-bound kernel) for contiguous reads of randomly ordered slots.
"""

import triton
import triton.language as tl

from ._common import store_rne
from .kv_layout import head_factor, load_kv_tile, prepare_q


@triton.jit(do_not_specialize=["split_base", "num_splits", "split_stride"])
def decode_rows_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    kb_ptr,
    vb_ptr,
    kf_ptr,
    vf_ptr,
    indptr_ptr,
    indices_ptr,
    o_ptr,
    lse_ptr,
    scale_log2,
    split_base,
    num_splits,
    split_stride,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    HQ_PAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
    PRESCALE: tl.constexpr,
    USE_ASM: tl.constexpr,
    PREC: tl.constexpr,
):
    b, split = tl.program_id(0), tl.program_id(1)
    G: tl.constexpr = HQ // HKV
    R: tl.constexpr = BLOCK_N * HKV
    i = tl.arange(0, HQ_PAD)  # query heads
    d = tl.arange(0, D)
    start = tl.load(indptr_ptr + b).to(tl.int64)
    length = tl.load(indptr_ptr + b + 1).to(tl.int64) - start
    chunk = tl.cdiv(tl.cdiv(length, num_splits), BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = tl.minimum(length, lo + chunk)
    q = tl.load(q_ptr + (b * HQ + i)[:, None] * D + d[None, :], mask=(i < HQ)[:, None], other=0.0)
    q, inv_c = prepare_q(q.to(tl.float32), PRESCALE, CDT)  # [HQ_PAD, D]
    kvh = i // G  # [HQ_PAD] KV head of each query head (>= HKV for padding rows)
    kvh_ok = tl.minimum(kvh, HKV - 1)
    k_mult = head_factor(kf_ptr, kvh_ok, FMT) * inv_c * scale_log2 + tl.zeros([HQ_PAD], tl.float32)
    r = tl.arange(0, R)
    r_head = r % HKV
    same_head = kvh[:, None] == r_head[None, :]  # [HQ_PAD, R]
    m_i = tl.full([HQ_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([HQ_PAD], tl.float32)
    acc = tl.zeros([HQ_PAD, D], tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        offs = n0 + r // HKV  # [R]
        valid = offs < hi
        slots = tl.load(indices_ptr + start + offs, mask=valid, other=0).to(tl.int64)
        k = load_kv_tile(
            k_ptr, kb_ptr, slots, valid, r_head, HKV, D, R, FMT, CDT, USE_ASM
        )  # [R, D]
        v = load_kv_tile(v_ptr, vb_ptr, slots, valid, r_head, HKV, D, R, FMT, CDT, USE_ASM)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * k_mult[:, None]  # [HQ_PAD, R]
        s = tl.where(same_head & valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # padding rows see nothing
        alpha = tl.exp2(m_i - m_ref)
        p = tl.exp2(s - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(CDT), v, input_precision=PREC)
        m_i = m_new
    nonempty = l_i > 0
    l_safe = tl.where(nonempty, l_i, 1.0)
    o = acc * (head_factor(vf_ptr, kvh_ok, FMT) / l_safe)[:, None]
    lse = tl.where(nonempty, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    row = (
        (b * HQ + i) * split_stride + split_base + split
    )  # [B, HQ, split_stride] (final output at stride 1)
    store_rne(o_ptr + row[:, None] * D + d[None, :], o, (i < HQ)[:, None])
    tl.store(lse_ptr + row, lse, mask=i < HQ)

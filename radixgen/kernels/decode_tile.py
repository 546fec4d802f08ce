"""Decode attention kernel over tiles of one KV head's tokens: one program per (group of KV heads
(one by default), request, split) (used by decode_attention.py, which documents the contract and
picks the tile configuration).

The whole query group of the program's KV heads is processed at once, so each token row of K and
V is read once; quantized tiles are dequantized in registers. Each split writes a partial (o, lse)
at split_base + split of split_stride partials per (request, query head).
"""

import triton
import triton.language as tl

from ._common import store_rne
from .kv_layout import decode_raw, head_factor, load_raw, prepare_q_rows

RESCALE_LOG2 = tl.constexpr(8.0)  # see the decode loop (LAZY_RESCALE): p stays <= 256


@triton.jit(do_not_specialize=["split_base", "num_splits", "split_stride"])
def decode_tile_kernel(
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
    HPP: tl.constexpr,
    M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FMT: tl.constexpr,
    CDT: tl.constexpr,
    PRESCALE: tl.constexpr,
    USE_ASM: tl.constexpr,
    PREC: tl.constexpr,
    SPLIT_EO: tl.constexpr,
    PREFETCH: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
    GDC: tl.constexpr = 0,
):
    # HPP KV heads per program, read as one contiguous run of HPP * D values per slot. Their
    # HPP * G query heads are the M rows of a block-diagonal q [M, HPP * D] (row r: query head
    # h0 * G + r, nonzero in the columns of its KV head r // G only), so q @ K^T gives each query
    # head's scores against its own KV head, and P @ V the diagonal blocks that are kept.
    hg, b, split = (
        tl.program_id(0),
        tl.program_id(1),
        tl.program_id(2),
    )  # heads of a request run together
    if GDC:  # programmatic dependent launch (decode_attention.py): the next launch may start now
        tl.extra.cuda.gdc_launch_dependents()
    G: tl.constexpr = HQ // HKV
    W: tl.constexpr = HPP * D
    h0 = hg * HPP
    r = tl.arange(0, M)
    r_head = r // G  # local KV head of each row; >= HPP for padding rows
    r_ok = r < HPP * G
    c = tl.arange(0, W)
    c_head = c // D
    diag = r_ok[:, None] & (r_head[:, None] == c_head[None, :])  # [M, W]
    start = tl.load(indptr_ptr + b).to(tl.int64)
    length = (tl.load(indptr_ptr + b + 1).to(tl.int64) - start).to(
        tl.int32
    )  # positions within a request: int32
    indices_ptr += start
    chunk = tl.cdiv(tl.cdiv(length, num_splits), BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = tl.minimum(length, lo + chunk)
    heads = h0 * G + r  # [M] query heads
    q = tl.load(q_ptr + (b * HQ + heads)[:, None] * D + (c % D)[None, :], mask=diag, other=0.0)
    factor = (
        head_factor(kf_ptr, h0 + tl.minimum(r_head, HPP - 1), FMT) * scale_log2
    )  # [M], to log2 units
    if (
        PRESCALE
    ):  # fp16 dots over a quantized pool: the factor goes into q before its one rounding to fp16
        q, k_mult = prepare_q_rows(
            q.to(tl.float32) * factor[:, None], PRESCALE, CDT
        )  # [M, W], 1/c [M]
    else:
        q, inv_c = prepare_q_rows(q.to(tl.float32), PRESCALE, CDT)
        k_mult = factor * inv_c
    m_i = tl.full([M], float("-inf"), tl.float32)
    l_i = tl.zeros([M], tl.float32)
    acc = tl.zeros([M, W], tl.float32)
    if SPLIT_EO:
        q_e, q_o = tl.split(tl.reshape(q, (M, W // 2, 2)))  # [M, W/2] each
        acc_e = tl.zeros([M, W // 2], tl.float32)
        acc_o = tl.zeros([M, W // 2], tl.float32)
    # the slot indices are loaded one tile ahead (issued before this tile's KV loads), so each tile
    # waits for one memory round trip, not two; with PREFETCH the stored bits of the next tile are
    # loaded too, before this tile's math
    next_offs = lo + tl.arange(0, BLOCK_N)
    next_slots = tl.load(indices_ptr + next_offs, mask=next_offs < hi, other=0)
    if PREFETCH:
        ka, kb = load_raw(
            k_ptr, kb_ptr, next_slots.to(tl.int64), next_offs < hi, h0, HKV, D, HPP, FMT, SPLIT_EO
        )
        va, vb = load_raw(
            v_ptr, vb_ptr, next_slots.to(tl.int64), next_offs < hi, h0, HKV, D, HPP, FMT, SPLIT_EO
        )
        next_offs += BLOCK_N
        next_slots = tl.load(indices_ptr + next_offs, mask=next_offs < hi, other=0)
    for n0 in range(lo, hi, BLOCK_N):
        valid = n0 + tl.arange(0, BLOCK_N) < hi
        if PREFETCH:  # next_* is the tile after this one
            cka, ckb, cva, cvb = ka, kb, va, vb
            ka, kb = load_raw(
                k_ptr,
                kb_ptr,
                next_slots.to(tl.int64),
                next_offs < hi,
                h0,
                HKV,
                D,
                HPP,
                FMT,
                SPLIT_EO,
            )
            va, vb = load_raw(
                v_ptr,
                vb_ptr,
                next_slots.to(tl.int64),
                next_offs < hi,
                h0,
                HKV,
                D,
                HPP,
                FMT,
                SPLIT_EO,
            )
            next_offs += BLOCK_N
            next_slots = tl.load(indices_ptr + next_offs, mask=next_offs < hi, other=0)
        else:  # next_* is this tile
            slots = next_slots.to(tl.int64)  # [BLOCK_N]
            next_offs += BLOCK_N
            next_slots = tl.load(indices_ptr + next_offs, mask=next_offs < hi, other=0)
            cka, ckb = load_raw(k_ptr, kb_ptr, slots, valid, h0, HKV, D, HPP, FMT, SPLIT_EO)
            cva, cvb = load_raw(v_ptr, vb_ptr, slots, valid, h0, HKV, D, HPP, FMT, SPLIT_EO)
        k0, k1 = decode_raw(cka, ckb, BLOCK_N, W, FMT, CDT, USE_ASM, SPLIT_EO)
        if SPLIT_EO:  # even / odd halves: two dots each, no interleaving shuffle
            s = tl.dot(q_e, tl.trans(k0), input_precision=PREC) + tl.dot(
                q_o, tl.trans(k1), input_precision=PREC
            )
        else:
            s = tl.dot(q, tl.trans(k0), input_precision=PREC)
        s = (
            s * k_mult[:, None] + tl.where(valid, 0.0, float("-inf"))[None, :]
        )  # [M, BLOCK_N], log2 units
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: every tile has a valid key
        # LAZY_RESCALE: the running max m_i moves (and acc, l_i are rescaled) only when a row's
        # max grew by more than RESCALE_LOG2, so p <= 2^RESCALE_LOG2 (fine in fp16) and most tiles
        # skip the rescale multiplies; lse = m_i + log2(l_i) holds for any reference m_i
        if not LAZY_RESCALE or tl.max(m_new - m_i, axis=0) > RESCALE_LOG2:
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha
            if SPLIT_EO:
                acc_e = acc_e * alpha[:, None]
                acc_o = acc_o * alpha[:, None]
            else:
                acc = acc * alpha[:, None]
            m_i = m_new
        p = tl.exp2(s - m_i[:, None])
        l_i += tl.sum(p, axis=1)
        v0, v1 = decode_raw(cva, cvb, BLOCK_N, W, FMT, CDT, USE_ASM, SPLIT_EO)
        if SPLIT_EO:
            acc_e = tl.dot(p.to(CDT), v0, acc_e, input_precision=PREC)
            acc_o = tl.dot(p.to(CDT), v1, acc_o, input_precision=PREC)
        else:
            acc = tl.dot(p.to(CDT), v0, acc, input_precision=PREC)
    if SPLIT_EO:
        acc = tl.reshape(tl.join(acc_e, acc_o), (M, W))
    nonempty = l_i > 0
    l_safe = tl.where(nonempty, l_i, 1.0)
    v_mult = head_factor(vf_ptr, h0 + c_head, FMT) + tl.zeros([W], tl.float32)
    o = acc * (v_mult[None, :] / l_safe[:, None])
    lse = tl.where(nonempty, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    row = (
        (b * HQ + heads) * split_stride + split_base + split
    )  # [B, HQ, split_stride] (final output at stride 1)
    store_rne(o_ptr + row[:, None] * D + (c % D)[None, :], o, diag)  # the diagonal blocks
    tl.store(lse_ptr + row, lse, mask=r_ok)
    if GDC == 2:  # launched early beside the previous pool's launch: finish after it
        tl.extra.cuda.gdc_wait()

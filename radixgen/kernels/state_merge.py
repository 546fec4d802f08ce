"""Attention-state merging: two states over disjoint key sets, or the partials of split-KV decode.

An attention state over a key set A is (v_A, s_A), with s_A = log sum_{j in A} exp(score_j)
(natural log) and v_A the softmax-weighted mean of the values of A. For disjoint A and B:
    m = max(s_A, s_B),  w_A = exp(s_A - m),  w_B = exp(s_B - m)
    v = (w_A v_A + w_B v_B) / (w_A + w_B),   s = m + log(w_A + w_B)
The empty set has s = -inf (w = 0); if both sets are empty the result is v = 0, s = -inf, never NaN.

merge_state merges two states; reduce_splits merges the splits of a decode (decode_attention.py)
in one pass over them.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._common import FLOAT_DTYPES, check_kernel_tensor, store_rne
from .kv_layout import output_buffers, written_out


@triton.jit
def _combine(o_a, s_a, o_b, s_b):
    """merge_state of (o_a [M, D], s_a [M]) and (o_b, s_b), all fp32."""
    m = tl.maximum(s_a, s_b)
    m = tl.where(m == float("-inf"), 0.0, m)
    w_a = tl.exp(s_a - m)
    w_b = tl.exp(s_b - m)
    tot = w_a + w_b
    safe = tl.where(tot > 0, tot, 1.0)
    o = (o_a * w_a[:, None] + o_b * w_b[:, None]) / safe[:, None]
    return o, tl.where(tot > 0, m + tl.log(safe), float("-inf"))


@triton.jit(do_not_specialize=["num_splits"])
def _reduce_splits_kernel(
    mid_o_ptr,
    mid_lse_ptr,
    o_ptr,
    lse_ptr,
    num_splits,
    D: tl.constexpr,
    CHUNK: tl.constexpr,
    PDL: tl.constexpr,
):
    """One (request, query head) row: merge_state over its splits' partials, CHUNK splits per
    step, so up to CHUNK splits cost one round of loads all in flight (a chain of one split per
    step waited a memory latency per split: 19 us for 64 x 32 rows of 7 splits on an H100)."""
    if PDL:  # launched before the decode launches finished: wait for their partials
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    d = tl.arange(0, D)
    c = tl.arange(0, CHUNK)
    m = tl.full([], float("-inf"), tl.float32)  # the running max of the splits' lse
    acc = tl.zeros([D], tl.float32)  # sum of exp(lse_i - m) * o_i
    wsum = tl.zeros([], tl.float32)  # sum of exp(lse_i - m)
    for start in range(0, num_splits, CHUNK):
        i = start + c
        ok = i < num_splits
        s_i = tl.load(mid_lse_ptr + row * num_splits + i, mask=ok, other=float("-inf"))
        o_i = tl.load(
            mid_o_ptr + (row * num_splits + i)[:, None] * D + d[None, :],
            mask=ok[:, None],
            other=0.0,
        )
        m_new = tl.maximum(m, tl.max(s_i, axis=0))
        base = tl.where(m_new == float("-inf"), 0.0, m_new)  # all empty so far: every weight 0
        alpha = tl.exp(m - base)
        w = tl.exp(s_i - base)
        acc = acc * alpha + tl.sum(w[:, None] * o_i, axis=0)
        wsum = wsum * alpha + tl.sum(w, axis=0)
        m = m_new
    safe = tl.where(wsum > 0, wsum, 1.0)
    store_rne(o_ptr + row * D + d, acc / safe, d < D)
    tl.store(lse_ptr + row, tl.where(wsum > 0, m + tl.log(safe), float("-inf")))


def reduce_splits(
    mid_o: torch.Tensor,
    mid_lse: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    *,
    pdl: bool = False,
) -> None:
    """o [B, Hq, D], lse [B, Hq] = merge_state over the splits of mid_o [B, Hq, S, D] / mid_lse [B, Hq, S].
    pdl: launch it as a programmatic dependent launch of the decode launch before it (_pdl)."""
    b, hq, splits, d = mid_o.shape
    chunk = min(triton.next_power_of_2(splits), 8)
    extra = {"launch_pdl": True} if pdl else {}
    _reduce_splits_kernel[(b * hq,)](
        mid_o,
        mid_lse,
        o,
        lse,
        splits,
        D=d,
        CHUNK=chunk,
        PDL=pdl,
        num_warps=max(1, min(4, chunk * d // 1024)),
        **extra,
    )


@triton.jit
def _merge_state_kernel(
    oa_ptr,
    sa_ptr,
    ob_ptr,
    sb_ptr,
    o_ptr,
    s_ptr,
    num_rows,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ROWS: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # [ROWS]
    d = tl.arange(0, BLOCK_D)
    rm = r < num_rows
    mask = rm[:, None] & (d < D)[None, :]
    offs = r[:, None] * D + d[None, :]
    s_a = tl.load(sa_ptr + r, mask=rm, other=float("-inf"))
    s_b = tl.load(sb_ptr + r, mask=rm, other=float("-inf"))
    o_a = tl.load(oa_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    o_b = tl.load(ob_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    o, s = _combine(o_a, s_a, o_b, s_b)
    store_rne(o_ptr + offs, o, mask)
    tl.store(s_ptr + r, s, mask=rm)


# ---------------------------------------------------------------- launchers


def merge_state(
    o_a: torch.Tensor,
    lse_a: torch.Tensor,
    o_b: torch.Tensor,
    lse_b: torch.Tensor,
    *,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
):
    """Merge two attention states over disjoint key sets (math in the module docstring).

    o_a, o_b [..., D] float (same shape/dtype), lse_a, lse_b float32 [...] natural log; all
    contiguous, on CUDA or TRITON_INTERPRET=1. Returns (o [..., D] in o_a's dtype, lse [...]
    float32), new or the given `out`; two empty states (-inf) give o = 0, lse = -inf. Raises
    ValueError on mismatch."""
    _check_merge(o_a, lse_a, o_b, lse_b)
    for t, name in ((o_a, "o_a"), (lse_a, "lse_a"), (o_b, "o_b"), (lse_b, "lse_b")):
        check_kernel_tensor(t, name)
    d = o_a.shape[-1]
    o, lse = output_buffers(out, tuple(o_a.shape), o_a.dtype, o_a.device)
    rows = lse_a.numel()
    if rows and d:
        block_d = triton.next_power_of_2(d)
        per = max(1, 2048 // block_d)
        _merge_state_kernel[(triton.cdiv(rows, per),)](
            o_a, lse_a, o_b, lse_b, o, lse, rows, D=d, BLOCK_D=block_d, ROWS=per, num_warps=4
        )
    return o, lse


def _check_merge(o_a, lse_a, o_b, lse_b) -> None:
    if not all(isinstance(t, torch.Tensor) for t in (o_a, lse_a, o_b, lse_b)):
        raise ValueError("merge_state takes tensors")
    if (
        o_a.shape != o_b.shape
        or o_a.dtype != o_b.dtype
        or o_a.dtype not in FLOAT_DTYPES
        or o_a.ndim < 1
    ):
        raise ValueError(
            f"o_a {tuple(o_a.shape)} {o_a.dtype} and o_b {tuple(o_b.shape)} {o_b.dtype} "
            "must match (float)"
        )
    if lse_a.shape != o_a.shape[:-1] or lse_b.shape != lse_a.shape:
        raise ValueError(
            f"lse shapes {tuple(lse_a.shape)}, {tuple(lse_b.shape)} must be {tuple(o_a.shape[:-1])}"
        )
    if lse_a.dtype != torch.float32 or lse_b.dtype != torch.float32:
        raise ValueError("lse_a and lse_b must be float32")
    if len({t.device for t in (o_a, lse_a, o_b, lse_b)}) != 1:
        raise ValueError("merge_state inputs must be on one device")


# ---------------------------------------------------------------- torch reference


def merge_state_ref(o_a, lse_a, o_b, lse_b, *, out=None):
    """Plain-torch merge_state (float32 math)."""
    _check_merge(o_a, lse_a, o_b, lse_b)
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)
    tot = w_a + w_b
    safe = torch.where(tot > 0, tot, torch.ones_like(tot))
    o = (o_a.float() * w_a[..., None] + o_b.float() * w_b[..., None]) / safe[..., None]
    lse = torch.where(tot > 0, m + torch.log(safe), torch.full_like(m, -math.inf))
    return written_out(out, o.to(o_a.dtype), lse)

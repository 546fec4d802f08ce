"""Multi-LoRA gather matmuls: every row of a batch multiplies its own adapter's weights.

    lora_gemm(x, w, out, ..., in_offset, out_offset, accumulate)
        out[t, out_offset + n] (+)= sum_k x[t, in_offset + k] * w[slot(t), n, k]

over the stacked weights w [num_slots, N, K] of an adapter pool. One LoRA delta is two calls:
the shrink (x [T, hidden] times A [slot, ranks, hidden] into h [T, ranks]) and, per output
slice of a fused projection, the expand (h's slice times B [slot, slice_out, rank], added into
the projection's output columns). Slot 0 is the base model: its rows are skipped (never read,
never written), so base-model rows cost nothing and add nothing.

Two ways to say which row uses which slot:
- SGMV (extend): `segments` = (starts, lens, slots) int32 [num_segments], rows of one segment
  contiguous and on one adapter; each program multiplies a BLOCK_M x BLOCK_N tile of one
  segment with `tl.dot`. The launcher needs the longest segment on the host (for the grid).
- BGMV (decode): `row_slots` int32 [T], one slot per row; each program computes BLOCK_N outputs
  of one row. The grid depends on T alone and the slots are read on the device, so a CUDA graph
  captured over a static `row_slots` buffer stays valid when the buffer's contents change.

`sgmv_ref` / `bgmv_ref` are the torch references (a loop over segments / rows).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def sgmv_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    N,
    K,
    stride_x,
    stride_ws,
    stride_wn,
    stride_out,
    seg_starts_ptr,
    seg_lens_ptr,
    seg_slots_ptr,
    ACCUMULATE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out tile (segment program_id(0), rows block program_id(1), cols block program_id(2)):
    x_ptr and out_ptr already point at their column offsets; w [slots, N, K] row-major in K."""
    seg, pid_m, pid_n = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    slot = tl.load(seg_slots_ptr + seg).to(tl.int64)
    seg_len = tl.load(seg_lens_ptr + seg)
    if slot == 0 or pid_m * BLOCK_M >= seg_len:
        return
    start = tl.load(seg_starts_ptr + seg).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < seg_len
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + (start + rows)[:, None] * stride_x
    w_cols = w_ptr + slot * stride_ws + cols[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + ks) < K
        xt = tl.load(x_rows + (k0 + ks)[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        wt = tl.load(w_cols + (k0 + ks)[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(xt, wt)
    out = out_ptr + (start + rows)[:, None] * stride_out + cols[None, :]
    mask = row_ok[:, None] & col_ok[None, :]
    if ACCUMULATE:
        acc += tl.load(out, mask=mask, other=0.0).to(tl.float32)
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bgmv_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    N,
    K,
    stride_x,
    stride_ws,
    stride_wn,
    stride_out,
    row_slots_ptr,
    ACCUMULATE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out[row program_id(0), cols block program_id(1)]: one row times its slot's weights."""
    row, pid_n = tl.program_id(0).to(tl.int64), tl.program_id(1)
    slot = tl.load(row_slots_ptr + row).to(tl.int64)
    if slot == 0:
        return
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + slot * stride_ws + cols[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + ks) < K
        xv = tl.load(x_ptr + row * stride_x + k0 + ks, mask=k_ok, other=0.0).to(tl.float32)
        wt = tl.load(w_rows + (k0 + ks)[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.sum(wt.to(tl.float32) * xv[None, :], axis=1)
    out = out_ptr + row * stride_out + cols
    if ACCUMULATE:
        acc += tl.load(out, mask=col_ok, other=0.0).to(tl.float32)
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


def _check(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, in_offset: int, out_offset: int):
    """Shapes, strides and devices both launchers need; returns (N, K)."""
    if x.dim() != 2 or out.dim() != 2 or w.dim() != 3:
        raise ValueError(f"x, out must be 2-D and w 3-D; got {x.dim()}, {out.dim()}, {w.dim()}")
    num_slots, n, k = w.shape
    if x.shape[0] != out.shape[0]:
        raise ValueError(f"x has {x.shape[0]} rows, out {out.shape[0]}")
    if in_offset + k > x.shape[1] or out_offset + n > out.shape[1]:
        raise ValueError(
            f"columns out of range: x[:, {in_offset}:{in_offset + k}] of {x.shape[1]}, "
            f"out[:, {out_offset}:{out_offset + n}] of {out.shape[1]}"
        )
    if x.stride(1) != 1 or w.stride(2) != 1 or out.stride(1) != 1:
        raise ValueError("x, w and out must be contiguous in their last dimension")
    if not (x.device == w.device == out.device):
        raise ValueError(f"x, w, out on {x.device}, {w.device}, {out.device}")
    return n, k


def _operands(x, w, out, in_offset: int, out_offset: int) -> tuple:
    """The arguments both kernels start with: x and out at their column offsets, N, K, strides."""
    n, k = w.shape[1], w.shape[2]
    x_at, out_at = x[:, in_offset:], out[:, out_offset:]
    return x_at, w, out_at, n, k, x.stride(0), w.stride(0), w.stride(1), out.stride(0)


def sgmv(
    x: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor,
    segments: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    max_seg_len: int,
    in_offset: int = 0,
    out_offset: int = 0,
    accumulate: bool = False,
) -> None:
    """SGMV (module docstring): writes (or adds into) out's rows of every segment whose slot is
    not 0; other rows of `out` are left as they are. segments = (starts, lens, slots) int32."""
    n, k = _check(x, w, out, in_offset, out_offset)
    starts, lens, slots = segments
    if not (starts.dtype == lens.dtype == slots.dtype == torch.int32):
        raise ValueError("segment starts, lens and slots must be int32")
    if starts.numel() == 0 or max_seg_len == 0:
        return
    block_m, block_n = 16, 64 if n > 32 else 32
    block_k = 64 if k > 32 else max(16, triton.next_power_of_2(k))
    grid = (starts.numel(), triton.cdiv(max_seg_len, block_m), triton.cdiv(n, block_n))
    sgmv_kernel[grid](
        *_operands(x, w, out, in_offset, out_offset),
        starts,
        lens,
        slots,
        ACCUMULATE=accumulate,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )


def bgmv(
    x: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor,
    row_slots: torch.Tensor,
    in_offset: int = 0,
    out_offset: int = 0,
    accumulate: bool = False,
) -> None:
    """BGMV (module docstring): rows whose slot is not 0 written (or added into); no host sync,
    so it may be captured in a CUDA graph over a static `row_slots` buffer."""
    n, k = _check(x, w, out, in_offset, out_offset)
    if row_slots.dtype != torch.int32 or row_slots.shape != (x.shape[0],):
        raise ValueError(f"row_slots must be int32 [{x.shape[0]}]")
    if x.shape[0] == 0:
        return
    block_n, block_k = 32, 64 if k > 32 else max(16, triton.next_power_of_2(k))
    bgmv_kernel[(x.shape[0], triton.cdiv(n, block_n))](
        *_operands(x, w, out, in_offset, out_offset),
        row_slots,
        ACCUMULATE=accumulate,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )


def sgmv_ref(x, w, out, segments, in_offset=0, out_offset=0, accumulate=False) -> None:
    """`sgmv` in torch: one matmul per segment."""
    k, n = w.shape[2], w.shape[1]
    for start, length, slot in zip(*(s.tolist() for s in segments)):
        if slot == 0 or length == 0:
            continue
        rows = slice(start, start + length)
        y = x[rows, in_offset : in_offset + k].float() @ w[slot].float().T
        dst = out[rows, out_offset : out_offset + n]
        dst.copy_(dst.float() + y if accumulate else y)


def bgmv_ref(x, w, out, row_slots, in_offset=0, out_offset=0, accumulate=False) -> None:
    """`bgmv` in torch: one row at a time."""
    k, n = w.shape[2], w.shape[1]
    for row, slot in enumerate(row_slots.tolist()):
        if slot == 0:
            continue
        y = x[row, in_offset : in_offset + k].float() @ w[slot].float().T
        dst = out[row, out_offset : out_offset + n]
        dst.copy_(dst.float() + y if accumulate else y)

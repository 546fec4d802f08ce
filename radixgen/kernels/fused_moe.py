"""Mixture-of-experts expert computation: every token's top-k experts, as grouped GEMMs.

    fused_experts(x, w13, w2, topk_weights, topk_ids) -> [T, H]
        out[t] = sum_j topk_weights[t, j] * w2[e] @ (silu(w13[e, :I] @ x[t]) * (w13[e, I:] @ x[t])),
        e = topk_ids[t, j]; w13 [E, 2I, H] (gate rows, then up rows), w2 [E, H, I].

The Triton path sorts the T * k (token, expert) pairs by expert and pads each expert's run to a
multiple of BLOCK_M (`align_block_size`), so every BLOCK_M-row tile of the sorted list belongs to
one expert; one launch then covers all experts for gate_up and one for down, each program
multiplying its tile of gathered rows by its expert's weight tile. The top-k weight is applied in
the down kernel's epilogue; the k rows of a token are summed after. Everything is tensor ops with
static shapes (no host sync), so it runs inside CUDA graphs.

`fused_experts_ref` is the torch path (the CPU one): pairs sorted by expert, one GEMM per active
expert over its contiguous rows, scattered back with index_add. It reads the per-expert counts on
the host.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def grouped_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    weight_ptr,
    sorted_ids_ptr,
    expert_ids_ptr,
    num_padded_ptr,
    num_pairs,
    N,
    K,
    stride_am,
    stride_be,
    stride_bn,
    stride_cm,
    A_ROWS_PER_PAIR: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """c[pair] = a[pair // A_ROWS_PER_PAIR] @ b[expert].T (times weight[pair] if MUL_WEIGHT), for
    the BLOCK_M sorted pairs of tile program_id(0) and BLOCK_N output columns of program_id(1).
    a [*, K] (A_ROWS_PER_PAIR = top_k: one row per token; 1: one row per pair), b [E, N, K],
    c [num_pairs, N]. Padding entries of the sorted list (== num_pairs) are masked out."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rows = tl.arange(0, BLOCK_M)
    pairs = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + rows).to(tl.int64)  # [BLOCK_M]
    row_ok = pairs < num_pairs
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + (pairs // A_ROWS_PER_PAIR)[:, None] * stride_am  # [BLOCK_M, 1]
    b_cols = b_ptr + expert * stride_be + cols.to(tl.int64)[None, :] * stride_bn  # [1, BLOCK_N]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + ks) < K
        a = tl.load(a_rows + (k0 + ks)[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_cols + (k0 + ks)[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(a, b)  # [BLOCK_M, BLOCK_K] @ [BLOCK_K, BLOCK_N]
    if MUL_WEIGHT:
        acc *= tl.load(weight_ptr + pairs, mask=row_ok, other=0.0).to(tl.float32)[:, None]
    c = c_ptr + pairs[:, None] * stride_cm + cols[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


def align_block_size(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """Sort the T * k (token, expert) pairs by expert, each expert's run padded to a multiple of
    block_m. Returns (sorted_ids int32 [P]: pair index t * k + j, or T * k for padding;
    expert_ids int32 [P // block_m]: the expert of each tile (num_experts past the end);
    num_padded int32 [1]: the used length of sorted_ids). P = T * k + E * (block_m - 1) rounded
    up to block_m bounds the padded length for every routing, so shapes depend on T only."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    num_pairs, device = flat.numel(), flat.device
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))  # bincount without its host sync
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = padded.cumsum(0)
    order = torch.sort(flat, stable=True).indices  # pairs grouped by expert, in token order
    sorted_experts = flat[order]
    rank = torch.arange(num_pairs, device=device) - (counts.cumsum(0) - counts)[sorted_experts]
    capacity = -(-(num_pairs + num_experts * (block_m - 1)) // block_m) * block_m
    sorted_ids = torch.full((capacity,), num_pairs, dtype=torch.int32, device=device)
    sorted_ids[(padded_end - padded)[sorted_experts] + rank] = order.to(torch.int32)
    tile_starts = torch.arange(0, capacity, block_m, device=device)
    expert_ids = torch.searchsorted(padded_end, tile_starts, right=True).to(torch.int32)
    return sorted_ids, expert_ids, padded_end[-1:].to(torch.int32)


def _check(x, w13, w2, topk_weights, topk_ids):
    if x.dim() != 2 or w13.dim() != 3 or w2.dim() != 3:
        raise ValueError(
            f"x must be [T, H], w13 [E, 2I, H], w2 [E, H, I]; got {tuple(x.shape)}, "
            f"{tuple(w13.shape)}, {tuple(w2.shape)}"
        )
    (num_experts, two_i, hidden), inter = w13.shape, w2.shape[2]
    if x.shape[1] != hidden or two_i != 2 * inter or tuple(w2.shape[:2]) != (num_experts, hidden):
        raise ValueError(
            f"shapes disagree: x {tuple(x.shape)}, w13 {tuple(w13.shape)}, w2 {tuple(w2.shape)}"
        )
    if (
        topk_ids.shape != topk_weights.shape
        or topk_ids.dim() != 2
        or topk_ids.shape[0] != x.shape[0]
    ):
        raise ValueError(
            f"topk_ids and topk_weights must both be [T, k]; got {tuple(topk_ids.shape)}, "
            f"{tuple(topk_weights.shape)} for T = {x.shape[0]}"
        )
    if not (x.dtype == w13.dtype == w2.dtype):
        raise ValueError(
            f"x, w13 and w2 must share a dtype; got {x.dtype}, {w13.dtype}, {w2.dtype}"
        )


def _block_m(num_pairs: int, num_experts: int) -> int:
    """Tile rows: small at decode (few pairs per expert: less padding), larger for prefill."""
    per_expert = num_pairs / num_experts
    return 16 if per_expert <= 16 else 32 if per_expert <= 64 else 64


def _grouped_gemm(a, b, out, weights, sorted_ids, expert_ids, num_padded, rows_per_pair, block_m):
    num_pairs, n = out.shape
    block_n, block_k = 64, 64 if b.element_size() <= 2 else 32
    grid = (expert_ids.numel(), triton.cdiv(n, block_n))
    grouped_gemm_kernel[grid](
        a,
        b,
        out,
        weights,
        sorted_ids,
        expert_ids,
        num_padded,
        num_pairs,
        n,
        b.shape[2],
        a.stride(0),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        A_ROWS_PER_PAIR=rows_per_pair,
        MUL_WEIGHT=weights is not None,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )


def fused_experts(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    """The routed experts' output [T, H] (see the module docstring), as two grouped-GEMM
    launches; x, w13 and w2 contiguous in one dtype, topk_ids int [T, k]. Allocates its outputs;
    mutates nothing."""
    _check(x, w13, w2, topk_weights, topk_ids)
    if not (x.is_contiguous() and w13.is_contiguous() and w2.is_contiguous()):
        raise ValueError("x, w13 and w2 must be contiguous")
    num_tokens, top_k = topk_ids.shape
    num_experts, inter = w13.shape[0], w2.shape[2]
    block_m = _block_m(num_tokens * top_k, num_experts)
    sorted_ids, expert_ids, num_padded = align_block_size(topk_ids, num_experts, block_m)
    gate_up = x.new_empty(num_tokens * top_k, 2 * inter)  # [T * k, 2I], row t * k + j
    _grouped_gemm(x, w13, gate_up, None, sorted_ids, expert_ids, num_padded, top_k, block_m)
    act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]  # [T * k, I]
    down = x.new_empty(num_tokens * top_k, x.shape[1])
    weights = topk_weights.reshape(-1).to(torch.float32).contiguous()
    _grouped_gemm(act, w2, down, weights, sorted_ids, expert_ids, num_padded, 1, block_m)
    return down.view(num_tokens, top_k, -1).sum(dim=1)


def fused_experts_ref(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    """The same in torch: (token, expert) pairs sorted by expert, one gate_up and one down GEMM
    per expert that has tokens, the top-k weight applied after down, rows added back in expert
    order (HF's order, so float32 results match it to rounding). Syncs with the host."""
    _check(x, w13, w2, topk_weights, topk_ids)
    top_k, inter = topk_ids.shape[1], w2.shape[2]
    flat = topk_ids.reshape(-1)
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    out = torch.zeros_like(x)
    weights = topk_weights.reshape(-1)
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        pairs = order[start : start + count]
        start += count
        tokens = pairs // top_k
        gate, up = F.linear(x[tokens], w13[expert]).split(inter, dim=-1)
        y = F.linear(F.silu(gate) * up, w2[expert]) * weights[pairs, None].to(x.dtype)
        out.index_add_(0, tokens, y)
    return out

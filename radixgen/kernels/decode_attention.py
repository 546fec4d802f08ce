"""Decode attention (one query token per request) over a paged KV pool.

decode_attention: request b attends over the slots kv_indices[kv_indptr[b]:kv_indptr[b+1]] (any
order) of ONE pool (bf16/fp16/fp32, fp8 or nvfp4, see kv_layout.py). One program per (group of
KV heads (one by default), request, split) of the tile kernel (decode_tile.py, or the whole-slot
rows kernel of decode_rows.py): the whole query group of those KV heads is processed at once, so
each token row of K and V is read once; quantized tiles are dequantized in registers. With several
splits (flash-decoding), each split writes a partial (o, lse) and a second kernel reduces them.
This module holds the launchers: tile configurations, split counts, validation. The partial
states are merged by the log-sum-exp math of state_merge.py (merge_state, reduce_splits: both
are this module's API too).

decode_attention_pools: a sequence split between pools (an fp8 prefix pool and an nvfp4 branch
pool) is attended in one pass per pool whose split partials land in one buffer, then one reduce:
the split reduce is this merge applied over all partials, so a pool is just more splits (one
reduce launch instead of a reduce per pool plus a merge_state). An fp8 part and an nvfp4 part that
the CUDA kernel takes (nvfp4_decode_cuda.MixedCall) are one launch, not one per pool; where a
CTA per part's split would take more than one wave, each CTA attends one split of both parts
(MIXED_PAIRED), so the partials are those of one pool's splits (no reduce at one split).
"""

from __future__ import annotations

import math
import os

import torch
import triton

from . import nvfp4_decode_cuda
from ._common import FLOAT_DTYPES, check_kernel_tensor, ctas_per_sm, interpreting
from .decode_rows import decode_rows_kernel
from .decode_tile import decode_tile_kernel
from .kv_layout import (
    FMT_FP8,
    FMT_NVFP4,
    KVBuffers,
    attend_ref,
    check_index,
    compute_dtype,
    kernel_flags,
    output_buffers,
    written_out,
)
from .state_merge import merge_state, merge_state_ref, reduce_splits

__all__ = [
    "decode_attention",
    "decode_attention_pools",
    "decode_attention_ref",
    "decode_attention_pools_ref",
    "merge_state",
    "merge_state_ref",
    "reduce_splits",
]

LOG2E = 1.4426950408889634
# format -> (BLOCK_N, num_warps, num_stages, KV heads per program, prefetch the next tile's bits into
# registers, register cap per thread (None: the compiler's; a cap fits more programs per SM)),
# module-level so a benchmark can sweep them; the defaults were the fastest on an H200
# (bench_kernels.py --sweep, batch 64 x 4096, 32/8 heads, D 128). Several KV heads per program (one
# contiguous read of heads * row bytes per slot), prefetching and register caps were all slower there.
# nvfp4 runs one warp over 32-token tiles: its dequantize is latency-bound, and more, smaller
# programs per SM hide it (0.227 -> 0.19 ms there; 2 or 4 warps over 64-128 tokens: 0.21-0.38 ms).
# fp8: 64-token tiles, 3 stages on an H100 (benchmarks/probe_mixed_decode.py: 0.191 ms
# whole, 0.100 at half the tokens, against 0.202 / 0.109 for 128-token tiles in 3 stages).
DECODE_CONFIGS = {
    0: (128, 4, 2, 1, False, None),
    1: (64, 4, 3, 1, False, None),
    2: (32, 1, 3, 1, False, None),
}
# code-shape variants: nvfp4 / fp8 (fp8_eo) as even/odd halves (fp8: 0.197 -> 0.148 ms there, no
# byte shuffles, one cvt per pair); all KV heads per program with masked dots (rows, slower)
DECODE_VARIANT = {"split_eo": True, "rows": False, "fp8_eo": True}
ROWS_CONFIGS = {
    0: (8, 4, 2),
    1: (16, 4, 2),
    2: (16, 4, 2),
}  # the rows kernel: (tokens per tile, warps, stages)
MIN_SPLIT_TOKENS = 256  # a split gets at least this many tokens on average
# NVFP4 pools go to the CUDA kernel (nvfp4_decode_cuda.py) where it runs, else to the Triton one
USE_CUDA_NVFP4 = True
# an fp8 part and an nvfp4 part in one launch of the CUDA kernel where it takes both (MixedCall;
# RADIXGEN_CUDA_MIXED=0: one launch per pool). H100, 64 x 4096 tokens half in each: 0.164 ms
# against 0.172 for one launch per pool (docs/benchmarks-history.md)
USE_CUDA_MIXED = os.environ.get("RADIXGEN_CUDA_MIXED", "1") != "0"
# the time of an fp8 token in the mixed launch, in nvfp4 tokens (_mixed_splits shares splits by it)
FP8_TOKEN_COST = 1.5
# the one mixed launch with each CTA attending a split of both parts (MixedCall's paired kernel: one
# partial per split, none to reduce at one split) instead of one part's split: "auto" where a CTA a
# part would take more than one wave of resident CTAs (_use_paired), True wherever both parts have
# the same split count, False never (RADIXGEN_MIXED_PAIRED=auto|1|0)
MIXED_PAIRED = {"0": False, "1": True}.get(os.environ.get("RADIXGEN_MIXED_PAIRED", "auto"), "auto")
USE_PDL = os.environ.get("RADIXGEN_PDL", "1") != "0"  # programmatic dependent launch (_pdl)


def _pdl(device: torch.device) -> bool:
    """Whether launches after the first of a decode call are programmatic dependent launches
    (sm_90+): each decode launch lets the next one start at once (its CTAs take the SMs the
    previous launch's last CTAs leave idle), a later pool's launch waits for the earlier ones only
    before it exits, and the split reduce waits for all of them before reading. USE_PDL turns it off."""
    return (
        USE_PDL
        and device.type == "cuda"
        and not interpreting()
        and torch.cuda.get_device_capability(device)[0] >= 9
    )


# ---------------------------------------------------------------- launchers


def _check_decode(q, kv: KVBuffers, kv_indptr, kv_indices, out_dtype) -> torch.dtype:
    if not isinstance(q, torch.Tensor) or q.ndim != 3 or q.dtype not in FLOAT_DTYPES:
        raise ValueError("q must be a float32/float16/bfloat16 tensor [B, Hq, D]")
    kv.check()
    if q.shape[2] != kv.head_dim or q.shape[1] % kv.num_kv_heads:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit a pool with {kv.num_kv_heads} KV heads of dim {kv.head_dim}"
        )
    if kv.k.device != q.device:
        raise ValueError(f"q is on {q.device} but the pool on {kv.k.device}")
    check_index(kv_indptr, "kv_indptr", q.device, q.shape[0] + 1)
    check_index(kv_indices, "kv_indices", q.device)
    out_dtype = q.dtype if out_dtype is None else out_dtype
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
    compute_dtype(q.dtype, kv)  # raises for a float pool of another dtype than q
    return out_dtype


def _num_splits(call: "_KernelCall", nnz: int) -> int:
    """The fewest splits whose (request, head group, split) programs fill the waves of the kernel's
    resident programs to >= 90% (the best fill if none does), each split keeping >= MIN_SPLIT_TOKENS
    keys on average. More splits only add partials to reduce, and a last wave left mostly empty
    idles the device (H200, 64 requests x 8 KV heads x 4096 keys: fp8 with 264 resident programs
    0.141 ms at 1 split, 0.153 at 5; bf16 with 396: 0.292 ms at 1 split (a 29%-full second wave),
    0.264 at 2 or 5)."""
    return _filling(call, range(1, _split_cap(call, nnz, 64) + 1))


def _split_cap(call, nnz: int, most: int) -> int:
    """The most splits (<= `most`, >= 1) that keep >= MIN_SPLIT_TOKENS of `nnz` keys each on average."""
    return max(1, min(nnz // max(call.batch * MIN_SPLIT_TOKENS, 1), most))


def _filling(call, counts: range) -> int:
    """The first split count in `counts` whose (request, head group, split) programs fill the waves
    of the call's resident programs to >= 90%, else the count that fills them best."""
    pairs = max(call.batch * call.head_groups, 1)
    resident = call.resident()

    def fill(splits: int) -> float:
        return pairs * splits / (triton.cdiv(pairs * splits, resident) * resident)

    return next((n for n in counts if fill(n) >= 0.9), max(counts, key=fill))


_RESIDENT: dict = {}  # kernel configuration -> programs resident on the device at once


class _KernelCall:
    """One decode kernel launch of the selected variant for a pool, less its split count."""

    def __init__(self, q, kv: KVBuffers, kv_indptr, kv_indices, sm_scale: float):
        (b, hq, d), hkv = q.shape, kv.num_kv_heads
        self.batch, self.device, self.scale_log2 = b, q.device, sm_scale * LOG2E
        self.inputs = (q, *kv.kernel_args(), kv_indptr, kv_indices)
        if DECODE_VARIANT["rows"]:
            block_n, warps, stages = ROWS_CONFIGS[kv.fmt]
            self.fn, self.head_groups = decode_rows_kernel, 1
            self.kwargs = dict(
                HQ=hq,
                HKV=hkv,
                D=d,
                HQ_PAD=max(16, triton.next_power_of_2(hq)),
                BLOCK_N=block_n,
                num_warps=warps,
                num_stages=stages,
                **kernel_flags(q.dtype, kv),
            )
            return
        block_n, warps, stages, _, prefetch, maxnreg = (*DECODE_CONFIGS[kv.fmt], None)[:6]
        extra = {} if maxnreg is None or interpreting() else {"maxnreg": maxnreg}
        hpp = _heads_per_program(kv)
        eo = (
            DECODE_VARIANT["split_eo"]
            if kv.fmt == FMT_NVFP4
            else kv.fmt == FMT_FP8 and DECODE_VARIANT.get("fp8_eo", False)
        )
        eo = eo and d // 2 >= 16  # a half-width dot needs K >= 16 (head_dim >= 32)
        if eo and kv.fmt == FMT_FP8:  # fp8 bytes read as int16 words of an even and an odd byte
            self.inputs = (q, kv.k.view(torch.int16), kv.v.view(torch.int16), *self.inputs[3:])
        # lazy rescaling pays off where the dequantize makes the kernel issue-bound (nvfp4); the
        # fp8 kernel is memory-bound and its branch costs registers (168 -> 196, one program less per SM)
        self.fn, self.head_groups = decode_tile_kernel, hkv // hpp
        self.kwargs = dict(
            HQ=hq,
            HKV=hkv,
            D=d,
            HPP=hpp,
            M=max(16, triton.next_power_of_2(hpp * (hq // hkv))),
            BLOCK_N=block_n,
            SPLIT_EO=eo,
            PREFETCH=prefetch,
            LAZY_RESCALE=kv.fmt == FMT_NVFP4,
            num_warps=warps,
            num_stages=stages,
            **extra,
            **kernel_flags(q.dtype, kv),
        )

    def grid(self, splits: int) -> tuple:
        return (
            (self.batch, splits)
            if self.fn is decode_rows_kernel
            else (self.head_groups, self.batch, splits)
        )

    def launch(
        self, mid_o, mid_lse, splits: int, split_base: int, stride: int, gdc: int = 0
    ) -> None:
        """Write (o, lse) per (request, head, split) into mid_o [B, Hq, stride, D] / mid_lse [B, Hq,
        stride] at split_base + split (stride 1: the final o [B, Hq, D], lse [B, Hq]). gdc (_pdl):
        1 lets the next launch start early, 2 also makes this a dependent launch of the one before."""
        flags = {} if self.fn is decode_rows_kernel else {"GDC": gdc}
        if gdc == 2 and flags:
            flags["launch_pdl"] = True
        self.fn[self.grid(splits)](
            *self.inputs,
            mid_o,
            mid_lse,
            self.scale_log2,
            split_base,
            splits,
            stride,
            **self.kwargs,
            **flags,
        )

    def resident(self) -> int:
        """Programs of this configuration resident at once on the device, from the compiled kernel's
        registers and shared memory (16 per SM where those are unknown, e.g. the interpreter)."""
        if self.device.type != "cuda" or interpreting():
            return 16 * 4
        key = (
            self.fn,
            self.device.index,
            self.inputs[0].dtype,
            self.inputs[1].dtype,
            *self.kwargs.values(),
        )
        if key not in _RESIDENT:
            props = torch.cuda.get_device_properties(self.device)
            try:  # the kernel every split count runs (split counts are unspecialized runtime ints)
                part = torch.empty(1, dtype=torch.float32, device=self.device)
                kernel = self.fn.warmup(
                    *self.inputs,
                    part,
                    part,
                    self.scale_log2,
                    0,
                    1,
                    1,
                    grid=self.grid(1),
                    **self.kwargs,
                )
                kernel._init_handles()
                per_sm = ctas_per_sm(
                    kernel.n_regs, kernel.metadata.shared, self.kwargs["num_warps"], props
                )
            except Exception:  # a Triton without these attributes: the old rule of thumb
                per_sm = 16
            _RESIDENT[key] = per_sm * props.multi_processor_count
        return _RESIDENT[key]


def decode_attention(
    q: torch.Tensor,
    kv: KVBuffers,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    *,
    out_dtype: torch.dtype | None = None,
    num_splits: int | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
):
    """Attend q [B, Hq, D] (one token per request, Hq a multiple of Hkv) over each request's slots.

    Request b's keys: kv.k/kv.v at slots kv_indices[kv_indptr[b]:kv_indptr[b+1]] (int32/int64 CSR,
    any order, not range-checked). Returns (o [B, Hq, D] out_dtype (default q.dtype), lse [B, Hq]
    float32 = log sum exp(sm_scale * q.k)), new or written into `out`; no keys: o = 0, lse = -inf.
    Float pools need q.dtype == pool dtype; quantized pools compute in fp16 (fp32 for an fp32 q).
    num_splits overrides the split-KV heuristic. No host sync. Raises ValueError for bad inputs.
    """
    return decode_attention_pools(
        q,
        [(kv, kv_indptr, kv_indices)],
        sm_scale,
        out_dtype=out_dtype,
        num_splits=num_splits,
        out=out,
    )


def decode_attention_pools(
    q: torch.Tensor,
    parts: list[tuple[KVBuffers, torch.Tensor, torch.Tensor]],
    sm_scale: float,
    *,
    out_dtype: torch.dtype | None = None,
    num_splits: int | list[int] | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
):
    """decode_attention over keys that lie in several pools (e.g. an FP8 prefix pool and an NVFP4
    branch pool): parts = [(kv, kv_indptr, kv_indices)] per pool, request b's keys being the union
    of its slots in every part. Each part's programs write their split partials (o, lse) into one
    buffer and one reduce merges them all: a pool is just more splits, and merging splits is
    merge_state's math (module docstring), so no per-pool reduce or merge pass runs. num_splits:
    one count for every part or one per part (None: the heuristic's)."""
    if not parts:
        raise ValueError(
            "decode_attention_pools needs at least one (kv, kv_indptr, kv_indices) part"
        )
    out_dtype = [_check_decode(q, kv, ptr, ind, out_dtype) for kv, ptr, ind in parts][0]
    for kv, ptr, ind in parts:
        kv.check_kernel()
        for t, name in ((ptr, "kv_indptr"), (ind, "kv_indices")):
            check_kernel_tensor(t, name)
    check_kernel_tensor(q, "q")
    b, hq, d = q.shape
    o, lse = output_buffers(out, (b, hq, d), out_dtype, q.device)  # [B, Hq, D], [B, Hq]
    if b == 0:
        return o, lse
    wanted = num_splits if isinstance(num_splits, (list, tuple)) else [num_splits] * len(parts)
    if len(wanted) != len(parts) or not all(
        n is None or (isinstance(n, int) and n >= 1) for n in wanted
    ):
        raise ValueError(f"num_splits must be a positive int or one per part, got {num_splits!r}")
    mixed = _mixed_call(q, parts, sm_scale, out_dtype)
    if mixed is not None:
        call, order = mixed  # order: the parts' indices, fp8 first
        auto = _mixed_splits(call, *(parts[i][2].numel() for i in order))
        splits = [0, 0]
        for i, n in zip(order, auto):
            splits[i] = wanted[i] or n
        paired = _use_paired(call, wanted, splits) and _mixed_call(
            q, parts, sm_scale, out_dtype, paired=True
        )
        if paired:
            return _paired_decode(
                paired[0], wanted[0], sum(ind.numel() for _, _, ind in parts), o, lse
            )
    else:
        calls = [_kernel_call(q, kv, ptr, ind, sm_scale, out_dtype) for kv, ptr, ind in parts]
        splits = [
            n or _num_splits(call, ind.numel())
            for n, call, (_, _, ind) in zip(wanted, calls, parts)
        ]
    total = sum(splits)
    mid_o, mid_lse = (
        (o, lse) if total == 1 else output_buffers(None, (b, hq, total, d), torch.float32, q.device)
    )
    bases = [sum(splits[:i]) for i in range(len(splits))]
    pdl = _pdl(q.device)
    if mixed is not None:
        call.launch(mid_o, mid_lse, *(x for i in order for x in (splits[i], bases[i])), total)
    else:  # the CUDA kernel is launched plainly (not as a dependent launch): it goes first
        for rank, i in enumerate(
            sorted(range(len(calls)), key=lambda i: not isinstance(calls[i], _KernelCall))
        ):
            calls[i].launch(
                mid_o,
                mid_lse,
                splits[i],
                bases[i],
                total,
                gdc=0 if not pdl else 1 if rank == 0 else 2,
            )
    if total > 1:
        reduce_splits(mid_o, mid_lse, o, lse, pdl=pdl)
    return o, lse


def _kernel_call(q, kv: KVBuffers, kv_indptr, kv_indices, sm_scale: float, out_dtype: torch.dtype):
    """The launch for one pool: the CUDA NVFP4 kernel where it is available and built for the
    shape (compiled here, so a failed compile falls back before anything is launched), else Triton."""
    if (
        USE_CUDA_NVFP4
        and nvfp4_decode_cuda.supports(q, kv)
        and nvfp4_decode_cuda.available(q.device)
    ):
        call = nvfp4_decode_cuda.DecodeCall(q, kv, kv_indptr, kv_indices, sm_scale * LOG2E)
        try:
            for dtype in {torch.float32, out_dtype}:
                call.compiled(dtype)
            return call
        except Exception:  # logged once by nvfp4_decode_cuda; the Triton kernel takes over
            pass
    return _KernelCall(q, kv, kv_indptr, kv_indices, sm_scale)


def _mixed_call(q, parts, sm_scale: float, out_dtype: torch.dtype, paired: bool = False):
    """(nvfp4_decode_cuda.MixedCall, (fp8 part index, nvfp4 part index)) where the parts are one
    fp8 and one nvfp4 part that the CUDA kernel takes in one launch (paired: each CTA a split of
    both; compiled here: a failed compile gives None, and each part its own launch), else None."""
    if not USE_CUDA_MIXED or not USE_CUDA_NVFP4 or len(parts) != 2:
        return None
    order = sorted(range(2), key=lambda i: parts[i][0].fmt != FMT_FP8)
    (fp8, *fp8_index), (nv, *nv_index) = (parts[i] for i in order)
    if not nvfp4_decode_cuda.mixed_supported(q, fp8, nv, fp8_index, nv_index):
        return None
    call = nvfp4_decode_cuda.MixedCall(
        q, parts[order[0]], parts[order[1]], sm_scale * LOG2E, paired
    )
    try:
        for dtype in {torch.float32, out_dtype}:
            call.compiled(dtype)
    except Exception:  # logged once by nvfp4_decode_cuda
        return None
    return call, order


def _use_paired(call, wanted: list, splits: list[int]) -> bool:
    """Whether the mixed launch pairs the parts (each CTA a split of both; MIXED_PAIRED). "auto":
    where the split counts are the rule's and a CTA per part's split would take more than one wave
    of resident CTAs. On an H100 (264 resident CTAs), half of each request's keys in each pool:
    256 x 1024 keys, splits 1 + 1 = 512 CTAs: +13.0% over the parts' average, paired (256 CTAs, no
    reduce) +3.8%; where one wave holds a CTA per part's split (64 x 4096, 128 x 2048, 16 x 16384)
    the parts were 2-9% faster than pairs (docs/benchmarks-history.md)."""
    if MIXED_PAIRED == "auto":
        return (
            wanted == [None, None] and call.batch * call.head_groups * sum(splits) > call.resident()
        )
    return bool(MIXED_PAIRED) and wanted[0] == wanted[1]


def _paired_decode(call, num_splits: int | None, keys: int, o: torch.Tensor, lse: torch.Tensor):
    """The paired mixed launch into (o, lse): num_splits splits of both parts (None: the split rule
    of one pool over all `keys`), their partials reduced, or written straight at one split."""
    n = num_splits or _num_splits(call, keys)
    b, hq, d = o.shape
    mid_o, mid_lse = (
        (o, lse) if n == 1 else output_buffers(None, (b, hq, n, d), torch.float32, o.device)
    )
    call.launch(mid_o, mid_lse, n, 0, n, 0, n)
    if n > 1:
        reduce_splits(mid_o, mid_lse, o, lse, pdl=_pdl(o.device))
    return o, lse


_MIXED_SPLITS: dict = {}  # (batch, head groups, resident CTAs, fp8 tokens, nvfp4 tokens) -> split counts


def _mixed_splits(call, fp8_tokens: int, nvfp4_tokens: int) -> tuple[int, int]:
    """(fp8 splits, nvfp4 splits) of a mixed launch: the fewest splits in all whose CTAs fill the
    waves of resident CTAs to >= 90% (the best fill if none does), as _num_splits counts them,
    shared between the parts by their work (an fp8 token costing FP8_TOKEN_COST nvfp4 tokens);
    each split keeps >= MIN_SPLIT_TOKENS keys on average. On an H100 at 64 x 4096 tokens, half in
    each pool (264 resident CTAs of 64 per split): 2 + 2 splits, one wave, 0.164 ms; a work-
    balanced 7 + 5 over three waves took 0.181 and 3 + 2 (1.2 waves) 0.194 (docs/benchmarks-history.md):
    co-resident CTAs share an SM's bandwidth, so a wave's time follows its SMs' summed work."""
    resident = call.resident()
    key = (call.batch, call.head_groups, resident, fp8_tokens, nvfp4_tokens)
    if key not in _MIXED_SPLITS:
        caps = [_split_cap(call, n, 32) for n in (fp8_tokens, nvfp4_tokens)]
        share = fp8_tokens * FP8_TOKEN_COST / max(fp8_tokens * FP8_TOKEN_COST + nvfp4_tokens, 1)
        total = _filling(call, range(2, sum(caps) + 1))
        fp8 = min(max(round(total * share), 1), caps[0], total - 1)
        if len(_MIXED_SPLITS) > 4096:
            _MIXED_SPLITS.clear()
        _MIXED_SPLITS[key] = (fp8, min(total - fp8, caps[1]))
    return _MIXED_SPLITS[key]


def _heads_per_program(kv: KVBuffers) -> int:
    """The config's KV heads per program, reduced to a divisor of the pool's KV heads."""
    return math.gcd(DECODE_CONFIGS[kv.fmt][3], kv.num_kv_heads)


# ---------------------------------------------------------------- torch references


def decode_attention_ref(
    q,
    kv: KVBuffers,
    kv_indptr,
    kv_indices,
    sm_scale: float,
    *,
    out_dtype=None,
    num_splits: int | None = None,
    out=None,
):
    """Plain-torch decode_attention (float32 math; num_splits is ignored; returns new tensors
    unless `out` is given)."""
    out_dtype = _check_decode(q, kv, kv_indptr, kv_indices, out_dtype)
    bounds = kv_indptr.tolist()
    o = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device)
    for b in range(q.shape[0]):
        slots = kv_indices[bounds[b] : bounds[b + 1]]
        if slots.numel():
            k, v = kv.dequantize(slots)
            visible = torch.ones(1, slots.numel(), dtype=torch.bool, device=q.device)
            o_b, lse_b = attend_ref(q[b : b + 1].float(), k, v, visible, sm_scale)
            o[b], lse[b] = o_b[0], lse_b[0]
    return written_out(out, o.to(out_dtype), lse)


def decode_attention_pools_ref(
    q, parts, sm_scale: float, *, out_dtype=None, num_splits=None, out=None
):
    """Plain-torch decode_attention_pools: one reference pass per part, merged by merge_state_ref."""
    if not parts:
        raise ValueError(
            "decode_attention_pools needs at least one (kv, kv_indptr, kv_indices) part"
        )
    state = None
    for kv, ptr, ind in parts:
        o, lse = decode_attention_ref(q, kv, ptr, ind, sm_scale, out_dtype=torch.float32)
        state = (o, lse) if state is None else merge_state_ref(*state, o, lse)
    out_dtype = q.dtype if out_dtype is None else out_dtype
    return written_out(out, state[0].to(out_dtype), state[1])

"""KV-cache kernels on one GPU: decode/extend attention and quantize-on-write stores, against
flashinfer and the device-to-device copy bandwidth measured in the same run.

    PYTHONPATH=. python benchmarks/bench_kernels.py [--json OUT] [--sweep]  # an H200: ~1-2 min
    # tiny shapes; on the CPU (TRITON_INTERPRET=1):
    PYTHONPATH=. python benchmarks/bench_kernels.py --smoke
    # decode also over in-order slots; scattered-read ceilings:
    ... --order both --decode-only --gather

Decode: batch 64 x 4096 tokens, 32 q / 8 kv heads, dim 128, slots in random order; bf16, fp8,
nvfp4 and mixed (half of each request's tokens fp8, half nvfp4: one launch of the CUDA kernel for
both pools where it runs, one launch per pool, and two passes + merge_state).
Effective bandwidth = bytes that must be read (KV rows + slot indices + q) / time; the copy
bandwidth counts read + write bytes of a 1 GiB clone. Each call is captured in a CUDA graph and
its replays timed with CUDA events (median of --iters after warm-up; --eager times plain calls,
whose Python launch overhead is ~0.1 ms); inputs smaller than 2x L2 are rotated between copies.
Each result is checked against the torch reference (relative error) before it is timed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

L2_BYTES = 50 << 20
FULL = dict(
    batch=64, seq=4096, hq=32, hkv=8, d=128, new=4096, prefix=4096, store=4096, quantize=65536
)
SMOKE = dict(batch=2, seq=40, hq=4, hkv=2, d=32, new=64, prefix=16, store=8, quantize=64)


class Timer:
    """Median seconds of fn(inputs[i % len]) over `iters` runs: CUDA-graph replays timed with CUDA
    events on a GPU (as a serving runtime runs decode: no Python launch overhead), or plain calls.
    A graph holds REPS calls back to back (cycling through the inputs) and the time is per call:
    one replay between two events also times the graph's launch, a floor of 16-18 us on an H100
    (a one-element kernel measured so), which would inflate every per-call figure."""

    REPS = 10

    def __init__(self, cuda: bool, iters: int, eager: bool = False):
        self.cuda, self.iters, self.eager = cuda, iters, eager

    def __call__(self, fn, inputs: list) -> float:
        if not self.cuda:  # the interpreter: one timed call, for a smoke check only
            t0 = time.perf_counter()
            fn(inputs[0])
            return time.perf_counter() - t0
        for x in inputs:
            fn(x)  # compile and warm up outside any capture
        n, reps = len(inputs), 1 if self.eager else self.REPS
        runs = (
            [lambda x=x: fn(x) for x in inputs]
            if self.eager
            else [
                self._graph(fn, [inputs[(i + r) % n] for r in range(reps)]).replay for i in range(n)
            ]
        )
        times = []
        for i in range(self.iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            runs[i % len(runs)]()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        return statistics.median(times)

    @staticmethod
    def _graph(fn, xs: list) -> torch.cuda.CUDAGraph:
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for x in xs:
                fn(x)
        return graph


def timed(timer: Timer, fn, inputs: list) -> tuple[float, str]:
    """(seconds, label suffix): graph replays, or plain calls (" (eager)") where fn is not
    capturable."""
    try:
        return timer(fn, inputs), ""
    except RuntimeError:  # e.g. a host-side check that synchronizes
        torch.cuda.synchronize()
        return Timer(timer.cuda, timer.iters, eager=True)(fn, inputs), " (eager)"


def copies(make, nbytes: int, cuda: bool) -> list:
    """Enough independent input sets that cycling through them defeats the L2 cache."""
    return [make() for _ in range(math.ceil(2 * L2_BYTES / nbytes) if cuda else 1)]


def rel_err(got, want) -> float:
    got, want = got.double(), want.double()
    ok = torch.isfinite(want)
    return ((got[ok] - want[ok]).norm() / want[ok].norm().clamp_min(1e-30)).item()


def build_pools(s, dev, gen, order: str = "random"):
    """bf16 / fp8 / nvfp4 pools of the same random bf16 K/V ([slots, Hkv, D]) and a CSR of the slots
    in random order, or ("contiguous") request b holding slots b * seq .. (b + 1) * seq - 1 in
    order."""
    from radixgen.kernels.kv_layout import KVBuffers
    from radixgen.kernels.kv_store import store_kv_fp8, store_kv_nvfp4

    slots_n, hkv, d = s["batch"] * s["seq"], s["hkv"], s["d"]
    k, v = (torch.randn(slots_n, hkv, d, generator=gen, device=dev).bfloat16() for _ in range(2))
    all_slots, amax = (
        torch.arange(slots_n, device=dev),
        [t.float().abs().amax((0, 2)) for t in (k, v)],
    )
    fp8 = [torch.empty(slots_n, hkv, d, device=dev, dtype=torch.float8_e4m3fn) for _ in range(2)]
    codes = [torch.empty(slots_n, hkv, d // 2, device=dev, dtype=torch.uint8) for _ in range(2)]
    bsc = [
        torch.empty(slots_n, hkv, d // 16, device=dev, dtype=torch.float8_e4m3fn) for _ in range(2)
    ]
    for i, x in enumerate((k, v)):
        store_kv_fp8(fp8[i], amax[i] / 448, all_slots, x)
        store_kv_nvfp4(codes[i], bsc[i], amax[i] / 2688, all_slots, x)
    pools = {
        "bf16": KVBuffers(k, v),
        "fp8": KVBuffers(*fp8, amax[0] / 448, amax[1] / 448),
        "nvfp4": KVBuffers(*codes, amax[0] / 2688, amax[1] / 2688, *bsc),
    }
    indptr = torch.arange(0, slots_n + 1, s["seq"], device=dev, dtype=torch.int32)
    perm = torch.randperm(slots_n, generator=gen, device=dev)
    return pools, indptr, (perm if order == "random" else torch.arange(slots_n, device=dev))


def kv_row_bytes(fmt: str, hkv: int, d: int) -> int:  # K + V bytes per token, all heads
    return 2 * hkv * {"bf16": 2 * d, "fp8": d, "nvfp4": d // 2 + d // 16}[fmt]


def bench_decode(s, dev, timer, rows, sweep: set, order: str = "random"):
    """Our decode for each pool format (checked against the reference), then mixed and flashinfer;
    first a sweep of the kernel configs of the formats in `sweep`."""
    from radixgen.kernels import decode_attention as da

    gen = torch.Generator(dev).manual_seed(0)
    pools, indptr, indices = build_pools(s, dev, gen, order)
    tag = "" if order == "random" else f" ({order})"
    n_rows = len(rows)
    b, hq, d, n = s["batch"], s["hq"], s["d"], s["seq"]
    sm = 1 / math.sqrt(d)
    qs = [
        torch.randn(b, hq, d, generator=gen, device=dev).bfloat16()
    ]  # the KV read (0.3-1 GB) defeats L2
    want = {}
    for fmt, kv in pools.items():
        # the reference loops in Python: check the first two requests
        want[fmt] = da.decode_attention_ref(
            qs[0][:2], kv, indptr[:3], indices, sm, out_dtype=torch.float32
        )[0]
        on_cuda = cuda_nvfp4(da, qs[0], kv)
        if fmt in sweep and dev == "cuda":
            if on_cuda:
                sweep_cuda_nvfp4(da, kv, qs, indptr, indices, sm, timer, want[fmt])
            else:
                sweep_decode(da, fmt, kv, qs, indptr, indices, sm, timer, want[fmt])
        nbytes = b * n * (kv_row_bytes(fmt, s["hkv"], d) + 4) + 2 * b * hq * d * 2
        # the CUDA NVFP4 kernel, then the Triton kernel it replaces on the same inputs
        runs = [(f"decode {fmt}", True)] + (
            [("decode nvfp4 (Triton kernel)", False)] if on_cuda else []
        )
        for label, use_cuda in runs:
            da.USE_CUDA_NVFP4 = use_cuda
            o, _ = da.decode_attention(qs[0], kv, indptr, indices, sm, out_dtype=torch.float32)
            t = timer(lambda q, kv=kv: da.decode_attention(q, kv, indptr, indices, sm), qs)
            rows.append(dict(op=label, ms=t * 1e3, bytes=nbytes, err=rel_err(o[:2], want[fmt])))
        da.USE_CUDA_NVFP4 = True
    bench_mixed(s, da, pools, qs, indices, sm, timer, rows)
    bench_flashinfer_decode(s, dev, pools, qs, indptr, indices, sm, want, timer, rows)
    for r in rows[n_rows:]:
        r["op"] += tag
    del pools


def bench_mixed(s, da, pools, qs, indices, sm, timer, rows):
    """The first half of each request's tokens in the fp8 pool, the second in nvfp4: 2 passes +
    merge."""
    b, hq, d, half = s["batch"], s["hq"], s["d"], s["seq"] // 2
    ind2 = indices.view(b, 2 * half)
    ptr_half = torch.arange(0, b * half + 1, half, device=indices.device, dtype=torch.int32)
    ind_a, ind_b = ind2[:, :half].contiguous().view(-1), ind2[:, half:].contiguous().view(-1)

    def two_passes(q):
        o_a, l_a = da.decode_attention(
            q, pools["fp8"], ptr_half, ind_a, sm, out_dtype=torch.float32
        )
        o_b, l_b = da.decode_attention(
            q, pools["nvfp4"], ptr_half, ind_b, sm, out_dtype=torch.float32
        )
        return da.merge_state(o_a, l_a, o_b, l_b)

    def pools_one_reduce(q):  # the runtime's path
        parts = [(pools["fp8"], ptr_half, ind_a), (pools["nvfp4"], ptr_half, ind_b)]
        return da.decode_attention_pools(q, parts, sm, out_dtype=torch.float32)

    nbytes = (
        b * half * (kv_row_bytes("fp8", s["hkv"], d) + kv_row_bytes("nvfp4", s["hkv"], d) + 8)
        + 4 * b * hq * d
    )
    want = mixed_reference(pools, qs[0], ind2, half, sm)
    # the runtime's path launches both pools at once where it can (paired or a part per CTA by its
    # rule)
    for name, fn, one_launch, paired in (
        ("decode mixed fp8+nvfp4", pools_one_reduce, True, "auto"),
        ("decode mixed, one launch, both parts per CTA", pools_one_reduce, True, True),
        ("decode mixed, one launch, a part per CTA", pools_one_reduce, True, False),
        ("decode mixed, one launch per pool", pools_one_reduce, False, False),
        ("decode mixed, 2 passes + merge", two_passes, False, False),
    ):
        da.USE_CUDA_MIXED, da.MIXED_PAIRED = one_launch, paired
        t = timer(fn, qs)
        rows.append(dict(op=name, ms=t * 1e3, bytes=nbytes, err=rel_err(fn(qs[0])[0][:2], want)))
    da.USE_CUDA_MIXED, da.MIXED_PAIRED = True, "auto"


def bench_flashinfer_decode(s, dev, pools, qs, indptr, indices, sm, want, timer, rows):
    from radixgen.kernels import flashinfer_ops as fi

    if not (fi.available() and dev == "cuda"):
        return
    b, hq, d, n = s["batch"], s["hq"], s["d"], s["seq"]
    for fmt in ("bf16", "fp8"):
        op, kv = fi.FlashInferDecode(dev), pools[fmt]
        op.plan(indptr, indices, hq, s["hkv"], d, torch.bfloat16, kv.k.dtype, sm)
        o, _ = op.run(qs[0], kv)
        t, how = timed(timer, lambda q, op=op, kv=kv: op.run(q, kv), qs)
        nbytes = b * n * (kv_row_bytes(fmt, s["hkv"], d) + 4) + 2 * b * hq * d * 2
        rows.append(
            dict(
                op=f"flashinfer decode {fmt}{how}",
                ms=t * 1e3,
                bytes=nbytes,
                err=rel_err(o[:2], want[fmt]),
            )
        )


def mixed_reference(pools, q, ind2, half, sm):
    """Torch reference of the first two split sequences: both halves dequantized, attended as
    one."""
    from radixgen.kernels.kv_layout import attend_ref

    outs = []
    for r in range(min(2, q.shape[0])):
        ka, va = pools["fp8"].dequantize(ind2[r, :half])
        kb, vb = pools["nvfp4"].dequantize(ind2[r, half:])
        vis = torch.ones(1, 2 * half, dtype=torch.bool, device=q.device)
        outs.append(
            attend_ref(q[r : r + 1].float(), torch.cat([ka, kb]), torch.cat([va, vb]), vis, sm)[0]
        )
    return torch.cat(outs)


SWEEP_SPLITS = (2, 3, 4, 5, 8)


def _new_kernels(fn, seen: set) -> str:
    """n_regs / n_spills / shared bytes of the compiled variants of `fn` not in `seen` (best
    effort)."""
    out = []
    try:
        for entry in fn.device_caches.values():
            for k in entry[0].values():
                if id(k) not in seen:
                    seen.add(id(k))
                    out.append(
                        f"regs {getattr(k, 'n_regs', '?')} spills {getattr(k, 'n_spills', '?')} "
                        f"smem {k.metadata.shared}"
                    )
    except Exception as exc:  # the cache layout differs between Triton versions
        out.append(f"no stats ({type(exc).__name__})")
    return "; ".join(out)


def sweep_decode(da, fmt, kv, qs, indptr, indices, sm, timer, want):
    """Print the time of each kernel variant and tile config (BLOCK_N, warps, stages, KV heads per
    program, prefetch[, register cap]); keep the fastest for `fmt`, then time forced split counts
    for it."""
    base = [
        (128, 4, 3, 1, False),
        (128, 4, 2, 1, False),
        (64, 4, 3, 1, False),
        (128, 4, 1, 1, True),
        (64, 4, 2, 1, True),
        (128, 4, 3, 1, False, 168),
        (128, 4, 3, 1, False, 128),
        (64, 4, 3, 1, False, 128),
        (64, 4, 4, 1, False, 128),
    ]
    candidates = [(dict(rows=False, split_eo=True, fp8_eo=True), c) for c in base]
    if fmt == "fp8":  # fp8 bytes as one tile (not even/odd halves), the HEAD default
        candidates += [(dict(rows=False, split_eo=True, fp8_eo=False), (128, 4, 3, 1, False))]
    else:  # two KV heads per program
        candidates += [(dict(rows=False, split_eo=True, fp8_eo=True), (64, 4, 1, 2, True))]
    best, seen = None, set()
    for variant, cfg in candidates:
        da.DECODE_VARIANT.update(variant)
        da.DECODE_CONFIGS[kv.fmt] = cfg
        try:
            o, _ = da.decode_attention(
                qs[0][:2], kv, indptr[:3], indices, sm, out_dtype=torch.float32
            )
            err = rel_err(o, want)
            if not err < 1e-3:
                print(f"  sweep {fmt} {variant} {cfg}: WRONG, rel err {err:.1e}")
                continue
            t = timer(lambda q: da.decode_attention(q, kv, indptr, indices, sm), qs)
        except Exception as exc:  # e.g. out of shared memory / registers for a config
            print(
                f"  sweep {fmt} {variant} {cfg}: failed ({type(exc).__name__}: {str(exc)[-200:]})"
            )
            continue
        print(
            f"  sweep {fmt} {variant} {cfg}: {t * 1e3:.3f} ms (rel err {err:.1e}; "
            f"{_new_kernels(da.decode_tile_kernel, seen)})",
            flush=True,
        )
        if best is None or t < best[0]:
            best = (t, variant, cfg)
    if best is None:
        raise RuntimeError(f"no decode variant compiled for {fmt}")
    da.DECODE_VARIANT.update(best[1])
    da.DECODE_CONFIGS[kv.fmt] = best[2]
    print(f"  sweep {fmt}: best {best[1]} {best[2]}")
    # split-KV sizing of the best config (the heuristic's choice is what the plain call takes)
    for splits in SWEEP_SPLITS:
        t = timer(
            lambda q, splits=splits: da.decode_attention(
                q, kv, indptr, indices, sm, num_splits=splits
            ),
            qs,
        )
        print(f"  sweep {fmt} splits {splits}: {t * 1e3:.3f} ms", flush=True)


def cuda_nvfp4(da, q, kv) -> bool:
    """True when decode_attention runs the CUDA NVFP4 kernel (nvfp4_decode_cuda.py) for this
    pool."""
    from radixgen.kernels import nvfp4_decode_cuda as cu

    return da.USE_CUDA_NVFP4 and cu.supports(q, kv) and cu.available(q.device)


# nvfp4_decode_cuda.CONFIG entries: the register pipeline, then the shared-memory one
CUDA_NVFP4_CONFIGS = (
    dict(stages=0, warps=1, min_warps=10),
    dict(stages=0, warps=1, min_warps=12),
    dict(stages=0, warps=1, min_warps=8),
    dict(stages=0, warps=2, min_warps=8),
    dict(stages=2, min_ctas=2),
    dict(stages=2, min_ctas=1),
    dict(stages=3, min_ctas=1),
    dict(stages=4, min_ctas=1),
)


def sweep_cuda_nvfp4(da, kv, qs, indptr, indices, sm, timer, want):
    """Time the CUDA NVFP4 kernel per pipeline config (register pipeline: warps per CTA and
    occupancy hint; shared-memory pipeline: stages and CTAs per SM), keep the fastest, then time
    forced split counts for it."""
    from radixgen.kernels import nvfp4_decode_cuda as cu

    best, default = None, dict(cu.CONFIG)
    for cfg in CUDA_NVFP4_CONFIGS:
        name = ", ".join(f"{key} {value}" for key, value in cfg.items())
        cu.CONFIG.update(default, **cfg)
        try:
            o, _ = da.decode_attention(
                qs[0][:2], kv, indptr[:3], indices, sm, out_dtype=torch.float32
            )
            err = rel_err(o, want)
            t = timer(lambda q: da.decode_attention(q, kv, indptr, indices, sm), qs)
        except Exception as exc:
            print(f"  sweep cuda nvfp4 {name}: failed ({type(exc).__name__}: {exc})")
            continue
        call = da._kernel_call(qs[0], kv, indptr, indices, sm, torch.bfloat16)
        k = call.compiled(torch.float32)
        print(
            f"  sweep cuda nvfp4 {name}: {t * 1e3:.3f} ms (rel err {err:.1e}; regs {k.num_regs}; "
            f"smem {k.smem}; resident {call.resident()}; "
            f"splits {da._num_splits(call, indices.numel())})",
            flush=True,
        )
        if err < 1e-2 and (best is None or t < best[0]):
            best = (t, name, cfg)
    if best is None:
        raise RuntimeError("no CUDA NVFP4 decode config ran")
    cu.CONFIG.update(default, **best[2])
    print(f"  sweep cuda nvfp4: best {best[1]}")
    for splits in (1, 2, 3, 4, 6, 8):
        t = timer(
            lambda q, splits=splits: da.decode_attention(
                q, kv, indptr, indices, sm, num_splits=splits
            ),
            qs,
        )
        print(f"  sweep cuda nvfp4 splits {splits}: {t * 1e3:.3f} ms", flush=True)


def gather_bandwidth(dev, timer) -> None:
    """Read-only bandwidth of rows of 32 B .. 2 KiB at random vs in order (a Triton kernel that sums
    each tile of rows): how much of the copy bandwidth scattered reads of a given size can reach."""
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_rows(src, idx, out, RB: tl.constexpr, ROWS: tl.constexpr):
        pid = tl.program_id(0)
        rows = tl.load(idx + pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        x = tl.load(src + rows[:, None] * (RB // 4) + tl.arange(0, RB // 4)[None, :])
        tl.store(out + pid, tl.sum(tl.sum(x, axis=1), axis=0))

    total = 1 << 30
    src = torch.randint(0, 1 << 20, (total // 4,), device=dev, dtype=torch.int32)
    for rb in (32, 64, 128, 256, 512, 1024, 2048):
        n = total // rb
        rows = max(16, 16384 // rb)
        res = []
        for how, idx in (
            ("random", torch.randperm(n, device=dev, dtype=torch.int32)),
            ("in order", torch.arange(n, device=dev, dtype=torch.int32)),
        ):
            out = torch.empty(n // rows, device=dev, dtype=torch.int32)
            t = timer(
                lambda _, i=idx, n=n, rows=rows, out=out, rb=rb: _sum_rows[(n // rows,)](
                    src, i, out, RB=rb, ROWS=rows, num_warps=4
                ),
                [None],
            )
            res.append(f"{how} {total / t / 1e12:.2f} TB/s")
            del idx
        print(f"  gather {rb:5d}-byte rows: " + ", ".join(res), flush=True)


def bench_extend(s, dev, timer, rows):
    from radixgen.kernels import extend_attention as ea
    from radixgen.kernels import flashinfer_ops as fi
    from radixgen.kernels.kv_layout import KVBuffers

    gen = torch.Generator(dev).manual_seed(1)
    new, old, hq, hkv, d, sm = (
        s["new"],
        s["prefix"],
        s["hq"],
        s["hkv"],
        s["d"],
        1 / math.sqrt(s["d"]),
    )
    kv = KVBuffers(
        *(torch.randn(new + old, hkv, d, generator=gen, device=dev).bfloat16() for _ in range(2))
    )
    q = torch.randn(new, hq, d, generator=gen, device=dev).bfloat16()
    qo_indptr, kv_indptr, num_new, ref_qo, ref_new = (
        torch.tensor(v, device=dev, dtype=torch.int32)
        for v in ([0, new], [0, new + old], [new], [0, 64], [64])
    )
    kv_indices = torch.randperm(new + old, generator=gen, device=dev)
    args = (kv, qo_indptr, kv_indptr, kv_indices, num_new, sm)
    o, _ = ea.extend_attention(q, *args)
    rows_chk = slice(
        new - 64, new
    )  # the reference for the last 64 queries only: the same keys, 64 of them new
    ref_o, _ = ea.extend_attention_ref(q[rows_chk], kv, ref_qo, kv_indptr, kv_indices, ref_new, sm)
    flops = 4 * hq * d * sum(old + i + 1 for i in range(new))
    t = timer(lambda qq: ea.extend_attention(qq, *args, max_qo_len=new), [q])
    rows.append(dict(op="extend bf16", ms=t * 1e3, flops=flops, err=rel_err(o[rows_chk], ref_o)))
    if fi.available() and dev == "cuda":
        op = fi.FlashInferExtend(dev)
        op.plan(qo_indptr, kv_indptr, kv_indices, hq, hkv, d, torch.bfloat16, torch.bfloat16, sm)
        o_fi, _ = op.run(q, kv)
        t, how = timed(timer, lambda qq: op.run(qq, kv), [q])
        rows.append(
            dict(
                op=f"flashinfer extend{how}",
                ms=t * 1e3,
                flops=flops,
                err=rel_err(o_fi[rows_chk], ref_o),
            )
        )


def bench_store(s, dev, timer, rows):
    from radixgen.kernels.kv_store import store_kv_fp8, store_kv_nvfp4

    n, hkv, d = s["store"], s["hkv"], s["d"]
    gen = torch.Generator(dev).manual_seed(2)
    xs = copies(
        lambda: torch.randn(n, hkv, d, generator=gen, device=dev).bfloat16(),
        n * hkv * d * 2,
        dev == "cuda",
    )
    pool = 16 * n
    slots = torch.randperm(pool, generator=gen, device=dev)[:n]
    s8, s4 = torch.full((hkv,), 0.01, device=dev), torch.full((hkv,), 0.002, device=dev)
    cache = torch.empty(pool, hkv, d, device=dev, dtype=torch.float8_e4m3fn)
    codes = torch.empty(pool, hkv, d // 2, device=dev, dtype=torch.uint8)
    bsc = torch.empty(pool, hkv, d // 16, device=dev, dtype=torch.float8_e4m3fn)
    elems = n * hkv * d
    cases = {
        "store_kv_fp8": (lambda x: store_kv_fp8(cache, s8, slots, x), elems * 3),
        "store_kv_nvfp4": (
            lambda x: store_kv_nvfp4(codes, bsc, s4, slots, x),
            elems * 2 + elems // 2 + elems // 16,
        ),
    }
    for name, (fn, nbytes) in cases.items():
        t, how = timed(timer, fn, xs)
        rows.append(dict(op=name + how, ms=t * 1e3, bytes=nbytes))


def bench_quantize(s, dev, timer, rows):
    """Quantize throughput of [tokens, Hkv, D] bf16 with per-head scales: the public call (its
    checks, one sync for the in-kernel NaN/Inf flag, timed eagerly) and the kernel alone (graph
    replays of the launch on preallocated outputs)."""
    from radixgen.kernels import quantize_fp8, quantize_nvfp4
    from radixgen.kernels.fp8 import launch_quantize_fp8
    from radixgen.kernels.nvfp4 import _row_scales as nvfp4_row_scales
    from radixgen.kernels.nvfp4 import launch_quantize_nvfp4

    n, hkv, d = s["quantize"], s["hkv"], s["d"]
    gen = torch.Generator(dev).manual_seed(3)
    xs = copies(
        lambda: torch.randn(n, hkv, d, generator=gen, device=dev).bfloat16(),
        n * hkv * d * 2,
        dev == "cuda",
    )
    s8, s4 = torch.full((1, hkv, 1), 0.01, device=dev), torch.full((1, hkv, 1), 0.002, device=dev)
    elems = n * hkv * d
    q8, flag = (
        torch.empty(n, hkv, d, dtype=torch.uint8, device=dev),
        torch.zeros(1, dtype=torch.int32, device=dev),
    )
    codes, bsc = (torch.empty(n, hkv, d // div, dtype=torch.uint8, device=dev) for div in (2, 16))
    row_scales = nvfp4_row_scales(s4, (n, hkv))
    eager = Timer(timer.cuda, timer.iters, eager=True)
    for fmt, call, kernel, nbytes in (
        (
            "fp8",
            lambda x: quantize_fp8(x, s8),
            lambda x: launch_quantize_fp8(x, s8, q8, flag),
            elems * 3,
        ),
        (
            "nvfp4",
            lambda x: quantize_nvfp4(x, s4),
            lambda x: launch_quantize_nvfp4(x, row_scales, codes, bsc, flag),
            elems * 2 + elems // 2 + elems // 16,
        ),
    ):
        rows.append(
            dict(
                op=f"quantize_{fmt} {n} x {hkv} x {d} (call)",
                ms=eager(call, xs) * 1e3,
                bytes=nbytes,
            )
        )
        rows.append(
            dict(op=f"quantize_{fmt} (kernel alone)", ms=timer(kernel, xs) * 1e3, bytes=nbytes)
        )
    assert int(flag.item()) == 0, "the quantize kernel flagged a finite input"


def copy_bandwidth(
    dev, timer
) -> float:  # one 1 GiB clone, timed eagerly (a graph replay of it ran slower)
    x = torch.empty(1 << 30 if dev == "cuda" else 1 << 20, dtype=torch.uint8, device=dev).fill_(1)
    return 2 * x.numel() / Timer(timer.cuda, timer.iters, eager=True)(lambda t: t.clone(), [x])


def report(rows, copy_bw: float, dev: str) -> None:
    print(
        f"\ndevice: {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu (TRITON_INTERPRET)'}; "
        f"copy bandwidth (read + write) {copy_bw / 1e12:.2f} TB/s"
    )
    print(f"{'op':<40}{'ms':>9}{'TB/s':>8}{'of copy':>9}{'TFLOP/s':>9}{'rel err':>10}")
    for r in rows:
        bw = r.get("bytes", 0) / (r["ms"] / 1e3)
        r["tbps"], r["of_copy"] = bw / 1e12, bw / copy_bw
        tf = r.get("flops", 0) / (r["ms"] / 1e3) / 1e12
        print(
            f"{r['op']:<40}{r['ms']:9.3f}{r['tbps']:8.2f}{r['of_copy']:9.0%}{tf:9.1f}"
            f"{r.get('err', float('nan')):10.1e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes (runs on the CPU under TRITON_INTERPRET=1)",
    )
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument(
        "--sweep",
        nargs="?",
        const="fp8,nvfp4",
        default="",
        help="time decode kernel configs of these formats (default fp8,nvfp4) and keep the best",
    )
    ap.add_argument("--eager", action="store_true", help="time plain calls, not CUDA-graph replays")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument(
        "--order",
        choices=("random", "contiguous", "both"),
        default="random",
        help="slot order of the decode pools (contiguous: each request's slots in one run)",
    )
    ap.add_argument(
        "--decode-only", action="store_true", help="skip the extend and store benchmarks"
    )
    ap.add_argument(
        "--gather", action="store_true", help="also time scattered row reads of 32 B .. 2 KiB"
    )
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        os.environ.setdefault(
            "TRITON_INTERPRET", "1"
        )  # before any radixgen.kernels module is imported
    shapes = SMOKE if args.smoke else FULL
    timer = Timer(dev == "cuda", args.iters if dev == "cuda" else 1, eager=args.eager)
    rows: list[dict] = []
    copy_bw = copy_bandwidth(dev, timer)
    if args.gather and dev == "cuda":
        gather_bandwidth(dev, timer)
    for order in ("random", "contiguous") if args.order == "both" else (args.order,):
        bench_decode(
            shapes,
            dev,
            timer,
            rows,
            set(args.sweep.split(",")) if order != "contiguous" else set(),
            order,
        )
    if not args.decode_only:
        bench_extend(shapes, dev, timer, rows)
        bench_store(shapes, dev, timer, rows)
        bench_quantize(shapes, dev, timer, rows)
    report(rows, copy_bw, dev)
    if args.json:
        args.json.write_text(
            json.dumps(dict(shapes=shapes, copy_tbps=copy_bw / 1e12, rows=rows), indent=1)
        )


if __name__ == "__main__":
    main()

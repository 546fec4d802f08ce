"""Where mixed decode's time goes: each pool's half alone, the split reduce alone, and split counts.

Mixed decode (decode_attention_pools over an fp8 and an nvfp4 part) is compared with the average
of the two formats over the whole sequence (bench_kernels.py). This probe times, at the same shape
(64 x 4096 tokens, half of each request's tokens per pool, 32/8 heads, D 128), each part over its
half alone with the split count the runtime picks and with fixed counts, the reduce alone, and the
mixed call with per-part split counts, so the difference can be placed. One GPU call:
    python3 benchmarks/probe_mixed_decode.py
With --one-launch it times the one-launch path instead (an fp8 and an nvfp4 part in one launch of
the CUDA kernel, nvfp4_decode_cuda.MixedCall): against one launch per pool, over pairs of split
counts, and the fp8 part alone through it (an empty nvfp4 part) against the Triton fp8 kernel.
--shape BATCH,TOKENS (with --one-launch) probes another batch and sequence length, e.g. 16,16384:
where the split rule's choice stands among the pairs there. The one launch is timed both ways:
paired (each CTA a split of both parts, decode_attention.MIXED_PAIRED, with its own split
counts) and parts (each CTA one part's split); --quick leaves out the parts' split pairs.
"""

from __future__ import annotations

import itertools
import math
import sys

import torch
from bench_kernels import FULL, Timer, build_pools


def _setup(s=FULL):
    """The pools, q and the mixed parts (half of each request's tokens per pool) at shape `s`
    (the full one by default), a maker of decode calls for the timer, and the timer."""
    from radixgen.kernels import decode_attention as da
    from radixgen.kernels.kv_layout import output_buffers

    dev = "cuda"
    gen = torch.Generator(dev).manual_seed(0)
    pools, indptr, indices = build_pools(s, dev, gen)
    b, hq, d, n = s["batch"], s["hq"], s["d"], s["seq"]
    half, sm = n // 2, 1 / math.sqrt(d)
    q = torch.randn(b, hq, d, generator=gen, device=dev).bfloat16()
    ind2 = indices.view(b, n)
    ptr_half = torch.arange(0, b * half + 1, half, device=dev, dtype=torch.int32)
    parts = [
        (pools["fp8"], ptr_half, ind2[:, :half].contiguous().view(-1)),
        (pools["nvfp4"], ptr_half, ind2[:, half:].contiguous().view(-1)),
    ]

    def run(parts_, splits=None):
        out = output_buffers(None, (b, hq, d), torch.float32, q.device)
        return lambda _: da.decode_attention_pools(
            q, parts_, sm, num_splits=splits, out_dtype=torch.float32, out=out
        )

    return pools, indptr, indices, q, parts, run, Timer(True, 50)


def main() -> None:
    from radixgen.kernels import decode_attention as da
    from radixgen.kernels.kv_layout import output_buffers

    pools, indptr, indices, q, parts, run, timer = _setup()
    (b, hq, d), n, dev = q.shape, FULL["seq"], q.device
    half, sm = n // 2, 1 / math.sqrt(d)

    def auto(parts_):
        calls = [da._kernel_call(q, kv, p, i, sm, torch.float32) for kv, p, i in parts_]
        return [da._num_splits(c, i.numel()) for c, (_, _, i) in zip(calls, parts_)], calls

    def show(label, ms, ref=None):
        extra = f"  {ms / ref - 1:+.1%} vs ref" if ref else ""
        print(f"{label:<52}{ms:8.4f} ms{extra}", flush=True)

    for pdl in (False, True):
        da.USE_PDL = pdl
        print(f"\n--- programmatic dependent launch {'on' if pdl else 'off'}", flush=True)
        times = {}
        for fmt in ("fp8", "nvfp4"):
            whole = [(pools[fmt], indptr, indices)]
            sp, calls = auto(whole)
            times[fmt] = timer(run(whole, sp), [q]) * 1e3
            show(
                f"{fmt} whole ({n} tokens), auto splits {sp}, resident {calls[0].resident()}",
                times[fmt],
            )
        avg = (times["fp8"] + times["nvfp4"]) / 2
        show("average of the two (the goal's reference)", avg)
        half_auto = {}
        for fmt, part in zip(("fp8", "nvfp4"), parts):
            sp, _ = auto([part])
            half_auto[fmt] = timer(run([part], sp), [q]) * 1e3
            show(f"{fmt} half ({half} tokens), auto splits {sp}", half_auto[fmt])
            for k in (1, 2, 4, 8):
                show(f"  {fmt} half, {k} splits", timer(run([part], [k]), [q]) * 1e3)
        show("sum of the halves (auto)", half_auto["fp8"] + half_auto["nvfp4"], avg)
        sp, _ = auto(parts)
        mixed = timer(run(parts, sp), [q]) * 1e3
        show(f"mixed, auto splits {sp}", mixed, avg)
        mid = output_buffers(None, (b, hq, sum(sp), d), torch.float32, q.device)
        o, lse = output_buffers(None, (b, hq, d), torch.float32, q.device)
        mid[0].zero_(), mid[1].zero_()
        red = timer(lambda _: da.reduce_splits(*mid, o, lse), [q]) * 1e3
        show(f"reduce alone over {sum(sp)} splits", red)
        one = torch.zeros(1, device=dev)
        show(
            "  a one-element kernel (the time of a launch in a graph)",
            timer(lambda _: one.add_(1), [q]) * 1e3,
        )
        for ka, kb in itertools.product((1, 2, 3), (2, 4)):
            show(
                f"  mixed, splits fp8 {ka} + nvfp4 {kb}",
                timer(run(parts, [ka, kb]), [q]) * 1e3,
                avg,
            )

    da.USE_PDL = True
    print(
        "\n--- fp8 kernel configs (BLOCK_N, warps, stages), whole / half, auto splits", flush=True
    )
    default = da.DECODE_CONFIGS[1]
    for block_n, warps, stages in (
        (128, 4, 2),
        (64, 4, 2),
        (64, 4, 3),
        (128, 4, 3),
        (128, 8, 2),
        (64, 2, 2),
    ):
        da.DECODE_CONFIGS[1] = (block_n, warps, stages, *default[3:])
        got = []
        for part in ([(pools["fp8"], indptr, indices)], parts[:1]):
            sp, _ = auto(part)
            got.append(f"{timer(run(part, sp), [q]) * 1e3:.4f} ms ({sp[0]} splits)")
        print(f"  {(block_n, warps, stages)}: " + " / ".join(got), flush=True)
    da.DECODE_CONFIGS[1] = default


def one_launch(shape: dict) -> None:
    from radixgen.kernels import decode_attention as da

    pools, indptr, indices, q, parts, run, timer = _setup(shape)
    b, dev, sm, n = q.shape[0], q.device, 1 / math.sqrt(q.shape[2]), shape["seq"]
    print(f"\n--- one launch at {b} x {n} tokens", flush=True)

    def show(label, ms, ref=None):
        extra = f"  {ms / ref - 1:+.1%} vs ref" if ref else ""
        print(f"{label:<56}{ms:8.4f} ms{extra}", flush=True)

    da.USE_CUDA_MIXED = True
    times = {}
    for fmt in ("fp8", "nvfp4"):
        times[fmt] = timer(run([(pools[fmt], indptr, indices)]), [q]) * 1e3
        show(f"{fmt} whole ({n} tokens), auto splits", times[fmt])
    avg = (times["fp8"] + times["nvfp4"]) / 2
    show("average of the two (the goal's reference)", avg)
    mixed, order = da._mixed_call(q, parts, sm, torch.float32)
    auto = da._mixed_splits(mixed, *(parts[i][2].numel() for i in order))
    paired = da._mixed_call(q, parts, sm, torch.float32, True)[0]
    n_auto = da._num_splits(paired, sum(p[2].numel() for p in parts))
    for label, call in (("parts", mixed), ("paired", paired)):
        k = call.compiled(torch.float32)
        print(
            f"one-launch kernel, {label}: {call.resident()} resident CTAs, {k.num_regs} registers"
        )
    rows = (
        (
            "mixed, the runtime's choice",
            True,
            "auto",
            f" (paired: {da._use_paired(mixed, [None, None], auto)})",
        ),
        ("mixed, one launch, paired", True, True, f" {n_auto}"),
        ("mixed, one launch, parts", True, False, f" {auto}"),
        ("mixed, one launch per pool", False, False, ""),
    )
    for label, one, pair, splits in rows:
        da.USE_CUDA_MIXED, da.MIXED_PAIRED = one, pair
        show(f"{label}, auto splits{splits}", timer(run(parts), [q]) * 1e3, avg)
    da.USE_CUDA_MIXED, da.MIXED_PAIRED = True, True
    for k in (1, 2, 3, 4, 6, 8, 12, 16):
        show(f"  one launch, paired, {k} splits", timer(run(parts, [k, k]), [q]) * 1e3, avg)
    if "--quick" in sys.argv:
        return
    da.MIXED_PAIRED = False
    best = None
    for ka, kb in itertools.product((2, 3, 4, 5, 6, 7, 8, 10), (2, 3, 4, 5, 6, 8)):
        ms = timer(run(parts, [ka, kb]), [q]) * 1e3
        best = min(best or (ms, ka, kb), (ms, ka, kb))
        show(f"  one launch, parts, splits fp8 {ka} + nvfp4 {kb}", ms, avg)
    show(f"best pair fp8 {best[1]} + nvfp4 {best[2]}", best[0], avg)
    empty = (pools["nvfp4"], torch.zeros(b + 1, device=dev, dtype=torch.int32), indices[:0])
    for k in (None, 2, 3, 4, 6, 8):
        whole = [(pools["fp8"], indptr, indices), empty]
        show(
            f"fp8 whole through the one-launch kernel, splits {k or 'auto'}",
            timer(run(whole, None if k is None else [k, 1]), [q]) * 1e3,
            times["fp8"],
        )
    da.MIXED_PAIRED = "auto"


def _shape(argv: list[str]) -> dict:
    if "--shape" not in argv:
        return FULL
    batch, seq = (int(v) for v in argv[argv.index("--shape") + 1].split(","))
    return dict(FULL, batch=batch, seq=seq)


if __name__ == "__main__":
    one_launch(_shape(sys.argv)) if "--one-launch" in sys.argv else main()

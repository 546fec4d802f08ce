"""Where a prefill step's time goes on the GPU, by chunk size and by the chunk's depth in its
prompt: what the prefill planner's step-time target trades against long-prompt throughput.

For each chunk size, one long prompt is prefilled alone in chunks of that size (the planner's
chunk and long-prompt threshold set to it, no step-time target): its throughput, and the step
time at depths 0-8k, 24-32k and the last 8k, each next to the FLOP floor of that step (linear
layers plus causal attention at the bf16 matmul rate measured in this process). Then one step
(a chunk at a given depth, alone and with decode rows riding along) under torch.profiler:
device time by kernel family (GEMM, attention, the rest) next to the step's wall time.

    python benchmarks/bench_chunk_cost.py --tokenizer <embedded model folder> --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from bench_agents import gpu_model_folder  # noqa: E402
from bench_gpu_serving import LLAMA31_8B, Driver, measure_device, pct, prefill_flops, random_ids  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--long-len", type=int, default=65536)
    p.add_argument("--chunks", default="512,1024,2048,4096,8192")
    p.add_argument(
        "--profile", default="512:32768,2048:32768,2048:60000", help="chunk:depth steps to profile"
    )
    p.add_argument("--kv", default="bf16")
    p.add_argument("--json")
    return p.parse_args(argv)


def set_chunk(planner, chunk: int) -> None:
    planner.chunk_size = planner.mixed_chunk_size = planner.long_threshold = chunk
    planner.step_cost = None


def chunked_prefill(eng, dev: dict, chunk: int, length: int, seed: int) -> dict:
    set_chunk(eng.scheduler.planner, chunk)
    ids = random_ids(eng.scheduler.runner.arch.vocab_size, length, seed)
    drv = Driver(eng)
    t = time.perf_counter()
    drv.run([(0.0, ids, {"max_new_tokens": 1})])
    total = time.perf_counter() - t
    steps = drv.step_times
    row = {
        "chunk": chunk,
        "tok_s": length / total,
        "steps": len(steps),
        "floor_tok_s": length * dev["matmul_flops"] / prefill_flops(LLAMA31_8B, length),
    }
    for name, lo, hi in (
        ("0-8k", 0, 8192),
        ("24-32k", 24576, 32768),
        ("last8k", length - 8192, length),
    ):
        sel = [s for k, s in enumerate(steps) if lo <= k * chunk < hi]
        floor = (
            sum(
                prefill_flops(LLAMA31_8B, chunk, k * chunk)
                for k in range(len(steps))
                if lo <= k * chunk < hi
            )
            / max(len(sel), 1)
            / dev["matmul_flops"]
        )
        row[name] = {
            "ms_p50": 1e3 * pct(sel, 0.5),
            "floor_ms": 1e3 * floor,
            "of_floor": floor / pct(sel, 0.5),
        }
    return row


def profile_step(eng, chunk: int, depth: int, decode_rows: int, seed: int) -> dict:
    """Steps extending a cached `depth`-token prefix by `chunk` tokens (with `decode_rows`
    requests decoding alongside): the wall time of one unprofiled, then one under torch.profiler
    (device time by kernel, host time by op, and the host-device syncs)."""
    sched, vocab = eng.scheduler, eng.scheduler.runner.arch.vocab_size
    set_chunk(sched.planner, 8192)
    prefix = random_ids(vocab, depth, seed)
    eng.generate(input_ids=prefix, sampling_params={"max_new_tokens": 1})  # cached now
    drv = Driver(eng)
    for k in range(decode_rows):
        drv.submit(random_ids(vocab, 64, seed + 1 + k), {"max_new_tokens": 64, "ignore_eos": True})
    for _ in range(3):  # the decode requests' prefills and first decode steps
        sched.step()
    set_chunk(sched.planner, chunk + 8)
    walls = []
    from torch.profiler import ProfilerActivity, profile

    for k in range(3):
        drv.submit(prefix + random_ids(vocab, chunk, seed + 99 + k), {"max_new_tokens": 1})
        torch.cuda.synchronize()
        if k < 2:
            t = time.perf_counter()
            sched.step()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t)
            continue
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            sched.step()
            torch.cuda.synchronize()
    kernels, host, syncs = [], [], {}
    for ev in prof.key_averages():
        dev_us = getattr(ev, "self_device_time_total", 0.0) or 0.0
        if ev.key.startswith(
            (
                "cudaStreamSynchronize",
                "cudaDeviceSynchronize",
                "cudaMemcpy",
                "aten::_local_scalar_dense",
                "aten::item",
                "cudaEventSynchronize",
            )
        ):
            syncs[ev.key] = (ev.count, ev.self_cpu_time_total / 1e3)
        if dev_us > 0 and not ev.key.startswith("aten::"):
            kernels.append((dev_us / 1e3, ev.count, ev.key[:90]))
        elif ev.self_cpu_time_total > 0:
            host.append((ev.self_cpu_time_total / 1e3, ev.count, ev.key[:90]))
    kernels.sort(reverse=True)
    host.sort(reverse=True)
    while sched.has_work:
        sched.step()
    return {
        "chunk": chunk,
        "depth": depth,
        "decode_rows": decode_rows,
        "wall_ms": [1e3 * w for w in walls],
        "kernel_ms_total": sum(k[0] for k in kernels),
        "kernels": kernels[:8],
        "host": host[:12],
        "syncs": syncs,
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    from radixgen.runtime.engine import Engine

    dev = measure_device()
    print(
        f"{dev['card']}: copy {dev['copy_bandwidth'] / 1e12:.2f} TB/s, matmul {dev['matmul_flops'] / 1e12:.0f} TFLOP/s"
    )
    folder = gpu_model_folder(Path(args.tokenizer), LLAMA31_8B)
    kv = {"kv_cache_dtype": "bf16"} if args.kv == "bf16" else {}
    eng = Engine(str(folder), dtype="bfloat16", load_format="dummy", max_total_tokens=200_000, **kv)
    t = time.perf_counter()
    eng.generate(
        input_ids=random_ids(eng.scheduler.runner.arch.vocab_size, 512, 1),
        sampling_params={"max_new_tokens": 4},
    )
    out = {
        "device": dev,
        "args": vars(args),
        "first_request_s": time.perf_counter() - t,
        "prefill": [],
        "profile": [],
    }
    print(f"first request {out['first_request_s']:.1f} s")
    for i, chunk in enumerate(int(c) for c in args.chunks.split(",")):
        row = chunked_prefill(eng, dev, chunk, args.long_len, seed=100 + i)
        out["prefill"].append(row)
        print(
            f"chunk {chunk}: {row['tok_s']:.0f} tok/s ({100 * row['tok_s'] / row['floor_tok_s']:.0f}% of FLOP floor), "
            + ", ".join(
                f"{k} step {row[k]['ms_p50']:.1f} ms ({100 * row[k]['of_floor']:.0f}%)"
                for k in ("0-8k", "24-32k", "last8k")
            ),
            flush=True,
        )
    for j, spec in enumerate(args.profile.split(",")):
        chunk, depth = (int(x) for x in spec.split(":"))
        for rows in (0, 8):
            r = profile_step(eng, chunk, depth, rows, seed=5000 + 100 * j + rows)
            out["profile"].append(r)
            print(
                f"profile chunk {chunk} at depth {depth} + {rows} decode rows: wall "
                f"{', '.join(f'{w:.1f}' for w in r['wall_ms'])} ms; kernels {r['kernel_ms_total']:.1f} ms; "
                f"syncs {r['syncs']}",
                flush=True,
            )
            for ms, count, key in r["kernels"][:5]:
                print(f"    dev  {ms:8.2f} ms  x{count:<5d} {key}")
            for ms, count, key in r["host"][:10]:
                print(f"    host {ms:8.2f} ms  x{count:<5d} {key}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    eng.shutdown()


if __name__ == "__main__":
    main()

"""Where a GPU decode step's time goes: host (Python, launches, syncs) against device.

Llama-3-8B shape with dummy bf16 weights (as `bench_agents.py --gpu`), `--batch` requests of
`--prompt` random tokens, greedy (or sampled: --temperature, --top-p). A warm-up generation of the same requests compiles the kernels
and leaves the prompts in the radix cache, so the profiled generation of `--steps` tokens is all
decode steps but its first (a one-token extend per request). Printed:
- wall time per step, and the CUDA kernel time summed over the profile per step (the device's
  share: if it is far below the wall time, the step is host-bound);
- kernel launches and host syncs per step (`cudaStreamSynchronize`, `cudaMemcpyAsync` to the
  host, `aten::item` / `aten::_local_scalar_dense`);
- the top ops by self CPU time;
- the wall time per step of the same generation without the profiler;
- with --python-top N, the host's Python functions by own and cumulative time (cProfile).
Decode steps replay CUDA graphs unless --disable-cuda-graph.

    python benchmarks/profile_gpu_step.py --tokenizer <embedded model folder> [--kv mixed]
    python benchmarks/profile_gpu_step.py --model-path <HF folder> --batch 4   # CPU smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from bench_agents import CONFIGS, gpu_model_folder  # noqa: E402

SYNC_OPS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "aten::_local_scalar_dense",
    "aten::item",
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--tokenizer", help="a model folder with the tokenizer files (Llama-3-8B shape, GPU)"
    )
    p.add_argument("--model-path", help="run this real model folder instead (any device)")
    p.add_argument("--kv", default="mixed", choices=list(CONFIGS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--disable-cuda-graph", action="store_true", help="run decode steps eagerly")
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument(
        "--python-top",
        type=int,
        default=0,
        help="also run the generation under cProfile and print this many functions by own time",
    )
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from radixgen.runtime.engine import Engine

    cuda = torch.cuda.is_available()
    kv = dict(
        CONFIGS[args.kv],
        max_total_tokens=args.batch * (args.prompt + 2 * args.steps + 64),
        disable_cuda_graph=args.disable_cuda_graph,
    )
    if args.model_path:
        eng = Engine(args.model_path, **kv)
    elif args.tokenizer and cuda:
        eng = Engine(
            str(gpu_model_folder(Path(args.tokenizer))), dtype="bfloat16", load_format="dummy", **kv
        )
    else:
        raise SystemExit("give --tokenizer (on a CUDA GPU) or --model-path")
    vocab = eng.scheduler.runner.arch.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(100, vocab - 100, (args.batch, args.prompt), generator=gen).tolist()
    params = {
        "max_new_tokens": args.steps,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "seed": 0,
        "ignore_eos": True,
    }
    eng.generate(input_ids=prompts, sampling_params=params)  # warm-up; the prompts stay cached
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    eng.generate(input_ids=prompts, sampling_params=params)  # timed without the profiler
    sync()
    plain = time.perf_counter() - t0
    acts = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if cuda else []
    )
    sync()
    with torch.profiler.profile(activities=acts) as prof:
        t0 = time.perf_counter()
        outs = eng.generate(input_ids=prompts, sampling_params=params)
        sync()
        wall = time.perf_counter() - t0
    cached = sum(o["meta_info"]["cached_tokens"] for o in outs) / sum(
        o["meta_info"]["prompt_tokens"] for o in outs
    )
    graphs = eng.scheduler.runner.graphs
    python_stats = python_profile(eng, prompts, params, sync) if args.python_top else None
    eng.shutdown()
    events = prof.key_averages()
    steps = args.steps
    kernel_us = sum(
        e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA
    )
    count = {e.key: e.count for e in events}
    launches = sum(
        n
        for k, n in count.items()
        if k in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
    )
    print(
        f"{args.kv}: batch {args.batch} x prompt {args.prompt} ({100 * cached:.1f}% cached), {steps} steps, "
        f"wall {wall * 1e3:.0f} ms = {wall * 1e3 / steps:.1f} ms per step"
    )
    print(
        f"without the profiler: {plain * 1e3 / steps:.1f} ms per step (CUDA graphs: "
        f"{graphs.summary() if graphs is not None else 'off'})"
    )
    print(
        f"CUDA kernel time {kernel_us / 1e3:.1f} ms = {kernel_us / 1e3 / steps:.1f} ms per step "
        f"({100 * kernel_us / 1e6 / wall:.0f}% of wall)"
    )
    print(
        f"per step: {launches / steps:.0f} kernel launches; "
        + ", ".join(f"{k} {count.get(k, 0) / steps:.1f}" for k in SYNC_OPS + ("cudaMemcpyAsync",))
    )
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.top, max_name_column_width=60))
    if python_stats is not None:
        print(f"\nPython functions by own time over the same {steps} steps (cProfile):")
        python_stats.sort_stats("tottime").print_stats(args.python_top)
        python_stats.sort_stats("cumulative").print_stats(r"radixgen", args.python_top)


def python_profile(eng, prompts, params, sync):
    """The generation once more under cProfile (host time by Python function)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    sync()
    prof.enable()
    eng.generate(input_ids=prompts, sampling_params=params)
    sync()
    prof.disable()
    return pstats.Stats(prof)


if __name__ == "__main__":
    main()

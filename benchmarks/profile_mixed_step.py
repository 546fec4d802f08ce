"""Where a mixed step's time goes: one long prompt prefilling in chunks while short requests
decode, Llama-3-8B shape with dummy bf16 weights, the step-time target on (`--max-step-ms`).

Each `Scheduler.step` is timed on the host (wall, with a device sync after it) and under the
torch profiler, which gives the CUDA kernel time of the same steps. Printed:
- mixed steps (those that carried long-prompt tokens): count, median wall, median long tokens,
  and the kernel time per step: wall minus kernels is the host's share;
- the top ops by self CPU time over the mixed steps;
- with --python-top N, the host's Python functions over the same phase (cProfile), by own and
  by cumulative time.

    python benchmarks/profile_mixed_step.py --tokenizer <embedded model folder>   # CUDA
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from bench_agents import gpu_model_folder  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", help="a folder with the tokenizer files (CUDA)")
    p.add_argument("--model-path", help="a real model folder instead (CPU smoke run)")
    p.add_argument("--long", type=int, default=16384, help="tokens of the long prompt")
    p.add_argument("--short", type=int, default=16, help="short requests decoding meanwhile")
    p.add_argument("--decode-tokens", type=int, default=512, help="tokens each short request makes")
    p.add_argument("--max-step-ms", type=float, default=40.0)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--python-top", type=int, default=0)
    return p.parse_args(argv)


class StepClock:
    """Wraps Scheduler.step: wall time (synced) and the long prompt's progress per step."""

    def __init__(self, eng):
        self.sched, self.records, self.long = eng.scheduler, [], None
        self.inner = self.sched.step
        self.sched.step = self.step

    def step(self):
        self.long = self.long or self._find_long()
        before = self.long.kv_len if self.long is not None else 0
        t0 = time.perf_counter()
        with torch.profiler.record_function("scheduler.step"):
            out = self.inner()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        progress = 0
        if self.long is not None:
            done = self.long.kv_len == 0 and before > 0  # finished: its KV was released
            progress = len(self.long.input_ids) - before if done else self.long.kv_len - before
            self.long = None if done else self.long
        self.records.append((wall, max(progress, 0)))
        return out

    def _find_long(self):
        queues = (self.sched.waiting, self.sched.chunked, self.sched.running)
        return next((r for q in queues for r in q if len(r.input_ids) > 4096), None)


def run_phase(eng, vocab: int, args, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    long_prompt = torch.randint(100, vocab - 100, (args.long,), generator=gen).tolist()
    shorts = torch.randint(100, vocab - 100, (args.short, 64), generator=gen).tolist()
    eng.generate(input_ids=shorts, sampling_params={"max_new_tokens": 1})
    params = {"max_new_tokens": args.decode_tokens, "temperature": 0, "ignore_eos": True}
    short_params = [params] * args.short
    long_params = {"max_new_tokens": 1, "temperature": 0, "ignore_eos": True}
    return eng.generate(
        input_ids=shorts + [long_prompt], sampling_params=short_params + [long_params]
    )


def main(argv=None):
    args = parse_args(argv)
    from radixgen.runtime.engine import Engine

    cuda = torch.cuda.is_available()
    shape = {"dtype": "bfloat16", "load_format": "dummy"} if args.model_path is None else {}
    eng = Engine(
        args.model_path or str(gpu_model_folder(Path(args.tokenizer))),
        **shape,
        kv_cache_dtype="bf16" if cuda else "auto",
        max_step_ms=args.max_step_ms,
        max_total_tokens=args.long + args.short * 700 + 4096,
    )
    vocab = eng.scheduler.runner.arch.vocab_size
    run_phase(eng, vocab, args, seed=1)  # warm-up: compiles every chunk shape
    clock = StepClock(eng)
    acts = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if cuda else []
    )
    with torch.profiler.profile(activities=acts) as prof:
        run_phase(eng, vocab, args, seed=2)
    report(clock.records, prof, args)
    if args.python_top:
        prof_py = cProfile.Profile()
        prof_py.enable()
        run_phase(eng, vocab, args, seed=3)
        prof_py.disable()
        stats = pstats.Stats(prof_py)
        stats.sort_stats("tottime").print_stats(args.python_top)
        stats.sort_stats("cumulative").print_stats(r"radixgen", args.python_top)
    eng.shutdown()


def report(records: list, prof, args) -> None:
    mixed = [(w, n) for w, n in records if n > 0]
    decode = [w for w, n in records if n == 0]
    events = prof.key_averages()
    kernel_us = sum(
        e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA
    )
    wall_total = sum(w for w, _ in records)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(f"{device}: {len(records)} steps, {wall_total:.2f} s wall")
    if mixed:
        walls = [w for w, _ in mixed]
        print(
            f"mixed steps: {len(mixed)}, median wall {1e3 * statistics.median(walls):.1f} ms, "
            f"median long tokens {statistics.median(n for _, n in mixed):.0f}, "
            f"long tokens/s while mixed {sum(n for _, n in mixed) / sum(walls):.0f}"
        )
    if decode:
        print(f"decode-only steps: {len(decode)}, median {1e3 * statistics.median(decode):.1f} ms")
    print(
        f"CUDA kernel time over all steps {kernel_us / 1e3:.0f} ms = "
        f"{100 * kernel_us / 1e6 / wall_total:.0f}% of step wall (the rest is host)"
    )
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.top, max_name_column_width=60))


if __name__ == "__main__":
    main()

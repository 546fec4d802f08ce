"""Short requests while long prompts prefill, through the offline Engine's scheduler (no HTTP).

Short requests (--short-len prompt tokens, --short-new new tokens, unique prompts) arrive at a
Poisson --short-rate; after --long-after seconds, --num-long long prompts (--long-len tokens)
arrive at once. Reports the short requests' TTFT and inter-token latency (those arriving while a
long prompt prefills; all of them in the run without long prompts: the idle baseline) and the
long prompts' prefill throughput, next to their throughput alone (same engine options, no
short requests). Each --configs entry is one engine build, run in turn in this process:
  default      the scheduler's defaults
  one-partial  one chunked prompt at a time, no long-prompt share or step target (the planner
               before several partial prefills)
GPU (Llama-3.1-8B shape, dummy weights): --gpu-shape llama3.1-8b. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_agents import gpu_model_folder  # noqa: E402 (benchmarks/ is the script directory)
from model_shapes import LLAMA3_8B  # noqa: E402

MODEL_DIR = Path(os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct"))
CONFIGS = {
    "default": {},
    "one-partial": {
        "max_num_partial_prefills": 1,
        "max_long_partial_prefills": 1,
        "long_prefill_token_threshold": 1 << 30,
        "max_step_ms": 0,
    },
}
LLAMA31_8B = {
    **LLAMA3_8B,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--model-path", default=str(MODEL_DIR))
    a("--gpu-shape", choices=["", "llama3.1-8b"], default="", help="dummy weights of this shape")
    a("--configs", default="one-partial,default")
    a(
        "--engine-args",
        default="{}",
        help="JSON of Engine options for every config (dtype, KV, ...)",
    )
    a("--num-long", default="1", help="comma list: long prompts per run")
    a("--long-len", type=int, default=2048)
    a(
        "--long-after",
        type=float,
        default=2.0,
        help="seconds of short traffic before the long prompts",
    )
    a("--short-rate", type=float, default=0.5, help="short requests per second")
    a("--short-len", type=int, default=50)
    a("--short-new", type=int, default=16)
    a(
        "--tail",
        type=float,
        default=2.0,
        help="seconds of short traffic after the last long prefill",
    )
    a("--idle-seconds", type=float, default=8.0, help="length of the run without long prompts")
    a("--seed", type=int, default=0)
    a("--out", default=None, help="JSON (default benchmarks/results/long-prefill-<date>.json)")
    return p.parse_args(argv)


def _log(msg: str) -> None:
    print(f"[long-prefill {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Run:
    """One timed run: submissions at their arrival times, per-request token times."""

    def __init__(self, engine, args, num_long: int, shorts: bool, rng: random.Random):
        from radixgen.core import SamplingParams

        self.engine, self.args, self.rng = engine, args, rng
        self.vocab = engine.scheduler.runner.arch.vocab_size
        self.num_long, self.shorts = num_long, shorts
        self.short_params = SamplingParams(
            max_new_tokens=args.short_new, temperature=0.0, ignore_eos=True
        )
        self.long_params = SamplingParams(max_new_tokens=1, temperature=0.0, ignore_eos=True)
        self.recs: dict[str, dict] = {}
        self.next_short = rng.expovariate(args.short_rate) if shorts else float("inf")

    def _ids(self, n: int) -> list[int]:
        return [self.rng.randrange(100, self.vocab) for _ in range(n)]

    def _submit(self, rid: str, kind: str, n: int, params, now: float) -> None:
        from radixgen.runtime.messages import GenerateReq

        self.recs[rid] = {"kind": kind, "arrival": now, "tokens": []}
        self.engine.scheduler.handle(GenerateReq(rid=rid, input_ids=self._ids(n), params=params))

    def _longs_done(self) -> float | None:
        longs = [r for r in self.recs.values() if r["kind"] == "long"]
        if len(longs) < self.num_long or any(not r["tokens"] for r in longs):
            return None
        return max(r["tokens"][0] for r in longs) if longs else None

    def _arrivals(self, now: float) -> None:
        if (
            self.num_long
            and now >= self.args.long_after
            and not any(r["kind"] == "long" for r in self.recs.values())
        ):
            for i in range(self.num_long):
                self._submit(
                    f"long{i}", "long", self.args.long_len, self.long_params, self.args.long_after
                )
        done = self._longs_done()
        stop = (
            self.args.idle_seconds
            if not self.num_long
            else float("inf")
            if done is None
            else done + self.args.tail
        )
        while self.next_short <= min(now, stop):
            # stamped with its arrival time: a request arriving during a step waits for it
            self._submit(
                f"short{len(self.recs)}",
                "short",
                self.args.short_len,
                self.short_params,
                self.next_short,
            )
            self.next_short += self.rng.expovariate(self.args.short_rate)
        if self.next_short > stop:
            self.next_short = float("inf")

    def drive(self) -> dict:
        sched, t0 = self.engine.scheduler, time.perf_counter()
        while True:
            now = time.perf_counter() - t0
            self._arrivals(now)
            if not sched.has_work:
                if self.next_short == float("inf") and (
                    not self.num_long or self._longs_done() is not None
                ):
                    return self.summary()
                time.sleep(0.001)
                continue
            for out in sched.step():
                if out.token_ids:
                    self.recs[out.rid]["tokens"] += [time.perf_counter() - t0] * len(out.token_ids)

    def summary(self) -> dict:
        longs = [r for r in self.recs.values() if r["kind"] == "long"]
        start = min((r["arrival"] for r in longs), default=0.0)
        end = self._longs_done() if longs else float("inf")
        shorts = [
            r for r in self.recs.values() if r["kind"] == "short" and start <= r["arrival"] <= end
        ]
        ttft = [r["tokens"][0] - r["arrival"] for r in shorts]
        itl = [b - a for r in shorts for a, b in zip(r["tokens"], r["tokens"][1:])]
        res = {
            "num_long": self.num_long,
            "num_shorts_measured": len(shorts),
            "short_ttft_ms": _pcts(ttft),
            "short_itl_ms": _pcts(itl),
        }
        if longs:
            res["long_prefill_s"] = end - start
            res["long_prefill_tok_s"] = len(longs) * self.args.long_len / (end - start)
        return res


def _pcts(xs: list[float]) -> dict:
    if not xs:
        return {}
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] * 1000
    return {
        "p50": round(statistics.median(xs) * 1000, 1),
        "p90": round(pick(0.9), 1),
        "p99": round(pick(0.99), 1),
        "max": round(xs[-1] * 1000, 1),
        "n": len(xs),
    }


def build_engine(args, options: dict):
    from radixgen.runtime.engine import Engine

    extra = json.loads(args.engine_args)
    if args.gpu_shape:
        folder = gpu_model_folder(MODEL_DIR)
        (folder / "config.json").write_text(json.dumps(LLAMA31_8B, indent=1))
        return Engine(str(folder), load_format="dummy", **{**options, **extra})
    return Engine(args.model_path, **{**options, **extra})


def warm_up(engine, args) -> None:
    """Compile and fill every path once (first extends, decode graphs) before timing."""
    run = Run(
        engine,
        argparse.Namespace(
            **{
                **vars(args),
                "long_len": min(args.long_len, 4096),
                "idle_seconds": 1.0,
                "tail": 0.5,
                "long_after": 0.2,
            }
        ),
        1,
        True,
        random.Random(args.seed + 99),
    )
    run.next_short = 0.0
    run.drive()


def main(argv=None) -> None:
    args = parse_args(argv)
    results = {"args": vars(args), "runs": []}
    for name in args.configs.split(","):
        engine = build_engine(args, CONFIGS[name])
        warm_up(engine, args)
        plans = (
            [(0, True)]
            + [(int(n), False) for n in args.num_long.split(",")]
            + [(int(n), True) for n in args.num_long.split(",")]
        )
        for num_long, shorts in plans:
            engine.scheduler.flush_cache()
            res = Run(engine, args, num_long, shorts, random.Random(args.seed)).drive()
            res.update(config=name, shorts=shorts)
            _log(json.dumps(res))
            results["runs"].append(res)
        engine.shutdown()
    out = Path(
        args.out
        or Path(__file__).parent / "results" / f"long-prefill-{time.strftime('%Y-%m-%d')}.json"
    )
    out.write_text(json.dumps(results, indent=1))
    _print_table(results["runs"])


def _print_table(runs: list[dict]) -> None:
    alone = {
        (r["config"], r["num_long"]): r.get("long_prefill_tok_s") for r in runs if not r["shorts"]
    }
    print(
        "| config | long prompts | short TTFT p50 / p99 / max ms | short ITL p50 / p99 ms | long prefill tok/s (alone) |"
    )
    print("|---|---|---|---|---|")
    for r in (r for r in runs if r["shorts"]):
        t, i = r["short_ttft_ms"], r["short_itl_ms"]
        tok = (
            f"{r['long_prefill_tok_s']:.0f} ({alone[(r['config'], r['num_long'])]:.0f})"
            if r["num_long"]
            else "-"
        )
        print(
            f"| {r['config']} | {r['num_long']} | {t.get('p50')} / {t.get('p99')} / {t.get('max')} "
            f"| {i.get('p50')} / {i.get('p99')} | {tok} |"
        )


if __name__ == "__main__":
    main()

"""GPU serving against its floor, on one card, through the public Engine (its Scheduler, as the
server drives it). Llama-3.1-8B shape with dummy bf16 weights (131,072 context, llama3 RoPE).

Rows, each per KV configuration (`bf16`, and `default`: what the GPU picks with no KV flags):
- startup: Engine construction, and the first request (a prefill and a decode) after it;
- decode at batch 1 x 512, 64 x 512 and 64 x 2048 context: tok/s and step time next to the byte
  floor (every weight and each sequence's KV read once a step, at the copy bandwidth measured in
  this process);
- prefill of one 65,536-token prompt alone: tok/s next to the FLOP floor (linear layers plus
  causal attention at the bf16 matmul rate measured in this process);
- interference: short requests (50 prompt + 16 new tokens) arriving at 8/s while 1 and then 2
  long prompts prefill: the short requests' TTFT p99 and ITL p99 (next to an idle server's) and
  the long prompts' prefill throughput (next to theirs alone).

    python benchmarks/bench_gpu_serving.py --tokenizer <embedded model folder> --json out.json
    python benchmarks/bench_gpu_serving.py --tokenizer ... --rows decode --kv bf16 \
        --engine-arg max_num_partial_prefills=1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from bench_agents import gpu_model_folder  # noqa: E402
from bench_quant_gpu import cuda_median_s  # noqa: E402
from model_shapes import LLAMA3_8B  # noqa: E402

LLAMA31_8B = dict(
    LLAMA3_8B,
    max_position_embeddings=131072,
    rope_scaling={
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
)
KV_CONFIGS = {"bf16": {"kv_cache_dtype": "bf16"}, "default": {}}
DECODE_SHAPES = ((1, 512), (64, 512), (64, 2048))
ROWS = ("startup", "decode", "prefill", "interference")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True, help="a model folder with the tokenizer files")
    p.add_argument("--kv", default="bf16,default", help="comma-separated: " + ", ".join(KV_CONFIGS))
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    p.add_argument("--decode-steps", type=int, default=64)
    p.add_argument("--long-len", type=int, default=65536)
    p.add_argument("--short-rate", type=float, default=8.0, help="short requests per second")
    p.add_argument("--max-total-tokens", type=int, default=200_000)
    p.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Engine option (JSON value or string), e.g. chunked_prefill_size=4096",
    )
    p.add_argument("--json", help="write the results here")
    return p.parse_args(argv)


def engine_args(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


# ---------------------------------------------------------------- floors, measured here
def measure_device() -> dict:
    x = torch.randn(256 * 1024 * 1024, device="cuda", dtype=torch.bfloat16)  # 512 MiB, past L2
    copy_s = cuda_median_s(lambda: x.clone())
    bandwidth = 2 * x.numel() * 2 / copy_s
    del x
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm_s = cuda_median_s(lambda: a @ a)
    del a
    torch.cuda.empty_cache()
    return {
        "card": torch.cuda.get_device_name(),
        "copy_bandwidth": bandwidth,
        "matmul_flops": 2 * 8192**3 / mm_s,
    }


def decode_floor_s(runner, batch: int, ctx: float, generated: float, bandwidth: float) -> float:
    """One step's bytes over the bandwidth: the weights, the prompt's KV in the first (prefix)
    precision and the generated tokens' KV in the last (branch) precision."""
    tb = [runner._token_bytes(kind) for kind in runner.kv_dtypes]
    return (runner.weight_bytes + batch * (ctx * tb[0] + generated * tb[-1])) / bandwidth


def prefill_flops(arch: dict, tokens: int, start: int = 0) -> float:
    """Linear layers (2 x parameters per token, embeddings aside) plus causal attention (QK^T and
    PV over the positions before each token) for tokens [start, start + tokens)."""
    h, inter, layers = arch["hidden_size"], arch["intermediate_size"], arch["num_hidden_layers"]
    kv = arch["num_key_value_heads"] * arch["head_dim"]
    per_layer = h * h * 2 + 2 * h * kv + 3 * h * inter
    linear = 2 * tokens * (layers * per_layer + h * arch["vocab_size"] / max(tokens, 1))
    positions = tokens * start + tokens * (tokens + 1) / 2
    return linear + 4 * layers * h * positions


# ---------------------------------------------------------------- driving the scheduler
class Driver:
    """Submits requests at given times and steps the scheduler, recording when each request's
    tokens came out (host clock, after the step that produced them)."""

    def __init__(self, eng):
        self.sched, self.t0 = eng.scheduler, time.perf_counter()
        self.events: dict[str, list[tuple[float, int]]] = {}
        self.arrival: dict[str, float] = {}
        self.step_times: list[float] = []

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def submit(self, ids: list[int], params: dict) -> str:
        from radixgen.core import SamplingParams
        from radixgen.runtime.messages import GenerateReq

        rid = uuid.uuid4().hex
        self.sched.handle(
            GenerateReq(rid=rid, input_ids=ids, params=SamplingParams.from_dict(params))
        )
        self.arrival[rid], self.events[rid] = self.now(), []
        return rid

    def run(self, schedule: list[tuple[float, list[int], dict]]) -> None:
        """schedule: (arrival second, prompt ids, sampling params), sorted by arrival."""
        pending, finished = list(schedule), set()
        while pending or len(finished) < len(self.arrival):
            while pending and pending[0][0] <= self.now():
                _, ids, params = pending.pop(0)
                self.submit(ids, params)
            if not self.sched.has_work:
                time.sleep(max(0.0, min(pending[0][0] - self.now(), 0.01)) if pending else 0.001)
                continue
            t = time.perf_counter()
            outs = self.sched.step()
            self.step_times.append(time.perf_counter() - t)
            when = self.now()
            for out in outs:
                self.events[out.rid].append((when, len(out.token_ids)))
                if out.finish is not None:
                    finished.add(out.rid)

    def ttft(self, rid: str) -> float:
        return self.events[rid][0][0] - self.arrival[rid]

    def itls(self, rid: str) -> list[float]:
        ev = self.events[rid]
        return [(b[0] - a[0]) / max(b[1], 1) for a, b in zip(ev, ev[1:])]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def random_ids(vocab: int, n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, vocab - 100, (n,), generator=g).tolist()


# ---------------------------------------------------------------- rows
def startup_row(folder: Path, kv: dict, args) -> tuple[object, dict]:
    from radixgen.runtime.engine import Engine

    t = time.perf_counter()
    eng = Engine(
        str(folder),
        dtype="bfloat16",
        load_format="dummy",
        max_total_tokens=args.max_total_tokens,
        **kv,
        **engine_args(args.engine_arg),
    )
    torch.cuda.synchronize()
    built = time.perf_counter() - t
    vocab = eng.scheduler.runner.arch.vocab_size
    t = time.perf_counter()
    eng.generate(
        input_ids=random_ids(vocab, 512, 1),
        sampling_params={"max_new_tokens": 16, "ignore_eos": True},
    )
    first = time.perf_counter() - t
    t = time.perf_counter()
    eng.generate(
        input_ids=random_ids(vocab, 512, 2),
        sampling_params={"max_new_tokens": 16, "ignore_eos": True},
    )
    second = time.perf_counter() - t
    return eng, {
        "engine_s": built,
        "first_request_s": first,
        "second_request_s": second,
        "kv": eng.scheduler.runner.kv_summary(),
    }


def decode_row(eng, dev: dict, batch: int, ctx: int, steps: int, seed: int) -> dict:
    runner = eng.scheduler.runner
    prompts = [random_ids(runner.arch.vocab_size, ctx, seed + i) for i in range(batch)]
    params = {"max_new_tokens": steps, "temperature": 0, "ignore_eos": True}
    eng.generate(
        input_ids=prompts, sampling_params=dict(params, max_new_tokens=2)
    )  # the prompts stay cached
    drv = Driver(eng)
    drv.run([(0.0, p, params) for p in prompts])
    decode = drv.step_times[1:]  # the first step extends each request by its last prompt token
    mean = sum(decode) / len(decode)
    floor = decode_floor_s(runner, batch, ctx, steps / 2, dev["copy_bandwidth"])
    return {
        "batch": batch,
        "ctx": ctx,
        "tok_s": batch / mean,
        "step_ms_mean": 1e3 * mean,
        "step_ms_p50": 1e3 * pct(decode, 0.5),
        "step_ms_p90": 1e3 * pct(decode, 0.9),
        "floor_ms": 1e3 * floor,
        "floor_tok_s": batch / floor,
        "of_floor": floor / mean,
    }


def long_prefill(
    eng,
    dev: dict,
    num_long: int,
    args,
    seed: int,
    short_rate: float = 0.0,
    alone_tok_s: float | None = None,
) -> dict:
    """num_long long prompts at t=0 (and, with short_rate, short requests arriving meanwhile).
    Every prompt is new to the radix cache: callers give seeds no other run of this process uses."""
    vocab = eng.scheduler.runner.arch.vocab_size
    longs = [random_ids(vocab, args.long_len, seed + i) for i in range(num_long)]
    schedule = [(0.0, ids, {"max_new_tokens": 1}) for ids in longs]
    alone_s = num_long * args.long_len / alone_tok_s if alone_tok_s else 4.0 * num_long
    if short_rate:
        n_short = max(8, int((alone_s * 1.3 + 0.5) * short_rate))
        schedule += [
            (
                0.05 + k / short_rate,
                random_ids(vocab, 50, seed + 1000 + k),
                {"max_new_tokens": 16, "ignore_eos": True},
            )
            for k in range(n_short)
        ]
        schedule.sort(key=lambda x: x[0])
    drv = Driver(eng)
    drv.run(schedule)
    rids = list(drv.arrival)
    is_long = {
        rid: i < num_long for i, rid in enumerate(rids)
    }  # submitted in schedule order: longs first
    long_done = max(drv.events[r][0][0] for r in rids if is_long[r])
    row = {
        "num_long": num_long,
        "long_tok_s": num_long * args.long_len / long_done,
        "floor_tok_s": num_long
        * args.long_len
        * dev["matmul_flops"]
        / (num_long * prefill_flops(LLAMA31_8B, args.long_len)),
        "step_ms_p50": 1e3 * pct(drv.step_times, 0.5),
        "step_ms_max": 1e3 * max(drv.step_times),
    }
    shorts = [r for r in rids if not is_long[r]]
    if shorts:
        row.update(short_summary(drv, shorts))
    return row


def short_summary(drv: Driver, rids: list[str]) -> dict:
    ttft = [drv.ttft(r) for r in rids]
    itl = [x for r in rids for x in drv.itls(r)]
    return {
        "short_n": len(rids),
        "ttft_p50_ms": 1e3 * pct(ttft, 0.5),
        "ttft_p99_ms": 1e3 * pct(ttft, 0.99),
        "itl_p50_ms": 1e3 * pct(itl, 0.5),
        "itl_p99_ms": 1e3 * pct(itl, 0.99),
    }


def idle_shorts(eng, args, seed: int, seconds: float = 3.0) -> dict:
    vocab = eng.scheduler.runner.arch.vocab_size
    n = int(seconds * args.short_rate)
    drv = Driver(eng)
    drv.run(
        [
            (
                k / args.short_rate,
                random_ids(vocab, 50, seed + k),
                {"max_new_tokens": 16, "ignore_eos": True},
            )
            for k in range(n)
        ]
    )
    return short_summary(drv, list(drv.arrival))


def run_config(name: str, folder: Path, dev: dict, args, rows: set[str]) -> dict:
    eng, start = startup_row(folder, KV_CONFIGS[name], args)
    res = {"startup": start}
    print(
        f"[{name}] startup: engine {start['engine_s']:.1f} s, first request {start['first_request_s']:.2f} s, "
        f"second {start['second_request_s']:.2f} s; {start['kv']}",
        flush=True,
    )
    if "decode" in rows:
        res["decode"] = [
            decode_row(eng, dev, b, c, args.decode_steps, seed=10_000 * i)
            for i, (b, c) in enumerate(DECODE_SHAPES)
        ]
        for r in res["decode"]:
            print(
                f"[{name}] decode {r['batch']} x {r['ctx']}: {r['tok_s']:.0f} tok/s, step {r['step_ms_mean']:.2f} ms "
                f"(p50 {r['step_ms_p50']:.2f}, p90 {r['step_ms_p90']:.2f}); floor {r['floor_ms']:.2f} ms = "
                f"{r['floor_tok_s']:.0f} tok/s; {100 * r['of_floor']:.0f}% of floor",
                flush=True,
            )
    if "prefill" in rows or "interference" in rows:
        alone = [long_prefill(eng, dev, n, args, seed=1_000_000 + 100 * n) for n in (1, 2)]
        res["prefill_alone"] = alone
        for r in alone:
            print(
                f"[{name}] prefill {r['num_long']} x {args.long_len} alone: {r['long_tok_s']:.0f} tok/s "
                f"(FLOP floor {r['floor_tok_s']:.0f}; {100 * r['long_tok_s'] / r['floor_tok_s']:.0f}%), "
                f"step p50 {r['step_ms_p50']:.0f} ms, max {r['step_ms_max']:.0f} ms",
                flush=True,
            )
    if "interference" in rows:
        idle = idle_shorts(eng, args, seed=7)
        res["idle_shorts"] = idle
        print(
            f"[{name}] idle: short TTFT p50 {idle['ttft_p50_ms']:.0f} ms, p99 {idle['ttft_p99_ms']:.0f} ms; "
            f"ITL p50 {idle['itl_p50_ms']:.1f} ms, p99 {idle['itl_p99_ms']:.1f} ms",
            flush=True,
        )
        res["interference"] = []
        for n, alone_row in zip((1, 2), res["prefill_alone"]):
            r = long_prefill(
                eng,
                dev,
                n,
                args,
                seed=2_000_000 + 100_000 * n,
                short_rate=args.short_rate,
                alone_tok_s=res["prefill_alone"][0]["long_tok_s"],
            )
            r["long_vs_alone"] = r["long_tok_s"] / alone_row["long_tok_s"]
            r["itl_p99_vs_idle"] = r["itl_p99_ms"] / idle["itl_p99_ms"]
            res["interference"].append(r)
            print(
                f"[{name}] {n} long + {r['short_n']} short at {args.short_rate:g}/s: short TTFT p50 "
                f"{r['ttft_p50_ms']:.0f} ms, p99 {r['ttft_p99_ms']:.0f} ms (target <= 120); ITL p99 "
                f"{r['itl_p99_ms']:.1f} ms = {r['itl_p99_vs_idle']:.2f}x idle (target <= 2); long prefill "
                f"{r['long_tok_s']:.0f} tok/s = {100 * r['long_vs_alone']:.0f}% of alone (target >= 90%)",
                flush=True,
            )
    eng.shutdown()
    del eng
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    return res


def main(argv=None) -> None:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    dev = measure_device()
    print(
        f"{dev['card']}: copy bandwidth {dev['copy_bandwidth'] / 1e12:.2f} TB/s, bf16 matmul "
        f"{dev['matmul_flops'] / 1e12:.0f} TFLOP/s (measured here)",
        flush=True,
    )
    folder, rows = gpu_model_folder(Path(args.tokenizer), LLAMA31_8B), set(args.rows.split(","))
    results = {"device": dev, "args": vars(args), "configs": {}}
    for name in args.kv.split(","):
        results["configs"][name] = run_config(name, folder, dev, args, rows)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if "decode" in rows and {"bf16", "default"} <= set(results["configs"]):
        for b, d in zip(
            results["configs"]["bf16"]["decode"], results["configs"]["default"]["decode"]
        ):
            print(f"default / bf16 at {b['batch']} x {b['ctx']}: {d['tok_s'] / b['tok_s']:.2f}x")


if __name__ == "__main__":
    main()

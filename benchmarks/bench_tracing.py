"""What request tracing costs: throughput of one server without `--otlp-traces-endpoint` and one
with it (exporting every span over OTLP HTTP to a receiver in this process), in the same run.

Both servers run side by side on the same model and stay up; the load alternates between them
round by round (off, on, off, on, ...), so drift on a shared machine (other processes, thermal)
falls on both. Each round sends `--num-requests` /generate requests (greedy, `ignore_eos`, a
fixed `--max-new-tokens`) at `--concurrency`; throughput is generated tokens / wall seconds.
Reports each round, the median of each side and the cost (1 - on / off). Target: <= 1%.
On a shared machine wall-clock throughput swings more than 1% from round to round, so it also
reports the CPU seconds each server's processes spent per generated token (from /proc): the
tracer's work shows there as the main process's extra CPU. And it measures the tracer's own CPU
per request in this process (`ServerMetrics` driven through one request's messages with and
without a tracer exporting to the receiver, its export thread included), the figure that
contention cannot blur, and divides it by the server's CPU per request.

    .venv/bin/python benchmarks/bench_tracing.py --rounds 6 --num-requests 48 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import MODEL_DIR, ROOT, _commit, free_port, stop, wait_healthy  # noqa: E402
from bench_soak import server_pids  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

PROMPTS = [
    "The history of the printing press",
    "How a steam engine works",
    "A recipe for bread",
    "Why the sky is blue",
    "The rules of chess",
    "A short story about a lighthouse keeper",
    "How vaccines train the immune system",
    "The water cycle explained for children",
]


def tracer_cpu_us(num_requests: int, num_deltas: int, traces_url: str, repeats: int = 5) -> dict:
    """CPU µs per request of the request telemetry without and with a tracer (median of
    `repeats` alternating runs; the tracer's shutdown, which exports what is left, counted)."""
    from radixgen.runtime.messages import ReqTimes, TextOut
    from radixgen.runtime.server.metrics import ServerMetrics
    from radixgen.runtime.server.tracing import build_tracer

    def out(rid: str, tokens: int, finish=None, times=None) -> TextOut:
        return TextOut(
            rid=rid,
            text="x" * tokens,
            token_ids=[7] * tokens,
            prompt_tokens=20,
            cached_tokens=4,
            completion_tokens=tokens,
            finish=finish,
            times=times,
        )

    def run(tracer) -> float:
        metrics, t0 = ServerMetrics("m", tracer), time.process_time()
        for i in range(num_requests):
            rid = f"r{i}"
            metrics.on_submit(rid, 20)
            now = time.time()
            metrics.on_output(out(rid, 1, times=ReqTimes(now, now, now)))
            for _ in range(num_deltas - 1):
                metrics.on_output(out(rid, 1))
            metrics.on_output(out(rid, 0, {"type": "length"}))
        if tracer is not None:
            tracer.shutdown()
        return 1e6 * (time.process_time() - t0) / num_requests

    off, on = [], []
    for _ in range(repeats):
        off.append(run(None))
        on.append(run(build_tracer(traces_url, "m")))
    return {"off": round(statistics.median(off), 1), "on": round(statistics.median(on), 1)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--model-path", default=MODEL_DIR)
    a(
        "--server-arg",
        action="append",
        default=[],
        help="extra `radixgen serve` flag for both (repeatable)",
    )
    a("--rounds", type=int, default=6, help="rounds per server, alternating")
    a("--num-requests", type=int, default=48, help="requests per round")
    a("--concurrency", type=int, default=8)
    a("--max-new-tokens", type=int, default=64)
    a("--startup-timeout", type=float, default=300)
    a(
        "--control",
        action="store_true",
        help="A/A run: the second server traces nothing either, so the "
        "'cost' is the difference between two identical servers (the noise floor)",
    )
    a("--out", default=None, help="JSON (default benchmarks/results/tracing-<date>.json)")
    return p.parse_args(argv)


class SpanReceiver(ThreadingHTTPServer):
    """A minimal OTLP HTTP collector: answers 200 to every POST and counts the bytes."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.num_posts = self.num_bytes = 0


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.server.num_bytes += len(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.num_posts += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def launch(args, extra: list[str], log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [
        str(ROOT / ".venv/bin/python"),
        "-m",
        "radixgen",
        "serve",
        "--port",
        str(port),
        "--model-path",
        args.model_path,
        "--log-level",
        "warning",
        *args.server_arg,
        *extra,
    ]
    # one intra-op thread each: two servers' OpenMP pools spin-waiting against each other would
    # dominate what is measured
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(
        cmd,
        stdout=open(log_path, "w"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    wait_healthy(proc, base, " ".join(extra) or "radixgen", args.startup_timeout, log_path)
    return proc, base


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def one_round(base: str, args, round_no: int) -> tuple[float, int]:
    """Generated tokens per second over one round of requests, and the tokens."""
    sem = asyncio.Semaphore(args.concurrency)
    params = {"max_new_tokens": args.max_new_tokens, "temperature": 0, "ignore_eos": True}

    async def one(client: httpx.AsyncClient, i: int) -> int:
        async with sem:
            text = f"{PROMPTS[i % len(PROMPTS)]} (part {round_no}.{i})"
            resp = await client.post(
                base + "/generate", json={"text": text, "sampling_params": params}
            )
            resp.raise_for_status()
            return resp.json()["meta_info"]["completion_tokens"]

    async with httpx.AsyncClient(timeout=600) as client:
        t0 = time.perf_counter()
        tokens = await asyncio.gather(*(one(client, i) for i in range(args.num_requests)))
        return sum(tokens) / (time.perf_counter() - t0), sum(tokens)


def measure(servers: dict[str, tuple[str, dict[str, int]]], args) -> tuple[dict, dict]:
    """Per server: tokens/s of each round, and CPU ms per generated token of each process."""
    for base, _ in servers.values():  # warm-up: first forwards, allocator, tokenizer caches
        asyncio.run(one_round(base, args, -1))
    rounds: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, dict[str, list[float]]] = {
        name: {proc: [] for proc in pids} for name, (_, pids) in servers.items()
    }
    for r in range(args.rounds):
        order = list(servers) if r % 2 == 0 else list(servers)[::-1]
        for name in order:
            base, pids = servers[name]
            before = {proc: cpu_seconds(pid) for proc, pid in pids.items()}
            speed, tokens = asyncio.run(one_round(base, args, r))
            rounds[name].append(speed)
            for proc, pid in pids.items():
                cpu[name][proc].append(1e3 * (cpu_seconds(pid) - before[proc]) / tokens)
            print(
                f"round {r} {name}: {speed:.1f} tok/s, CPU ms/token "
                f"{ {p: round(v[-1], 3) for p, v in cpu[name].items()} }",
                file=sys.stderr,
            )
    return rounds, cpu


def main(argv=None) -> int:
    args = parse_args(argv)
    out = (
        Path(args.out)
        if args.out
        else ROOT / "benchmarks/results" / f"tracing-{dt.date.today().isoformat()}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    receiver = SpanReceiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    procs = []
    try:
        procs.append(launch(args, [], out.with_suffix(".off.log")))
        traced = [] if args.control else ["--otlp-traces-endpoint", endpoint]
        procs.append(launch(args, traced, out.with_suffix(".on.log")))
        micro = tracer_cpu_us(2000, args.max_new_tokens, endpoint + "/v1/traces")
        servers = {
            name: (base, server_pids(base, proc.pid))
            for name, (proc, base) in zip(("off", "on"), procs)
        }
        rounds, cpu = measure(servers, args)
    finally:
        for proc, _ in procs:
            stop(proc)
        receiver.shutdown()
    off, on = statistics.median(rounds["off"]), statistics.median(rounds["on"])
    pairs = [1 - b / a for a, b in zip(rounds["off"], rounds["on"])]
    cpu_median = {
        name: {proc: round(statistics.median(v), 4) for proc, v in procs_cpu.items()}
        for name, procs_cpu in cpu.items()
    }
    total = {name: sum(v.values()) for name, v in cpu_median.items()}
    res = {
        "tokens_per_s": rounds,
        "median_off": round(off, 2),
        "median_on": round(on, 2),
        "cost": round(1 - on / off, 4),
        "cost_per_round": [round(c, 4) for c in pairs],
        "cpu_ms_per_token": cpu_median,
        "cpu_cost": round(total["on"] / total["off"] - 1, 4),
        "tracer_cpu_us_per_request": micro,
        "tracer_share_of_server_cpu": round(
            (micro["on"] - micro["off"]) / (1e3 * total["off"] * args.max_new_tokens), 6
        ),
        "otlp_posts": receiver.num_posts,
        "otlp_bytes": receiver.num_bytes,
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "commit": _commit(),
        "args": vars(args),
    }
    out.write_text(json.dumps(res, indent=1))
    if args.control:
        print("--control: neither server traces; 'on' is the second server, untraced")
    print(
        f"tracing off {off:.1f} tok/s, on {on:.1f} tok/s: cost {100 * res['cost']:+.2f}% "
        f"(per round {', '.join(f'{100 * c:+.1f}%' for c in pairs)}; target <= 1%); "
        f"{receiver.num_posts} OTLP posts, {receiver.num_bytes} bytes"
    )
    print(
        f"CPU ms per generated token (median): off {cpu_median['off']}, on {cpu_median['on']}: "
        f"cost {100 * res['cpu_cost']:+.2f}% of the server's CPU"
    )
    print(
        f"request telemetry CPU per request in-process: {micro['off']} µs without a tracer, {micro['on']} µs "
        f"with one: the tracer is {100 * res['tracer_share_of_server_cpu']:.3f}% of the server's CPU per request"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Serving benchmark: drives OpenAI-compatible servers (radixgen, vLLM) with one dataset.

Streams every request (chat for ``shared-prefix``, token-id completions for ``random``) with a fixed
``max_tokens``, ``ignore_eos`` and temperature 0, at a Poisson ``--request-rate`` or a
``--max-concurrency``, and reports request and output-token throughput, TTFT / inter-token /
end-to-end latency percentiles and the prefix-cache hit rate from the responses'
``usage.prompt_tokens_details.cached_tokens``. ``--launch radixgen,vllm`` starts each server in turn
(never two at once) on a free port, measures it, stops it, and prints ours/vLLM ratios.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_datasets as sd  # noqa: E402
import workloads as wl  # noqa: E402
from _vllm_runner import OtherCpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--launch", default="", help="comma list of radixgen,vllm to start here (else --base-url)")
    a("--base-url", default="http://127.0.0.1:30000", help="an already running server")
    a("--model", default=None, help="served model name (default: the first of /v1/models)")
    a("--model-path", default=MODEL_DIR)
    a("--dataset", choices=["shared-prefix", "random"], default="shared-prefix")
    a("--num-system-prompts", type=int, default=4)
    a("--users-per-system", type=int, default=16)
    a("--turns", type=int, default=1, help="shared-prefix: >1 = multi-turn conversations")
    a("--num-prompts", type=int, default=64, help="random dataset")
    a("--input-len", type=int, default=512, help="random dataset")
    a("--output-len", type=int, default=64)
    a("--request-rate", type=float, default=float("inf"), help="req/s, Poisson; inf = all at once")
    a("--max-concurrency", type=int, default=16, help="requests in flight at most; 0 = no cap")
    a("--seed", type=int, default=0)
    a("--dtype", default="float32", help="for launched servers")
    a("--vllm-python", default="/tmp/vllm-cpu/bin/python")
    a("--vllm-block-size", type=int, default=32)
    a("--startup-timeout", type=float, default=300)
    a("--out", default=None, help="JSON (default benchmarks/results/serving-<date>.json)")
    return p.parse_args(argv)


def _log(msg: str):
    print(f"[serving {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- one request
def _body(conv: dict, messages, model: str, args) -> tuple[str, dict]:
    body = {
        "model": model,
        "max_tokens": args.output_len,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if messages is None:
        return "/v1/completions", {**body, "prompt": conv["prompt"]}
    return "/v1/chat/completions", {**body, "messages": messages}


def _delta(chunk: dict) -> str:
    ch = chunk.get("choices") or []
    if not ch:
        return ""
    return ch[0].get("text") or (ch[0].get("delta") or {}).get("content") or ""


async def one_request(client, url: str, body: dict, turn: int) -> dict:
    """Streams one request; times the first content chunk (TTFT) and the gaps between chunks."""
    rec = {"turn": turn, "itl": [], "chunks": 0, "text": ""}
    t0 = last = time.perf_counter()
    usage = None
    try:
        async with client.stream("POST", url, json=body) as resp:
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}: {(await resp.aread())[:200]!r}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                chunk = json.loads(line[5:])
                now, text = time.perf_counter(), _delta(chunk)
                usage = chunk.get("usage") or usage
                if text:
                    if rec["chunks"]:
                        rec["itl"].append(now - last)
                    else:
                        rec["ttft"] = now - t0
                    rec["chunks"] += 1
                    rec["text"] += text
                    last = now
        rec["e2e"] = time.perf_counter() - t0
        if usage is None or "ttft" not in rec:
            raise RuntimeError("no usage or no content in the stream")
        rec["prompt_tokens"], rec["completion_tokens"] = (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )
        rec["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    except Exception as exc:  # reported per request, the run goes on
        rec["error"] = f"{type(exc).__name__}: {exc}"
    return rec


async def conversation(client, base: str, model: str, conv: dict, args, recs: list, sem):
    """First turn, then each follow-up with the previous answer appended (multi-turn)."""
    msgs = conv.get("messages")
    for turn in range(1 + len(conv.get("followups", []))):
        if turn:
            msgs = msgs + [
                {"role": "assistant", "content": recs[-1]["text"]},
                {"role": "user", "content": conv["followups"][turn - 1]},
            ]
        path, body = _body(conv, msgs, model, args)
        if sem is None:
            rec = await one_request(client, base + path, body, turn + 1)
        else:
            async with sem:
                rec = await one_request(client, base + path, body, turn + 1)
        recs.append(rec)
        if "error" in rec:
            return


async def drive(base: str, model: str, convs: list[dict], args) -> tuple[list[dict], float]:
    """All conversations, Poisson arrivals at --request-rate, at most --max-concurrency requests
    in flight; returns the per-request records and the wall time."""
    rng = random.Random(args.seed)
    sem = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    per_conv: list[list[dict]] = [[] for _ in convs]
    async with httpx.AsyncClient(timeout=None, limits=limits) as client:
        t0, tasks = time.perf_counter(), []
        for conv, recs in zip(convs, per_conv):
            tasks.append(
                asyncio.create_task(conversation(client, base, model, conv, args, recs, sem))
            )
            if args.request_rate != float("inf"):
                await asyncio.sleep(rng.expovariate(args.request_rate))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
    return [r for recs in per_conv for r in recs], wall


# ------------------------------------------------------------------------------ servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cmd(name: str, port: int, args) -> tuple[list[str], dict]:
    if name == "radixgen":
        return (
            [
                str(ROOT / ".venv/bin/python"),
                "-m",
                "radixgen",
                "serve",
                "--port",
                str(port),
                "--model-path",
                args.model_path,
                "--dtype",
                args.dtype,
            ],
            {},
        )
    env = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_CPU_OMP_THREADS_BIND": "0-1", "HF_HUB_OFFLINE": "1"}
    # `vllm serve` wants the dist "vllm" (this one is "vllm-cpu"); the module is the same server
    return (
        [
            args.vllm_python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            args.model_path,
            "--dtype",
            args.dtype,
            "--port",
            str(port),
            "--enable-prefix-caching",
            "--block-size",
            str(args.vllm_block_size),
            "--max-model-len",
            "2048",
            "--enable-prompt-tokens-details",
        ],
        env,
    )


def launch(name: str, args, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd, env = server_cmd(name, port, args)
    _log(f"starting {name}: {' '.join(cmd)} (log {log_path})")
    log = open(log_path, "w")
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, **env},
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    wait_healthy(proc, base, name, args.startup_timeout, log_path)
    return proc, base


def wait_healthy(proc: subprocess.Popen, base: str, name: str, timeout: float, log_path: Path):
    """Poll /health until 200; RuntimeError (the server stopped) if it exits or times out."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                _log(f"{name} healthy after {time.time() - t0:.0f} s")
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    stop(proc)
    raise RuntimeError(f"{name} not healthy after {timeout} s")


def stop(proc: subprocess.Popen):
    """SIGTERM to the server's own process group (it was started in a new session), then KILL."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def served_model(base: str) -> str:
    return httpx.get(base + "/v1/models", timeout=10).json()["data"][0]["id"]


def warm_up(base: str, model: str, tok):
    """Two short token-id completions sharing no prefix with the datasets."""
    for ids in wl.warmup_prompts(tok):
        r = httpx.post(
            base + "/v1/completions",
            timeout=120,
            json={"model": model, "prompt": ids, "max_tokens": 8, "temperature": 0},
        )
        r.raise_for_status()


def measure(base: str, model: str | None, convs, args, tok) -> dict:
    model = model or served_model(base)
    warm_up(base, model, tok)
    load0 = os.getloadavg()
    with OtherCpu() as oc:
        recs, wall = asyncio.run(drive(base, model, convs, args))
    res = sd.summarize(recs, wall)
    res.update(
        model=model, loadavg_before=load0, loadavg_after=os.getloadavg(), other_cpu=oc.fraction
    )
    return res


def run_server(name: str, convs, args, tok, out: Path) -> dict:
    try:
        proc, base = launch(name, args, out.with_suffix(f".{name}.log"))
    except Exception as exc:
        return {"error": str(exc)}
    try:
        return measure(base, None, convs, args, tok)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        stop(proc)
        _log(f"stopped {name}")


def out_path(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = ROOT / "benchmarks/results" / f"serving-{dt.date.today().isoformat()}"
    path, k = base.with_suffix(".json"), 2
    while path.exists():
        path, k = Path(f"{base}-{k}.json"), k + 1
    return path


def _commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


def main(argv=None):
    args = parse_args(argv)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_path)
    if args.dataset == "random":
        convs = sd.random_ids(tok, args.num_prompts, args.input_len, args.seed)
    else:
        convs = sd.shared_prefix(tok, args.num_system_prompts, args.users_per_system, args.turns)
    stats = sd.dataset_stats(tok, convs, args.vllm_block_size)
    out = out_path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _log(f"dataset {args.dataset}: {stats}")
    servers = {}
    for name in [n for n in args.launch.split(",") if n]:
        servers[name] = run_server(name, convs, args, tok, out)
    if not servers:
        servers[args.base_url] = measure(args.base_url, args.model, convs, args, tok)
    cfg = {k: (str(v) if v == float("inf") else v) for k, v in vars(args).items()}
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "config": cfg,
        "dataset": stats,
        "commit": _commit(),
        "machine": {"cpus": os.cpu_count()},
        "servers": servers,
    }
    out.write_text(json.dumps(result, indent=1))
    print(sd.table(servers))
    print(
        f"workload: {stats['conversations']} conversations x {stats['turns']} turns, first-turn "
        f"prompt tokens {stats['prompt_tokens']}, optimum hit {stats['optimum_hit_rate']:.3f} "
        f"(whole {args.vllm_block_size}-token blocks "
        f"{stats[f'optimum_hit_rate_block{args.vllm_block_size}']:.3f})"
    )
    _log(f"wrote {out}")


if __name__ == "__main__":
    main()

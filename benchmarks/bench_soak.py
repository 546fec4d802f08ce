"""Soak benchmark: mixed traffic against one `radixgen serve` for a fixed count of requests.

Kinds (drawn in a fixed, seeded order from `--mix`): `chat` and `completions` (plain, sampled),
`json_schema` (chat with `response_format`; the output is validated against its schema, cut by
max_tokens or not), `tools` (chat with tools, `tool_choice` auto or required; arguments validated),
`stream` (a chat stream read to `[DONE]`), `abort` (a chat stream cut after its first chunks).
Every request has the same `max_tokens`, so the kinds' latencies compare. At `--concurrency`
requests in flight it reports failures (a non-200, a malformed body, an invalid structured
output), end-to-end latency percentiles per kind, json_schema p99 / chat p99, each server
process's RSS growth (after a warm-up that runs every kind, to the end) and whether the scheduler
is idle again afterwards. Targets (CPU, embedded model): 0 failures over 1,000 requests, RSS
growth < 5% per process, json_schema p99 <= 1.5x chat p99.

    .venv/bin/python benchmarks/bench_soak.py --num-requests 1000 --concurrency 8
    .venv/bin/python benchmarks/bench_soak.py --base-url http://127.0.0.1:30000   # a running server
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import MODEL_DIR, ROOT, _commit, free_port, stop, wait_healthy  # noqa: E402
from serving_datasets import pct  # noqa: E402

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        },
        "required": ["city", "tags"],
    },
    {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "score": {"type": "number"},
            "note": {"type": ["string", "null"], "maxLength": 40},
        },
        "required": ["ok", "score", "note"],
    },
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 20},
                    "unit": {"enum": ["c", "f"]},
                },
                "required": ["city", "unit"],
            },
        },
    }
]
QUESTIONS = [
    "What is the capital of France?",
    "Name three colours.",
    "Write a haiku about rain.",
    "How do I sort a list in Python?",
    "What is 17 times 23?",
    "Describe a cat in one sentence.",
    "Give me a fun fact about the moon.",
    "What is the weather like in Oslo?",
]
KINDS = ("chat", "completions", "json_schema", "tools", "stream", "abort")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--base-url", default=None, help="a running server (default: launch one on --model-path)")
    a("--model-path", default=MODEL_DIR)
    a("--server-arg", action="append", default=[], help="extra `radixgen serve` flag (repeatable)")
    a("--num-requests", type=int, default=1000)
    a("--concurrency", type=int, default=8)
    a("--max-tokens", type=int, default=32)
    a("--mix", default="chat=3,completions=2,json_schema=2,tools=1,stream=2,abort=1")
    a("--seed", type=int, default=0)
    a("--startup-timeout", type=float, default=300)
    a("--out", default=None, help="JSON (default benchmarks/results/soak-<date>.json)")
    return p.parse_args(argv)


class Failure(Exception):
    """A request the server answered wrongly."""


def plan(args) -> list[str]:
    """The request kinds, in a seeded order with the --mix proportions."""
    weights = {k: float(v) for k, v in (part.split("=") for part in args.mix.split(","))}
    unknown = set(weights) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown kinds in --mix: {sorted(unknown)}; known: {KINDS}")
    rng = random.Random(args.seed)
    return rng.choices(list(weights), weights=list(weights.values()), k=args.num_requests)


def body(kind: str, i: int, model: str, max_tokens: int) -> tuple[str, dict]:
    """The route and JSON body of request i of `kind`."""
    question = QUESTIONS[i % len(QUESTIONS)]
    base = {"model": model, "max_tokens": max_tokens, "temperature": 0.8, "seed": i}
    chat = {**base, "messages": [{"role": "user", "content": question}]}
    if kind == "completions":
        return "/v1/completions", {**base, "prompt": f"Question: {question}\nAnswer:"}
    if kind == "json_schema":
        schema = SCHEMAS[i % len(SCHEMAS)]
        return "/v1/chat/completions", {
            **chat,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": f"s{i % len(SCHEMAS)}", "schema": schema},
            },
        }
    if kind == "tools":
        return "/v1/chat/completions", {
            **chat,
            "tools": TOOLS,
            "tool_choice": "required" if i % 2 else "auto",
        }
    if kind in ("stream", "abort"):
        return "/v1/chat/completions", {**chat, "stream": True}
    return "/v1/chat/completions", chat


def check(kind: str, i: int, resp: dict) -> None:
    """Raise Failure unless a non-stream response has the shape (and valid structure) asked for."""
    choice = (resp.get("choices") or [None])[0]
    if not choice or "usage" not in resp:
        raise Failure(f"no choice or usage: {str(resp)[:200]}")
    if kind == "completions":
        if not isinstance(choice.get("text"), str):
            raise Failure("completion without text")
        return
    message = choice.get("message") or {}
    if kind == "json_schema":
        try:
            jsonschema.validate(json.loads(message.get("content") or ""), SCHEMAS[i % len(SCHEMAS)])
        except (ValueError, jsonschema.ValidationError) as exc:
            raise Failure(
                f"invalid json_schema output ({choice.get('finish_reason')}): {exc}"[:300]
            ) from None
    if kind == "tools":
        for call in message.get("tool_calls") or []:
            try:
                jsonschema.validate(
                    json.loads(call["function"]["arguments"]), TOOLS[0]["function"]["parameters"]
                )
            except (ValueError, KeyError, jsonschema.ValidationError) as exc:
                raise Failure(f"invalid tool call: {exc}"[:300]) from None
        if i % 2 and not message.get("tool_calls"):
            raise Failure("tool_choice required but no tool call")


async def one(client: httpx.AsyncClient, kind: str, i: int, model: str, args) -> dict:
    path, payload = body(kind, i, model, args.max_tokens)
    rec = {"kind": kind}
    t0 = time.perf_counter()
    try:
        if kind in ("stream", "abort"):
            await stream(client, path, payload, rec, t0, cut_after=2 if kind == "abort" else None)
        else:
            resp = await client.post(path, json=payload)
            if resp.status_code != 200:
                raise Failure(f"HTTP {resp.status_code}: {resp.text[:200]}")
            check(kind, i, resp.json())
    except (Failure, httpx.HTTPError, ValueError) as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
    rec["e2e"] = time.perf_counter() - t0
    return rec


async def stream(
    client: httpx.AsyncClient, path: str, payload: dict, rec: dict, t0: float, cut_after: int | None
) -> None:
    """Read an SSE stream to [DONE] (Failure without it), or close it after `cut_after` chunks."""
    chunks, done = 0, False
    async with client.stream("POST", path, json=payload) as resp:
        if resp.status_code != 200:
            raise Failure(f"HTTP {resp.status_code}: {(await resp.aread())[:200]!r}")
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            event = json.loads(line[6:])
            if "error" in event:
                raise Failure(f"error event: {event['error']}")
            chunks += 1
            rec.setdefault("ttft", time.perf_counter() - t0)
            if cut_after is not None and chunks >= cut_after:
                return
    if not done:
        raise Failure("stream ended without [DONE]")


async def drive(base: str, model: str, kinds: list[str], args) -> list[dict]:
    sem = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(max_connections=args.concurrency * 2)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:

        async def bounded(i: int, kind: str) -> dict:
            async with sem:
                return await one(client, kind, i, model, args)

        return await asyncio.gather(*(bounded(i, k) for i, k in enumerate(kinds)))


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def server_pids(base: str, main_pid: int | None) -> dict[str, int]:
    pids = dict(httpx.get(base + "/get_server_info", timeout=30).json().get("pids", {}))
    if main_pid is not None:
        pids["main"] = main_pid
    return pids


def idle_after(base: str, timeout: float = 30.0) -> dict:
    """The scheduler's statistics once nothing runs or waits (or at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = httpx.get(base + "/get_server_info", timeout=30).json()["scheduler"]
        if (
            stats["num_running_reqs"] == 0 and stats["num_waiting_reqs"] == 0
        ) or time.monotonic() > deadline:
            return stats
        time.sleep(0.2)


def summarize(recs: list[dict], wall: float, rss0: dict, rss1: dict, idle: dict) -> dict:
    res: dict = {
        "requests": len(recs),
        "failures": sum("error" in r for r in recs),
        "wall_s": wall,
        "errors": sorted({r["error"] for r in recs if "error" in r})[:10],
        "kinds": {},
    }
    for kind in KINDS:
        xs = [r["e2e"] for r in recs if r["kind"] == kind and "error" not in r]
        if xs:
            res["kinds"][kind] = {"n": len(xs), **{f"p{q}_s": pct(xs, q) for q in (50, 90, 99)}}
    kinds = res["kinds"]
    if "json_schema" in kinds and "chat" in kinds:
        res["json_p99_over_chat_p99"] = kinds["json_schema"]["p99_s"] / kinds["chat"]["p99_s"]
    res["rss_kib"] = {
        name: {
            "after_warmup": rss0.get(name),
            "end": rss1.get(name),
            "growth": (rss1[name] - rss0[name]) / rss0[name]
            if rss0.get(name) and rss1.get(name)
            else None,
        }
        for name in rss0
    }
    res["idle_after"] = {
        k: idle.get(k) for k in ("num_running_reqs", "num_waiting_reqs", "token_usage")
    }
    return res


def table(res: dict) -> str:
    lines = [
        f"{res['requests']} requests, {res['failures']} failures, {res['wall_s']:.0f} s",
        "kind          n     p50 s   p90 s   p99 s",
    ]
    for kind, k in res["kinds"].items():
        lines.append(
            f"{kind:<12}{k['n']:>4}  {k['p50_s']:7.2f} {k['p90_s']:7.2f} {k['p99_s']:7.2f}"
        )
    ratio = res.get("json_p99_over_chat_p99")
    lines.append(f"json_schema p99 / chat p99: {ratio:.2f} (target <= 1.5)" if ratio else "")
    for name, r in res["rss_kib"].items():
        growth = "n/a" if r["growth"] is None else f"{r['growth']:+.1%}"
        lines.append(
            f"RSS {name:<12} {r['after_warmup']} -> {r['end']} KiB ({growth}; target < 5%)"
        )
    lines.append(f"idle after: {res['idle_after']}")
    return "\n".join(lines)


def launch(args, log_path: Path):
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
    ]
    proc = subprocess.Popen(
        cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    wait_healthy(proc, base, "radixgen", args.startup_timeout, log_path)
    return proc, base


def main(argv=None) -> int:
    args = parse_args(argv)
    out = (
        Path(args.out)
        if args.out
        else ROOT / "benchmarks/results" / f"soak-{dt.date.today().isoformat()}.json"
    )
    proc, base = (None, args.base_url) if args.base_url else launch(args, out.with_suffix(".log"))
    try:
        model = httpx.get(base + "/v1/models", timeout=30).json()["data"][0]["id"]
        warm = asyncio.run(drive(base, model, [k for k in KINDS for _ in range(2)], args))
        if any("error" in r for r in warm):
            print("warm-up failures:", [r["error"] for r in warm if "error" in r], file=sys.stderr)
        pids = server_pids(base, proc.pid if proc else None)
        rss0 = {name: rss_kib(pid) for name, pid in pids.items()}
        t0 = time.perf_counter()
        recs = asyncio.run(drive(base, model, plan(args), args))
        wall = time.perf_counter() - t0
        idle = idle_after(base)
        rss1 = {name: rss_kib(pid) for name, pid in pids.items()}
    finally:
        if proc is not None:
            stop(proc)
    res = summarize(recs, wall, rss0, rss1, idle)
    res.update(
        date=dt.datetime.now().isoformat(timespec="seconds"), commit=_commit(), args=vars(args)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(table(res))
    print(f"wrote {out}")
    return 0 if res["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Datasets, statistics and report table of bench_serving.py (deterministic, no downloads).

A dataset is a list of *conversations*: ``{"messages": [...], "followups": [user texts]}`` for the
chat endpoint (turn k+1 appends turn k's answer and the next follow-up) or ``{"prompt": [ids]}``
for the completions endpoint.

* ``shared-prefix``: the agent system prompts and user turns of workloads.py (same seed, so with
  4 x 16 users the first turns are exactly bench_offline's ``shared`` workload), N system prompts
  x M users in shuffled order; ``turns`` > 1 adds follow-up user messages (multi-turn).
* ``random``: uniformly random token ids (no special tokens) of a fixed input length, sent as
  token-id prompts to /v1/completions.
"""

from __future__ import annotations

import random

import workloads as wl


def shared_prefix(tok, num_systems: int, users_per_system: int, turns: int = 1) -> list[dict]:
    """Reproduces build_workloads' random stream, then draws the follow-up turns after it."""
    n = num_systems * users_per_system
    rng = random.Random(wl.SEED)
    need = num_systems + n
    pool = wl._NAMES + [f"{x} {k}" for k in range(2, 2 + need // len(wl._NAMES)) for x in wl._NAMES]
    names = rng.sample(pool[: max(need, len(wl._NAMES))], need)
    systems = [wl.system_prompt(tok, rng, nm) for nm in names]  # the unique ones keep the stream
    users = wl.user_turns(tok, rng, n)
    order = list(range(n))
    rng.shuffle(order)
    later = wl.user_turns(tok, rng, n * (turns - 1)) if turns > 1 else []
    convs = []
    for i in range(n):
        msgs = [
            {"role": "system", "content": systems[order[i] % num_systems]},
            {"role": "user", "content": users[i]},
        ]
        convs.append(
            {
                "messages": msgs,
                "followups": later[i * (turns - 1) : (i + 1) * (turns - 1)],
                "system_id": order[i] % num_systems,
            }
        )
    return convs


def random_ids(tok, num_prompts: int, input_len: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    special = set(tok.all_special_ids)
    vocab = [i for i in range(len(tok)) if i not in special]
    return [{"prompt": [rng.choice(vocab) for _ in range(input_len)]} for _ in range(num_prompts)]


def first_turn_ids(tok, convs: list[dict]) -> list[list[int]]:
    """Token ids of every first turn as the servers render it (chat template) or send it."""
    if "prompt" in convs[0]:
        return [c["prompt"] for c in convs]
    return [
        wl._render(tok, c["messages"][0]["content"], c["messages"][1]["content"]) for c in convs
    ]


def dataset_stats(tok, convs: list[dict], block_size: int) -> dict:
    stats = wl.prefix_stats(first_turn_ids(tok, convs), block_size)
    stats["conversations"] = len(convs)
    stats["turns"] = 1 + len(convs[0].get("followups", []))
    return stats


# ------------------------------------------------------------------------------ statistics
def pct(xs: list[float], q: float) -> float | None:
    """q-th percentile (0..100), linear interpolation; None for no data."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(recs: list[dict], duration: float) -> dict:
    """Aggregate per-request records (see bench_serving.one_request) of one timed run."""
    ok = [r for r in recs if "error" not in r]
    out_tok = sum(r["completion_tokens"] for r in ok)
    prompt_tok = sum(r["prompt_tokens"] for r in ok)
    cached = [r["cached_tokens"] for r in ok if r["cached_tokens"] is not None]
    ttft = [r["ttft"] for r in ok]
    itl = [g for r in ok for g in r["itl"]]
    tpot = [
        (r["e2e"] - r["ttft"]) / (r["completion_tokens"] - 1)
        for r in ok
        if r["completion_tokens"] > 1
    ]
    e2e = [r["e2e"] for r in ok]
    chunks = sum(r["chunks"] for r in ok)
    res = {
        "completed": len(ok),
        "failed": len(recs) - len(ok),
        "duration_s": duration,
        "request_throughput": len(ok) / duration,
        "output_tok_s": out_tok / duration,
        "total_tok_s": (out_tok + prompt_tok) / duration,
        "prompt_tokens": prompt_tok,
        "output_tokens": out_tok,
        "tokens_per_chunk": out_tok / chunks if chunks else None,
        "cached_tokens": sum(cached) if cached else None,
        "hit_rate": sum(cached) / prompt_tok if cached and prompt_tok else None,
        "errors": sorted({r["error"][:200] for r in recs if "error" in r})[:5],
    }
    for name, xs in (("ttft", ttft), ("itl", itl), ("tpot", tpot), ("e2e", e2e)):
        for q in (50, 99):
            res[f"{name}_p{q}_ms"] = None if not xs else pct(xs, q) * 1000
    res["per_turn_hit_rate"] = _per_turn_hits(ok)
    return res


def _per_turn_hits(ok: list[dict]) -> dict:
    out = {}
    for t in sorted({r["turn"] for r in ok}):
        rs = [r for r in ok if r["turn"] == t and r["cached_tokens"] is not None]
        p = sum(r["prompt_tokens"] for r in rs)
        out[str(t)] = sum(r["cached_tokens"] for r in rs) / p if p else None
    return out


# ------------------------------------------------------------------------------ report table
ROWS = [
    ("request_throughput", "req/s", ".3f", 1),
    ("output_tok_s", "output tok/s", ".1f", 1),
    ("ttft_p50_ms", "TTFT p50 ms", ".0f", -1),
    ("ttft_p99_ms", "TTFT p99 ms", ".0f", -1),
    ("itl_p50_ms", "ITL p50 ms", ".1f", -1),
    ("itl_p99_ms", "ITL p99 ms", ".1f", -1),
    ("tpot_p50_ms", "TPOT p50 ms", ".1f", -1),
    ("e2e_p50_ms", "E2E p50 ms", ".0f", -1),
    ("hit_rate", "cache hit rate", ".3f", 1),
    ("tokens_per_chunk", "tokens/chunk", ".2f", 0),
    ("prompt_tokens", "prompt tokens", "d", 0),
    ("completed", "completed", "d", 0),
    ("failed", "failed", "d", 0),
    ("other_cpu", "other-cpu", ".0%", 0),
]


def _f(x, spec):
    return "n/a" if x is None else format(x, spec)


def table(servers: dict) -> str:
    names = list(servers)
    ok = {n: v for n, v in servers.items() if "error" not in v}
    both = "radixgen" in ok and "vllm" in ok
    lines = [
        f"{'metric':16}"
        + "".join(f"{n:>12}" for n in names)
        + (f"{'ours/vLLM':>11}" if both else "")
    ]
    for key, label, spec, _better in ROWS:
        cells = "".join(f"{_f(ok[n].get(key), spec) if n in ok else 'FAILED':>12}" for n in names)
        ratio = ""
        if both and ok["vllm"].get(key) and ok["radixgen"].get(key) is not None and _better:
            ratio = f"{ok['radixgen'][key] / ok['vllm'][key]:10.2f}x"
        lines.append(f"{label:16}{cells}{ratio}")
    for n, v in ok.items():
        lines.append(
            f"{n}: load avg before {v['loadavg_before'][0]:.2f}, after "
            f"{v['loadavg_after'][0]:.2f}; hit rate per turn "
            + ", ".join(f"{t}: {_f(h, '.3f')}" for t, h in v["per_turn_hit_rate"].items())
        )
    lines += [f"{n}: FAILED {v['error'][:300]}" for n, v in servers.items() if n not in ok]
    return "\n".join(lines)

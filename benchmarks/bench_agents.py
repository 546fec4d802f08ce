"""Agent sessions under one KV byte budget: bf16 vs FP8 vs mixed (FP8 prefix + NVFP4 branch) KV.

Workload (deterministic, no downloads): one ~2k-token system prompt (an orchestrator role and
JSON tool schemas) shared by `--agents` (64) sub-agents, each with its own short task. Turn 1:
every agent's [system, task] prompt, greedy, `--max-new-tokens` (256) tokens with EOS ignored,
all submitted at once. Turn 2, once every turn 1 has ended: turn-1 prompt ids + its output ids +
`<|im_end|>\\n` + a new user message (chat template), same generation settings. Token ids are
concatenated (not re-rendered from text), so turn 2 can hit the turn-1 branch in the radix cache.

Every config gets the same KV byte budget, `--budget-tokens` N tokens' worth of bf16 KV; the
`max_total_tokens` each engine is given follows from it (one pool: slots = bytes / bytes per
token of its precision; mixed: `max_total_tokens` is a budget in model-dtype tokens, split by
`kv_branch_fraction`, see ModelRunner._build_kv). Per config it reports:

* the slot counts the engine got (`runner.capacity`);
* max concurrent sessions from the byte math: the shared prompt once, then per session its own
  prompt tokens (prefix precision) and its generated tokens (branch precision) at turn-1 end;
  for mixed, the smaller of what the prefix pool and the branch pool allow;
* observed: the peak number of running (decoding) requests over the run, the retractions, and
  the KV bytes in use per running request at that peak (used slots of each pool x its bytes per
  token / running requests: includes the shared prompt and whatever the radix cache holds);
* KV bytes per session (the per-session part of the byte math, shared prompt excluded) and the
  ratio mixed / bf16 (goal <= 0.32);
* throughput (output tokens / wall seconds of both turns) and the cache hit rate (sum of
  `cached_tokens` / sum of `prompt_tokens`, both turns).

The mixed config's `kv_branch_fraction` defaults to the byte share of generated tokens in a
turn-1 session (own prompt in FP8 vs generated in NVFP4), so neither pool runs out first.

    .venv/bin/python benchmarks/bench_agents.py --quick        # CPU, embedded model, 8 agents x 32 tokens
    .venv/bin/python benchmarks/bench_agents.py                 # CPU, 64 agents x 256 tokens
    python benchmarks/bench_agents.py --gpu --tokenizer build/bench-agents-tokenizer   # H200

`--gpu`: a temp folder gets a Llama-3-8B-shaped config.json (hidden 4096, intermediate 14336, 32
layers, 32 heads, 8 KV heads, vocab 128256) and the embedded model's tokenizer files; weights
are `load_format="dummy"` (random, bf16), so outputs are meaningless and only the KV accounting,
the hit rate and the speed count. The GPU machine has no ~/.cache/radixgen: copy the tokenizer
files (tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json)
into build/bench-agents-tokenizer here and carry that path.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from model_shapes import LLAMA3_8B  # noqa: E402 (benchmarks/ is the script directory)

CONFIGS = {
    "bf16": {"kv_cache_dtype": "bf16"},
    "fp8": {"kv_cache_dtype": "fp8_e4m3"},
    "mixed": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
    },  # the default branch window
    "mixed-nowin": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
        "kv_branch_window": "none",
    },
    # without the q/k Hadamard rotation quantized pools get by default (its cost)
    "mixed-norot": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
        "kv_rotation": "off",
    },
    # decode steps run eagerly instead of replaying CUDA graphs (GPU; what the graphs save)
    "bf16-eager": {"kv_cache_dtype": "bf16", "disable_cuda_graph": True},
    "mixed-eager": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
        "disable_cuda_graph": True,
    },
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
RATIO_GOAL = 0.32


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-path", default=None, help="HF folder (default: the embedded SmolLM2)")
    p.add_argument("--quick", action="store_true", help="8 agents, 32 tokens per turn")
    p.add_argument(
        "--gpu", action="store_true", help="H200: Llama-3-8B shape, load_format=dummy, bf16 weights"
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="--gpu: folder with the tokenizer files to copy (default: the model path or "
        "the embedded model; on a machine without it, copy them into e.g. build/)",
    )
    p.add_argument("--agents", type=int, default=None, help="default 64 (--quick: 8)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 256 (--quick: 32)")
    p.add_argument("--system-tokens", type=int, default=2000, help="shared system prompt size")
    p.add_argument(
        "--budget-tokens",
        type=int,
        default=None,
        help="KV byte budget in bf16 tokens (default: the shared prompt + a quarter "
        "of the agents' turn-2 sessions, so bf16 cannot hold them all)",
    )
    p.add_argument(
        "--kv-branch-fraction", type=float, default=None, help="mixed (default: from the workload)"
    )
    p.add_argument("--configs", default="bf16,fp8,mixed")
    p.add_argument(
        "--dtype", default=None, help="model dtype (default float32 on CPU, bfloat16 with --gpu)"
    )
    p.add_argument(
        "--json", type=Path, default=None, help="default benchmarks/results/agents-<date>.json"
    )
    args = p.parse_args(argv)
    args.agents = args.agents or (8 if args.quick else 64)
    args.max_new_tokens = args.max_new_tokens or (32 if args.quick else 256)
    args.dtype = args.dtype or ("bfloat16" if args.gpu else "float32")
    args.configs = [c for c in args.configs.split(",") if c]
    return args


def _log(msg: str):
    print(f"[agents {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- workload
_DOMAINS = [
    "calendar",
    "email",
    "weather",
    "flights",
    "hotels",
    "documents",
    "tickets",
    "invoices",
    "inventory",
    "shipments",
    "contacts",
    "notes",
    "reports",
    "payments",
    "repositories",
    "builds",
    "alerts",
    "metrics",
    "customers",
    "orders",
    "maps",
    "translations",
    "files",
    "meetings",
    "tasks",
    "forms",
    "surveys",
    "courses",
    "recipes",
    "devices",
]
_VERBS = ["search", "get", "create", "update", "delete", "list", "summarize", "export"]
_FIELDS = [
    ("query", "string", "Free-text search terms."),
    ("id", "string", "The unique identifier."),
    ("limit", "integer", "Maximum number of results to return (1-100)."),
    ("start_date", "string", "ISO 8601 date where the range begins."),
    ("end_date", "string", "ISO 8601 date where the range ends."),
    ("status", "string", "One of: open, pending, closed."),
    ("owner", "string", "Email address of the responsible person."),
    ("tags", "array", "Labels to filter or attach."),
    ("priority", "string", "One of: low, normal, high, urgent."),
    ("include_archived", "boolean", "Whether archived items are included."),
]


def _tool(rng: random.Random, domain: str) -> dict:
    verb = rng.choice(_VERBS)
    fields = rng.sample(_FIELDS, rng.randint(2, 5))
    props = {}
    for name, kind, desc in fields:
        props[name] = {"type": kind, "description": desc}
        if kind == "array":
            props[name]["items"] = {"type": "string"}
    return {
        "type": "function",
        "function": {
            "name": f"{verb}_{domain}",
            "description": f"{verb.capitalize()} {domain} in the workspace "
            f"and return the matching records as JSON.",
            "parameters": {"type": "object", "properties": props, "required": [fields[0][0]]},
        },
    }


def system_prompt(tok, target_tokens: int) -> str:
    """An orchestrator role, rules and JSON tool schemas: tools are added until the text reaches
    target_tokens tokens."""
    rng = random.Random(7)
    head = (
        "You are a sub-agent of an operations assistant. You receive one task from the "
        "orchestrator, plan the steps, call tools when you need data, and finish with a short "
        "report. Rules: call at most one tool per message; write tool calls as a JSON object "
        '{"tool": name, "arguments": {...}} on its own line; never invent identifiers; when '
        "a tool returns an error, explain it and try a different approach; keep the final "
        "report under 150 words.\n\nAvailable tools (JSON schema):\n"
    )
    tools, text = [], head
    for i in range(200):
        tools.append(
            _tool(
                rng,
                _DOMAINS[i % len(_DOMAINS)]
                + ("" if i < len(_DOMAINS) else f"_v{i // len(_DOMAINS)}"),
            )
        )
        text = head + json.dumps(tools, indent=1)
        if len(tok.encode(text, add_special_tokens=False)) >= target_tokens:
            break
    return text


def agent_tasks(n: int) -> list[tuple[str, str]]:
    """(turn-1 task, turn-2 follow-up) per agent, deterministic."""
    rng = random.Random(11)
    subjects = [
        "the overdue invoices of last month",
        "tomorrow's meetings of the sales team",
        "open high-priority tickets",
        "shipments delayed by weather",
        "new customers this week",
        "failed builds on the main branch",
        "low inventory items",
        "unanswered customer emails",
        "flights to Berlin next Tuesday",
        "alerts from the payment service",
    ]
    actions = ["Find", "Summarize", "List and rank", "Check", "Collect the details of"]
    follow = [
        "Now draft a short message to the owner about the most urgent item.",
        "Group your findings by priority and say what to do first.",
        "Which of these needs a human decision? Explain briefly.",
        "Turn this into a checklist for tomorrow morning.",
    ]
    return [
        (
            f"Task {i}: {rng.choice(actions)} {rng.choice(subjects)} and report back.",
            rng.choice(follow),
        )
        for i in range(n)
    ]


def build_turn1(tok, system: str, tasks) -> list[list[int]]:
    return [
        _ids(
            tok.apply_chat_template(
                [{"role": "system", "content": system}, {"role": "user", "content": t}],
                add_generation_prompt=True,
                tokenize=False,
            ),
            tok,
        )
        for t, _ in tasks
    ]


def build_turn2(tok, prompts1, outputs1, tasks) -> list[list[int]]:
    """turn-1 prompt + its output + end of turn + a new user turn, as token ids."""
    out = []
    for p, o, (_, follow) in zip(prompts1, outputs1, tasks):
        tail = f"<|im_end|>\n<|im_start|>user\n{follow}<|im_end|>\n<|im_start|>assistant\n"
        out.append(p + o + _ids(tail, tok))
    return out


def _ids(text: str, tok) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


# ---------------------------------------------------------------- byte math
def token_bytes(arch: dict) -> dict[str, float]:
    """KV bytes per token of each precision (K and V, every layer)."""
    L, h, d = (
        arch["num_hidden_layers"],
        arch["num_key_value_heads"],
        arch.get("head_dim") or (arch["hidden_size"] // arch["num_attention_heads"]),
    )
    return {
        "bf16": 2 * L * h * d * 2,
        "fp32": 2 * L * h * d * 4,
        "fp8_e4m3": 2 * L * h * d,
        "nvfp4": 2 * L * h * (d // 2 + d // 16),
    }


def engine_kv_args(name: str, budget_bytes: float, tb: dict, model_dtype: str, frac: float) -> dict:
    """max_total_tokens (and the branch fraction) that give config `name` budget_bytes of KV."""
    kv = dict(CONFIGS[name])
    if name.startswith("mixed"):
        model_kind = {"float32": "fp32", "bfloat16": "bf16", "float16": "bf16"}[model_dtype]
        kv.update(max_total_tokens=int(budget_bytes // tb[model_kind]), kv_branch_fraction=frac)
    else:
        kind = kv["kv_cache_dtype"]
        kv["max_total_tokens"] = int(budget_bytes // tb[kind])
    return kv


def session_math(
    name: str, capacity: list[int], tb: dict, shared: int, own: float, gen: int, agents: int
) -> dict:
    """Sessions that fit (shared prompt once; per session `own` prompt tokens and the branch
    window's generated tokens in the prefix precision, the other generated tokens in the branch
    precision) and per-session KV bytes, also with the shared prompt's bytes spread over all
    `agents` sessions."""
    base = name.split("-")[0]  # bf16-eager is bf16, mixed-* is mixed
    prefix, branch = (
        ("bf16", "bf16")
        if base == "bf16"
        else (("fp8_e4m3", "fp8_e4m3") if base == "fp8" else ("fp8_e4m3", "nvfp4"))
    )
    win = window_tokens(name, gen)
    per_session = (own + win) * tb[prefix] + (gen - win) * tb[branch]
    if len(capacity) == 1:
        fit = (capacity[0] - shared) / (own + gen)
    else:
        fit = min((capacity[0] - shared) / (own + win), capacity[1] / max(gen - win, 1))
    return {
        "prefix": prefix,
        "branch": branch,
        "kv_bytes_per_session": per_session,
        "kv_bytes_per_session_amortized": per_session + shared * tb[prefix] / agents,
        "max_sessions_math": int(max(fit, 0)),
    }


def window_tokens(name: str, gen: int) -> int:
    """Generated tokens of a session that a mixed config's branch window keeps in the prefix
    pool at most (first SINK, newest RECENT, plus up to DEMOTE_BATCH - 1 not yet moved)."""
    if not name.startswith("mixed"):
        return 0
    from radixgen.config import CacheConfig
    from radixgen.runtime.kv_manager import DEMOTE_BATCH

    window = CacheConfig(
        **{k: v for k, v in CONFIGS[name].items() if k == "kv_branch_window"}
    ).branch_window
    return min(gen, sum(window) + DEMOTE_BATCH - 1) if window else 0


# ---------------------------------------------------------------- run
class StepProbe:
    """Wraps Scheduler.step: records the peak running requests and the KV bytes in use then."""

    def __init__(self, sched, bytes_per_tier: list[float]):
        self.sched, self.bytes_per_tier = sched, bytes_per_tier
        self.peak_running, self.bytes_at_peak = 0, 0.0
        inner = sched.step

        def step():
            out = inner()
            running = len(sched.running)
            if running >= self.peak_running:
                self.peak_running, self.bytes_at_peak = running, self.used_bytes()
            return out

        sched.step = step

    def used_bytes(self) -> float:
        alloc, cap = self.sched.runner.allocator, self.sched.runner.capacity
        return sum(
            (c - alloc.num_free(t)) * b for t, (c, b) in enumerate(zip(cap, self.bytes_per_tier))
        )


def run_config(args, name: str, model_path: Path, kv: dict, turn1, tasks, tok, tb) -> dict:
    from radixgen.runtime.engine import Engine

    extra = {"load_format": "dummy"} if args.gpu else {}
    eng = Engine(str(model_path), dtype=args.dtype, **kv, **extra)
    runner = eng.scheduler.runner
    kinds = list(runner.kv_dtypes)
    model_kind = {"float32": "fp32", "bfloat16": "bf16", "float16": "bf16"}[args.dtype]
    per_tier = [tb[model_kind if k == "auto" else k] for k in kinds][: len(runner.capacity)]
    params = {"max_new_tokens": args.max_new_tokens, "temperature": 0, "ignore_eos": True}
    eng.generate(input_ids=[turn1[0][:32]], sampling_params={"max_new_tokens": 4, "temperature": 0})
    eng.scheduler.flush_cache()
    if runner.graphs is not None:  # capture the decode graphs before the clock starts
        runner.graphs.prepare(max(len(p) for p in turn1) + 2 * args.max_new_tokens + 64)
    probe = StepProbe(eng.scheduler, per_tier)
    t0 = time.perf_counter()
    out1 = eng.generate(input_ids=turn1, sampling_params=params)
    t1 = time.perf_counter()
    turn2 = build_turn2(tok, turn1, [o["output_ids"] for o in out1], tasks)
    out2 = eng.generate(input_ids=turn2, sampling_params=params)
    t2 = time.perf_counter()
    outs = out1 + out2
    n_out = sum(len(o["output_ids"]) for o in outs)
    res = {
        "kv_args": kv,
        "kv_dtypes": kinds,
        "capacity": list(runner.capacity),
        "bytes_per_token": per_tier,
        "turn1_s": t1 - t0,
        "turn2_s": t2 - t1,
        "output_tokens": n_out,
        "tok_s": n_out / (t2 - t0),
        "hit_rate": sum(o["meta_info"]["cached_tokens"] for o in outs)
        / sum(o["meta_info"]["prompt_tokens"] for o in outs),
        "hit_rate_turn2": sum(o["meta_info"]["cached_tokens"] for o in out2)
        / sum(o["meta_info"]["prompt_tokens"] for o in out2),
        "aborted": sum(
            (o["meta_info"]["finish_reason"] or {}).get("type") == "abort" for o in outs
        ),
        "peak_running": probe.peak_running,
        "retractions": eng.scheduler.num_retractions,
        "kv_bytes_per_running_at_peak": probe.bytes_at_peak / max(probe.peak_running, 1),
    }
    eng.shutdown()
    return res


def gpu_model_folder(src: Path, config: dict | None = None) -> Path:
    """A temp folder with a real model shape's config.json (default Llama-3-8B) and the embedded
    tokenizer files."""
    folder = Path(tempfile.mkdtemp(prefix="gpu-shape-"))
    (folder / "config.json").write_text(json.dumps(config or LLAMA3_8B, indent=1))
    for f in TOKENIZER_FILES:
        if (src / f).exists():
            shutil.copy(src / f, folder / f)
    return folder


def machine_info(gpu: bool) -> dict:
    import torch

    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "radixgen"],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
    ).stdout.strip()
    info = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "commit": git.stdout.strip() + (" (radixgen/ has uncommitted changes)" if dirty else ""),
        "load_avg_at_start": os.getloadavg(),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }
    if gpu and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def table(rows: dict, base: str = "bf16") -> str:
    lines = [
        "| config | KV prefix / branch | slots | max sessions (math) | peak running (observed) "
        "| retractions | KV bytes / session (math) | ratio vs bf16 | KV bytes / running at peak "
        "| tok/s | hit rate (turn 2) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    b = rows.get(base, {}).get("kv_bytes_per_session")
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"| {name} | FAILED: {r['error']} |")
            continue
        ratio = f"{r['kv_bytes_per_session'] / b:.3f}" if b else "-"
        lines.append(
            f"| {name} | {r['prefix']} / {r['branch']} | {' + '.join(map(str, r['capacity']))} "
            f"| {r['max_sessions_math']} | {r['peak_running']} | {r['retractions']} "
            f"| {r['kv_bytes_per_session'] / 1e3:.0f} kB | {ratio} | {r['kv_bytes_per_running_at_peak'] / 1e3:.0f} kB "
            f"| {r['tok_s']:.1f} | {r['hit_rate']:.3f} ({r['hit_rate_turn2']:.3f}) |"
        )
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    from radixgen.runtime.engine import load_tokenizer
    from radixgen.runtime.model.embedded import default_model_path

    if args.model_path:
        base_path = Path(args.model_path)
    elif (
        args.gpu and args.tokenizer
    ):  # the GPU machine has no embedded model: the tokenizer is all it needs
        base_path = args.tokenizer
    else:
        base_path = default_model_path()
    model_path = gpu_model_folder(args.tokenizer or base_path) if args.gpu else base_path
    arch = json.loads((model_path / "config.json").read_text())
    tok = load_tokenizer(model_path)
    tb = token_bytes(arch)
    system = system_prompt(tok, args.system_tokens)
    tasks = agent_tasks(args.agents)
    turn1 = build_turn1(tok, system, tasks)
    shared = _common_prefix(turn1)
    own = sum(len(p) for p in turn1) / len(turn1) - shared
    gen = args.max_new_tokens
    # a quarter of the agents' turn-2 sessions (own prompt, two answers, the follow-up turn)
    budget_tokens = args.budget_tokens or int(
        shared + max(args.agents / 4, 2) * (own + 2 * gen + 24)
    )
    budget = budget_tokens * tb["bf16"]
    win = window_tokens("mixed", gen)
    frac = args.kv_branch_fraction or ((gen - win) * tb["nvfp4"]) / (
        (gen - win) * tb["nvfp4"] + (own + win + shared / args.agents) * tb["fp8_e4m3"]
    )
    info = machine_info(args.gpu)
    _log(
        f"{args.agents} agents, shared prompt {shared} tokens, own prompt {own:.1f}, {gen} new tokens x 2 "
        f"turns; budget {budget_tokens} bf16 tokens = {budget / 1e6:.1f} MB; branch fraction {frac:.3f}; "
        f"load {info['load_avg_at_start'][0]:.2f}"
    )
    out = (
        args.json
        or HERE
        / "results"
        / f"agents-{dt.date.today().isoformat()}{'-gpu' if args.gpu else ''}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": info,
        "model": str(base_path) + (" (Llama-3-8B shape, dummy weights)" if args.gpu else ""),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "workload": {
            "agents": args.agents,
            "shared_prompt_tokens": shared,
            "own_prompt_tokens_mean": own,
            "new_tokens_per_turn": gen,
            "budget_bf16_tokens": budget_tokens,
            "budget_bytes": budget,
            "kv_branch_fraction": frac,
            "bytes_per_token": tb,
        },
        "rows": {},
    }
    for name in args.configs:
        kv = engine_kv_args(name, budget, tb, args.dtype, frac)
        _log(f"{name}: {kv}")
        try:
            r = run_config(args, name, model_path, kv, turn1, tasks, tok, tb)
            r.update(session_math(name, r["capacity"], tb, shared, own, gen, args.agents))
        except Exception as exc:  # one config failing must not lose the others
            _log(f"{name} failed: {exc!r}\n{traceback.format_exc()}")
            r = {"error": f"{type(exc).__name__}: {exc}"}
        doc["rows"][name] = r
        _log(f"{name}: {r}")
        out.write_text(
            json.dumps(doc, indent=1) + "\n"
        )  # after every config: a timeout keeps the rest
    rows = doc["rows"]
    report = table(rows)
    ratio = (
        (
            rows.get("mixed", {}).get("kv_bytes_per_session", 0)
            / rows["bf16"]["kv_bytes_per_session"]
        )
        if "kv_bytes_per_session" in rows.get("bf16", {})
        else None
    )
    print(report)
    amortized = None
    if ratio:
        amortized = (
            rows["mixed"]["kv_bytes_per_session_amortized"]
            / rows["bf16"]["kv_bytes_per_session_amortized"]
        )
        print(
            f"\nmixed / bf16 KV bytes per session: {ratio:.3f} (goal <= {RATIO_GOAL}: "
            f"{'met' if ratio <= RATIO_GOAL else 'MISSED'}); with the shared prompt spread over "
            f"{args.agents} sessions: {amortized:.3f}"
        )
    doc.update(
        mixed_over_bf16_bytes_per_session=ratio, mixed_over_bf16_amortized=amortized, table=report
    )
    out.write_text(json.dumps(doc, indent=1) + "\n")
    _log(f"wrote {out}")


def _common_prefix(prompts: list[list[int]]) -> int:
    first, n = prompts[0], len(prompts[0])
    for p in prompts[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], p)) if a != b), min(n, len(p)))
    return n


if __name__ == "__main__":
    main()

"""End to end: JSON-schema-constrained vs unconstrained decoding on the embedded model, next to
vLLM's CPU backend with its structured outputs (xgrammar), same workload, same run.

Workload: N extraction / function-calling requests (default 48) rendered through the model's chat
template into token ids (identical for every engine); each asks for JSON matching one of 8
varied schemas (the schema is in the system prompt). Greedy, up to --max-new-tokens (192), EOS
ends a request. Modes per engine:

  radixgen unconstrained | radixgen unconstrained, same lengths (ignore_eos, each request's
  max_new_tokens = the length of its constrained output: the grammar's cost per token with the
  output lengths held equal) | radixgen json_schema + jump-forward (default) | radixgen
  json_schema, jump-forward off (sampling param no_jump_forward) | vLLM unconstrained | vLLM
  structured outputs (xgrammar, compact whitespace like radixgen's default)

One radixgen Engine and one vLLM worker process (its own venv, kept alive, driven over a pipe)
per dtype. Grammar compiles are timed first and reported separately; then one untimed warm-up
of every mode (fills every compile cache), then --repeats rounds in which the modes run
interleaved in a rotating order (so background load hits every mode alike), each timed run
starting from an empty prefix cache. Per mode: wall s, requests/s, output tokens, output tok/s,
s per request, mean tokens per request, model forwards (radixgen: scheduler steps that ran a
forward), tokens appended by jump-forward, % of outputs that parse as JSON and validate against
their schema (jsonschema), and the share of the CPU other processes used meanwhile.

    .venv/bin/python benchmarks/bench_grammar_e2e.py [--dtypes float32,bfloat16] [--requests 48]
        [--max-new-tokens 192] [--repeats 2] [--skip-vllm] [--json OUT]

The same file is the vLLM worker (`--vllm-worker`, run by vLLM's venv python; stdlib imports only
at module level).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
MODEL = Path.home() / ".cache" / "radixgen" / "SmolLM2-135M-Instruct"

# ---------------------------------------------------------------- workload (deterministic)


def _str(n: int) -> dict:
    return {"type": "string", "maxLength": n}


SCHEMAS: dict[str, dict] = {
    "person": {
        "type": "object",
        "required": ["name", "age", "city"],
        "properties": {
            "name": _str(40),
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "city": _str(30),
        },
    },
    "weather_call": {
        "type": "object",
        "required": ["name", "arguments"],
        "properties": {
            "name": {"const": "get_weather"},
            "arguments": {
                "type": "object",
                "required": ["city", "unit"],
                "properties": {"city": _str(30), "unit": {"enum": ["celsius", "fahrenheit"]}},
            },
        },
    },
    "product": {
        "type": "object",
        "required": ["name", "price", "currency", "in_stock"],
        "properties": {
            "name": _str(40),
            "price": {"type": "number", "minimum": 0},
            "currency": {"enum": ["USD", "EUR", "GBP"]},
            "in_stock": {"type": "boolean"},
            "tags": {"type": "array", "items": _str(15), "maxItems": 4},
        },
    },
    "event": {
        "type": "object",
        "required": ["title", "date", "location"],
        "properties": {
            "title": _str(40),
            "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "location": _str(30),
            "attendees": {"type": "array", "items": _str(20), "maxItems": 5},
        },
    },
    "review": {
        "type": "object",
        "required": ["sentiment", "rating", "summary"],
        "properties": {
            "sentiment": {"enum": ["positive", "negative", "neutral"]},
            "rating": {"type": "integer", "minimum": 1, "maximum": 5},
            "summary": _str(60),
        },
    },
    "order": {
        "type": "object",
        "required": ["order_id", "items", "express"],
        "properties": {
            "order_id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "required": ["sku", "quantity"],
                    "properties": {
                        "sku": _str(12),
                        "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                    },
                },
            },
            "express": {"type": "boolean"},
        },
    },
    "search_call": {
        "type": "object",
        "required": ["tool", "query", "limit"],
        "properties": {
            "tool": {"enum": ["web_search", "news_search", "image_search"]},
            "query": _str(50),
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
    },
    "contacts": {
        "type": "array",
        "minItems": 1,
        "maxItems": 3,
        "items": {
            "type": "object",
            "required": ["name", "phone"],
            "properties": {
                "name": _str(30),
                "phone": {"type": "string", "pattern": "^[0-9]{3}-[0-9]{3}-[0-9]{4}$"},
            },
        },
    },
}

_FIRST = ["Alice", "Bob", "Carmen", "Dmitri", "Emeka", "Fatima", "Goran", "Hana", "Ivan", "Julia"]
_LAST = ["Nguyen", "Schmidt", "Okafor", "Rossi", "Tanaka", "Silva", "Kowalski", "Haddad"]
_CITIES = ["Lisbon", "Osaka", "Nairobi", "Denver", "Krakow", "Montreal", "Pune", "Valparaiso"]
_PRODUCTS = [
    "wireless headphones",
    "espresso machine",
    "trail running shoes",
    "mechanical keyboard",
    "standing desk",
    "cast iron skillet",
    "e-reader",
    "camping tent",
]


def _user_text(kind: str, rng: random.Random) -> str:
    name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    city = rng.choice(_CITIES)
    if kind == "person":
        return (
            f'Extract the person from this note: "Met {name} yesterday, {rng.randint(19, 80)} '
            f'years old, moved to {city} last spring and works as a nurse."'
        )
    if kind == "weather_call":
        unit = rng.choice(["Celsius", "Fahrenheit"])
        return f"Call the weather function: what's the weather like in {city} right now, in {unit}?"
    if kind == "product":
        prod = rng.choice(_PRODUCTS)
        cur = rng.choice([("$", "USD"), ("EUR ", "EUR"), ("GBP ", "GBP")])
        stock = rng.choice(["in stock", "sold out"])
        return (
            f'Extract the product: "The {prod} costs '
            f"{cur[0]}{rng.randint(20, 900)}.{rng.randint(0, 99):02d}, "
            f'currently {stock}; tagged sale and new."'
        )
    if kind == "event":
        return (
            f'Extract the event: "Team offsite in {city} on '
            f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}, "
            f'organised by {name}, with {rng.choice(_FIRST)} and {rng.choice(_FIRST)} attending."'
        )
    if kind == "review":
        mood = rng.choice(
            [
                "I loved it, works perfectly",
                "Broke after two days, very disappointed",
                "It's okay, nothing special",
            ]
        )
        return f'Analyse this review of a {rng.choice(_PRODUCTS)}: "{mood}."'
    if kind == "order":
        return (
            'Extract the order: "Order '
            f"{rng.choice(['ABC', 'XQZ', 'LMN'])}-{rng.randint(1000, 9999)}: "
            f"{rng.randint(1, 5)} x SKU-{rng.randint(100, 999)} and {rng.randint(1, 5)} x "
            f"SKU-{rng.randint(100, 999)}, "
            f'{rng.choice(["express", "standard"])} shipping."'
        )
    if kind == "search_call":
        return (
            f"Call a search tool to find the {rng.randint(3, 10)} latest news articles about "
            f"{rng.choice(['solar power', 'the World Cup', 'electric cars', 'the stock market'])} "
            f"in {city}."
        )
    if kind == "contacts":
        return (
            f'List the contacts in: "Call {name} at '
            f"{rng.randint(200, 999)}-{rng.randint(200, 999)}-"
            f"{rng.randint(1000, 9999)} or {rng.choice(_FIRST)} at {rng.randint(200, 999)}-"
            f'{rng.randint(200, 999)}-{rng.randint(1000, 9999)}."'
        )
    raise ValueError(kind)


def build_workload(tokenizer, num_requests: int, seed: int = 0) -> list[dict]:
    """[{schema_name, schema, input_ids}] cycling through SCHEMAS, rendered by the chat template."""
    rng, names, reqs = random.Random(seed), list(SCHEMAS), []
    for i in range(num_requests):
        name = names[i % len(names)]
        system = (
            "You are a data extraction assistant. Reply with only a JSON value that matches "
            "this JSON Schema, with no other text:\n" + json.dumps(SCHEMAS[name])
        )
        msgs = [
            {"role": "system", "content": system},
            {"role": "user", "content": _user_text(name, rng)},
        ]
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        reqs.append({"schema_name": name, "schema": SCHEMAS[name], "input_ids": list(ids)})
    return reqs


# ---------------------------------------------------------------- validity
def validity(texts: list[str], workload: list[dict]) -> dict:
    """How many outputs parse as JSON, and how many also validate against their schema."""
    import jsonschema

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    parsed = valid = 0
    for text, req in zip(texts, workload):
        try:
            value = json.loads(text)
        except ValueError:
            continue
        parsed += 1
        try:
            jsonschema.validate(value, req["schema"], format_checker=checker)
            valid += 1
        except jsonschema.ValidationError:
            pass
    return {"parsed": parsed, "valid": valid, "n": len(texts)}


# ---------------------------------------------------------------- radixgen
class RadixgenRunner:
    MODES = ("unconstrained", "unconstrained, same lengths", "json+jf", "json no-jf")

    def __init__(self, model: Path, dtype: str, max_new_tokens: int):
        from radixgen.runtime.engine import Engine

        t0 = time.perf_counter()
        self.engine = Engine(str(model), dtype=dtype)
        self.startup_s = time.perf_counter() - t0
        self.max_new_tokens = max_new_tokens
        self.same_lengths: list[int] = []  # per request, for "unconstrained, same lengths"
        sched = self.engine.scheduler
        self.forwards = 0
        self.forced = 0
        fwd, forced_fn = sched.runner.forward_mixed, sched.grammar.forced_tokens

        def counting_forward(*a, **k):
            self.forwards += 1
            return fwd(*a, **k)

        def counting_forced(req):
            out = forced_fn(req)
            self.forced += len(out)
            return out

        sched.runner.forward_mixed = counting_forward
        sched.grammar.forced_tokens = counting_forced

    def compile_times(self, workload: list[dict]) -> dict[str, float]:
        """First (cold) compile of each schema, through the engine's own compiler (so its cache is
        warm afterwards), and the cost of a cached compile."""
        from radixgen.core import SamplingParams

        compiler, out = self.engine.scheduler.grammar.compiler, {}
        for name, schema in SCHEMAS.items():
            constraint = SamplingParams.from_dict({"json_schema": schema}).constraint
            t0 = time.perf_counter()
            compiler.submit(constraint).result()
            out[name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(100):
            compiler.submit(constraint).result()
        out["_cached_us"] = (time.perf_counter() - t0) / 100 * 1e6
        return out

    def params(self, mode: str, i: int, req: dict) -> dict:
        p = {"temperature": 0, "max_new_tokens": self.max_new_tokens}
        if mode == "unconstrained, same lengths":
            p.update(max_new_tokens=max(1, self.same_lengths[i]), ignore_eos=True)
        elif mode != "unconstrained":
            p["json_schema"] = req["schema"]
        if mode == "json no-jf":
            p["no_jump_forward"] = True
        return p

    def run(self, mode: str, workload: list[dict]) -> dict:
        from _vllm_runner import OtherCpu

        assert self.engine.scheduler.flush_cache(), "cache flush refused"
        params = [self.params(mode, i, r) for i, r in enumerate(workload)]
        ids = [r["input_ids"] for r in workload]
        f0, j0 = self.forwards, self.forced
        with OtherCpu() as other:
            t0 = time.perf_counter()
            outs = self.engine.generate(input_ids=ids, sampling_params=params)
            seconds = time.perf_counter() - t0
        return {
            "seconds": seconds,
            "other_cpu": other.fraction,
            "output_tokens": [len(o["output_ids"]) for o in outs],
            "output_ids": [o["output_ids"] for o in outs],
            "texts": [o["text"] for o in outs],
            "finish": [o["meta_info"]["finish_reason"]["type"] for o in outs],
            "latency": [o["meta_info"]["e2e_latency"] for o in outs],
            "forwards": self.forwards - f0,
            "forced_tokens": self.forced - j0,
        }

    def close(self):
        self.engine.shutdown()


# ---------------------------------------------------------------- vLLM (worker in its own venv)
class VllmClient:
    """Parent side: starts the worker, sends one JSON command a line, reads one JSON line back."""

    MODES = ("vLLM unconstrained", "vLLM json (xgrammar)")

    def __init__(
        self,
        python: str,
        model: Path,
        dtype: str,
        max_new_tokens: int,
        workload: list[dict],
        log_path: Path,
        timeout: float,
    ):
        env = dict(
            os.environ,
            VLLM_CPU_KVCACHE_SPACE="4",
            VLLM_CPU_OMP_THREADS_BIND="0-1",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        for var in ("PYTHONPATH", "VIRTUAL_ENV", "LD_PRELOAD"):
            env.pop(var, None)
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--vllm-worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
            bufsize=1,
        )
        self.log_path, self.timeout = log_path, timeout
        self.ready = self.call(
            {
                "cmd": "init",
                "model": str(model),
                "dtype": dtype,
                "max_new_tokens": max_new_tokens,
                "requests": [
                    {"input_ids": r["input_ids"], "schema": r["schema"]} for r in workload
                ],
            }
        )

    def call(self, cmd: dict) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.flush()
            tail = "".join(self.log_path.read_text().splitlines(True)[-30:])
            raise RuntimeError(
                f"vLLM worker died (exit {self.proc.poll()}); log {self.log_path}:\n{tail}"
            )
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"vLLM worker: {out['error']}")
        return out

    def run(self, mode: str, workload: list[dict]) -> dict:
        return self.call({"cmd": "run", "constrained": mode != "vLLM unconstrained"})

    def close(self):
        try:
            self.call({"cmd": "quit"})
        except Exception:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def vllm_worker() -> None:
    """Runs in vLLM's venv: commands on stdin, results on the real stdout (fd 1 goes to stderr)."""
    from _vllm_runner import OtherCpu, _claim_stdout

    result_out = _claim_stdout()
    state: dict = {}

    def reply(obj):
        result_out.write(json.dumps(obj) + "\n")
        result_out.flush()

    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "quit":
                reply({"ok": True})
                return
            if cmd["cmd"] == "init":
                reply(_vllm_init(state, cmd))
            elif cmd["cmd"] == "run":
                reply(_vllm_run(state, cmd["constrained"], OtherCpu))
        except Exception as exc:  # report, keep serving
            import traceback

            traceback.print_exc()
            reply({"error": repr(exc)})


def _vllm_params(state: dict, constrained: bool):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    n = state["max_new_tokens"]
    if not constrained:
        return SamplingParams(temperature=0, max_tokens=n)
    return [
        SamplingParams(
            temperature=0,
            max_tokens=n,
            structured_outputs=StructuredOutputsParams(
                json=r["schema"], disable_any_whitespace=True
            ),
        )
        for r in state["requests"]
    ]


def _vllm_init(state: dict, cmd: dict) -> dict:
    import vllm
    from vllm import LLM

    t0 = time.perf_counter()
    llm = LLM(
        model=cmd["model"],
        dtype=cmd["dtype"],
        enable_prefix_caching=True,
        block_size=32,
        max_model_len=2048,
        seed=0,
        structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    )
    state.update(llm=llm, max_new_tokens=cmd["max_new_tokens"], requests=cmd["requests"])
    startup = time.perf_counter() - t0
    # compile time: one constrained request per distinct schema, a single token each, cold grammar
    # cache (includes a one-token generate; the unconstrained one-token generate is subtracted)
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    prompt = TokensPrompt(prompt_token_ids=cmd["requests"][0]["input_ids"])
    llm.generate([prompt], SamplingParams(temperature=0, max_tokens=1), use_tqdm=False)
    t0 = time.perf_counter()
    llm.generate([prompt], SamplingParams(temperature=0, max_tokens=1), use_tqdm=False)
    base = time.perf_counter() - t0
    compile_s, seen = {}, set()
    for r in cmd["requests"]:
        key = json.dumps(r["schema"], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        t0 = time.perf_counter()
        llm.generate(
            [prompt],
            SamplingParams(
                temperature=0,
                max_tokens=1,
                structured_outputs=StructuredOutputsParams(
                    json=r["schema"], disable_any_whitespace=True
                ),
            ),
            use_tqdm=False,
        )
        compile_s[key] = time.perf_counter() - t0 - base
    return {
        "vllm_version": vllm.__version__,
        "startup_s": startup,
        "compile_s": list(compile_s.values()),
    }


def _vllm_run(state: dict, constrained: bool, OtherCpu) -> dict:
    from vllm.inputs import TokensPrompt

    llm = state["llm"]
    if not llm.reset_prefix_cache():
        print("[worker] reset_prefix_cache returned False", file=sys.stderr)
    prompts = [TokensPrompt(prompt_token_ids=r["input_ids"]) for r in state["requests"]]
    params = _vllm_params(state, constrained)
    with OtherCpu() as other:
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "other_cpu": other.fraction,
        "output_tokens": [len(o.outputs[0].token_ids) for o in outs],
        "output_ids": [list(o.outputs[0].token_ids) for o in outs],
        "texts": [o.outputs[0].text for o in outs],
        "finish": [o.outputs[0].finish_reason for o in outs],
        "latency": None,
        "forwards": None,
        "forced_tokens": None,
    }


# ---------------------------------------------------------------- driver and report
def summarize(runs: list[dict], workload: list[dict], constrained: bool) -> dict:
    """Median over repeats of the timing figures; token counts and validity from the first run."""
    first = runs[0]
    secs = [r["seconds"] for r in runs]
    sec = statistics.median(secs)
    toks = sum(first["output_tokens"])
    n = len(workload)
    val = validity(first["texts"], workload)
    stops = sum(1 for f in first["finish"] if f == "stop")
    return {
        "seconds": secs,
        "median_s": sec,
        "req_per_s": n / sec,
        "output_tokens": toks,
        "tok_per_s": toks / sec,
        "s_per_req": sec / n,
        "tokens_per_req": toks / n,
        "mean_latency_s": (statistics.mean(first["latency"]) if first["latency"] else None),
        "forwards": first["forwards"],
        "forced_tokens": first["forced_tokens"],
        "other_cpu": [r["other_cpu"] for r in runs],
        "stopped": stops,
        "parsed": val["parsed"],
        "valid": val["valid"],
        "n": n,
        "constrained": constrained,
        "identical_runs": all(r["output_ids"] == first["output_ids"] for r in runs[1:]),
    }


def bench_dtype(args, dtype: str, workload: list[dict]) -> dict:
    res: dict = {"dtype": dtype}
    vllm = None
    if not args.skip_vllm:
        print(
            f"[{dtype}] starting the vLLM worker (60-100 s start-up, then its grammar compiles)",
            flush=True,
        )
        log = (
            Path(args.json).with_suffix(f".vllm-{dtype}.log")
            if args.json
            else Path(f"/tmp/bench_grammar_e2e.vllm-{dtype}.log")
        )
        try:
            vllm = VllmClient(
                args.vllm_python,
                args.model,
                dtype,
                args.max_new_tokens,
                workload,
                log,
                args.vllm_timeout,
            )
        except Exception as exc:  # report radixgen's modes anyway
            print(f"[{dtype}] vLLM failed, going on without it: {exc}", flush=True)
            res["vllm_error"] = str(exc)
    if vllm:
        res["vllm"] = vllm.ready
        print(
            f"[{dtype}] vLLM {vllm.ready['vllm_version']} ready in {vllm.ready['startup_s']:.0f} "
            f"s; xgrammar compiles {['%.3f' % c for c in vllm.ready['compile_s']]} s",
            flush=True,
        )
    rg = RadixgenRunner(args.model, dtype, args.max_new_tokens)
    res["radixgen_startup_s"] = rg.startup_s
    res["radixgen_compile_s"] = rg.compile_times(workload)
    print(
        f"[{dtype}] radixgen compiles (s): "
        + ", ".join(
            f"{k} {v:.2f}" for k, v in res["radixgen_compile_s"].items() if not k.startswith("_")
        )
        + f"; cached {res['radixgen_compile_s']['_cached_us']:.0f} us",
        flush=True,
    )
    modes = [(m, rg) for m in RadixgenRunner.MODES] + (
        [(m, vllm) for m in VllmClient.MODES] if vllm else []
    )
    rg.same_lengths = rg.run("json+jf", workload)["output_tokens"]  # untimed: the lengths to match
    for mode, eng in modes:  # untimed warm-up of every mode (compile caches are warm already)
        eng.run(mode, workload[: args.warmup_requests] if eng is rg else workload)
    runs: dict[str, list[dict]] = {m: [] for m, _ in modes}
    for rep in range(args.repeats):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for mode, eng in order:
            r = eng.run(mode, workload)
            runs[mode].append(r)
            print(
                f"[{dtype}] round {rep + 1} {mode:22s} {r['seconds']:7.2f} s  "
                f"{sum(r['output_tokens']):6d} tok  other-cpu {r['other_cpu']:.0%}",
                flush=True,
            )
    rg.close()
    if vllm:
        vllm.close()
    res["modes"] = {m: summarize(runs[m], workload, "json" in m) for m, _ in modes}
    jf, nojf = runs["json+jf"][0]["output_ids"], runs["json no-jf"][0]["output_ids"]
    res["jf_vs_nojf_identical"] = sum(a == b for a, b in zip(jf, nojf))
    if vllm:
        res["unconstrained_agree_vllm"] = sum(
            a == b
            for a, b in zip(
                runs["unconstrained"][0]["output_ids"], runs["vLLM unconstrained"][0]["output_ids"]
            )
        )
        res["constrained_agree_vllm"] = sum(
            a == b for a, b in zip(jf, runs["vLLM json (xgrammar)"][0]["output_ids"])
        )
    res["samples"] = {m: runs[m][0]["texts"][:8] for m, _ in modes}
    return res


def report(results: list[dict], n: int) -> str:
    lines = []
    for res in results:
        lines.append(f"\n### {res['dtype']}")
        lines.append(
            "| mode | wall s (median) | req/s | output tokens | output tok/s | s / req | tok / req "
            "| forwards | jump-forward tokens | parse / valid | other-cpu |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for mode, m in res["modes"].items():
            fw = "–" if m["forwards"] is None else str(m["forwards"])
            ft = "–" if m["forced_tokens"] is None else str(m["forced_tokens"])
            oc = "/".join(f"{x:.0%}" for x in m["other_cpu"])
            lines.append(
                f"| {mode} | {m['median_s']:.2f} ({', '.join(f'{s:.2f}' for s in m['seconds'])}) "
                f"| {m['req_per_s']:.2f} | {m['output_tokens']} | {m['tok_per_s']:.0f} | "
                f"{m['s_per_req']:.3f} | {m['tokens_per_req']:.1f} | {fw} | {ft} | "
                f"{m['parsed']}/{m['valid']} of {m['n']} | {oc} |"
            )
        md = res["modes"]
        u, j, nj = md["unconstrained"], md["json+jf"], md["json no-jf"]
        same = md["unconstrained, same lengths"]
        lines.append(
            f"\nradixgen json+jf vs unconstrained: tok/s x{j['tok_per_s'] / u['tok_per_s']:.2f}, "
            f"req/s x{j['req_per_s'] / u['req_per_s']:.2f}; vs unconstrained with the same output "
            f"lengths: wall x{same['median_s'] / j['median_s']:.2f} (tok/s "
            f"x{j['tok_per_s'] / same['tok_per_s']:.2f}, forwards {j['forwards']} vs "
            f"{same['forwards']}); json+jf vs no-jf: tok/s "
            f"x{j['tok_per_s'] / nj['tok_per_s']:.2f}, forwards {j['forwards']} vs "
            f"{nj['forwards']}; greedy ids identical jf/no-jf: {res['jf_vs_nojf_identical']}/{n}"
        )
        if "vLLM unconstrained" in md:
            vu, vj = md["vLLM unconstrained"], md["vLLM json (xgrammar)"]
            lines.append(
                f"vLLM json vs unconstrained: tok/s x{vj['tok_per_s'] / vu['tok_per_s']:.2f}, "
                f"req/s x{vj['req_per_s'] / vu['req_per_s']:.2f}. radixgen / vLLM: unconstrained "
                f"tok/s x{u['tok_per_s'] / vu['tok_per_s']:.2f}, req/s "
                f"x{u['req_per_s'] / vu['req_per_s']:.2f}; "
                f"constrained tok/s x{j['tok_per_s'] / vj['tok_per_s']:.2f}, req/s "
                f"x{j['req_per_s'] / vj['req_per_s']:.2f}. "
                f"greedy ids equal to vLLM's: unconstrained {res['unconstrained_agree_vllm']}/{n}, "
                f"constrained {res['constrained_agree_vllm']}/{n}"
            )
            compile_s = res["radixgen_compile_s"]
            lines.append(
                "compile: radixgen cold "
                f"{sum(v for k, v in compile_s.items() if not k.startswith('_')):.1f} s "
                f"for {len(SCHEMAS)} schemas (cached {compile_s['_cached_us']:.0f} us); "
                f"vLLM/xgrammar cold ~{sum(res['vllm']['compile_s']):.2f} s"
            )
    return "\n".join(lines)


def main() -> None:
    if "--vllm-worker" in sys.argv:
        vllm_worker()
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=MODEL)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--requests", type=int, default=48)
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--warmup-requests", type=int, default=8, help="radixgen warm-up batch size")
    p.add_argument("--skip-vllm", action="store_true")
    p.add_argument("--vllm-python", default="/tmp/vllm-cpu/bin/python")
    p.add_argument("--vllm-timeout", type=float, default=1800)
    p.add_argument("--json", default=None, help="write all results here")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(args.model))
    workload = build_workload(tokenizer, args.requests)
    print(
        f"{len(workload)} requests, {sum(len(r['input_ids']) for r in workload)} prompt tokens, "
        f"{len(SCHEMAS)} schemas, max_new_tokens {args.max_new_tokens}, greedy",
        flush=True,
    )
    results = []
    for dtype in args.dtypes.split(","):  # report (and write) after each dtype
        results.append(bench_dtype(args, dtype, workload))
        text = report(results, len(workload))
        print(report(results[-1:], len(workload)), flush=True)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(
                json.dumps(
                    {
                        "args": {k: str(v) for k, v in vars(args).items()},
                        "results": results,
                        "report": text,
                    },
                    indent=1,
                )
            )


if __name__ == "__main__":
    main()

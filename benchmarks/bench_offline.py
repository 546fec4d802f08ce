"""Offline throughput: radixgen vs HF transformers vs vLLM's CPU backend, in one run.

Every engine gets the same token-id prompts (benchmarks/workloads.py), 64 greedy new tokens with
EOS ignored, and is timed on one generate call of all prompts after a warm-up. See README.md.

    .venv/bin/python benchmarks/bench_offline.py                  # both dtypes, both workloads
    .venv/bin/python benchmarks/bench_offline.py --num-requests 8 --dtype float32 --skip-radixgen
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import workloads as wl  # noqa: E402
from _vllm_runner import OtherCpu  # noqa: E402  (stdlib-only probe, shared with the runner)

ENGINES = ("radixgen", "hf", "vllm")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct"))
    p.add_argument("--dtype", default="float32,bfloat16", help="comma list")
    p.add_argument("--workload", default="shared,unique", help="comma list of shared,unique")
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--num-system-prompts", type=int, default=4, help="shared workload")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=1, help="timed runs per engine (median)")
    p.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra radixgen.Engine option (repeatable; VALUE parsed as JSON if it can)",
    )
    p.add_argument("--hf-batch-size", type=int, default=16)
    p.add_argument("--vllm-python", default="/tmp/vllm-cpu/bin/python")
    p.add_argument("--vllm-block-size", type=int, default=32)
    p.add_argument("--vllm-ld-preload", default="", help="LD_PRELOAD for vLLM (e.g. libiomp5)")
    p.add_argument("--vllm-timeout", type=int, default=1800, help="seconds per vLLM process")
    for e in ENGINES:
        p.add_argument(f"--skip-{e}", action="store_true")
    p.add_argument("--save-output-ids", action="store_true", help="keep output ids in the JSON")
    p.add_argument(
        "--out", type=Path, default=HERE / "results" / f"offline-{dt.date.today().isoformat()}.json"
    )
    args = p.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    args.workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    args.engine_kwargs = dict(_parse_kv(kv) for kv in args.engine_arg)
    return args


def _parse_kv(kv: str):
    key, _, val = kv.partition("=")
    try:
        return key, json.loads(val)
    except json.JSONDecodeError:
        return key, val


def _log(msg: str):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def engine_result(
    seconds: list[float], other: list[float], outputs, prompts, cached, optimum: float
) -> dict:
    """Numbers for one engine on one workload; cached is a list of per-request ints or None,
    other the share of the machine's CPU that other processes used during each timed run."""
    secs = statistics.median(seconds)
    n_out = sum(len(o) for o in outputs)
    n_prompt = sum(len(p) for p in prompts)
    hit = sum(cached) / n_prompt if cached is not None else None
    return {
        "seconds": secs,
        "seconds_all": seconds,
        "output_tokens": n_out,
        "output_tok_s": n_out / secs,
        "hit_rate": hit,
        "hit_over_optimum": hit / optimum if hit is not None and optimum else None,
        "other_cpu": max(other),
        "other_cpu_all": other,
        "output_ids": outputs,
    }


# ---------------------------------------------------------------- radixgen (in process)
def _radixgen_start(args, dtype, warm):
    import radixgen

    engine = radixgen.Engine(model_path=args.model, dtype=dtype, **args.engine_kwargs)
    engine.generate(
        input_ids=warm, sampling_params={"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}
    )
    _radixgen_flush(engine)
    return engine


def _radixgen_flush(engine) -> bool:
    flush = getattr(engine, "flush_cache", None)
    return callable(flush) and flush() is not False


def run_radixgen(args, dtype, prompts, warm, optimum):
    params = {"max_new_tokens": args.max_new_tokens, "temperature": 0, "ignore_eos": True}
    engine, times, other, first = None, [], [], None
    try:
        for r in range(args.repeats):
            if engine is not None and not _radixgen_flush(engine):
                engine.shutdown()  # no flush_cache: a cold cache needs a fresh engine
                engine = None
            engine = engine or _radixgen_start(args, dtype, warm)
            with OtherCpu() as oc:
                t0 = time.perf_counter()
                outs = engine.generate(input_ids=prompts, sampling_params=params)
                times.append(time.perf_counter() - t0)
            other.append(oc.fraction)
            first = first or outs
    finally:
        if engine is not None:
            engine.shutdown()
    cached = [o["meta_info"].get("cached_tokens") for o in first]
    cached = None if any(c is None for c in cached) else cached
    return engine_result(
        times, other, [list(o["output_ids"]) for o in first], prompts, cached, optimum
    )


# ---------------------------------------------------------------- HF transformers (in process)
def load_hf(model_dir: str, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    # Ignore EOS like the other engines' ignore_eos: keep generating (and emitting) EOS rather
    # than masking it as min_new_tokens does, which would change the greedy tokens.
    model.generation_config.eos_token_id = None
    return model


def hf_generate(model, prompts, batch_size: int, max_new: int, pad_id: int) -> list[list[int]]:
    import torch

    outs = []
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i : i + batch_size]
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in batch])
        # explicit mask: pad id 2 is also <|im_end|>, which occurs inside every prompt
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            gen = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=max_new,
                min_new_tokens=max_new,
                pad_token_id=pad_id,
            )
        outs += gen[:, width:].tolist()
    return outs


def run_hf(args, model, pad_id, prompts, warm, optimum):
    hf_generate(model, warm, args.hf_batch_size, 4, pad_id)
    times, other, first = [], [], None
    for _ in range(args.repeats):
        with OtherCpu() as oc:
            t0 = time.perf_counter()
            outs = hf_generate(model, prompts, args.hf_batch_size, args.max_new_tokens, pad_id)
            times.append(time.perf_counter() - t0)
        other.append(oc.fraction)
        first = first or outs
    return engine_result(times, other, first, prompts, None, optimum)


# ---------------------------------------------------------------- vLLM (subprocess, own venv)
def run_vllm(args, dtype, prompt_sets: dict, warm, optima: dict, log_path: Path) -> dict:
    """One vLLM process per dtype runs all workloads (prefix cache reset before each run)."""
    spec = {
        "model": args.model,
        "dtype": dtype,
        "block_size": args.vllm_block_size,
        "max_model_len": 2048,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "warmup": warm,
        "workloads": prompt_sets,
    }
    env = dict(
        os.environ,
        VLLM_CPU_KVCACHE_SPACE="4",
        VLLM_CPU_OMP_THREADS_BIND="0-1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    for var in ("PYTHONPATH", "VIRTUAL_ENV", "LD_PRELOAD"):
        env.pop(var, None)
    if args.vllm_ld_preload:
        env["LD_PRELOAD"] = args.vllm_ld_preload
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(
                [args.vllm_python, str(HERE / "_vllm_runner.py"), f.name],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                timeout=args.vllm_timeout,
            )
    finally:
        os.unlink(f.name)
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = "".join(log_path.read_text().splitlines(True)[-25:])
        raise RuntimeError(f"vLLM runner exited {proc.returncode}; log {log_path}:\n{tail}")
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    out = {}
    for name, r in raw["results"].items():
        res = engine_result(
            r["seconds"],
            r["other_cpu"],
            r["output_ids"],
            prompt_sets[name],
            r["cached_tokens"],
            optima[name],
        )
        res.update(
            metrics_prefix_cache=r["metrics_prefix_cache"],
            startup_s=raw["startup_s"],
            version=raw["vllm_version"],
        )
        out[name] = res
    return out


# ---------------------------------------------------------------- report
def machine_info() -> dict:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    import torch
    import transformers

    try:
        git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True)
        commit = git.stdout.strip() if git.returncode == 0 else "none (no commits yet)"
    except OSError:
        commit = "unknown"
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": commit,
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }


def _guarded(fn, *a):
    try:
        return fn(*a)
    except Exception as exc:  # one engine failing must not lose the others' numbers
        _log(f"{getattr(fn, '__name__', fn)} failed: {exc!r}")
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_dtype(args, dtype, tok, sets, stats, warm) -> dict:
    """{workload: {engine: result}} for one dtype."""
    prompts = {w: sets[w]["prompts"] for w in args.workloads}
    opt = {w: stats[w]["optimum_hit_rate"] for w in args.workloads}
    res = {w: {} for w in args.workloads}
    for w in args.workloads if not args.skip_radixgen else ():
        _log(f"radixgen {dtype} {w}")
        res[w]["radixgen"] = _guarded(run_radixgen, args, dtype, prompts[w], warm, opt[w])
    model = None if args.skip_hf else _guarded(load_hf, args.model, dtype)
    for w in args.workloads if model is not None else ():
        _log(f"HF {dtype} {w}")
        res[w]["hf"] = (
            model
            if isinstance(model, dict)
            # the load failed
            else _guarded(run_hf, args, model, tok.pad_token_id, prompts[w], warm, opt[w])
        )
    del model
    gc.collect()
    if not args.skip_vllm:
        _log(f"vLLM {dtype} {','.join(args.workloads)} (start-up takes 1-2 min)")
        log_path = args.out.with_name(f"{args.out.stem}.vllm-{dtype}.log")
        out = _guarded(run_vllm, args, dtype, prompts, warm, opt, log_path)
        for w in args.workloads:
            res[w]["vllm"] = out.get(w, out)
    return res


def main(argv=None):
    args = parse_args(argv)
    load_at_start = os.getloadavg()
    _log(f"load average {load_at_start[0]:.2f} (other work running makes timings meaningless)")
    from transformers import AutoTokenizer

    args.out.parent.mkdir(parents=True, exist_ok=True)
    stem, n = args.out.stem, 2
    while args.out.exists():  # never overwrite an earlier run of the same day
        args.out, n = args.out.with_stem(f"{stem}-{n}"), n + 1
    tok = AutoTokenizer.from_pretrained(args.model)
    sets = wl.build_workloads(tok, args.num_requests, args.num_system_prompts)
    stats = {}
    for w in args.workloads:
        stats[w] = wl.prefix_stats(sets[w]["prompts"], args.vllm_block_size)
        stats[w]["system_token_lens"] = sets[w]["system_token_lens"]
        _log(f"workload {w}: {stats[w]}")
    warm = wl.warmup_prompts(tok)
    results = []
    for dtype in args.dtypes:
        per_w = run_dtype(args, dtype, tok, sets, stats, warm)
        for w in args.workloads:
            results.append(
                {
                    "dtype": dtype,
                    "workload": w,
                    "engines": per_w[w],
                    "comparison": wl.compare(per_w[w]),
                }
            )
    report = wl.table(results, stats, args.vllm_block_size)
    print(report)
    if not args.save_output_ids:
        for r in results:
            for v in r["engines"].values():
                v.pop("output_ids", None)
    doc = {
        "machine": {**machine_info(), "load_avg_at_start": load_at_start},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "workloads": stats,
        "results": results,
        "table": report,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    _log(f"wrote {args.out}")


if __name__ == "__main__":
    main()

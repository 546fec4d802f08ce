"""KV-cache precision vs output quality: bf16 (baseline), fp8, nvfp4 and mixed (FP8 prefix +
NVFP4 branch) KV on the same float32 model, so the KV precision is the only difference.

Per KV config, on a fresh Engine (the quantized pools calibrate their scales on first use):

* Greedy agreement: the prompts of kv_quality_prompts.py (chat, JSON, code, reasoning), rendered
  with the tokenizer's chat template, greedy, `--max-new-tokens` (64) each, EOS honoured, all in
  one `Engine.generate` call. Against the bf16 outputs: tokens before the first divergence (a
  shorter output that is a prefix of the other diverges at its end; identical outputs count as
  max-new-tokens) and the exact-match rate (output ids identical).
* Teacher forcing on kv_quality_prompts.PASSAGE (>= 1000 tokens): mean KL(bf16 || config) of
  the full-vocabulary next-token distributions, and perplexity. The public API returns only the
  logprob of the actual token (`input_token_logprobs`) or a top-k, so full distributions come
  from driving `engine.scheduler.runner` (ModelRunner) directly with `ForcedSequence` below: a
  table row and KV slots are taken from the runner's allocator (the radix cache is not used),
  the first `--tf-prompt-len` (16) passage tokens are prefilled as the prompt (prefix pool) and
  every later passage token is fed as a *generated* token, its KV slot from the branch pool (as
  the scheduler's `_alloc_decode` does). So in the mixed config the passage beyond the first 16
  tokens lands in the NVFP4 branch pool, which is what a long generated branch sees; every
  config runs the same path. To keep this affordable on 2 CPU cores, the generated tokens are
  fed in one extend forward after a first single decode step (`branch_extend_logprobs`): the
  attention stores K/V and reads them back from the pool under a causal mask
  (runtime/attention.py), so each query sees exactly the quantized KV the step-by-step decode
  shows it. The JSON's `method_check` compares it with the true step-by-step decode path
  (`forced_logprobs`, one `forward_mixed` decode per token) on the first `--check-tokens`
  positions of every config. As a second cross-check the JSON also holds KL/perplexity with the
  whole passage prefilled as a prompt (there the mixed config keeps everything in FP8).
* `mixed` stores every generated token in the NVFP4 branch pool (`--kv-branch-window none`);
  `mixed+win` is the runtime's default branch window (`--kv-branch-window 4,16`, see
  runtime/kv_manager.py): the first 4 and the newest 16 or more generated tokens of a request
  stay FP8, older ones move to the branch pool in batches. Its greedy outputs come from the
  Engine like every row's; its teacher forcing runs step by step (`forced_logprobs`, the first
  `--win-tf-tokens` positions, the bf16 reference cut to the same positions) with the
  scheduler's own `KVManager.demote` after every step.
* Quantized pools store Hadamard-rotated q/k by default (`--kv-rotation auto`); the `norot` rows
  turn that off. The `fp32` row keeps KV *more* precisely than the bf16 reference: its greedy
  agreement is what rounding alone does to this model's greedy paths.

    .venv/bin/python benchmarks/eval_kv_quality.py                 # 56 prompts, ~1.6k-token text
    .venv/bin/python benchmarks/eval_kv_quality.py --quick         # 8 prompts, 300 text tokens
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import kv_quality_prompts as kq  # noqa: E402
import torch  # noqa: E402

CONFIGS = {
    "bf16": {"kv_cache_dtype": "bf16"},
    "fp8": {"kv_cache_dtype": "fp8_e4m3"},
    "nvfp4": {"kv_cache_dtype": "nvfp4"},
    "mixed": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
        "kv_branch_window": "none",
    },
    "mixed+win": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
    },  # window from --window
    # a KV *more* precise than the reference: how often greedy paths split on rounding alone
    "fp32": {"kv_cache_dtype": "fp32"},
    # the same without the q/k Hadamard rotation that quantized pools get by default
    "fp8 norot": {"kv_cache_dtype": "fp8_e4m3", "kv_rotation": "off"},
    "mixed+win norot": {
        "kv_prefix_dtype": "fp8_e4m3",
        "kv_branch_dtype": "nvfp4",
        "kv_rotation": "off",
    },
}
GOALS = {"fp8_ppl_pct": 0.5, "mixed_ppl_pct": 3.0, "mixed_exact": 0.90}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-path", default=None, help="HF folder (default: the embedded SmolLM2)")
    p.add_argument("--quick", action="store_true", help="8 prompts, 300 passage tokens")
    p.add_argument("--num-prompts", type=int, default=None, help="default: all (56)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument(
        "--text-tokens", type=int, default=None, help="passage tokens used (default all)"
    )
    p.add_argument("--tf-prompt-len", type=int, default=16, help="passage tokens fed as the prompt")
    p.add_argument(
        "--window",
        default="4,16",
        help="--kv-branch-window of the mixed+win row; 'none' skips that row",
    )
    p.add_argument(
        "--check-tokens",
        type=int,
        default=48,
        help="passage positions also run step by step, to check the one-extend method",
    )
    p.add_argument(
        "--win-tf-tokens",
        type=int,
        default=None,
        help="passage positions of the (step-by-step) mixed+win teacher forcing (default all)",
    )
    p.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help="comma-separated rows (bf16 always runs first: the others compare with it)",
    )
    p.add_argument("--max-total-tokens", type=int, default=24576)
    p.add_argument(
        "--json", type=Path, default=None, help="default benchmarks/results/kv-quality-<date>.json"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.num_prompts = args.num_prompts or 8
        args.text_tokens = args.text_tokens or 300
    return args


def _log(msg: str):
    print(f"[kvq {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the forced-token driver
class ForcedSequence:
    """One sequence run on `ModelRunner` directly, outside the scheduler and the radix cache:
    prompt positions get prefix-pool slots, every appended token a branch-pool slot, or, given
    the scheduler's `KVManager` with a branch window (`kv`), a prefix-pool slot that
    `kv.demote` later moves to the branch pool. `free()` returns everything."""

    def __init__(self, runner, prompt_ids: list[int], kv=None):
        from radixgen.core import SamplingParams
        from radixgen.runtime.request import Request

        self.runner, self.kv = runner, kv if kv is not None and kv.window else None
        self.req = Request(f"forced-{id(self)}", list(prompt_ids), SamplingParams())
        self.req.row = runner.table.alloc_row()
        assert self.req.row is not None, "no free request row"

    @property
    def branch_tier(self) -> int:
        """The pool a new generated token's KV goes to."""
        return self.kv.new_token_tier if self.kv else (1 if self.runner.mixed_kv else 0)

    def prefill(self, all_logits: bool = False) -> torch.Tensor:
        """Prefill the prompt; logits of its last position [1, V], or with all_logits of every
        position [L, V] (row i predicts prompt token i + 1)."""
        n = len(self.req.input_ids)
        slots = self.runner.allocator.alloc(n, 0)
        assert slots is not None, "KV pool too small"
        extra = [(0, n)] if all_logits else None
        logits = self.runner.forward_mixed([self.req], [n], [slots], [], None, extra)
        self.req.kv_len = n
        return logits[1:] if all_logits else logits

    def free(self) -> None:
        r = self.req
        self.runner.allocator.free(self.runner.table.read(r.row, r.kv_len).clone())
        self.runner.table.free_row(r.row)
        r.row = None


def decode_step(seqs: list[ForcedSequence], tokens: list[int]) -> torch.Tensor:
    """Append tokens[i] to seqs[i] as a generated token and run one decode forward of all;
    logits [B, V] predicting each sequence's next token."""
    runner = seqs[0].runner
    for s, t in zip(seqs, tokens):
        s.req.output_ids.append(t)
    by_tier: dict[int, list[int]] = {}
    for i, s in enumerate(seqs):
        by_tier.setdefault(s.branch_tier, []).append(i)
    slots = torch.empty(len(seqs), dtype=torch.int64)
    for tier, idx in by_tier.items():
        got = runner.allocator.alloc(len(idx), tier)
        assert got is not None, "KV pool too small"
        slots[torch.tensor(idx)] = got.cpu()
    logits = runner.forward_mixed([], [], [], [s.req for s in seqs], slots.to(runner.device))
    for s in seqs:
        s.req.kv_len += 1
    windowed = [s for s in seqs if s.kv is not None]
    if windowed:  # what the scheduler does after every step
        windowed[0].kv.demote([s.req for s in windowed])
    return logits


# ---------------------------------------------------------------- measurements
def forced_logprobs(
    runner, text_ids: list[int], prompt_len: int, kv=None, limit: int | None = None
) -> torch.Tensor:
    """Teacher forcing step by step: log-softmax [n, V] predicting text tokens prompt_len..
    (n = len(text) - prompt_len, or `limit`) from the prompt (prefilled) plus the passage fed
    token by token as generated tokens through the decode path."""
    n = len(text_ids) - prompt_len if limit is None else min(limit, len(text_ids) - prompt_len)
    seq = ForcedSequence(runner, text_ids[:prompt_len], kv)
    out = [torch.log_softmax(seq.prefill().float(), -1)]
    for t in text_ids[prompt_len : prompt_len + n - 1]:
        out.append(torch.log_softmax(decode_step([seq], [t]).float(), -1))
    seq.free()
    return torch.cat(out)


def branch_extend_logprobs(runner, text_ids: list[int], prompt_len: int) -> torch.Tensor:
    """Teacher forcing in three forwards, equal in math to `forced_logprobs` without a window:
    prefill the prompt; decode passage token prompt_len as the first generated token (its slot
    from the branch pool, which calibrates that pool's scales on one token, as in real
    decoding); then extend all later passage tokens at once as generated tokens, in
    branch-pool slots. Attention stores K/V before reading it back from the pool with a causal
    mask, so every query sees exactly the quantized KV the step-by-step decode would show it;
    the only difference is when a scale grows (one store here, several there: powers of two,
    exact except for E4M3 subnormals). Log-softmax [len(text) - prompt_len, V]."""
    seq = ForcedSequence(runner, text_ids[:prompt_len])
    out = [seq.prefill(), decode_step([seq], [text_ids[prompt_len]])]
    rest = text_ids[prompt_len + 1 : -1]
    if rest:
        req, runner_ = seq.req, seq.runner
        req.output_ids.extend(rest)
        slots = runner_.allocator.alloc(len(rest), seq.branch_tier)
        assert slots is not None, "KV pool too small"
        logits = runner_.forward_mixed([req], [len(rest)], [slots], [], None, [(0, len(rest))])
        req.kv_len += len(rest)
        out.append(logits[1:])
    seq.free()
    return torch.log_softmax(torch.cat(out).float(), -1)


def prefill_logprobs(runner, text_ids: list[int], prompt_len: int) -> torch.Tensor:
    """The whole passage prefilled as a prompt: log-softmax rows predicting tokens prompt_len.."""
    seq = ForcedSequence(runner, text_ids)
    logits = seq.prefill(all_logits=True)[prompt_len - 1 : -1]
    seq.free()
    return torch.log_softmax(logits.float(), -1)


def tf_metrics(ref: torch.Tensor, lp: torch.Tensor, targets: list[int]) -> dict:
    """Mean KL(ref || lp) in nats per position, and perplexity of targets under lp."""
    kl = (ref.exp() * (ref - lp)).sum(-1)
    nll = -lp.gather(1, torch.tensor(targets)[:, None])[:, 0]
    return {
        "kl": float(kl.mean()),
        "kl_p99": float(kl.quantile(0.99)),
        "kl_max": float(kl.max()),
        "ppl": math.exp(float(nll.mean())),
        "positions": len(targets),
    }


def method_check(extend: torch.Tensor, step: torch.Tensor) -> dict:
    """How far the one-extend teacher forcing is from the step-by-step decode path."""
    kl = (step.exp() * (step - extend)).sum(-1)
    return {
        "positions": len(step),
        "mean_kl_step_vs_extend": float(kl.mean()),
        "max_abs_logprob_diff": float((step - extend).abs().max()),
        "argmax_agree": float((step.argmax(-1) == extend.argmax(-1)).float().mean()),
    }


def agreement(ref: list[list[int]], outs: list[list[int]], max_new: int) -> dict:
    """Tokens before the first divergence (identical outputs: max_new) and exact-match rate."""
    div = []
    for a, b in zip(ref, outs):
        if a == b:
            div.append(max_new)
            continue
        div.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))))
    exact = sum(a == b for a, b in zip(ref, outs)) / len(ref)
    return {
        "mean_tokens_to_divergence": sum(div) / len(div),
        "exact_match": exact,
        "divergence": div,
    }


# ---------------------------------------------------------------- per config
def run_config(args, name: str, kv: dict, prompts, text_ids) -> dict:
    from radixgen.runtime.engine import Engine

    t0 = time.perf_counter()
    eng = Engine(args.model_path, dtype="float32", max_total_tokens=args.max_total_tokens, **kv)
    runner = eng.scheduler.runner
    res = {"kv": kv, "kv_dtypes": list(runner.kv_dtypes), "capacity": list(runner.capacity)}
    window_kv = eng.scheduler.kv if eng.scheduler.kv.window else None
    try:
        if window_kv is not None:  # the window moves KV between steps: step by step
            res["forced"] = forced_logprobs(
                runner, text_ids, args.tf_prompt_len, window_kv, args.win_tf_tokens
            )
        else:
            res["forced"] = branch_extend_logprobs(runner, text_ids, args.tf_prompt_len)
            if args.check_tokens:  # the step-by-step decode path, on the first positions
                step = forced_logprobs(
                    runner, text_ids, args.tf_prompt_len, None, args.check_tokens
                )
                res["method_check"] = method_check(res["forced"][: len(step)], step)
        res["prefill"] = prefill_logprobs(runner, text_ids, args.tf_prompt_len)
        params = {"max_new_tokens": args.max_new_tokens, "temperature": 0}
        outs = eng.generate(input_ids=prompts, sampling_params=params)
        res["outputs"] = [list(o["output_ids"]) for o in outs]
    finally:
        eng.shutdown()
    res["seconds"] = time.perf_counter() - t0
    _log(f"{name}: {res['seconds']:.0f} s")
    return res


def reduce_logprobs(base: dict, r: dict, targets: list[int]) -> None:
    """Replace r's [positions, V] log-prob tensors by metrics against base (bf16) in place."""
    for key in ("forced", "prefill"):
        n = len(r[key])  # a windowed row may cover only the first --win-tf-tokens positions
        ref = base[key][:n]
        r[key + "_metrics"] = tf_metrics(ref, r[key], targets[:n])
        r[key + "_metrics"]["ppl_ref"] = tf_metrics(ref, ref, targets[:n])["ppl"]
    if r is not base:
        for key in ("forced", "prefill"):
            r.pop(key, None)


def summarize(raw: dict, max_new: int) -> list[dict]:
    base = raw["bf16"]
    rows = []
    for name, r in raw.items():
        rows.append(
            {
                "config": name,
                "kv_dtypes": r["kv_dtypes"],
                "capacity": r["capacity"],
                **agreement(base["outputs"], r["outputs"], max_new),
                **r["forced_metrics"],
                "prefill": r["prefill_metrics"],
                "method_check": r.get("method_check"),
            }
        )
    for row in rows:  # against bf16 on the same positions
        row["ppl_delta_pct"] = 100 * (row["ppl"] / row["ppl_ref"] - 1)
    return rows


def table(rows: list[dict], max_new: int) -> str:
    lines = [
        f"| config | KV (prefix / branch) | mean tokens to divergence | exact-match@{max_new} "
        "| KL(bf16 ‖ config) nats | perplexity | ppl Δ vs bf16 | TF positions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {' / '.join(r['kv_dtypes'])} | {r['mean_tokens_to_divergence']:.1f} "
            f"| {100 * r['exact_match']:.1f}% | {r['kl']:.5f} | {r['ppl']:.4f} | {r['ppl_delta_pct']:+.3f}% "
            f"| {r['positions']} |"
        )
    lines += [
        "",
        "whole passage prefilled as a prompt (mixed = FP8 prefix pool only):",
        "| config | KL | perplexity |",
        "|---|---|---|",
    ]
    lines += [
        f"| {r['config']} | {r['prefill']['kl']:.5f} | {r['prefill']['ppl']:.4f} |"
        for r in rows
        if "prefill" in r
    ]
    checks = [(r["config"], r["method_check"]) for r in rows if r.get("method_check")]
    if checks:
        lines += [
            "",
            "one-extend vs step-by-step teacher forcing (first positions): "
            + "; ".join(
                f"{n} KL {c['mean_kl_step_vs_extend']:.1e}, max |Δlogprob| {c['max_abs_logprob_diff']:.1e}"
                for n, c in checks
            ),
        ]
    return "\n".join(lines)


def goals(rows: list[dict]) -> dict:
    by = {r["config"]: r for r in rows}
    out = {}
    if "fp8" in by:
        out["fp8 ppl within 0.5% of bf16"] = abs(by["fp8"]["ppl_delta_pct"]) <= GOALS["fp8_ppl_pct"]
    for name in [n for n in by if n.startswith("mixed")]:
        r = by[name]
        out[f"{name} ppl within 3%"] = abs(r["ppl_delta_pct"]) <= GOALS["mixed_ppl_pct"]
        out[f"{name} exact-match >= 90%"] = r["exact_match"] >= GOALS["mixed_exact"]
    return out


# ---------------------------------------------------------------- main
def machine_info() -> dict:
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
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "commit": git.stdout.strip() + (" (radixgen/ has uncommitted changes)" if dirty else ""),
        "load_avg_at_start": os.getloadavg(),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }


def build_inputs(args, tok):
    prompts = kq.PROMPTS[: args.num_prompts] if args.num_prompts else kq.PROMPTS
    ids = []
    for p in prompts:
        text = tok.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        ids.append(tok.encode(text, add_special_tokens=False))
    text_ids = tok.encode(kq.PASSAGE, add_special_tokens=False)
    if args.text_tokens:
        text_ids = text_ids[: args.text_tokens]
    return ids, text_ids


def main(argv=None):
    args = parse_args(argv)
    from radixgen.runtime.engine import load_tokenizer
    from radixgen.runtime.model.embedded import default_model_path

    model_path = Path(args.model_path) if args.model_path else default_model_path()
    tok = load_tokenizer(model_path)
    prompts, text_ids = build_inputs(args, tok)
    info = machine_info()
    _log(
        f"{len(prompts)} prompts ({sum(map(len, prompts))} tokens), passage {len(text_ids)} tokens, "
        f"load {info['load_avg_at_start'][0]:.2f}"
    )
    torch.manual_seed(0)
    targets, raw = text_ids[args.tf_prompt_len :], {}
    wanted = ["bf16"] + [
        n.strip() for n in args.configs.split(",") if n.strip() not in ("", "bf16")
    ]
    unknown = [n for n in wanted if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
    configs = {n: dict(CONFIGS[n]) for n in wanted}
    for name, kv in configs.items():
        if name.startswith("mixed+win"):
            kv["kv_branch_window"] = args.window
    if args.window == "none":
        configs = {n: kv for n, kv in configs.items() if not n.startswith("mixed+win")}
    for name, kv in configs.items():  # bf16 first: the others are compared with it as they end
        raw[name] = run_config(args, name, kv, prompts, text_ids)
        reduce_logprobs(raw["bf16"], raw[name], targets)
    rows = summarize(raw, args.max_new_tokens)
    report = table(rows, args.max_new_tokens)
    met = goals(rows)
    print(report)
    print("\ngoals: " + "; ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in met.items()))
    out = args.json or HERE / "results" / f"kv-quality-{dt.date.today().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": info,
        "model": str(model_path),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "num_prompts": len(prompts),
        "prompt_kinds": kq.KINDS[: len(prompts)],
        "passage_tokens": len(text_ids),
        "rows": rows,
        "goals": met,
        "seconds": {n: r["seconds"] for n, r in raw.items()},
        "outputs": {n: r["outputs"] for n, r in raw.items()},
        "table": report,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    _log(f"wrote {out}")


if __name__ == "__main__":
    main()

"""vLLM CPU with and without n-gram speculation on bench_speculative.py's workloads (batch 1,
greedy, unconstrained); executed in vLLM's venv by bench_speculative.py --vllm.

Usage: ``python _vllm_spec_runner.py SPEC.json`` with model, max_new, k, warmup and workloads
({name: [token-id lists]}). Prints one JSON object on stdout ({name: {off_tok_s, on_tok_s,
speedup, accept_length}}); vLLM's own output goes to stderr.
"""

import json
import os
import sys
import time


def _metrics(llm) -> dict:
    """vLLM's spec-decode counters (names vary by version), {} when it exposes none."""
    try:
        return {
            m.name: getattr(m, "value", None) for m in llm.get_metrics() if "spec_decode" in m.name
        }
    except Exception:  # noqa: BLE001 - optional
        return {}


def _time(llm, prompts, params) -> tuple[int, float]:
    from vllm.inputs import TokensPrompt

    tokens, start = 0, time.perf_counter()
    for ids in prompts:
        out = llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
        tokens += len(out[0].outputs[0].token_ids)
    return tokens, time.perf_counter() - start


def main() -> None:
    spec = json.load(open(sys.argv[1]))
    stdout = os.dup(1)
    os.dup2(2, 1)  # vLLM prints to stdout: keep ours clean
    from vllm import LLM, SamplingParams

    params = SamplingParams(temperature=0, max_tokens=spec["max_new"])
    common = dict(
        model=spec["model"],
        dtype="float32",
        enable_prefix_caching=True,
        block_size=32,
        max_model_len=2048,
    )
    result = {}
    for mode in ("off", "on"):
        extra = (
            {}
            if mode == "off"
            else {
                "speculative_config": {
                    "method": "ngram",
                    "num_speculative_tokens": spec["k"],
                    "prompt_lookup_max": 4,
                    "prompt_lookup_min": 1,
                }
            }
        )
        try:
            llm = LLM(**common, **extra)
        except Exception as exc:  # noqa: BLE001 - reported, e.g. speculation unsupported on the CPU
            result[f"{mode}_error"] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        for name, prompts in spec["workloads"].items():
            _time(llm, spec["warmup"][name], params)
            before = _metrics(llm)
            tokens, seconds = _time(llm, prompts, params)
            row = result.setdefault(name, {})
            row[f"{mode}_tok_s"] = tokens / seconds
            if mode == "on":
                after = _metrics(llm)
                row["spec_counters"] = {
                    k: (after[k] - before.get(k, 0)) if isinstance(after[k], (int, float)) else None
                    for k in after
                }
        del llm
    for row in result.values():
        if isinstance(row, dict) and "on_tok_s" in row and "off_tok_s" in row:
            row["speedup"] = row["on_tok_s"] / row["off_tok_s"]
    os.write(stdout, (json.dumps(result) + "\n").encode())


if __name__ == "__main__":
    main()

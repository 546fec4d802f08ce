"""Runs the offline workloads on vLLM's CPU backend; executed by bench_offline.py in vLLM's venv.

Usage: ``python _vllm_runner.py SPEC.json``. SPEC holds model, dtype, block_size, max_model_len,
max_new_tokens, repeats, warmup (token-id lists) and workloads ({name: [token-id lists]}).
Prints one JSON object on stdout; everything else (vLLM's logs, prints of its engine process)
goes to stderr, because fd 1 is pointed at stderr before vLLM is imported.

Also home of OtherCpu (stdlib only), the contention probe that bench_offline.py imports too.
"""

import json
import os
import sys
import time


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine spent busy (not idle/iowait) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of process root and its live descendants."""
    parent, cpu = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    tree, todo = {root}, [root]
    while todo:
        cur = todo.pop()
        kids = [p for p, pp in parent.items() if pp == cur and p not in tree]
        tree.update(kids)
        todo += kids
    return sum(cpu.get(p, 0.0) for p in tree)


class OtherCpu:
    """`with OtherCpu() as oc:` ... then oc.fraction = share of the machine's CPU that other
    processes used meanwhile (0 on a quiet machine; timings are suspect beyond ~0.05)."""

    def __enter__(self):
        self.own0 = _tree_cpu_s(os.getpid())
        self.t0, self.busy0 = time.perf_counter(), _busy_cpu_s()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        other = (_busy_cpu_s() - self.busy0) - (_tree_cpu_s(os.getpid()) - self.own0)
        self.fraction = max(0.0, other) / (wall * os.cpu_count())


def _claim_stdout():
    """Keep the real stdout for the result; route fd 1 (inherited by child processes) to stderr."""
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(result_fd, "w")


def _prefix_counters(llm) -> dict | None:
    """vllm:prefix_cache_queries / _hits from the metrics snapshot, or None if unavailable."""
    try:
        metrics = llm.get_metrics()
    except Exception as exc:  # stats disabled or API changed
        print(f"[runner] get_metrics failed: {exc!r}", file=sys.stderr)
        return None
    found = {}
    for m in metrics:
        if m.name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"):
            found[m.name.split("_")[-1]] = found.get(m.name.split("_")[-1], 0) + m.value
    return found if len(found) == 2 else None


def _delta(before, after):
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in after}


def _timed_generate(llm, prompts, params):
    from vllm.inputs import TokensPrompt

    reqs = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    before = _prefix_counters(llm)
    with OtherCpu() as other:
        t0 = time.perf_counter()
        outs = llm.generate(reqs, params, use_tqdm=False)
        seconds = time.perf_counter() - t0
    counters = _delta(before, _prefix_counters(llm))
    return seconds, outs, counters, other.fraction


def run_workload(llm, prompts, params, repeats):
    times, other, counters = [], [], None
    for r in range(repeats):
        if not llm.reset_prefix_cache():
            print("[runner] reset_prefix_cache returned False", file=sys.stderr)
        seconds, outs, ctr, oth = _timed_generate(llm, prompts, params)
        times.append(seconds)
        other.append(oth)
        if r == 0:
            first, counters = outs, ctr
    return {
        "seconds": times,
        "other_cpu": other,
        "output_ids": [list(o.outputs[0].token_ids) for o in first],
        "prompt_tokens": [len(o.prompt_token_ids) for o in first],
        "cached_tokens": [o.num_cached_tokens for o in first],
        "metrics_prefix_cache": counters,
    }


def main():
    result_out = _claim_stdout()
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    import vllm
    from vllm import LLM, SamplingParams

    t0 = time.perf_counter()
    llm = LLM(
        model=spec["model"],
        dtype=spec["dtype"],
        enable_prefix_caching=True,
        block_size=spec["block_size"],
        max_model_len=spec["max_model_len"],
        disable_log_stats=False,
        seed=0,
    )
    startup = time.perf_counter() - t0
    params = SamplingParams(temperature=0, max_tokens=spec["max_new_tokens"], ignore_eos=True)
    warm = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    llm.generate([{"prompt_token_ids": p} for p in spec["warmup"]], warm, use_tqdm=False)
    results = {
        name: run_workload(llm, prompts, params, spec["repeats"])
        for name, prompts in spec["workloads"].items()
    }
    json.dump(
        {"vllm_version": vllm.__version__, "startup_s": startup, "results": results}, result_out
    )
    result_out.write("\n")
    result_out.flush()


if __name__ == "__main__":
    main()

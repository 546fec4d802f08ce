"""Weight versions: the time to load, validate and activate a new version and to roll back, and
decode throughput and p99 inter-token latency while a swap (update, then rollback) happens,
against steady state in the same run.

In-process (the Engine's scheduler, driven step by step at a fixed concurrency), so the
figures are the runtime's own, without HTTP. The new version is a copy of the model with its
weights perturbed by 1% noise (written to a temp folder), or, with --load-format dummy, dummy
weights of another seed. Phases: `steady` (a window with no weight operation), then `swap` (a
window of the same length in which an update is started; once it serves, a rollback follows).
Then --rollbacks rollbacks back and forth with no load time the bare switch.

    .venv/bin/python benchmarks/bench_weights.py                      # CPU, embedded model
    .venv/bin/python benchmarks/bench_weights.py --shape llama3-8b --dtype bfloat16 \\
        --concurrency 32 --max-total-tokens 65536 --window-s 20       # GPU: standby on the device
    ... --weight-standby pinned_host                        # GPU: the pinned-host exchange
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq
from radixgen.runtime.model.embedded import default_model_path
from radixgen.runtime.weights.manager import UpdateSource

PROMPT = "Write a long story about a lighthouse keeper and the ships that pass by at night."


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model-path", default=None, help="HF folder (default: the embedded SmolLM2-135M)"
    )
    p.add_argument(
        "--shape",
        default=None,
        choices=("llama3-8b",),
        help="a config folder of this shape (embedded tokenizer) instead of --model-path; "
        "implies --load-format dummy",
    )
    p.add_argument("--load-format", default="auto", choices=("auto", "dummy"))
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-total-tokens", type=int, default=8192)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument(
        "--max-new-tokens", type=int, default=64, help="per request; finished ones are replaced"
    )
    p.add_argument(
        "--window-s", type=float, default=10.0, help="length of the steady and the swap window"
    )
    p.add_argument(
        "--rollbacks", type=int, default=10, help="bare rollbacks timed after the windows"
    )
    p.add_argument("--weight-standby", default="auto", choices=("auto", "device", "pinned_host"))
    p.add_argument("--out", default=None, help="write the results as JSON here")
    return p.parse_args(argv)


def perturbed_copy(src: Path, dst: Path, scale: float = 0.01) -> Path:
    """`src`'s config, tokenizer and weights * (1 + scale * noise) in `dst`."""
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if (
            f.is_file()
            and not f.name.endswith(".safetensors")
            and f.name != "model.safetensors.index.json"
        ):
            (dst / f.name).write_bytes(f.read_bytes())
    gen = torch.Generator().manual_seed(1)
    weights = {}
    for path in sorted(src.glob("*.safetensors")):
        for name, t in load_file(str(path)).items():
            noise = torch.randn(t.shape, generator=gen, dtype=torch.float32) * scale
            weights[name] = (t.float() * (1 + noise)).to(t.dtype).contiguous()
    save_file(weights, str(dst / "model.safetensors"))
    return dst


def shape_folder(folder: Path) -> Path:
    """An HF folder with a benchmark shape's config.json and the embedded model's tokenizer."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from model_shapes import LLAMA3_8B

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(LLAMA3_8B))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).write_bytes((default_model_path() / name).read_bytes())
    return folder


class Load:
    """Keeps `concurrency` greedy requests decoding; records each token's arrival per request."""

    def __init__(self, eng: Engine, concurrency: int, max_new_tokens: int):
        self.eng, self.sched = eng, eng.scheduler
        self.ids = eng.tokenizer.encode(PROMPT, add_special_tokens=False)
        self.params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0, ignore_eos=True)
        self.open: dict[str, float] = {}  # rid -> its last token's time
        self.versions: dict[str, set] = {}
        for _ in range(concurrency):
            self._submit()

    def _submit(self) -> None:
        rid = uuid.uuid4().hex
        self.sched.handle(GenerateReq(rid, self.ids, self.params))
        self.open[rid] = time.perf_counter()
        self.versions[rid] = set()

    def run(self, seconds: float, during=None) -> dict:
        """Step for `seconds` (and on until `during.done`); `during(now)` is called before every
        step. Tokens/s and inter-token latencies."""
        itls, tokens, start = [], 0, time.perf_counter()
        while (now := time.perf_counter()) - start < seconds or (
            during is not None and not during.done()
        ):
            if during is not None:
                during(now)
            for out in self.sched.step():
                t = time.perf_counter()
                if out.token_ids and out.rid in self.open:
                    if out.completion_tokens > len(out.token_ids):  # not the first token: an ITL
                        itls.extend(
                            [(t - self.open[out.rid]) / len(out.token_ids)] * len(out.token_ids)
                        )
                    self.open[out.rid] = t
                    tokens += len(out.token_ids)
                    self.versions[out.rid].add(out.weight_version)
                if out.finish is not None and out.rid in self.open:
                    del self.open[out.rid]
                    self._submit()
        elapsed = time.perf_counter() - start
        itls.sort()
        return {
            "tokens_per_s": tokens / elapsed,
            "itl_p50_ms": 1e3 * itls[len(itls) // 2] if itls else None,
            "itl_p99_ms": 1e3 * itls[int(len(itls) * 0.99)] if itls else None,
            "itl_max_ms": 1e3 * itls[-1] if itls else None,
            "tokens": tokens,
        }


def swap_driver(eng: Engine, source: UpdateSource, log: dict):
    """A `during` callback: start the update at once, roll back once it serves."""
    gate = eng.scheduler.gate
    state = {"phase": "start"}

    def during(now: float) -> None:
        for answer in gate.take_answers():
            if answer.error is not None:
                raise RuntimeError(f"weight operation failed: {answer.error.message}")
            log[state["phase"]] = answer.result
            if state["phase"] == "update":
                state["phase"] = "rollback"
                gate.rollback("rollback")
            else:
                state["phase"] = "done"
        if state["phase"] == "start":
            state["phase"] = "update"
            gate.update("update", source)

    during.done = lambda: state["phase"] == "done"
    return during


def main(argv=None) -> dict:
    args = parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    model_path = Path(args.model_path) if args.model_path else default_model_path()
    if args.shape is not None:
        model_path, args.load_format = shape_folder(Path(tmp.name) / args.shape), "dummy"
    eng = Engine(
        str(model_path),
        load_format=args.load_format,
        dtype=args.dtype,
        max_total_tokens=args.max_total_tokens,
        max_running_requests=max(args.concurrency, 1),
        weight_standby=args.weight_standby,
    )
    if args.load_format == "dummy":
        source = UpdateSource("bench-v1", str(model_path), "dummy")
    else:
        source = UpdateSource("bench-v1", str(perturbed_copy(model_path, Path(tmp.name) / "v1")))
    load = Load(eng, args.concurrency, args.max_new_tokens)
    load.run(min(args.window_s, 3.0))  # warm-up (CUDA graphs of the batch sizes seen)
    steady = load.run(args.window_s)
    ops: dict = {}
    swap = load.run(args.window_s, swap_driver(eng, source, ops))
    mixed = sum(len(v) > 1 for v in load.versions.values())
    bare = [eng.rollback_weights()["rollback_s"] for _ in range(args.rollbacks)]
    update, rollback = ops.get("update", {}), ops.get("rollback", {})
    result = {
        "device": str(eng.scheduler.runner.device),
        "model": str(model_path),
        "load_format": args.load_format,
        "concurrency": args.concurrency,
        "weight_bytes": eng.scheduler.runner.weight_bytes,
        "placement": update.get("placement"),
        "steady": steady,
        "swap": swap,
        "load_s": update.get("load_s"),
        "validate_s": update.get("validate_s"),
        "drain_s": update.get("drain_s"),
        "activate_s": update.get("activate_s"),
        "rollback_s": rollback.get("rollback_s"),
        "rollback_drain_s": rollback.get("drain_s"),
        "bare_rollback_ms": {"median": 1e3 * statistics.median(bare), "max": 1e3 * max(bare)}
        if bare
        else None,
        "responses_mixing_versions": mixed,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    eng.shutdown()
    tmp.cleanup()
    return result


if __name__ == "__main__":
    main()

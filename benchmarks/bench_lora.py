"""Multi-LoRA decode throughput: 64 concurrent requests spread over 8 rank-16 adapters against
the base model alone on the same engine, and base-model requests on a LoRA-enabled engine
against an engine without LoRA, all in one run (so each ratio has its own same-run baseline).

In-process (the Engine's scheduler), greedy, ignore_eos, every request the same length. Decode
throughput counts the tokens generated once every request of a round has its first token (the
prefills are done) until the round ends, over that time. Rounds alternate between the variants
(--repeats each) and the median is reported. Adapters are random (A, B ~ N(0, 0.01^2)) over all
seven projections, written in PEFT format to a temp folder.

    .venv/bin/python benchmarks/bench_lora.py                     # CPU, embedded model
    python benchmarks/bench_lora.py --shape llama3-8b --dtype bfloat16 --max-total-tokens 65536 \\
        --max-new-tokens 128                                      # GPU, dummy weights
JSON goes to --out, or to $OUT/bench_lora.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
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
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.embedded import default_model_path

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model-path", default=None, help="HF folder (default: embedded SmolLM2)")
    p.add_argument("--shape", default=None, choices=("llama3-8b",), help="implies dummy weights")
    p.add_argument("--load-format", default="auto", choices=("auto", "dummy"))
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-total-tokens", type=int, default=16384)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--num-adapters", type=int, default=8)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    return p.parse_args(argv)


def write_adapters(root: Path, arch: ModelArch, num: int, rank: int, dtype: torch.dtype) -> dict:
    """`num` random PEFT adapters of `rank` over every projection, {name: folder}."""
    from safetensors.torch import save_file

    h, q, kv, inter = arch.hidden_size, arch.q_size, arch.kv_size, arch.intermediate_size
    shapes = {"q_proj": (q, h), "k_proj": (kv, h), "v_proj": (kv, h), "o_proj": (h, q)}
    shapes |= {"gate_proj": (inter, h), "up_proj": (inter, h), "down_proj": (h, inter)}
    paths = {}
    for i in range(num):
        gen = torch.Generator().manual_seed(i)
        tensors = {}
        for layer in range(arch.num_layers):
            for target in TARGETS:
                out, inp = shapes[target]
                block = (
                    "mlp" if target.endswith(("gate_proj", "up_proj", "down_proj")) else "self_attn"
                )
                key = f"base_model.model.model.layers.{layer}.{block}.{target}"
                a = torch.randn(rank, inp, generator=gen) * 0.01
                b = torch.randn(out, rank, generator=gen) * 0.01
                tensors[f"{key}.lora_A.weight"] = a.to(dtype)
                tensors[f"{key}.lora_B.weight"] = b.to(dtype)
        folder = root / f"adapter{i}"
        folder.mkdir(parents=True)
        save_file(tensors, str(folder / "adapter_model.safetensors"))
        config = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": TARGETS}
        (folder / "adapter_config.json").write_text(json.dumps(config))
        paths[f"adapter{i}"] = str(folder)
    return paths


def decode_round(eng: Engine, args, adapters: list[str | None]) -> float:
    """Decode tokens/s of one round of len(adapters) concurrent requests."""
    sched = eng.scheduler
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0, ignore_eos=True)
    vocab = sched.runner.arch.vocab_size
    first: set[str] = set()
    open_rids = set()
    for i, adapter in enumerate(adapters):
        rid = uuid.uuid4().hex
        ids = [
            (7919 * (i * args.prompt_len + j)) % (vocab - 10) + 5 for j in range(args.prompt_len)
        ]
        sched.handle(GenerateReq(rid, ids, params, adapter))
        open_rids.add(rid)
    tokens_after, start = 0, None
    while open_rids:
        for out in sched.step():
            if start is not None:
                tokens_after += len(out.token_ids)
            elif out.token_ids:
                first.add(out.rid)
            if out.finish is not None:
                open_rids.discard(out.rid)
        if start is None and len(first) == len(adapters):
            start = time.perf_counter()
    if start is None or tokens_after == 0:
        raise RuntimeError("the round ended before every request decoded")
    return tokens_after / (time.perf_counter() - start)


def engine_kwargs(args) -> dict:
    kwargs = {"dtype": args.dtype, "max_total_tokens": args.max_total_tokens}
    kwargs |= {"max_running_requests": max(args.concurrency, 64)}
    if args.load_format == "dummy":
        kwargs["load_format"] = "dummy"
    return kwargs


def model_folder(args, tmp: Path) -> Path:
    if args.shape is None:
        return Path(args.model_path) if args.model_path else default_model_path()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from model_shapes import LLAMA3_8B

    args.load_format = "dummy"
    folder = tmp / "shape"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA3_8B))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).write_bytes((default_model_path() / name).read_bytes())
    return folder


def median_rounds(eng: Engine, args, variants: dict[str, list]) -> dict[str, float]:
    """Alternate the variants' rounds (after one warm-up round each); median tokens/s each."""
    for adapters in variants.values():
        decode_round(eng, args, adapters)
    runs = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, adapters in variants.items():
            runs[name].append(decode_round(eng, args, adapters))
    return {name: statistics.median(v) for name, v in runs.items()}


def free(eng: Engine) -> None:
    eng.shutdown()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv=None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = model_folder(args, tmp)
        arch = ModelArch.from_folder(folder)
        n = args.concurrency
        plain = Engine(str(folder), **engine_kwargs(args))
        device, dtype = plain.scheduler.runner.device, plain.scheduler.runner.dtype
        no_lora = median_rounds(plain, args, {"base": [None] * n})["base"]
        free(plain)
        paths = write_adapters(tmp / "adapters", arch, args.num_adapters, args.rank, dtype)
        names = list(paths)
        eng = Engine(
            str(folder),
            enable_lora=True,
            lora_paths=paths,
            max_loras_per_batch=args.num_adapters,
            max_lora_rank=args.rank,
            **engine_kwargs(args),
        )
        rates = median_rounds(
            eng, args, {"base": [None] * n, "lora": [names[i % len(names)] for i in range(n)]}
        )
        free(eng)
    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "model": args.shape or str(folder),
        "dtype": str(dtype).removeprefix("torch."),
        "concurrency": n,
        "num_adapters": args.num_adapters,
        "rank": args.rank,
        "max_new_tokens": args.max_new_tokens,
        "decode_tok_s": {
            "lora_8_adapters": rates["lora"],
            "base_on_lora_engine": rates["base"],
            "base_without_lora": no_lora,
        },
        "lora_over_base_same_engine": rates["lora"] / rates["base"],
        "base_lora_engine_over_no_lora": rates["base"] / no_lora,
    }
    print(json.dumps(result, indent=2))
    out = args.out or (
        os.path.join(os.environ["OUT"], "bench_lora.json") if "OUT" in os.environ else None
    )
    if out:
        Path(out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""Multi-head latent attention on the GPU: the MLA decode kernel's bandwidth, end-to-end decode of
the DeepSeek-V2-Lite shape (dummy weights) next to its byte floor, and KV bytes per token.

Sections, each on its own (one failing leaves the others' results):
  device   copy bandwidth of a 512 MiB bf16 clone, measured in this process (the reference);
  kv_bytes KV bytes per token of the V2-Lite shape per pool format, against Llama-3-8B's GQA;
  kernel   kernels/mla_decode.py over one layer's latent pool (bf16, fp8_e4m3, nvfp4) at batch
           1 and 64 x 2k context, 16 heads: bytes read / time against the copy bandwidth; and
           flashinfer's BatchMLAPagedAttentionWrapper on the same bf16 latents where it imports;
  decode   Engine(load_format="dummy") at the V2-Lite shape: decode tokens/s at batch 1 and 64
           with 2k-token prompts, next to the byte floor of a step: every non-expert weight
           (attention, dense first layer, shared experts, router, lm_head; not the embedding
           table, of which a step reads B rows), the routed experts the step's tokens actually
           picked (counted in separate steps, so the count's host syncs stay out of the timing),
           and the batch's KV.

    python benchmarks/bench_mla.py --tokenizer <embedded model folder> [--json out.json]
    python benchmarks/bench_mla.py --tokenizer <folder> --dry-run   # CPU, tiny shapes

JSON goes to --json, or to $OUT/bench_mla.json where $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # this tree's radixgen

import torch  # noqa: E402
from bench_agents import gpu_model_folder  # noqa: E402
from bench_gpu_serving import Driver, pct, random_ids  # noqa: E402
from model_shapes import DEEPSEEK_TINY, DEEPSEEK_V2_LITE, LLAMA3_8B  # noqa: E402

KINDS = ("bf16", "fp8_e4m3", "nvfp4")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True, help="a folder with tokenizer files")
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--steps", type=int, default=32, help="decode steps per request")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes: checks the script")
    p.add_argument("--json")
    return p.parse_args(argv)


def median_s(fn, iters: int = 30) -> float:
    """Median seconds of fn: CUDA-event timed on a GPU, host clock on the CPU."""
    if torch.cuda.is_available():
        from bench_quant_gpu import cuda_median_s

        return cuda_median_s(fn, iters)
    fn()
    times = []
    for _ in range(max(iters // 10, 3)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def device_row(device: str) -> dict:
    x = torch.randn(256 * 1024 * 1024 if device == "cuda" else 1 << 22, device=device).bfloat16()
    copy_s = median_s(x.clone)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return {"card": name, "copy_bandwidth": 2 * x.numel() * 2 / copy_s}


def kv_bytes_rows(config: dict) -> dict:
    from radixgen.radix.quant_kv_pool import kv_bytes_per_token
    from radixgen.runtime.model.arch import ModelArch

    out = {}
    for name, cfg in (("mla", config), ("llama3_8b", LLAMA3_8B)):
        arch = ModelArch.from_config(cfg)
        out[name] = {
            kind: kv_bytes_per_token(kind, arch.num_layers, *arch.pool_shape, torch.bfloat16)
            for kind in KINDS
        }
    out["llama3_8b_over_mla"] = {k: out["llama3_8b"][k] / out["mla"][k] for k in KINDS}
    return out


def latent_pool(kind: str, slots: int, rank: int, rope: int, device: str):
    """One layer's latent pool of `kind`, filled with random latents: (KVBuffers, raw bf16
    latents [slots, rank + rope] for flashinfer)."""
    from radixgen.radix.latent_pool import LatentPool, latent_groups
    from radixgen.radix.quant_kv_pool import make_kv_pool

    groups, width = latent_groups(rank, rope)
    pool = make_kv_pool(kind, slots, 1, groups, width, torch.bfloat16, device)
    view, gen = LatentPool(pool, groups, width), torch.Generator(device).manual_seed(0)
    latents = torch.randn(slots, rank + rope, generator=gen, device=device).bfloat16()
    for lo in range(0, slots, 1 << 16):
        part = torch.arange(lo, min(slots, lo + (1 << 16)), device=device)
        view.store(0, part, latents[part, None])
    return pool.kv_buffers(0), latents


def kernel_rows(config: dict, batches: list[int], ctx: int, copy_bw: float, device: str) -> list:
    rows = []
    for kind in KINDS:
        for batch in batches:
            rows.append(kernel_row(config, kind, batch, ctx, copy_bw, device))
            print("kernel", json.dumps(rows[-1]), flush=True)
    return rows


def kernel_row(config: dict, kind: str, batch: int, ctx: int, copy_bw: float, device: str):
    """One MLA decode call of `batch` requests x ctx latents of `kind` (16 heads, V2-Lite's)."""
    from radixgen.kernels import mla_decode as mla
    from radixgen.radix.quant_kv_pool import kv_bytes_per_token

    rank, rope, heads = config["kv_lora_rank"], config["qk_rope_head_dim"], 16
    sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else 4
    fn = mla.mla_decode if device == "cuda" else mla.mla_decode_ref
    kv, latents = latent_pool(kind, batch * ctx, rank, rope, device)
    indptr = torch.arange(batch + 1, device=device) * ctx
    indices = torch.arange(batch * ctx, device=device)
    q = torch.randn(batch, heads, rank + rope, device=device).bfloat16()
    splits = mla.decode_splits(batch, heads, ctx, sms)
    secs = median_s(lambda: fn(q, kv, indptr, indices, 192**-0.5, rank, splits))
    latent_bytes = kv_bytes_per_token(kind, 1, kv.num_kv_heads, kv.head_dim, q.dtype)
    moved = batch * ctx * latent_bytes + q.numel() * 2 + batch * heads * rank * 2
    row = {"kind": kind, "batch": batch, "ctx": ctx, "splits": splits, "us": 1e6 * secs}
    row.update(gb_s=moved / secs / 1e9, of_copy=moved / secs / copy_bw)
    if kind == "bf16":
        row["flashinfer"] = flashinfer_row(q, latents, indptr, indices, rank, moved, copy_bw)
    return row


def flashinfer_row(q, latents, indptr, indices, rank: int, moved: int, copy_bw: float) -> dict:
    from radixgen.kernels import flashinfer_ops

    if not flashinfer_ops.available():
        return {"skipped": "flashinfer is not importable"}
    op = flashinfer_ops.FlashInferMLADecode(q.device)
    op.plan(indptr, indices, q.shape[1], rank, q.shape[2] - rank, q.dtype, 192**-0.5)
    whole = latents[:, None]
    secs = median_s(lambda: op.run(q, whole[..., :rank], whole[..., rank:]))
    return {"us": 1e6 * secs, "gb_s": moved / secs / 1e9, "of_copy": moved / secs / copy_bw}


def weight_split(arch) -> tuple[float, float, float]:
    """(bytes of every weight a decode step reads whole, bytes of one routed expert of one
    layer, the embedding table's bytes) in bf16."""
    from radixgen.runtime.model.registry import param_shapes

    shapes = param_shapes(arch)
    total = sum(math.prod(s) for s in shapes.values()) * 2
    embed = math.prod(shapes["model.embed_tokens.weight"]) * 2
    expert = 3 * arch.hidden_size * arch.moe.expert_size * 2
    moe_layers = sum(arch.is_moe_layer(n) for n in range(arch.num_layers))
    return total - embed - expert * arch.moe.num_experts * moe_layers, expert, embed


def experts_touched(eng, prompts: list[list[int]], batch: int) -> float:
    """Routed experts that a decode step of `batch` requests reads, summed over the MoE layers
    (mean of a few steps; the counting syncs the host, so these steps are not timed)."""
    from radixgen.runtime.model import moe

    counts, route = [], moe.route

    def counted(logits, arch, bias=None):
        weights, ids = route(logits, arch, bias)
        if logits.shape[0] == batch:  # a decode forward's tokens
            counts.append(int(ids.unique().numel()))
        return weights, ids

    moe.route = counted
    try:
        params = {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}
        eng.generate(input_ids=prompts, sampling_params=params)
    finally:
        moe.route = route
    arch = eng.scheduler.runner.arch
    moe_layers = sum(arch.is_moe_layer(n) for n in range(arch.num_layers))
    return sum(counts) / max(len(counts), 1) * moe_layers  # counts: one per MoE layer and step


def decode_rows(folder: Path, batches: list[int], ctx: int, steps: int, copy_bw: float) -> list:
    from radixgen.runtime.engine import Engine

    rows, top = [], max(batches)
    eng = Engine(
        str(folder),
        load_format="dummy",
        dtype="bfloat16",
        context_length=ctx + steps + 64,
        max_total_tokens=top * (ctx + steps + 64) + 1024,
        max_running_requests=top,
        chunked_prefill_size=8192,
    )
    try:
        runner = eng.scheduler.runner
        dense, expert, _ = weight_split(runner.arch)
        kv_token = runner._token_bytes("auto")
        for batch in batches:
            prompts = [
                random_ids(runner.arch.vocab_size, ctx, 100 * batch + i) for i in range(batch)
            ]
            params = {"max_new_tokens": steps, "temperature": 0, "ignore_eos": True}
            eng.generate(input_ids=prompts, sampling_params=dict(params, max_new_tokens=2))
            drv = Driver(eng)
            drv.run([(0.0, p, params) for p in prompts])  # prompts cached: decode steps only
            step = drv.step_times[1:]
            mean = sum(step) / len(step)
            touched = experts_touched(eng, prompts, batch)
            floor_bytes = dense + touched * expert + batch * (ctx + steps / 2) * kv_token
            floor_s = floor_bytes / copy_bw
            row = {"batch": batch, "ctx": ctx, "tok_s": batch / mean, "step_ms": 1e3 * mean}
            row.update(step_ms_p50=1e3 * pct(step, 0.5), experts_touched=touched)
            row.update(floor_ms=1e3 * floor_s, floor_tok_s=batch / floor_s, of_floor=floor_s / mean)
            rows.append(row)
            print("decode", json.dumps(row), flush=True)
    finally:
        eng.shutdown()
    return rows


def section(results: dict, name: str, fn, *args) -> None:
    """results[name] = fn(*args), or the error (the other sections still run)."""
    try:
        results[name] = fn(*args)
    except Exception as err:  # noqa: BLE001 (a benchmark section failing is a result)
        traceback.print_exc()
        results[name] = {"error": f"{type(err).__name__}: {err}"}


def main(argv=None) -> None:
    args = parse_args(argv)
    device = "cpu" if args.dry_run or not torch.cuda.is_available() else "cuda"
    if device == "cpu":
        torch.set_num_threads(1)  # a shared CPU: several OpenMP threads each run ~100x slower
    config = DEEPSEEK_TINY if args.dry_run else DEEPSEEK_V2_LITE
    ctx = 64 if args.dry_run else args.ctx
    batches = [1, 4] if args.dry_run else [int(b) for b in args.batches.split(",")]
    steps = 4 if args.dry_run else args.steps
    results: dict = {"config": "tiny" if args.dry_run else "deepseek_v2_lite", "device": device}
    section(results, "device", device_row, device)
    copy_bw = results["device"].get("copy_bandwidth", float("nan"))
    section(results, "kv_bytes", kv_bytes_rows, DEEPSEEK_V2_LITE)
    section(results, "kernel", kernel_rows, config, batches, ctx, copy_bw, device)
    folder = gpu_model_folder(Path(args.tokenizer), config)
    section(results, "decode", decode_rows, folder, batches, ctx, steps, copy_bw)
    text = json.dumps(results, indent=1)
    print(text)
    path = args.json or (
        os.path.join(os.environ["OUT"], "bench_mla.json") if "OUT" in os.environ else None
    )
    if path:
        Path(path).write_text(text)


if __name__ == "__main__":
    main()

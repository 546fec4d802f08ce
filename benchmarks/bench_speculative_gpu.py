"""Verify-step cost of speculative decoding on one GPU: one model forward that scores a token tree
of N+1 rows per request (an EXTEND with ForwardBatch.tree_masks) against one plain decode
forward (1 token per request), Llama-3-8B shape, dummy bf16 weights, kernel attention.

    PYTHONPATH=. python benchmarks/bench_speculative_gpu.py [--json OUT] [--quick]   # an H200: ~2 min

Per request ~`--context` (1024) cached tokens. Trees of N+1 rows (root = the last accepted token,
N draft tokens), N in 4, 8, 16, 32, 64: `causal` (a chain without a mask: the kernel's causal
path), `chain` (the same chain as a tree mask) and `bushy` (a 4-ary tree in breadth-first order).
Batch 1 and 16. KV: `bf16` (one pool) and `mixed` (context in an FP8 pool, new tokens in an
NVFP4 pool: two attention passes + merge_state). Times: model.forward(batch, pool, attn) as the
runtime calls it (host-side metadata included), CUDA events around each call, median of
--iters after warm-up; the KV of the new rows is rewritten each call, the context is random.
GPU busy: the sum of kernel durations of one forward (torch.profiler), i.e. the forward without
the host's launch overhead and syncs. Floors: bytes (every weight except the embedding table once, plus each request's KV once) over
the device-to-device copy bandwidth measured in the same run, and 2 x params x rows over the bf16
matmul rate measured in the same run; the larger one is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from model_shapes import LLAMA3_8B  # noqa: E402 (benchmarks/ is the script directory)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batches", default="1,16")
    p.add_argument("--drafts", default="4,8,16,32,64", help="N: draft tokens per tree (N+1 rows)")
    p.add_argument("--trees", default="causal,chain,bushy")
    p.add_argument(
        "--kv", default="bf16,mixed", help="bf16, mixed, fp8_e4m3, nvfp4 (comma-separated)"
    )
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--layers", type=int, default=None, help="fewer layers (a smoke run)")
    p.add_argument("--quick", action="store_true", help="N in 4, 16, 64; chain and bushy only")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny model on the CPU (torch attention): a code check",
    )
    p.add_argument(
        "--decode-only", action="store_true", help="only the decode rows (no verify trees)"
    )
    p.add_argument(
        "--count-syncs",
        action="store_true",
        help="also count host syncs of one forward (torch.cuda.set_sync_debug_mode warnings)",
    )
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    if a.smoke:
        a.context, a.batches, a.drafts, a.iters = 40, "1,3", "4,8", 2
    if a.quick:
        a.drafts, a.trees = "4,16,64", "chain,bushy"
    a.batches = [int(x) for x in a.batches.split(",")]
    a.drafts = [int(x) for x in a.drafts.split(",")]
    a.trees, a.kv = a.trees.split(","), a.kv.split(",")
    return a


def tree_parents(n_rows: int, kind: str) -> list[int]:
    if kind in ("causal", "chain"):
        return [-1] + list(range(n_rows - 1))
    return [-1] + [(i - 1) // 4 for i in range(1, n_rows)]  # 4-ary, breadth-first


def tree_mask(parents: list[int]) -> tuple[torch.Tensor, list[int]]:
    """[n, n] bool ancestor-or-self mask and each node's depth."""
    n = len(parents)
    mask, depth = torch.zeros(n, n, dtype=torch.bool), [0] * n
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parents[j]
        depth[i] = int(mask[i].sum()) - 1
    return mask, depth


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure_ceilings(device) -> tuple[float, float]:
    """(copy bytes/s counting read + write, bf16 matmul FLOP/s) on random data."""
    x = torch.randn(1 << 28, device=device, dtype=torch.float32)  # 1 GiB
    y = torch.empty_like(x)
    mm_a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    mm_b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def t(fn, n=10):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3 / n

    copy = 2 * x.numel() * 4 / t(lambda: y.copy_(x))
    mm = 2 * 8192**3 / t(lambda: mm_a @ mm_b)
    del x, y, mm_a, mm_b
    return copy, mm


class Setup:
    """The model, one pool per KV config, and each request's context slots."""

    def __init__(self, args, device):
        from radixgen.radix.mixed_kv_pool import MixedKVPool
        from radixgen.radix.quant_kv_pool import kv_bytes_per_token, make_kv_pool
        from radixgen.runtime.attention import TorchAttention
        from radixgen.runtime.attention_kernels import KernelAttention
        from radixgen.runtime.model.arch import ModelArch
        from radixgen.runtime.model.llama import LlamaModel
        from radixgen.runtime.model.loader import dummy_state_dict

        cfg = dict(LLAMA3_8B)
        if args.smoke:
            cfg.update(
                hidden_size=256,
                intermediate_size=512,
                num_hidden_layers=2,
                num_attention_heads=8,
                num_key_value_heads=2,
                head_dim=32,
                vocab_size=1000,
            )
        if args.layers:
            cfg["num_hidden_layers"] = args.layers
        folder = Path(tempfile.mkdtemp(prefix="llama3-8b-shape-"))
        (folder / "config.json").write_text(json.dumps(cfg))
        a = self.arch = ModelArch.from_folder(folder)
        weights = dummy_state_dict(a, torch.bfloat16, device, seed=0)
        self.params = sum(t.numel() for t in weights.values())
        # bytes a forward must read: every weight but the embedding table (only its rows)
        self.weight_bytes = sum(
            t.numel() * t.element_size() for n, t in weights.items() if "embed" not in n
        )
        self.flop_params = self.params - weights["model.embed_tokens.weight"].numel()
        self.model = LlamaModel(a, weights, device)
        if device.type == "cuda":
            self.attn = KernelAttention(a.num_heads, a.num_kv_heads, a.head_dim, backend="triton")
        else:
            self.attn = TorchAttention(a.num_heads, a.num_kv_heads, a.head_dim)
        self.device, self.ctx = device, args.context
        max_b, max_rows = max(args.batches), max(args.drafts) + 1
        n_ctx, n_new = max_b * args.context, max_b * max_rows
        make = lambda kind, n: make_kv_pool(
            kind, n, a.num_layers, a.num_kv_heads, a.head_dim, torch.bfloat16, device
        )
        self.pools, self.tok_bytes = {}, {}
        for kv in args.kv:
            if kv == "bf16":
                self.pools[kv] = make("bf16", n_ctx + n_new)
                self.tok_bytes[kv] = (
                    kv_bytes_per_token(
                        "bf16", a.num_layers, a.num_kv_heads, a.head_dim, torch.bfloat16
                    ),
                ) * 2
            elif kv == "mixed":  # context in FP8, the new rows in NVFP4
                self.pools[kv] = MixedKVPool(make("fp8_e4m3", n_ctx), make("nvfp4", n_new), n_ctx)
                self.tok_bytes[kv] = tuple(
                    kv_bytes_per_token(k, a.num_layers, a.num_kv_heads, a.head_dim, torch.bfloat16)
                    for k in ("fp8_e4m3", "nvfp4")
                )
            elif kv in ("fp8_e4m3", "nvfp4"):  # one quantized pool
                self.pools[kv] = make(kv, n_ctx + n_new)
                self.tok_bytes[kv] = (
                    kv_bytes_per_token(
                        kv, a.num_layers, a.num_kv_heads, a.head_dim, torch.bfloat16
                    ),
                ) * 2
            else:
                raise ValueError(f"unknown --kv {kv!r}")
        # request b: context slots [b * ctx, (b + 1) * ctx), new rows from n_ctx + b * max_rows
        self.ctx_slots = [
            torch.arange(b * args.context, (b + 1) * args.context) for b in range(max_b)
        ]
        self.new_slots = [
            torch.arange(n_ctx + b * max_rows, n_ctx + (b + 1) * max_rows) for b in range(max_b)
        ]
        gen = torch.Generator(device=device).manual_seed(1)
        all_ctx = torch.arange(n_ctx, device=device)
        for pool in self.pools.values():
            for layer in range(a.num_layers):
                k = torch.randn(
                    n_ctx, a.num_kv_heads, a.head_dim, generator=gen, device=device
                ).bfloat16()
                v = torch.randn(
                    n_ctx, a.num_kv_heads, a.head_dim, generator=gen, device=device
                ).bfloat16()
                pool.store(layer, all_ctx, k, v)
        _sync(device)

    def batch(self, bsz: int, rows: int, tree: str | None):
        """A decode batch (tree None, rows 1) or a verify batch of `rows` tree rows per request."""
        from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode

        dev, ctx = self.device, self.ctx
        if tree is None:
            mask, depth = None, [0]
        else:
            mask, depth = tree_mask(tree_parents(rows, tree))
            if tree == "causal":
                mask = None
        seq = ctx + rows
        kv_slots = torch.stack(
            [torch.cat([self.ctx_slots[b], self.new_slots[b][:rows]]) for b in range(bsz)]
        )
        ids = torch.randint(0, self.arch.vocab_size, (bsz * rows,))
        positions = torch.tensor([ctx + d for d in depth] * bsz)
        out_slots = torch.cat([self.new_slots[b][:rows] for b in range(bsz)])
        mode = ForwardMode.DECODE if tree is None else ForwardMode.EXTEND
        return ForwardBatch(
            mode,
            ids.to(dev),
            positions.to(dev),
            out_slots.to(dev),
            kv_slots.to(dev),
            [seq] * bsz,
            [rows] * bsz,
            torch.arange(bsz * rows, device=dev),
            tree_masks=None if mask is None else [mask] * bsz,
        )

    def time_forward(self, kv: str, make_batch, iters: int) -> float:
        """Median ms of model.forward on a fresh batch each call (built outside the timing)."""
        pool, times = self.pools[kv], []
        for i in range(iters + 3):
            batch = make_batch()
            if self.device.type != "cuda":
                t = time.perf_counter()
                self.model.forward(batch, pool, self.attn)
                times.append((time.perf_counter() - t) * 1e3)
                continue
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            self.model.forward(batch, pool, self.attn)
            e.record()
            e.synchronize()
            if i >= 3:
                times.append(s.elapsed_time(e))
        return statistics.median(times)

    def busy_ms(self, kv: str, make_batch) -> float:
        """GPU kernel time of one forward (sum of kernel durations, torch.profiler): what the
        forward costs without the host's launch overhead and syncs. nan if the profiler fails."""
        if self.device.type != "cuda":
            return float("nan")
        try:
            from torch.profiler import ProfilerActivity, profile

            batch = make_batch()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                self.model.forward(batch, self.pools[kv], self.attn)
                torch.cuda.synchronize()
            return sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages()) / 1e3
        except Exception as exc:  # noqa: BLE001 (a timing aid only)
            print(f"profiler failed: {exc!r}", flush=True)
            return float("nan")

    def count_syncs(self, kv: str, make_batch) -> tuple[int, list[str]]:
        """Host syncs torch reports in one forward (set_sync_debug_mode warnings; the batch is built
        before) and the distinct places they come from."""
        import traceback
        import warnings

        batch = make_batch()
        torch.cuda.synchronize()
        places = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                self.model.forward(batch, self.pools[kv], self.attn)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        for w in caught:
            if "synchroniz" in str(w.message):
                places.append(f"{Path(w.filename).name}:{w.lineno}")
        torch.cuda.synchronize()
        return len(places), sorted(set(places))

    def floor_ms(
        self, kv: str, bsz: int, rows: int, copy_bw: float, mm_rate: float
    ) -> tuple[float, float]:
        ctx_b, new_b = self.tok_bytes[kv]
        kv_bytes = bsz * (self.ctx * ctx_b + rows * new_b)
        byte_ms = (self.weight_bytes + kv_bytes) / copy_bw * 1e3
        flop_ms = 2 * self.flop_params * bsz * rows / mm_rate * 1e3
        return byte_ms, flop_ms


def main(argv=None):
    args = parse_args(argv)
    device = torch.device("cpu" if args.smoke and not torch.cuda.is_available() else "cuda")
    t0 = time.perf_counter()
    copy_bw, mm_rate = measure_ceilings(device) if device.type == "cuda" else (4.18e12, 755e12)
    print(
        f"ceilings: copy {copy_bw / 1e12:.2f} TB/s (read + write), bf16 matmul {mm_rate / 1e12:.0f} TFLOP/s",
        flush=True,
    )
    s = Setup(args, device)
    print(
        f"model: {s.params / 1e9:.2f} B params, {s.weight_bytes / 1e9:.2f} GB read per forward; "
        f"setup {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    rows_out = []
    header = (
        "| KV | batch | tree | N | rows/req | verify ms | decode ms | verify/decode | GPU busy verify ms "
        "| GPU busy decode ms | busy ratio | floor ms (max byte, flop) | floor ratio |"
    )
    lines = [header, "|" + "---|" * 13]
    for kv in args.kv:
        for bsz in args.batches:
            dec_batch = lambda: s.batch(bsz, 1, None)
            dec = s.time_forward(kv, dec_batch, args.iters)
            dec_busy = s.busy_ms(kv, dec_batch)
            dec_floor = max(s.floor_ms(kv, bsz, 1, copy_bw, mm_rate))
            syncs, where = s.count_syncs(kv, dec_batch) if args.count_syncs else (None, [])
            rows_out.append(
                dict(
                    kv=kv,
                    batch=bsz,
                    tree="decode",
                    n=0,
                    ms=dec,
                    busy_ms=dec_busy,
                    floor_ms=dec_floor,
                    syncs=syncs,
                    sync_places=where,
                )
            )
            if args.count_syncs:
                print(
                    f"{kv} batch {bsz} decode: {syncs} host syncs per forward, from {where}",
                    flush=True,
                )
            lines.append(
                f"| {kv} | {bsz} | decode | 0 | 1 | - | {dec:.2f} | 1.00 | - | {dec_busy:.2f} | 1.00 "
                f"| {dec_floor:.2f} | 1.00 |"
            )
            print(lines[-1], flush=True)
            for n in [] if args.decode_only else args.drafts:
                for tree in args.trees:
                    ver_batch = lambda: s.batch(bsz, n + 1, tree)
                    ms = s.time_forward(kv, ver_batch, args.iters)
                    busy = s.busy_ms(kv, ver_batch)
                    byte_ms, flop_ms = s.floor_ms(kv, bsz, n + 1, copy_bw, mm_rate)
                    fl = max(byte_ms, flop_ms)
                    rows_out.append(
                        dict(
                            kv=kv,
                            batch=bsz,
                            tree=tree,
                            n=n,
                            ms=ms,
                            decode_ms=dec,
                            ratio=ms / dec,
                            busy_ms=busy,
                            decode_busy_ms=dec_busy,
                            busy_ratio=busy / dec_busy,
                            byte_floor_ms=byte_ms,
                            flop_floor_ms=flop_ms,
                            floor_ratio=fl / dec_floor,
                        )
                    )
                    lines.append(
                        f"| {kv} | {bsz} | {tree} | {n} | {n + 1} | {ms:.2f} | {dec:.2f} | {ms / dec:.2f} "
                        f"| {busy:.2f} | {dec_busy:.2f} | {busy / dec_busy:.2f} | {fl:.2f} | {fl / dec_floor:.2f} |"
                    )
                    print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                    "torch": torch.__version__,
                    "copy_bw": copy_bw,
                    "bf16_mm_flops": mm_rate,
                    "context": args.context,
                    "weight_bytes": s.weight_bytes,
                    "rows": rows_out,
                    "table": "\n".join(lines),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()

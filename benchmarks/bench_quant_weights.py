"""Quantized weights on the GPU: kernel time per Llama-3-8B linear shape and M, next to the
copy bandwidth measured in the same process and each format's byte floor, then end-to-end
decode tok/s through the Engine (dummy weights, Llama-3-8B shape) for bf16 / fp8 / nvfp4.

    python benchmarks/bench_quant_weights.py            # on a CUDA machine; JSON to $OUT if set
    python benchmarks/bench_quant_weights.py --dry-run  # tiny shapes, CPU-safe pieces only

Rows: cuBLAS bf16 (F.linear); the weight-only Triton kernels (kernels/weight_gemm.py) for NVFP4
(W4A16) and FP8 (W8A16); NVFP4 dequantize + cuBLAS (M >= 64 only); FP8 `torch._scaled_mm` with
per-token activation scales; and gemlite when `import gemlite` works: its A16W4 NVFP4 path
(Blackwell's `tl.dot_scaled`), its A16W8 FP8 weight-only path, and its A16W4 INT4 path (group
32), the 4-bit peer that compiles on Hopper. Each is timed as a CUDA graph of 20 calls, as the
decode step runs them, so launch overhead is not counted. Floors: weight bytes / copy bandwidth
(NVFP4 4.5 bits a value, FP8 8 bits, INT4 g32 4.5, bf16 16). `best` is the fastest quantized
path of the project per (shape, M), what quant/linear.py's `dispatch_table` should hold. A
tiling sweep of the weight-only kernels at M = 1 and 16 follows. Each section runs in its own
try/except.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = {
    "qkv": (6144, 4096),
    "o": (4096, 4096),
    "gate_up": (28672, 4096),
    "down": (4096, 14336),
    "lm_head": (128256, 4096),
}
MS = (1, 4, 16, 64, 256)
BITS = {
    "bf16": 16,
    "nvfp4_kernel": 4.5,
    "nvfp4_dequant": 4.5,
    "fp8_kernel": 8,
    "fp8_scaled_mm": 8,
    "gemlite_nvfp4": 4.5,
    "gemlite_fp8": 8,
    "gemlite_int4": 4.5,
}
OURS = ("nvfp4_kernel", "nvfp4_dequant", "fp8_kernel", "fp8_scaled_mm")
GRAPH_CALLS = 20


def median_s(fn, iters: int = 50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def graph_median_s(fn, replays: int = 15) -> float:
    """Seconds per call of `fn`, captured GRAPH_CALLS times in one CUDA graph and replayed; plain
    event timing (launch overhead included) where the capture fails."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_CALLS):
                fn()
    except Exception as err:  # noqa: BLE001 - a path that cannot be captured is timed eagerly
        print(f"  (graph capture failed, timed eagerly: {err!r:.80})")
        return median_s(fn)
    return median_s(graph.replay, replays) / GRAPH_CALLS


def copy_bandwidth() -> float:
    x = torch.empty(256 * 1024 * 1024, device="cuda", dtype=torch.bfloat16)  # 512 MiB, past L2
    bw = 2 * x.numel() * 2 / median_s(x.clone, 20)
    del x
    torch.cuda.empty_cache()
    return bw


def kernel_paths(n: int, k: int):
    """name -> (M -> callable) for one weight shape."""
    from radixgen.kernels.fp8_gemm import fp8_linear, fp8_weight_linear
    from radixgen.kernels.nvfp4_gemm import nvfp4_linear
    from radixgen.runtime.quant.weight import quantize_fp8_weight, quantize_nvfp4_weight

    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    nv = quantize_nvfp4_weight(w, scale_search=False)
    f8 = quantize_fp8_weight(w)
    paths = {
        "bf16": lambda x: F.linear(x, w),
        "nvfp4_kernel": lambda x: nvfp4_linear(x, nv.data, nv.block_scales, nv.scale),
        "nvfp4_dequant": lambda x: F.linear(x, nv.dequantize(x.dtype)),
        "fp8_kernel": lambda x: fp8_weight_linear(x, f8.data, f8.scale),
        "fp8_scaled_mm": lambda x: fp8_linear(x, f8.data, f8.scale),
    }
    paths.update(gemlite_paths(w))
    return paths


def gemlite_paths(w: torch.Tensor) -> dict:
    """gemlite's layers for `w` that build and run once; each failure is printed and skipped."""
    try:
        from gemlite import helper
    except ImportError:
        return {}
    n, k = w.shape
    probe = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    paths = {}
    for name, build in (
        ("gemlite_nvfp4", lambda: helper.A16W4_NVFP(device="cuda", dtype=torch.bfloat16)),
        ("gemlite_fp8", lambda: helper.A16W8_FP8(device="cuda", dtype=torch.bfloat16)),
    ):
        try:
            layer = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
            layer.weight.data.copy_(w)
            gem = build().from_linear(layer)
            gem(probe)
            paths[name] = gem
        except Exception as err:  # noqa: BLE001 - report and go on without it
            print(f"{name} ({n}x{k}): failed: {str(err).splitlines()[0][:120]}")
    try:
        paths["gemlite_int4"] = _gemlite_int4(helper, w)
        paths["gemlite_int4"](probe)
    except Exception as err:  # noqa: BLE001
        paths.pop("gemlite_int4", None)
        print(f"gemlite_int4 ({n}x{k}): failed: {str(err).splitlines()[0][:120]}")
    return paths


def _gemlite_int4(helper, w: torch.Tensor, group: int = 32):
    """Asymmetric INT4 with a bf16 scale and zero per `group` values, through gemlite's A16Wn."""
    n, k = w.shape
    g = w.float().reshape(n, k // group, group)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = ((hi - lo) / 15).clamp(min=1e-8)
    zero = -lo / scale
    q = (g / scale + zero).round().clamp(0, 15).to(torch.uint8).reshape(n, k)
    return helper.A16W4_HQQ_INT(device="cuda", dtype=torch.bfloat16).from_weights(
        q, scale.reshape(n, -1).to(torch.bfloat16), zero.reshape(n, -1).to(torch.bfloat16)
    )


def bench_kernels(shapes: dict, ms: tuple, bandwidth: float) -> list[dict]:
    rows = []
    for name, (n, k) in shapes.items():
        try:
            paths = kernel_paths(n, k)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            continue
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            row = {"shape": name, "n": n, "k": k, "m": m}
            for path, fn in paths.items():
                if path == "nvfp4_dequant" and m < 64:
                    continue  # it dequantizes the whole layer per call: a large-M path only
                try:
                    t = graph_median_s(lambda fn=fn, x=x: fn(x))
                    floor = n * k * BITS[path] / 8 / bandwidth
                    row[path] = {"us": t * 1e6, "floor_us": floor * 1e6, "of_floor": floor / t}
                except Exception as err:  # noqa: BLE001
                    row[path] = {"error": repr(err)}
            timed = {
                p: v["us"]
                for p, v in row.items()
                if isinstance(v, dict) and "us" in v and p in OURS
            }
            row["best"] = min(timed, key=timed.get) if timed else None
            rows.append(row)
            print(_kernel_line(row), flush=True)
    return rows


SWEEP = (
    {},  # the planner's choice
    {"block_n": 32, "block_k": 128},
    {"block_n": 64, "block_k": 64},
    {"block_n": 128, "block_k": 64, "warps": 8},
    {"block_n": 64, "block_k": 128, "warps": 8},
    {"block_n": 32, "block_k": 256, "warps": 8},
    {"block_n": 16, "block_k": 256},
)


def bench_sweep(shapes: tuple, ms: tuple, bandwidth: float) -> list[dict]:
    """The weight-only kernels over tilings, each at 1x and 2x the planner's split."""
    from radixgen.kernels.fp8_gemm import fp8_weight_linear
    from radixgen.kernels.nvfp4_gemm import nvfp4_linear
    from radixgen.kernels.weight_gemm import plan_tiling
    from radixgen.runtime.quant.weight import quantize_fp8_weight, quantize_nvfp4_weight

    rows = []
    for name in shapes:
        n, k = SHAPES[name]
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        nv, f8 = quantize_nvfp4_weight(w, scale_search=False), quantize_fp8_weight(w)
        kernels = {
            "nvfp4_kernel": lambda x, t, nv=nv: nvfp4_linear(
                x, nv.data, nv.block_scales, nv.scale, **t
            ),
            "fp8_kernel": lambda x, t, f8=f8: fp8_weight_linear(x, f8.data, f8.scale, **t),
        }
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            for path, fn in kernels.items():
                for over in SWEEP:
                    base = plan_tiling(m, n, k, x.device, **over)
                    for split in sorted({base.split, 2 * base.split, max(1, base.split // 2)}):
                        tiling = {**over, "split": split}
                        try:
                            t = graph_median_s(lambda fn=fn, x=x, t=tiling: fn(x, t))
                        except Exception as err:  # noqa: BLE001
                            print(f"sweep {name} M={m} {path} {tiling}: {err!r:.100}")
                            continue
                        floor = n * k * BITS[path] / 8 / bandwidth
                        rows.append(
                            {
                                "shape": name,
                                "m": m,
                                "path": path,
                                "tiling": tiling,
                                "us": t * 1e6,
                                "of_floor": floor / t,
                            }
                        )
            for path in kernels:
                mine = [r for r in rows if r["shape"] == name and r["m"] == m and r["path"] == path]
                if mine:
                    best = min(mine, key=lambda r: r["us"])
                    print(
                        f"sweep {name:8s} M={m:<3d} {path:13s} planner {mine[0]['us']:7.1f}us "
                        f"({100 * mine[0]['of_floor']:3.0f}%), best {best['us']:7.1f}us "
                        f"({100 * best['of_floor']:3.0f}%) at {best['tiling']}",
                        flush=True,
                    )
    return rows


def _kernel_line(row: dict) -> str:
    cells = [f"{row['shape']:8s} M={row['m']:<4d}"]
    for path in BITS:
        v = row.get(path)
        if isinstance(v, dict) and "us" in v:
            cells.append(f"{path} {v['us']:8.1f}us ({100 * v['of_floor']:3.0f}% floor)")
    return "  ".join(cells) + f"  best {row['best']}"


def _kv_bytes_per_token(cfg: dict) -> int:
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * head_dim * 2  # bf16 K, V


def bench_decode(batches: tuple, context: int, steps: int, bandwidth: float) -> list[dict]:
    from model_shapes import LLAMA3_8B

    from radixgen.runtime.engine import Engine

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(LLAMA3_8B))
        _copy_tokenizer(Path(tmp))
        for method in ("none", "fp8", "nvfp4"):
            try:
                new = _decode_rows(Engine, tmp, method, batches, context, steps)
                for row in new:
                    kv = row["batch"] * (context + steps // 2) * _kv_bytes_per_token(LLAMA3_8B)
                    step_s = (row["weight_bytes"] + kv) / bandwidth
                    row["floor_tok_s"] = row["batch"] / step_s
                    row["of_floor"] = row["tok_s"] / row["floor_tok_s"]
                print(
                    "  ".join(
                        f"{r['quantization']} b{r['batch']}: {r['tok_s']:.1f} tok/s "
                        f"({100 * r['of_floor']:.0f}% of floor {r['floor_tok_s']:.1f})"
                        for r in new
                    ),
                    flush=True,
                )
                rows += new
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            torch.cuda.empty_cache()
    return rows


def _decode_rows(engine_cls, folder, method, batches, context, steps) -> list[dict]:
    rows = []
    eng = engine_cls(
        folder,
        load_format="dummy",
        quantization=method,
        nvfp4_scale_search=False,
        max_total_tokens=max(batches) * (context + steps + 8),
        max_running_requests=max(batches),
    )
    try:
        for batch in batches:
            prompts = [[(7 * i + j) % 30000 + 100 for j in range(context)] for i in range(batch)]
            params = {"max_new_tokens": steps, "temperature": 0, "ignore_eos": True}
            eng.generate(input_ids=prompts, sampling_params={**params, "max_new_tokens": 1})
            start = time.perf_counter()
            eng.generate(input_ids=prompts, sampling_params=params)  # prefix hits: mostly decode
            wall = time.perf_counter() - start
            rows.append(
                {
                    "quantization": method,
                    "batch": batch,
                    "context": context,
                    "tok_s": batch * steps / wall,
                    "weight_bytes": eng.scheduler.runner.weight_bytes,
                }
            )
            print(
                f"decode {method:6s} batch {batch:3d} ctx {context}: {rows[-1]['tok_s']:.1f} tok/s",
                flush=True,
            )
    finally:
        eng.shutdown()
    return rows


def _copy_tokenizer(dst: Path) -> None:
    from radixgen.runtime.model.embedded import default_model_path

    src = default_model_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (dst / name).write_bytes((src / name).read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes; skips what needs CUDA")
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument(
        "--only", default="kernels,sweep,decode", help="comma list of sections to run"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    result: dict = {}
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time" + (" (dry run)" if args.dry_run else ""))
        result["kernels"] = []
    else:
        shapes = {"tiny": (256, 128)} if args.dry_run else SHAPES
        for section, run in (("copy_bandwidth", copy_bandwidth),):
            result[section] = run()
        print(f"{torch.cuda.get_device_name()}: copy {result['copy_bandwidth'] / 1e12:.2f} TB/s")
        try:
            import gemlite  # noqa: F401
        except ImportError:
            print("gemlite: not installed")
        try:
            if "kernels" in only:
                result["kernels"] = bench_kernels(
                    shapes, (1, 16) if args.dry_run else MS, result["copy_bandwidth"]
                )
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        try:
            if "sweep" in only:
                result["sweep"] = bench_sweep(
                    ("qkv", "gate_up", "down"), (1, 16), result["copy_bandwidth"]
                )
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        if not args.dry_run and "decode" in only:
            try:
                result["decode"] = bench_decode(
                    (1, 64), args.context, args.steps, result["copy_bandwidth"]
                )
            except Exception:  # noqa: BLE001
                traceback.print_exc()
    out = os.environ.get("OUT")
    if out:
        Path(out, "bench_quant_weights.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

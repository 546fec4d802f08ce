"""GPU: NVFP4 / FP8 quantize and dequantize throughput against the byte floor (H200).

Run on a CUDA machine: `python benchmarks/bench_quant_gpu.py`. Bytes moved = input read +
outputs written; the floor is the device-to-device copy bandwidth measured in the same run."""

from __future__ import annotations

import torch

from radixgen.kernels import dequantize_fp8, dequantize_nvfp4, quantize_fp8, quantize_nvfp4


def cuda_median_s(fn, iters: int = 50) -> float:
    """Median seconds of fn over iters CUDA-event-timed runs, after 5 warm-up runs."""
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def main() -> None:
    rows, cols = 65536, 1024  # 64k tokens x (8 KV heads x 128): 128 MiB of bf16, beyond L2
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    n = x.numel()
    copy_s = cuda_median_s(lambda: x.clone())
    floor = 2 * n * 2 / copy_s
    print(f"copy bandwidth (read + write): {floor / 1e12:.2f} TB/s")
    s_t = x.abs().amax().float() / (6 * 448)
    codes, scales, _ = quantize_nvfp4(x, s_t)
    q8, s8 = quantize_fp8(x)
    cases = {
        "nvfp4 quantize": (lambda: quantize_nvfp4(x, s_t), n * 2 + n // 2 + n // 16),
        "nvfp4 dequantize": (
            lambda: dequantize_nvfp4(codes, scales, s_t),
            n // 2 + n // 16 + n * 2,
        ),
        "fp8 quantize": (lambda: quantize_fp8(x, s8), n * 2 + n),
        "fp8 dequantize": (lambda: dequantize_fp8(q8, s8), n + n * 2),
    }
    print(f"{'op':<18}{'ms':>8}{'TB/s':>8}{'of copy':>9}")
    for name, (fn, nbytes) in cases.items():
        t = cuda_median_s(fn)
        print(f"{name:<18}{t * 1e3:8.3f}{nbytes / t / 1e12:8.2f}{nbytes / t / floor:9.0%}")


if __name__ == "__main__":
    main()

# One device call for the one-launch mixed decode (nvfp4_decode_cuda.MixedCall): its GPU tests,
# the probe of split pairs against one launch per pool, the runtime GPU tests (bf16 / fp8 / nvfp4 /
# mixed pools, CUDA graphs), then the decode benchmark.
#   run(command="bash benchmarks/gpu/mixed_launch.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1 RADIXGEN_CUDA_MIXED=1
timeout ${TESTS_S:-140} python3 -m pytest -q -x -k "mixed and not stages3" tests/kernels/test_nvfp4_decode_cuda.py > "$OUT/mixed_tests.log" 2>&1
tail -15 "$OUT/mixed_tests.log"
timeout ${PROBE_S:-100} python3 benchmarks/probe_mixed_decode.py --one-launch > "$OUT/probe.log" 2>&1
tail -70 "$OUT/probe.log"
[ -n "$QUICK" ] && exit 0  # QUICK=1: the kernel tests and the probe only
timeout 120 python3 -m pytest -q tests/runtime/test_gpu_engine.py tests/runtime/test_cuda_graph.py > "$OUT/runtime_tests.log" 2>&1
tail -4 "$OUT/runtime_tests.log"
timeout 80 python3 benchmarks/bench_kernels.py --decode-only --iters 30 --json "$OUT/decode.json" > "$OUT/bench.log" 2>&1
grep -E "^decode|^flashinfer|copy bandwidth|Error|error" "$OUT/bench.log" | head -30

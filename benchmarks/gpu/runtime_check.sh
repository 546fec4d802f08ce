# One device call: the decode benchmark, the runtime's GPU tests (engine, CUDA graphs, constrained
# decoding; the last needs jsonschema's wheels: ../shared/gpu/fetch_wheels.sh msgspec==0.23.0
# outlines_core==0.2.14 jsonschema==4.26.0 attrs==26.1.0 referencing==0.37.0 rpds-py==2026.9.1
# jsonschema-specifications==2025.9.1), then the kernel tests of the decode path (the CUDA NVFP4
# kernel included; KERNEL_TESTS="..." filters them by -k).
#   run(command="bash benchmarks/gpu/runtime_check.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
KERNEL_TESTS=${KERNEL_TESTS:-"not nothing"}  # a -k filter for the kernel tests
timeout 120 python3 benchmarks/bench_kernels.py --decode-only --iters 30 --json "$OUT/decode.json" > "$OUT/bench.log" 2>&1
grep -E "^decode|^flashinfer|copy bandwidth|cuda|Error|error" "$OUT/bench.log" | head -30
timeout 240 python3 -m pytest -q tests/runtime/test_gpu_engine.py tests/runtime/test_cuda_graph.py \
    tests/runtime/test_gpu_constrained.py > "$OUT/runtime_tests.log" 2>&1
tail -8 "$OUT/runtime_tests.log"
timeout 230 python3 -m pytest -q -x -k "$KERNEL_TESTS" tests/kernels/test_nvfp4_decode_cuda.py tests/kernels/test_decode_attention.py \
    tests/kernels/test_merge_state.py tests/grammar/test_row_masker.py > "$OUT/kernel_tests.log" 2>&1
tail -4 "$OUT/kernel_tests.log"

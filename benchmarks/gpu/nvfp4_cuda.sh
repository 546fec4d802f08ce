# One device call: the CUDA NVFP4 decode kernel's GPU tests (both pipelines) and the decode tests it
# serves, then the decode benchmark with a sweep of the CUDA kernel's configs.
#   run(command="bash benchmarks/gpu/nvfp4_cuda.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
timeout 300 python3 -m pytest -q --maxfail=20 tests/kernels/test_nvfp4_decode_cuda.py tests/kernels/test_decode_attention.py \
    tests/kernels/test_merge_state.py > "$OUT/tests.log" 2>&1
tail -25 "$OUT/tests.log"
timeout 240 python3 benchmarks/bench_kernels.py --decode-only --gather --sweep nvfp4 --iters 30 --json "$OUT/decode.json" \
    > "$OUT/bench.log" 2>&1
grep -E "gather|sweep cuda|^decode|^flashinfer|copy bandwidth|Error|error" "$OUT/bench.log" | head -40

# Issue 4's measurements in two device calls (each under the 600-s call limit), the second on the
# warm machine:
#   run(command="bash benchmarks/gpu/h200_check.sh decode", carry=[".whl", ".gpu_cache"])
#     the decode benchmark (bf16 / fp8 / nvfp4 / mixed, flashinfer peers, copy ceiling), the
#     split-pair probe of the one-launch mixed decode, and the GPU kernel tests but the runtime's
#     attention through the model (318 of 340; ~230 s on an H100)
#   run(command="bash benchmarks/gpu/h200_check.sh rest", carry=[".whl", ".gpu_cache"])
#     the whole kernel benchmark (quantize throughput, extend vs flashinfer), the runtime's
#     attention tests (the other 22 kernel tests, ~160 s) and the runtime's GPU tests (bf16 / fp8 /
#     nvfp4 / mixed pools, CUDA graphs, constrained decoding)
# and, when the quantize kernels or the mixed split rule change (one call, ~400 s on an H100):
#   run(command="bash benchmarks/gpu/h200_check.sh quantize", carry=[".whl", ".gpu_cache"])
#     the whole kernel benchmark, the quantize/store tests on the GPU, and the one-launch mixed
#     decode's split pairs at three more shapes (batch x tokens)
# and, when the mixed decode's one launch changes (one call, ~500 s on an H100):
#   run(command="bash benchmarks/gpu/h200_check.sh paired", carry=[".whl", ".gpu_cache"])
#     the one-launch mixed tests (paired and a part per CTA) and both kinds of one launch against
#     the parts' average at four shapes
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
step() {  # name, seconds, command...: its output to $OUT/name.log, one line of status here
  local name=$1 limit=$2 start=$SECONDS; shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name: rc $?, $((SECONDS - start)) s"
}
case "$1" in
decode)
  step decode 110 python3 benchmarks/bench_kernels.py --decode-only --iters 30 --json "$OUT/decode.json"
  grep -E "^decode|^flashinfer|copy bandwidth|Error" "$OUT/decode.log" | head -30
  step probe 100 python3 benchmarks/probe_mixed_decode.py --one-launch
  tail -40 "$OUT/probe.log"
  step kernel_tests 320 python3 -m pytest -q -m gpu tests/kernels --ignore=tests/kernels/test_runtime_attention_gpu.py
  tail -8 "$OUT/kernel_tests.log" ;;
rest)
  step bench 150 python3 benchmarks/bench_kernels.py --iters 30 --json "$OUT/bench.json"
  grep -vE "^\s*$" "$OUT/bench.log" | grep -E "^[a-z]|copy|Error" | head -50
  step runtime_attention 200 python3 -m pytest -q -m gpu tests/kernels/test_runtime_attention_gpu.py
  tail -2 "$OUT/runtime_attention.log"
  step runtime_tests 200 python3 -m pytest -q tests/runtime/test_gpu_engine.py \
      tests/runtime/test_gpu_constrained.py tests/runtime/test_cuda_graph.py
  tail -6 "$OUT/runtime_tests.log" ;;
quantize)
  step bench 200 python3 benchmarks/bench_kernels.py --iters 30 --json "$OUT/bench.json"
  grep -vE "^\s*$" "$OUT/bench.log" | grep -E "^[a-z]|copy|Error" | head -50
  step quantize_tests 150 python3 -m pytest -q tests/kernels/test_nvfp4.py tests/kernels/test_fp8.py \
      tests/kernels/test_quant_pool_store.py
  tail -3 "$OUT/quantize_tests.log"
  for shape in 16,16384 128,2048 256,1024; do
    step "probe_$shape" 80 python3 benchmarks/probe_mixed_decode.py --one-launch --shape "$shape"
    grep -E "average|one launch,|one launch per pool|best pair|resident" "$OUT/probe_$shape.log" | head -6
  done ;;
paired)
  step paired_tests 120 python3 -m pytest -q -x tests/kernels/test_nvfp4_decode_cuda.py -k "paired and not stages3"
  tail -4 "$OUT/paired_tests.log"
  for shape in 64,4096 256,1024 128,2048 16,16384; do
    step "probe_$shape" 60 python3 benchmarks/probe_mixed_decode.py --one-launch --quick --shape "$shape"
    grep -E "average|one launch|resident" "$OUT/probe_$shape.log" | head -20
  done
  step mixed_tests 200 python3 -m pytest -q tests/kernels/test_nvfp4_decode_cuda.py -k "mixed and (parts or stages3 or dtypes)"
  tail -4 "$OUT/mixed_tests.log" ;;
*) echo "usage: h200_check.sh decode|rest|quantize|paired"; exit 2 ;;
esac

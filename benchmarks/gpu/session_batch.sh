# One device call: the GPU tests of the MLA graphs and the weight-only / LoRA / MLA kernels, a
# mixed-step profile, quantized end-to-end decode, the MLA and LoRA benchmarks.
#   run(command="bash benchmarks/gpu/session_batch.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
timeout 130 python3 -m pytest -q tests/runtime/test_mla_cuda_graph.py tests/kernels/test_nvfp4_gemm.py \
    tests/kernels/test_lora.py tests/kernels/test_mla_decode.py > "$OUT/gpu_tests.log" 2>&1
tail -12 "$OUT/gpu_tests.log"
timeout 110 python3 benchmarks/profile_mixed_step.py --tokenizer "$TOKENIZER" --long 16384 --short 16 \
    --decode-tokens 256 --top 20 > "$OUT/mixed_profile.log" 2>&1
head -40 "$OUT/mixed_profile.log" | grep -v USDT
timeout 110 python3 benchmarks/bench_quant_weights.py --only decode > "$OUT/quant_decode.log" 2>&1
grep -E "copy|decode|floor|Error" "$OUT/quant_decode.log" | tail -12
timeout 90 python3 benchmarks/bench_mla.py --tokenizer "$TOKENIZER" --json "$OUT/mla.json" > "$OUT/mla.log" 2>&1
tail -20 "$OUT/mla.log"
timeout 90 python3 benchmarks/bench_lora.py --shape llama3-8b --dtype bfloat16 --max-total-tokens 65536 \
    --max-new-tokens 128 --repeats 1 --out "$OUT/lora.json" > "$OUT/lora.log" 2>&1
tail -15 "$OUT/lora.log"

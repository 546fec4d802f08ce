# One device call: the long-prompt interference rows (bf16 KV), then the same prompt alone with
# no step-time target and one partial prefill (the planner before partial prefills), then one
# mixed step profiled (chunk 512 at depth 32k with 0 / 8 / 32 decode rows).
#   run(command="bash benchmarks/gpu/interference.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
timeout 300 python3 benchmarks/bench_gpu_serving.py --tokenizer "$TOKENIZER" --kv bf16 --rows interference \
    --json "$OUT/interference.json" "$@" 2>&1 | tee "$OUT/interference.log" | grep "^\[\|H100\|H200"
timeout 150 python3 benchmarks/bench_gpu_serving.py --tokenizer "$TOKENIZER" --kv bf16 --rows prefill \
    --engine-arg max_step_ms=0 --engine-arg max_num_partial_prefills=1 --engine-arg max_long_partial_prefills=1 \
    --json "$OUT/prefill-baseline.json" 2>&1 | tee "$OUT/prefill-baseline.log" | grep "^\[\|H100\|H200"
timeout 140 python3 benchmarks/bench_chunk_cost.py --tokenizer "$TOKENIZER" --chunks "" --profile 512:32768 \
    --json "$OUT/mixed-profile.json" 2>&1 | tee "$OUT/mixed-profile.log" | grep -v "^\s*$" | tail -75

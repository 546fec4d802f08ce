# One device call: bench_gpu_serving.py's rows for both KV configurations (extra arguments pass
# through, e.g. --engine-arg max_num_partial_prefills=1).
#   run(command="bash benchmarks/gpu/serving.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
timeout ${BENCH_TIMEOUT:-560} python3 benchmarks/bench_gpu_serving.py --tokenizer "$TOKENIZER" \
    --json "$OUT/gpu-serving.json" "$@" 2>&1 | tee "$OUT/gpu-serving.log" | grep -v "^\s*$" | tail -40

# One device call: the long-prompt interference rows (bf16 KV) at the default step-time target
# and at each of $STEP_MS (default "40"); decode and prefill rows of each KV configuration
# ($KV, default "bf16,fp8,default"); the long prompt alone with no step-time target and one
# partial prefill at a time (the planner before partial prefills).
#   run(command="bash benchmarks/gpu/interference.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
serving() {  # name, time limit, then bench_gpu_serving.py arguments
    local name=$1 limit=$2; shift 2
    echo "== $name: $*"
    timeout "$limit" python3 benchmarks/bench_gpu_serving.py --tokenizer "$TOKENIZER" \
        --json "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.log" | grep "^\[\|H100\|H200\|Error\|/ bf16"
}
serving interference 150 --kv bf16 --rows interference
for ms in ${STEP_MS-40}; do
    serving "interference-$ms" 130 --kv bf16 --rows interference --engine-arg max_step_ms=$ms
done
[ -n "${KV-bf16,fp8,mixed}" ] && serving kv-configs 200 --kv "${KV-bf16,fp8,mixed}" --rows decode,prefill
[ -z "$NO_BASELINE" ] && serving prefill-baseline 90 --kv bf16 --rows prefill --engine-arg max_step_ms=0 \
    --engine-arg max_num_partial_prefills=1 --engine-arg max_long_partial_prefills=1

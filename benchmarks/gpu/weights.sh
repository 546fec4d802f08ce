# One device call: bench_weights.py on the Llama-3-8B shape (dummy bf16 weights), standby on
# the device ($STANDBY: device, pinned_host or both).
#   run(command="bash benchmarks/gpu/weights.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
for standby in ${STANDBY-device}; do
    echo "== weight standby: $standby"
    timeout ${WEIGHTS_TIMEOUT:-200} python3 benchmarks/bench_weights.py --shape llama3-8b --dtype bfloat16 \
        --concurrency 32 --max-total-tokens 65536 --window-s 15 --weight-standby "$standby" \
        --out "$OUT/weights-$standby.json" 2>&1 | tee "$OUT/weights-$standby.log" | tail -25
done

# One device call: CUDA-graph decode tests, decode-step profiles with and without graphs, and
# the agent sessions with and without graphs.
#   run(command="bash benchmarks/gpu/graphs.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
timeout 240 python3 -m pytest -q -x tests/runtime/test_cuda_graph.py tests/runtime/test_gpu_engine.py \
    > "$OUT/tests.log" 2>&1
tail -15 "$OUT/tests.log"
grep -q " failed\|error" "$OUT/tests.log" && exit 1
for run in "mixed" "bf16" "mixed --disable-cuda-graph"; do
  name=$(echo "$run" | tr -d ' -' | sed 's/disablecudagraph/-eager/')
  timeout 150 python3 benchmarks/profile_gpu_step.py --tokenizer "$TOKENIZER" --kv $run > "$OUT/profile-$name.log" 2>&1
  grep -A3 "per step" "$OUT/profile-$name.log" | head -4
done
timeout 420 python3 benchmarks/bench_agents.py --gpu --tokenizer "$TOKENIZER" \
    --configs bf16,bf16-eager,fp8,mixed,mixed-eager --json "$OUT/agents.json" > "$OUT/agents.log" 2>&1
tail -12 "$OUT/agents.log"

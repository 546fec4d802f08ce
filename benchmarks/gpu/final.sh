# One device call: the runtime's GPU tests, decode-step profiles with graphs (greedy, sampled)
# after the allocator and batched-sampling changes, and the agent sessions.
#   run(command="bash benchmarks/gpu/final.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
timeout 420 python3 -m pytest -q tests/runtime/test_gpu_engine.py tests/runtime/test_gpu_constrained.py tests/runtime/test_cuda_graph.py \
    tests/kernels/test_runtime_attention_gpu.py > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
run() {  # name, then profile_gpu_step arguments
  local name=$1; shift
  timeout 120 python3 benchmarks/profile_gpu_step.py --tokenizer "$TOKENIZER" "$@" > "$OUT/profile-$name.log" 2>&1
  echo "$name: $(grep 'without the profiler' "$OUT/profile-$name.log")"
}
run mixed --kv mixed --steps 32
run mixed-sampled --kv mixed --steps 32 --temperature 0.8 --top-p 0.95
run bf16 --kv bf16 --steps 32
timeout 300 python3 benchmarks/bench_agents.py --gpu --tokenizer "$TOKENIZER" \
    --configs bf16,fp8,mixed --json "$OUT/agents.json" > "$OUT/agents.log" 2>&1
grep "^| " "$OUT/agents.log"

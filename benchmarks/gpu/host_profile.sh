# One device call: where the host's time goes in a decode step replayed from a CUDA graph
# (cProfile of the scheduler, mixed and bf16 pools).
#   run(command="bash benchmarks/gpu/host_profile.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
for kv in mixed bf16; do
  timeout 200 python3 benchmarks/profile_gpu_step.py --tokenizer "$TOKENIZER" --kv $kv --steps 32 --top 10 \
      --python-top 45 > "$OUT/host-profile-$kv.log" 2>&1
  grep -A2 "per step" "$OUT/host-profile-$kv.log" | head -3
done

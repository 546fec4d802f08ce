# One device call: decode-step profiles (mixed, bf16) and the GPU engine tests.
#   run(command="bash benchmarks/gpu/profile_step.sh", carry=[".whl", ".gpu_cache"])
source benchmarks/gpu/h200_env.sh
for kv in mixed bf16; do
  python3 benchmarks/profile_gpu_step.py --tokenizer "$TOKENIZER" --kv $kv > "$OUT/profile-$kv.log" 2>&1
  tail -45 "$OUT/profile-$kv.log"
done
python3 -m pytest -q -x tests/runtime/test_gpu_engine.py 2>&1 | tail -5

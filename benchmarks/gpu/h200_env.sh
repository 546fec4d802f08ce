# Source on the H200 machine (device tool), from the repository root:
#   source benchmarks/gpu/h200_env.sh
# Needs, carried with the call: .whl/ (../shared/gpu/fetch_wheels.sh msgspec==0.23.0
# outlines_core==0.2.14) and .gpu_cache/radixgen/SmolLM2-135M-Instruct (the embedded model's
# folder without its weights: config, tokenizer and its .complete marker (without it the runtime
# converts the GGUF, which is not there); GPU runs use dummy weights).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=.:/tmp/site HF_HUB_OFFLINE=1 RADIXGEN_CACHE_DIR=$PWD/.gpu_cache/radixgen
export TOKENIZER=$PWD/.gpu_cache/radixgen/SmolLM2-135M-Instruct
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader

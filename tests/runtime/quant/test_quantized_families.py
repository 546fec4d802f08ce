"""Every model family of the registry runs with quantized weights (dummy weights, CPU): every
projection (the MoE experts included) is stored quantized, greedy generation runs through the
Engine, and the quantized model's logprobs stay near the dense model's."""

import json
import shutil

import pytest
import torch

from radixgen.runtime.engine import Engine
from radixgen.runtime.quant.weight import QuantizedWeight

TINY = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 49152,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "num_hidden_layers": 2,
    "torch_dtype": "float32",
    "eos_token_id": 2,
}
# each family with one method (both methods share every code path but the quantizer)
METHOD = {
    "LlamaForCausalLM": "fp8",
    "Qwen2ForCausalLM": "nvfp4",
    "Qwen3ForCausalLM": "fp8",
    "Qwen3MoeForCausalLM": "nvfp4",
    "Qwen2MoeForCausalLM": "fp8",
    "MixtralForCausalLM": "nvfp4",
}
FAMILIES = {
    "LlamaForCausalLM": {},
    "Qwen2ForCausalLM": {},
    "Qwen3ForCausalLM": {},
    "Qwen3MoeForCausalLM": {
        "num_hidden_layers": 3,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
        "mlp_only_layers": [1],
    },
    "Qwen2MoeForCausalLM": {
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
    },
    "MixtralForCausalLM": {
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "intermediate_size": 32,
    },
}
ENGINE = {
    "load_format": "dummy",
    "dtype": "float32",
    "max_total_tokens": 512,
    "max_running_requests": 4,
}
PROMPTS = [[5, 17, 300, 41, 9], [1000, 2, 7, 7, 7, 120, 64]]
GREEDY = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True, "return_logprob": True}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_folder(request, tmp_path_factory, model_path):
    folder = tmp_path_factory.mktemp(request.param)
    (folder / "config.json").write_text(
        json.dumps({**TINY, **FAMILIES[request.param], "architectures": [request.param]})
    )
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(model_path / name, folder / name)
    torch.set_num_threads(1)
    return folder


def _projections(model):
    for layer in model.layers:
        yield layer.qkv
        yield layer.o_proj
        mlp = layer.mlp
        yield from ([mlp.gate_up, mlp.down] if hasattr(mlp, "gate_up") else [mlp.w13, mlp.w2])


def test_every_family_runs_quantized(family_folder):
    method = METHOD[family_folder.name.rstrip("0123456789")]
    dense = Engine(str(family_folder), **ENGINE)
    quant = Engine(str(family_folder), quantization=method, **ENGINE)
    try:
        model = quant.scheduler.runner.model
        assert all(
            isinstance(w, QuantizedWeight) and w.format == method for w in _projections(model)
        )
        assert not isinstance(model.lm_head, QuantizedWeight)
        assert quant.scheduler.runner.weight_bytes < dense.scheduler.runner.weight_bytes
        ref = dense.generate(input_ids=PROMPTS, sampling_params=GREEDY)
        out = quant.generate(input_ids=PROMPTS, sampling_params=GREEDY)
        assert all(len(r["output_ids"]) == GREEDY["max_new_tokens"] for r in out)
        # the first token's logprob under each model (same prompt, so the same position)
        first = lambda r: r["meta_info"]["output_token_logprobs"][0][0]  # noqa: E731
        assert all(abs(first(a) - first(b)) < 0.5 for a, b in zip(ref, out))
    finally:
        dense.shutdown()
        quant.shutdown()

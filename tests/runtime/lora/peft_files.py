"""PEFT adapter folders written by tests (random A and B, PEFT's names), and the base weights
merged with one (W + scaling * B @ A), to compare a served adapter with a merged model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from radixgen.runtime.model.arch import ModelArch

ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL_TARGETS = ATTN + ("gate_proj", "up_proj", "down_proj")


def tiny_lora_engine(tiny_model_path: Path, adapters: dict, **extra):
    """An Engine on the tiny dummy model serving `adapters` ({name: folder})."""
    from radixgen.runtime.engine import Engine

    return Engine(
        str(tiny_model_path),
        load_format="dummy",
        max_total_tokens=2048,
        enable_lora=True,
        lora_paths={name: str(path) for name, path in adapters.items()},
        **extra,
    )


def module_shapes(arch: ModelArch) -> dict[str, tuple[int, int]]:
    """(out, in) of each adaptable projection."""
    h, q, kv, i = arch.hidden_size, arch.q_size, arch.kv_size, arch.intermediate_size
    return {
        "q_proj": (q, h),
        "k_proj": (kv, h),
        "v_proj": (kv, h),
        "o_proj": (h, q),
        "gate_proj": (i, h),
        "up_proj": (i, h),
        "down_proj": (h, i),
    }


def hf_name(layer: int, target: str) -> str:
    block = "self_attn" if target in ATTN else "mlp"
    return f"model.layers.{layer}.{block}.{target}"


def write_adapter(
    folder: Path,
    arch: ModelArch,
    *,
    rank: int = 8,
    alpha: float = 16.0,
    targets=ALL_TARGETS,
    layers=None,
    seed: int = 0,
    std: float = 0.05,
    rslora: bool = False,
    config_changes: dict | None = None,
    base_model: str = "HuggingFaceTB/SmolLM2-135M-Instruct",
) -> Path:
    """A PEFT folder: adapter_config.json and adapter_model.safetensors with random A/B."""
    folder.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    shapes = module_shapes(arch)
    tensors = {}
    for layer in range(arch.num_layers) if layers is None else layers:
        for target in targets:
            out, inp = shapes[target]
            prefix = f"base_model.model.{hf_name(layer, target)}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, inp, generator=gen) * std
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out, rank, generator=gen) * std
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": alpha,
        "target_modules": list(targets),
        "use_rslora": rslora,
        "bias": "none",
        "lora_dropout": 0.0,
        "task_type": "CAUSAL_LM",
    } | (config_changes or {})
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def merged_weights(weights: dict[str, torch.Tensor], adapter_folder: Path) -> dict:
    """`weights` (HF names) with the adapter merged in: W + scaling * B @ A, in float64."""
    from safetensors.torch import load_file

    config = json.loads((adapter_folder / "adapter_config.json").read_text())
    r, alpha = config["r"], config["lora_alpha"]
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    tensors = load_file(str(adapter_folder / "adapter_model.safetensors"))
    out = dict(weights)
    for key, a in tensors.items():
        if ".lora_A." not in key:
            continue
        b = tensors[key.replace(".lora_A.", ".lora_B.")]
        name = key.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
        w = out[name]
        out[name] = (w.double() + scaling * (b.double() @ a.double())).to(w.dtype)
    return out

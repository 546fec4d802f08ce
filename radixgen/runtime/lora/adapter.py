"""A LoRA adapter in PEFT's format, read and checked against the served model.

A PEFT folder holds `adapter_config.json` (r, lora_alpha, target_modules, use_rslora,
base_model_name_or_path, ...) and `adapter_model.safetensors` with, per adapted projection,
`base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight` [r, in] and `...lora_B.weight`
[out, r]. The delta of a projection is scaling * B @ A with scaling = lora_alpha / r, or
lora_alpha / sqrt(r) with rslora; the scaling is folded into B here, once, so the forward
computes (x @ A.T) @ B.T and nothing else. Every failure is a `LoraError` with an error code
the server turns into a 400.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from radixgen.config import LORA_TARGETS
from radixgen.runtime.model.arch import ModelArch

# (projection of the model, its output slice index) of each PEFT target: q/k/v are fused into
# `qkv` and gate/up into `gate_up` (runtime/model/llama.py)
TARGET_PROJECTION = {
    "q_proj": ("qkv", 0),
    "k_proj": ("qkv", 1),
    "v_proj": ("qkv", 2),
    "o_proj": ("o", 0),
    "gate_proj": ("gate_up", 0),
    "up_proj": ("gate_up", 1),
    "down_proj": ("down", 0),
}
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
_KEY = re.compile(
    r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$"
)


class LoraError(ValueError):
    """An adapter that cannot be served; `code` names the reason, `status` the HTTP status."""

    def __init__(self, message: str, code: str, status: int = 400):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


def projection_shapes(arch: ModelArch) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    """Per fused projection: its input size and its output slices (start, size), in the order
    of TARGET_PROJECTION's slice indices."""
    h, q, kv, inter = arch.hidden_size, arch.q_size, arch.kv_size, arch.intermediate_size
    return {
        "qkv": (h, [(0, q), (q, kv), (q + kv, kv)]),
        "o": (q, [(0, h)]),
        "gate_up": (h, [(0, inter), (inter, inter)]),
        "down": (inter, [(0, h)]),
    }


@dataclass
class LoraAdapter:
    """A loaded adapter: `weights[(layer, target)] = (A [r, in], B * scaling [out, r])` on the
    host, in the model dtype. `cache_key` is unique per load, so a name reloaded with other
    weights never matches the KV of its earlier load."""

    name: str
    path: str
    rank: int
    scaling: float
    targets: tuple[str, ...]
    base_model: str | None
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]
    cache_key: str = ""

    @property
    def num_bytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.weights.values())


def read_config(folder: Path) -> dict:
    config_path = folder / "adapter_config.json"
    if not folder.is_dir():
        raise LoraError(f"lora_path {str(folder)!r} is not a folder", "lora_path_not_found")
    if not config_path.is_file():
        raise LoraError(f"{folder} has no adapter_config.json", "lora_path_not_found")
    if not (folder / "adapter_model.safetensors").is_file():
        raise LoraError(f"{folder} has no adapter_model.safetensors", "lora_path_not_found")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LoraError(f"{config_path}: not JSON ({exc})", "invalid_lora_config") from None
    if not isinstance(config, dict) or not isinstance(config.get("r"), int) or config["r"] < 1:
        raise LoraError(f"{config_path}: 'r' must be a positive integer", "invalid_lora_config")
    for key in ("use_dora", "rank_pattern", "alpha_pattern", "modules_to_save"):
        if config.get(key):
            raise LoraError(
                f"{config_path}: {key} is not supported (plain LoRA only)", "invalid_lora_config"
            )
    if config.get("bias", "none") != "none":
        raise LoraError(f"{config_path}: LoRA bias is not supported", "invalid_lora_config")
    return config


def load_adapter(
    name: str, path: str, arch: ModelArch, dtype: torch.dtype, max_rank: int, targets: tuple
) -> LoraAdapter:
    """Read and check the PEFT adapter at `path` for the model of `arch` and a pool of
    `max_rank` holding `targets`. Raises LoraError."""
    folder = Path(path)
    config = read_config(folder)
    rank = config["r"]
    if rank > max_rank:
        raise LoraError(
            f"adapter {name!r} has rank {rank}; --max-lora-rank is {max_rank}",
            "lora_rank_too_large",
        )
    alpha = float(config.get("lora_alpha", rank))
    scaling = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(folder / "adapter_model.safetensors"))
    except (SafetensorError, OSError) as exc:
        raise LoraError(
            f"{folder}: unreadable safetensors ({exc})", "invalid_lora_weights"
        ) from None
    pairs = _pair_tensors(name, tensors)
    weights = {}
    shapes = projection_shapes(arch)
    for (layer, target), (a, b) in sorted(pairs.items()):
        _check_pair(name, arch, shapes, layer, target, a, b, rank, targets)
        weights[(layer, target)] = (a.to(dtype), (b.float() * scaling).to(dtype))
    if not weights:
        raise LoraError(f"adapter {name!r} holds no LoRA weights", "invalid_lora_weights")
    return LoraAdapter(
        name,
        str(path),
        rank,
        scaling,
        tuple(sorted({t for _, t in weights}, key=LORA_TARGETS.index)),
        config.get("base_model_name_or_path"),
        weights,
    )


def _pair_tensors(name: str, tensors: dict[str, torch.Tensor]) -> dict:
    """(layer, target) -> (A, B) from PEFT names; refuses names that are not LoRA A/B weights
    of a decoder layer's projection (an embedding or lm_head adapter)."""
    found: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        m = _KEY.match(key)
        if m is None:
            raise LoraError(
                f"adapter {name!r}: {key} adapts a module this server cannot adapt "
                f"(it adapts {', '.join(LORA_TARGETS)})",
                "lora_target_not_supported",
            )
        found.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = tensor
    for (layer, target), ab in found.items():
        if set(ab) != {"A", "B"}:
            raise LoraError(
                f"adapter {name!r}: layer {layer} {target} has lora_{''.join(ab)} only",
                "invalid_lora_weights",
            )
    return {k: (v["A"], v["B"]) for k, v in found.items()}


def _check_pair(name, arch, shapes, layer, target, a, b, rank, targets) -> None:
    if target not in TARGET_PROJECTION:
        raise LoraError(
            f"adapter {name!r} targets {target}, which the model lacks "
            f"(it adapts {', '.join(LORA_TARGETS)})",
            "lora_target_not_supported",
        )
    if target in MLP_TARGETS and arch.is_moe_layer(layer):
        raise LoraError(
            f"adapter {name!r} targets {target} of layer {layer}, a mixture-of-experts layer "
            "with no dense MLP to adapt",
            "lora_target_not_supported",
        )
    if target not in targets:
        raise LoraError(
            f"adapter {name!r} targets {target}, which --lora-target-modules "
            f"({', '.join(targets)}) leaves out",
            "lora_target_not_supported",
        )
    proj, index = TARGET_PROJECTION[target]
    in_size, slices = shapes[proj]
    want_a, want_b = (rank, in_size), (slices[index][1], rank)
    if layer >= arch.num_layers or tuple(a.shape) != want_a or tuple(b.shape) != want_b:
        raise LoraError(
            f"adapter {name!r} does not fit this model (another base model?): layer {layer} "
            f"{target} has A {tuple(a.shape)}, B {tuple(b.shape)}; the model needs A {want_a}, "
            f"B {want_b} over {arch.num_layers} layers",
            "lora_shape_mismatch",
        )

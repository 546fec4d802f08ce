"""Checkpoint folders written by tests: the tiny model's config and tokenizer with chosen
weights (dummy weights of a seed, perturbed, scaled, or of another shape) as safetensors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import dummy_state_dict

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def tiny_weights(model_folder: Path, seed: int) -> dict[str, torch.Tensor]:
    """The dummy weights `--load-format dummy --seed <seed>` builds for the folder's config."""
    arch = ModelArch.from_folder(model_folder)
    return dummy_state_dict(arch, torch.float32, torch.device("cpu"), seed)


def write_checkpoint(
    folder: Path,
    model_folder: Path,
    weights: dict[str, torch.Tensor],
    config_changes: dict | None = None,
) -> Path:
    """`folder` as an HF model folder: the config of `model_folder` (with `config_changes`),
    its tokenizer files and `weights` in model.safetensors."""
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads((model_folder / "config.json").read_text()) | (config_changes or {})
    (folder / "config.json").write_text(json.dumps(config))
    for name in TOKENIZER_FILES:
        if (model_folder / name).is_file():
            shutil.copy(model_folder / name, folder / name)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder

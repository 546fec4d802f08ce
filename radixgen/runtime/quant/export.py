"""Writes pre-quantized checkpoints of a dense HF checkpoint, in the layouts quant/checkpoint.py
reads (for tests and for serving a model quantized once, ahead of time):

    python -m radixgen.runtime.quant.export SRC DST --format modelopt-nvfp4

Formats: modelopt-nvfp4, modelopt-fp8 (per-tensor), modelopt-fp8-channel
(FP8_PER_CHANNEL_PER_TOKEN), ct-nvfp4 (compressed-tensors nvfp4-pack-quantized: one global
scale shared by q/k/v and by gate/up, stored as its inverse), ct-fp8 (compressed-tensors
float-quantized, per-channel). lm_head, embeddings, norms and MoE routers stay dense.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from radixgen.runtime.quant.weight import (
    QuantizedWeight,
    is_quantizable,
    nvfp4_tensor_scale_of,
    quantize_fp8_weight,
    quantize_nvfp4_weight,
)

FORMATS = ("modelopt-nvfp4", "modelopt-fp8", "modelopt-fp8-channel", "ct-nvfp4", "ct-fp8")
_FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("w1", "w3"))
_MODELOPT_ALGO = {
    "modelopt-nvfp4": "NVFP4",
    "modelopt-fp8": "FP8",
    "modelopt-fp8-channel": "FP8_PER_CHANNEL_PER_TOKEN",
}


def quantize_for_export(weights: dict[str, torch.Tensor], fmt: str) -> dict[str, QuantizedWeight]:
    """HF name -> QuantizedWeight of every quantizable weight, as `fmt`'s producer makes it.
    compressed-tensors NVFP4 derives its tensor scale from the stored global scale g
    (fp32(1 / g), as the loader does), never the other way round: 1 / (1 / s) != s in float32."""
    names = [n for n, t in weights.items() if is_quantizable(n, t, False)]
    if fmt == "modelopt-fp8" or fmt in ("modelopt-fp8-channel", "ct-fp8"):
        per_tensor = fmt == "modelopt-fp8"
        return {n: quantize_fp8_weight(weights[n], per_tensor) for n in names}
    if fmt == "modelopt-nvfp4":
        return {n: quantize_nvfp4_weight(weights[n]) for n in names}
    if fmt != "ct-nvfp4":
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = {}
    for name in names:
        tensor_scale = 1.0 / ct_global_scale(weights, name)
        out[name] = quantize_nvfp4_weight(weights[name], tensor_scale=tensor_scale)
    return out


def ct_global_scale(weights: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """compressed-tensors' NVFP4 global scale 6 * 448 / amax, the amax over the weights fused
    with `name` (q/k/v, gate/up)."""
    group = _fused_group(name, weights)
    amax = torch.stack([weights[g].abs().amax().float() for g in group]).amax()
    return 1.0 / nvfp4_tensor_scale_of(amax)


def _fused_group(name: str, weights: dict) -> list[str]:
    """The names fused with `name` into one GEMM (itself alone if none)."""
    for group in _FUSED:
        for part in group:
            if name.endswith(f".{part}.weight"):
                base = name.removesuffix(f"{part}.weight")
                return [f"{base}{p}.weight" for p in group if f"{base}{p}.weight" in weights]
    return [name]


def _tensors(name: str, q: QuantizedWeight, fmt: str, weights: dict) -> dict[str, torch.Tensor]:
    prefix = name.removesuffix("weight")
    first_row_scale = q.scale.reshape(-1)[0].clone()
    if q.format == "fp8":
        scale = first_row_scale if fmt == "modelopt-fp8" else q.scale.clone()
        return {prefix + "weight": q.data, prefix + "weight_scale": scale}
    if fmt == "modelopt-nvfp4":
        return {
            prefix + "weight": q.data,
            prefix + "weight_scale": q.block_scales,
            prefix + "weight_scale_2": first_row_scale,
        }
    return {
        prefix + "weight_packed": q.data,
        prefix + "weight_scale": q.block_scales,
        prefix + "weight_global_scale": ct_global_scale(weights, name).reshape(1),
    }


def _quant_config(fmt: str) -> dict:
    if fmt.startswith("modelopt"):
        return {
            "quant_method": "modelopt",
            "quant_algo": _MODELOPT_ALGO[fmt],
            "group_size": 16,
            "exclude_modules": ["lm_head"],
        }
    weights = (
        {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
        if fmt == "ct-nvfp4"
        else {"num_bits": 8, "type": "float", "strategy": "channel"}
    )
    return {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized" if fmt == "ct-nvfp4" else "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ["lm_head"],
    }


def export_checkpoint(src: str | Path, dst: str | Path, fmt: str) -> dict[str, QuantizedWeight]:
    """Write `fmt` of the dense checkpoint in `src` to `dst` (config, tokenizer files copied);
    returns the producer's QuantizedWeights by HF name."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    weights: dict[str, torch.Tensor] = {}
    for path in sorted(src.glob("*.safetensors")):
        weights.update({n: t.float() for n, t in load_file(str(path)).items()})
    quantized = quantize_for_export(weights, fmt)
    out = {n: t.contiguous() for n, t in weights.items() if n not in quantized}
    for name, q in quantized.items():
        out.update({k: v.contiguous() for k, v in _tensors(name, q, fmt, weights).items()})
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / "model.safetensors"))
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = _quant_config(fmt)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    if fmt.startswith("modelopt"):
        (dst / "hf_quant_config.json").write_text(
            json.dumps({"quantization": _quant_config(fmt)}, indent=2)
        )
    for extra in src.iterdir():
        if extra.suffix == ".json" and extra.name not in (
            "config.json",
            "model.safetensors.index.json",
        ):
            shutil.copy(extra, dst / extra.name)
    return quantized


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", help="dense HF checkpoint folder (safetensors)")
    parser.add_argument("dst", help="output folder")
    parser.add_argument("--format", required=True, choices=FORMATS)
    args = parser.parse_args(argv)
    quantized = export_checkpoint(args.src, args.dst, args.format)
    print(f"wrote {args.dst}: {len(quantized)} {args.format} weights")


if __name__ == "__main__":
    main()

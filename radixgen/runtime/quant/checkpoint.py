"""Pre-quantized checkpoints, read exactly as their producer stored them (never re-quantized).

Detected from `hf_quant_config.json` (NVIDIA ModelOpt) or `config.json`'s `quantization_config`
(`quant_method` "modelopt" or "compressed-tensors"). Tensors, per linear layer `P`:
  ModelOpt NVFP4       P.weight uint8 [N, K/2], P.weight_scale E4M3 [N, K/16],
                       P.weight_scale_2 FP32 (the tensor scale), P.input_scale FP32
  ModelOpt FP8         P.weight E4M3 [N, K], P.weight_scale FP32 [] (FP8) or [N] / [N, 1]
                       (FP8_PER_CHANNEL_PER_TOKEN), P.input_scale
  compressed-tensors   nvfp4-pack-quantized: P.weight_packed uint8 [N, K/2], P.weight_scale E4M3
                       [N, K/16], P.weight_global_scale FP32 [1] = 1 / tensor scale (shared by
                       fused q/k/v and gate/up), P.input_global_scale;
                       float-quantized (FP8): P.weight E4M3, P.weight_scale FP32 [N, 1] or [1]
Both store two E2M1 codes per byte, element 2i in the low nibble: the kernels' own layout.
KV-cache scales (`k_scale`, `v_scale`) are dropped: the KV pools calibrate their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from radixgen.runtime.quant.weight import QuantizedWeight, quantize_state_dict

_MODELOPT_ALGOS = {"NVFP4": "nvfp4", "FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8"}
_CT_FORMATS = {"nvfp4-pack-quantized": "nvfp4", "float-quantized": "fp8", "naive-quantized": "fp8"}
_KV_SCALES = (".k_scale", ".v_scale")


@dataclass(frozen=True)
class CheckpointQuantization:
    producer: str  # "modelopt" or "compressed-tensors"
    method: str  # "fp8" or "nvfp4"


def checkpoint_quantization(folder: str | Path) -> CheckpointQuantization | None:
    """How the checkpoint in `folder` is quantized; None for a dense one. Raises ValueError
    for a quantization scheme radixgen cannot read."""
    folder = Path(folder)
    hf_quant = folder / "hf_quant_config.json"
    if hf_quant.is_file():
        return _modelopt(json.loads(hf_quant.read_text()).get("quantization", {}))
    config = folder / "config.json"
    qcfg = json.loads(config.read_text()).get("quantization_config") if config.is_file() else None
    if not qcfg:
        return None
    kind = qcfg.get("quant_method")
    if kind == "modelopt":
        return _modelopt(qcfg)
    if kind == "compressed-tensors" and qcfg.get("format") in _CT_FORMATS:
        return CheckpointQuantization("compressed-tensors", _CT_FORMATS[qcfg["format"]])
    raise ValueError(
        f"{folder}: unsupported checkpoint quantization {kind!r} "
        f"(format {qcfg.get('format')!r}); radixgen reads ModelOpt NVFP4/FP8 and "
        f"compressed-tensors {', '.join(_CT_FORMATS)}"
    )


def _modelopt(qcfg: dict) -> CheckpointQuantization:
    algo = str(qcfg.get("quant_algo", "")).upper()
    if algo not in _MODELOPT_ALGOS:
        raise ValueError(
            f"unsupported ModelOpt quant_algo {algo!r}; supported: {', '.join(_MODELOPT_ALGOS)}"
        )
    if algo == "NVFP4" and qcfg.get("group_size", 16) != 16:
        raise ValueError(f"ModelOpt NVFP4 with group_size {qcfg['group_size']}: only 16 exists")
    return CheckpointQuantization("modelopt", _MODELOPT_ALGOS[algo])


def read_quantized(weights: dict) -> dict:
    """Replace (in place) each quantized layer's tensors by one QuantizedWeight under
    `P.weight`, as stored: codes, block scales and scales are moved, never recomputed."""
    for name in [n for n in weights if n.endswith(_KV_SCALES)]:
        del weights[name]
    for name in [n for n in weights if n.endswith(".weight_scale")]:
        prefix = name.removesuffix("weight_scale")
        weights[prefix + "weight"] = _read_layer(weights, prefix)
    return weights


def _read_layer(weights: dict, prefix: str) -> QuantizedWeight:
    data = weights.pop(prefix + "weight_packed", None)
    data = weights.pop(prefix + "weight") if data is None else data
    scale = weights.pop(prefix + "weight_scale")
    input_scale = weights.pop(
        prefix + "input_scale", weights.pop(prefix + "input_global_scale", None)
    )
    rows = data.shape[:-1]
    if data.dtype == torch.float8_e4m3fn:
        per_row = scale.float().reshape(-1, 1) if scale.numel() > 1 else scale.float().reshape(1, 1)
        return QuantizedWeight(
            "fp8", data, per_row.expand(*rows, 1).contiguous(), None, input_scale
        )
    if data.dtype != torch.uint8 or scale.dtype != torch.float8_e4m3fn:
        raise ValueError(
            f"{prefix}weight: a quantized weight is float8_e4m3fn (FP8) or uint8 with "
            f"float8_e4m3fn block scales (NVFP4), got {data.dtype} / {scale.dtype}"
        )
    if prefix + "weight_scale_2" in weights:  # ModelOpt: the tensor scale itself
        tensor_scale = weights.pop(prefix + "weight_scale_2").float()
    else:  # compressed-tensors: its inverse
        tensor_scale = 1.0 / weights.pop(prefix + "weight_global_scale").float()
    tensor_scale = tensor_scale.reshape(1, 1).expand(*rows, 1).contiguous()
    return QuantizedWeight("nvfp4", data, tensor_scale, scale, input_scale)


def quantized_weights(
    folder: str | Path,
    weights: dict,
    quantization: str | None,
    quantize_lm_head: bool,
    scale_search: bool,
    load_format: str,
) -> tuple[dict, str]:
    """(the state dict with QuantizedWeights in place, the method in effect): a pre-quantized
    checkpoint as stored, else `quantization` applied on load (None or "none": dense)."""
    found = None if load_format == "dummy" else checkpoint_quantization(folder)
    if found is not None:
        if quantization not in (None, found.method):
            raise ValueError(
                f"--quantization {quantization}: the checkpoint is already "
                f"{found.producer} {found.method}; omit the flag or pass {found.method}"
            )
        return read_quantized(weights), found.method
    method = quantization or "none"
    return quantize_state_dict(weights, method, quantize_lm_head, scale_search), method

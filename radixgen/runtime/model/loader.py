"""Weights from an HF-format folder: safetensors (single file or sharded with an index json),
or `dummy` random weights built from config.json alone."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import torch

from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.registry import param_shapes

# tensor parallelism: HF name -> (the name kept, cut(full or safetensors slice)), None: skipped
Shard = Callable[[str], "tuple[str, Callable[[Any], torch.Tensor]] | None"]
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_dtype(name: str, arch: ModelArch, device: torch.device) -> torch.dtype:
    """`auto` keeps the checkpoint's dtype on a GPU; on the CPU float16 becomes float32
    (CPU float16 GEMMs are slow)."""
    if name != "auto":
        if name not in _DTYPES:
            raise ValueError(f"unknown dtype {name!r}; choose auto, {', '.join(_DTYPES)}")
        return _DTYPES[name]
    dtype = _DTYPES.get(arch.torch_dtype.replace("torch.", ""), torch.float32)
    if device.type == "cpu" and dtype == torch.float16:
        return torch.float32
    return dtype


def load_state_dict(
    folder: str | Path,
    arch: ModelArch,
    dtype: torch.dtype,
    load_format: str,
    device: torch.device,
    seed: int = 0,
    shard: Shard | None = None,
) -> dict[str, torch.Tensor]:
    """HF parameter name -> tensor (on `device`; floating weights in `dtype`, while a quantized
    checkpoint's codes, FP8 data and scales keep their stored dtype: quant/checkpoint.py reads
    them exactly). `shard(name)` (tensor parallelism, distributed/sharding.py): the name this
    rank keeps a weight under and how to cut it, or None to skip it; only the cut is read."""
    if load_format == "dummy":
        return dummy_state_dict(arch, dtype, device, seed, shard)
    if load_format not in ("auto", "safetensors"):
        raise ValueError(f"unknown load format {load_format!r}; choose auto, safetensors, dummy")
    from safetensors import safe_open

    out: dict[str, torch.Tensor] = {}
    for path in _safetensors_files(Path(folder)):
        with safe_open(str(path), framework="pt", device="cpu") as file:
            for name in file.keys():
                planned = (name, _whole) if shard is None else shard(name)
                if planned is None:
                    continue
                if shard is not None and "scale" in name.rsplit(".", 1)[-1]:
                    raise ValueError(
                        "a pre-quantized checkpoint is not sharded under --tp-size > 1; load a "
                        "bf16 checkpoint with --quantization fp8/nvfp4 instead"
                    )
                tensor = planned[1](file.get_slice(name))
                keep = tensor.dtype not in _DTYPES.values() or "scale" in name.rsplit(".", 1)[-1]
                out[planned[0]] = tensor.to(device=device, dtype=None if keep else dtype)
    return out


def _whole(t) -> torch.Tensor:
    return t[:]


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: shards listed in the index are missing: {missing}")
        return [folder / s for s in shards]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{folder} has no *.safetensors weights (use --load-format dummy for random weights)"
        )
    return files


def dummy_state_dict(
    arch: ModelArch,
    dtype: torch.dtype,
    device: torch.device,
    seed: int = 0,
    shard: Shard | None = None,
) -> dict[str, torch.Tensor]:
    """Random weights with the real shapes (uniform, std 0.02; norms at 1), built on `device`
    from a counter-based hash in exact integer arithmetic, so every device gets the same weights
    (a generator's randn differs between CPU and CUDA) and CUDA can be checked against the CPU."""
    offset = [0]

    def make(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        if name.endswith("norm.weight"):
            return torch.ones(shape, dtype=dtype, device=device)
        count = math.prod(shape)
        values = _hashed_uniform(offset[0], count, seed, device)  # in [0, 1)
        offset[0] += count
        return ((values - 0.5) * (0.02 * math.sqrt(12.0))).view(shape).to(dtype)

    out = {}
    for name, shape in param_shapes(arch).items():
        planned = (name, _whole) if shard is None else shard(name)
        if planned is None:  # another rank's expert: only its counters are skipped
            offset[0] += math.prod(shape) * (not name.endswith("norm.weight"))
            continue
        out[planned[0]] = planned[1](make(name, shape)).contiguous()
    return out


def param_bytes(arch: ModelArch, dtype: torch.dtype) -> int:
    """Bytes of all weights of `arch` in `dtype`, from the shapes alone (nothing allocated)."""
    size = torch.empty((), dtype=dtype).element_size()
    return sum(math.prod(shape) for shape in param_shapes(arch).values()) * size


_MASK31 = (1 << 31) - 1


def _hashed_uniform(start: int, count: int, seed: int, device: torch.device) -> torch.Tensor:
    """float32 values in [0, 1) hashed from the counters start .. start + count - 1 and the seed:
    31-bit lanes (products stay below 2^62, exact in int64 everywhere), a few multiply-xorshift
    rounds. Built in chunks so the int64 temporaries stay small."""
    out = torch.empty(count, dtype=torch.float32, device=device)
    chunk = 1 << (26 if device.type == "cuda" else 18)  # CPU: temporaries that stay in cache
    for lo in range(0, count, chunk):
        h = torch.arange(
            start + lo, start + min(count, lo + chunk), dtype=torch.int64, device=device
        )
        h = ((h & _MASK31) ^ ((h >> 31) * 0x3C6EF372 + seed * 0x2545F491 + 0x1B873593)) & _MASK31
        for mult in (0x5BD1E995, 0x27D4EB2F, 0x165667B1):
            h.mul_(mult & _MASK31).bitwise_and_(_MASK31)
            h.bitwise_xor_(h >> 15)
        out[lo : lo + h.numel()] = h.to(torch.float32).mul_(1.0 / (1 << 31))
    return out

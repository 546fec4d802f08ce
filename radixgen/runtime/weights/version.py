"""What a weight version is, and the radix-cache namespace requests of a version use."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

CHECKSUM_SAMPLES = 4096  # elements hashed per tensor (evenly strided), besides names and shapes
INITIAL_VERSION = "default"  # the weights loaded at startup (SGLang's default weight_version)


class CacheNamespace(NamedTuple):
    """The radix-cache namespace of a request: KV computed under one (weight version, adapter)
    is never matched under another. `adapter` is None for the base model."""

    weight_version: str
    adapter: str | None = None


@dataclass(frozen=True)
class WeightVersion:
    """One set of weights: its name, where it came from (a folder, or "tensor" for weights a
    trainer sent), when it was loaded (unix seconds), a checksum and its size."""

    name: str
    source: str
    load_format: str
    checksum: str
    num_bytes: int
    loaded_at: float = field(default_factory=time.time)

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "load_format": self.load_format,
            "checksum": self.checksum,
            "num_bytes": self.num_bytes,
            "loaded_at": self.loaded_at,
        }


def sampled_checksum(weights: dict[str, torch.Tensor]) -> str:
    """blake2b over every tensor's name, dtype and shape and CHECKSUM_SAMPLES of its elements
    at a fixed stride (the whole tensor when smaller): the same weights always give the same
    value, and any change of names, shapes or dtypes, or a retrained tensor, changes it. A
    change confined to unsampled elements can go unseen: it is a fingerprint read in
    milliseconds, not a full-content hash (which would read every byte of an 8B model)."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(weights):
        tensor = weights[name]
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        flat = tensor.detach().reshape(-1)
        stride = max(flat.numel() // CHECKSUM_SAMPLES, 1)
        sample = flat[::stride][:CHECKSUM_SAMPLES].to("cpu", torch.float32).contiguous()
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()

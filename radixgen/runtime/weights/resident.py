"""Weight versions held in memory, and the two ways a switch makes one of them serve.

- `device`: the version's model lives on the serving device (the GPU, or the CPU when serving
  there), with its own CUDA graphs captured before the switch: a switch or a rollback is a
  pointer switch (`ModelRunner.model` and `.graphs` point at the other version's objects).
- `pinned_host`: there was no room for a second copy on the GPU, so the version waits in pinned
  host memory as a model of plain tensors; a switch exchanges tensor contents with the serving
  model in place (host -> device and device -> host, one tensor at a time through one device
  temporary), so the serving model's addresses, and the CUDA graphs that read them, stay
  valid. The exchange moves every byte over PCIe both ways: far slower than a pointer switch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from radixgen.runtime.weights.version import WeightVersion

DEVICE, PINNED_HOST = "device", "pinned_host"


@dataclass
class ResidentWeights:
    """One version in memory: its model object, its decode graphs (None without CUDA graphs),
    where its tensors are, and its canary entropy once measured."""

    version: WeightVersion
    model: Any
    graphs: Any
    placement: str
    canary_entropy: float | None = None


def model_tensors(obj: Any, seen: set[int] | None = None) -> Iterator[torch.Tensor]:
    """Every tensor a model object holds, in a fixed traversal order (attributes, dataclass
    fields, lists, tuples), each once: two models of one architecture yield the same sequence
    of shapes, which is what `exchange` pairs up."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen:
            seen.add(id(obj))
            yield obj
        return
    if isinstance(obj, (list, tuple)):
        for item in obj:
            yield from model_tensors(item, seen)
        return
    if id(obj) in seen or not hasattr(obj, "__dict__") or callable(obj) and not _holds_state(obj):
        return
    seen.add(id(obj))
    values = (
        [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        if dataclasses.is_dataclass(obj)
        else list(vars(obj).values())
    )
    for value in values:
        yield from model_tensors(value, seen)


def _holds_state(obj: Any) -> bool:
    """A callable object (an MLP) holds weights; a plain function or bound method does not."""
    return not (isinstance(obj, type) or hasattr(obj, "__func__") or hasattr(obj, "__code__"))


def exchange(serving: Any, staged: Any) -> None:
    """Swap the contents of two models' tensors: `serving` (on the device) gets `staged`'s
    values and `staged` (pinned host) gets `serving`'s. Tensor objects and addresses stay."""
    pairs = list(zip(model_tensors(serving), model_tensors(staged), strict=True))
    for dev, host in pairs:
        if dev.shape != host.shape or dev.dtype != host.dtype:
            raise ValueError(
                f"cannot exchange a {dev.shape} {dev.dtype} tensor with {host.shape} {host.dtype}"
            )
    for dev, host in pairs:
        incoming = host.to(dev.device, non_blocking=True, copy=True)  # never an alias of host
        host.copy_(dev, non_blocking=True)
        dev.copy_(incoming)
    if pairs and pairs[0][0].is_cuda:
        torch.cuda.synchronize(pairs[0][0].device)


def pin_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights in pinned host memory (consumed)."""
    return {name: weights.pop(name).to("cpu").pin_memory() for name in list(weights)}


def fits_on_device(device: torch.device, num_bytes: int, headroom: float = 1.1) -> bool:
    """Whether the device's measured free memory holds another `num_bytes` of weights (plus
    10% for the standby's CUDA graphs and the canary's activations)."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return free >= num_bytes * headroom

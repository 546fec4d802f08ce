"""The checks a new weight version passes before it may serve. Each failure is a
`WeightCheckError` naming its check (`architecture`, `shapes`, `finite`, `canary`), so the
client learns which one failed; the active version is never touched by a failed update."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from radixgen.radix.kv_pool import KVPool
from radixgen.runtime.attention import TorchAttention
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.registry import param_shapes

OPTIONAL_PREFIXES = ("lm_head.",)  # a tied checkpoint may or may not carry its lm_head


class WeightCheckError(ValueError):
    """A candidate version failed `check` (a short name) for the reason in the message."""

    def __init__(self, check: str, message: str):
        super().__init__(f"{check} check failed: {message}")
        self.check = check


def check_architecture(active: ModelArch, candidate: ModelArch) -> None:
    """The same model class and the same parameter shapes (so KV layout and vocabulary agree)."""
    if candidate.architecture != active.architecture:
        raise WeightCheckError(
            "architecture",
            f"the checkpoint is a {candidate.architecture}; "
            f"the served model is a {active.architecture}",
        )
    want, got = param_shapes(active), param_shapes(candidate)
    if want != got:
        diff = next(
            name for name in sorted(set(want) | set(got)) if want.get(name) != got.get(name)
        )
        raise WeightCheckError(
            "shapes",
            f"{diff}: the served model has shape {want.get(diff)}, "
            f"the checkpoint's config gives {got.get(diff)}",
        )


def check_shapes(arch: ModelArch, weights: dict[str, torch.Tensor]) -> None:
    """Every parameter of `arch` present with its shape, and nothing else."""
    want = param_shapes(arch)
    missing = [name for name in want if name not in weights]
    if missing:
        raise WeightCheckError("shapes", f"{len(missing)} weights are missing, e.g. {missing[0]}")
    for name, tensor in weights.items():
        if name not in want:
            if name.startswith(OPTIONAL_PREFIXES) or "rotary_emb" in name:
                continue
            raise WeightCheckError("shapes", f"unexpected weight {name}")
        if tuple(tensor.shape) != want[name]:
            raise WeightCheckError(
                "shapes",
                f"{name} has shape {tuple(tensor.shape)}; the served model's is {want[name]}",
            )


def check_finite(weights: dict[str, torch.Tensor]) -> None:
    """No NaN or Inf in any tensor (every element is read)."""
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise WeightCheckError("finite", f"{name} holds NaN or Inf values")


@dataclass(frozen=True)
class Canary:
    """Probe prompts (token ids) run on a candidate: its logits must be finite and its mean
    next-token entropy (nats) within `band` of the active version's on the same prompts."""

    prompts: tuple[tuple[int, ...], ...]
    band: float

    def entropy(self, model, arch: ModelArch, device: torch.device) -> float:
        """Mean next-token entropy of `model` over every position of every probe prompt; raises
        WeightCheckError("canary") on non-finite logits. Runs on a private KV pool and attention
        backend, so it may run on another thread than the scheduler's forwards."""
        if not self.prompts:
            return 0.0
        logits = canary_logits(model, arch, device, self.prompts)  # [T, vocab] float32
        if not bool(torch.isfinite(logits).all()):
            raise WeightCheckError("canary", "the probe prompts gave non-finite logits")
        logp = torch.log_softmax(logits, dim=-1)
        return float(-(logp.exp() * logp).sum(-1).mean())

    def check(self, active_entropy: float, candidate_entropy: float) -> None:
        if math.fabs(candidate_entropy - active_entropy) > self.band:
            raise WeightCheckError(
                "canary",
                f"mean token entropy {candidate_entropy:.3f} nats on the probe prompts is "
                f"outside the band of +-{self.band:g} around the active version's "
                f"{active_entropy:.3f}",
            )


def canary_logits(
    model, arch: ModelArch, device: torch.device, prompts: tuple[tuple[int, ...], ...], lora=None
) -> torch.Tensor:
    """Logits [sum of prompt lengths, vocab] of one extend forward over `prompts`, each on its
    own slots of a pool made for it (`lora`: the rows' adapters, a runtime/lora LoraBatch)."""
    lens = [len(p) for p in prompts]
    total, width = sum(lens), max(lens)
    pool = KVPool(total, arch.num_layers, *arch.pool_shape, model.dtype, device)
    attn = TorchAttention(*arch.attention_shape, cascade=False)
    starts = [0, *torch.tensor(lens).cumsum(0).tolist()]
    kv_slots = torch.zeros((len(prompts), width), dtype=torch.int64)
    for i, n in enumerate(lens):
        kv_slots[i, :n] = torch.arange(starts[i], starts[i] + n)
    batch = ForwardBatch(
        mode=ForwardMode.EXTEND,
        input_ids=torch.tensor([t for p in prompts for t in p], device=device),
        positions=torch.cat([torch.arange(n) for n in lens]).to(device),
        out_slots=torch.arange(total, device=device),
        kv_slots=kv_slots.to(device),
        seq_lens=lens,
        extend_lens=lens,
        logits_indices=torch.arange(total, device=device),
        lora=lora,
    )
    return model.forward(batch, pool, attn)

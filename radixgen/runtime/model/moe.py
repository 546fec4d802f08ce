"""The sparse mixture-of-experts feed-forward: a router (`route`), the routed experts as one
fused computation (kernels.fused_experts: Triton grouped GEMMs on CUDA, a sorted-by-expert
torch path on the CPU) and optional shared experts. Expert weights are stacked per layer as
w13 [E, 2I, H] (gate rows, then up rows) and w2 [E, H, I]."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from radixgen.kernels import fused_experts
from radixgen.runtime.model.arch import MoEArch
from radixgen.runtime.model.layers import DenseMLP, linear
from radixgen.runtime.quant.weight import QuantizedWeight, join_weights


@dataclass(frozen=True)
class ExpertNames:
    """How a family names its MoE weights under `model.layers.N.`."""

    block: str = "mlp"  # the sparse block: `{block}.gate.weight` is the router
    gate: str = "gate_proj"  # per-expert projections: `{block}.experts.{e}.{gate}.weight`
    up: str = "up_proj"
    down: str = "down_proj"
    shared: str = "shared_expert"  # `{block}.{shared}.{gate,up,down}.weight`


QWEN_NAMES = ExpertNames()
MIXTRAL_NAMES = ExpertNames(block="block_sparse_moe", gate="w1", up="w3", down="w2")
DEEPSEEK_NAMES = ExpertNames(shared="shared_experts")


def route(
    logits: torch.Tensor, moe: MoEArch, correction_bias: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights float32 [T, top_k], expert ids int64 [T, top_k]) from router logits [T, E]
    (float32); the rules are MoEArch's docstring. Tensor ops only (no host sync)."""
    scores = logits.softmax(dim=-1) if moe.scoring == "softmax" else logits.sigmoid()
    choice = scores if correction_bias is None else scores + correction_bias
    if moe.num_groups:
        groups = choice.view(choice.shape[0], moe.num_groups, -1)  # [T, G, E / G]
        group_score = (
            groups.topk(2, dim=-1).values.sum(-1) if moe.correction_bias else groups.amax(-1)
        )
        best = group_score.topk(moe.topk_groups, dim=-1).indices  # [T, topk_groups]
        keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, best, True)
        choice = choice.masked_fill(~keep.repeat_interleave(groups.shape[2], dim=1), float("-inf"))
    ids = choice.topk(moe.top_k, dim=-1).indices
    weights = scores.gather(1, ids)
    if moe.renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights * moe.routed_scaling_factor, ids


def local_experts(
    weights: torch.Tensor, ids: torch.Tensor, first: int, count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights, local ids) of a rank holding experts first .. first + count - 1: other
    experts' picks get weight 0 (and a valid local id), so they add nothing to the sum."""
    local = ids - first
    mine = (local >= 0) & (local < count)
    return weights * mine, local.clamp(0, count - 1)


@dataclass
class MoEBlock:
    moe: MoEArch
    router: torch.Tensor  # [E, H]; float32 when the family routes in float32 (sigmoid scoring)
    w13: torch.Tensor | QuantizedWeight  # [E, 2I, H]
    w2: torch.Tensor | QuantizedWeight  # [E, H, I]
    correction_bias: torch.Tensor | None  # float32 [E]
    shared: DenseMLP | None
    shared_gate: torch.Tensor | None  # [1, H]
    # expert parallelism: w13 and w2 hold experts first_expert .. first_expert + len(w13) - 1
    # of the router's E, and the output is this rank's partial sum (all-reduced by the model)
    first_expert: int = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """[T, H] -> [T, H]."""
        logits = F.linear(x.to(self.router.dtype), self.router).float()  # [T, E]
        weights, ids = route(logits, self.moe, self.correction_bias)
        if self.w13.shape[0] < logits.shape[1]:
            weights, ids = local_experts(weights, ids, self.first_expert, self.w13.shape[0])
        out = fused_experts(x, _dense(self.w13, x.dtype), _dense(self.w2, x.dtype), weights, ids)
        if self.shared is not None:
            shared = self.shared(x)
            if self.shared_gate is not None:
                shared = torch.sigmoid(linear(x, self.shared_gate)) * shared
            out = out + shared
        return out

    @classmethod
    def take(
        cls, weights: dict[str, torch.Tensor], prefix: str, moe: MoEArch, names: ExpertNames
    ) -> "MoEBlock":
        """Pop one sparse block from an HF state dict (`prefix` = `model.layers.N.`): per-expert
        weights are stacked (and freed as they are), or taken as they are when the checkpoint
        already stores them stacked (`experts.gate_up_proj` / `experts.down_proj`)."""
        p = f"{prefix}{names.block}."
        router = weights.pop(p + "gate.weight")
        if moe.scoring == "sigmoid":
            router = router.float()
        if p + "experts.gate_up_proj" in weights:
            w13, w2 = weights.pop(p + "experts.gate_up_proj"), weights.pop(p + "experts.down_proj")
        else:
            w13, w2 = _stack_experts(weights, p + "experts.", moe.num_experts, names)
        bias = weights.pop(p + "gate.e_score_correction_bias", None)
        shared = gate = None
        if moe.shared_expert_size:
            shared = DenseMLP.take(weights, f"{p}{names.shared}.", names.gate, names.up, names.down)
            gate = weights.pop(p + "shared_expert_gate.weight") if moe.shared_expert_gate else None
        return cls(
            moe,
            router,
            _contiguous(w13),
            _contiguous(w2),
            None if bias is None else bias.float(),
            shared,
            gate,
        )


def _dense(w: torch.Tensor | QuantizedWeight, dtype: torch.dtype) -> torch.Tensor:
    """Quantized experts run dequantized, one layer at a time: there is no quantized grouped
    GEMM, so they save memory but not time."""
    return w.dequantize(dtype) if isinstance(w, QuantizedWeight) else w


def _contiguous(w: torch.Tensor | QuantizedWeight) -> torch.Tensor | QuantizedWeight:
    return w if isinstance(w, QuantizedWeight) else w.contiguous()


def _stack_experts(
    weights: dict, prefix: str, num_experts: int, names: ExpertNames
) -> tuple[torch.Tensor, torch.Tensor]:
    take = lambda e, name: weights.pop(f"{prefix}{e}.{name}.weight")  # noqa: E731
    first_gate = weights[f"{prefix}0.{names.gate}.weight"]  # [I, H]
    if isinstance(first_gate, QuantizedWeight):
        w13 = [join_weights([take(e, names.gate), take(e, names.up)]) for e in range(num_experts)]
        w2 = [take(e, names.down) for e in range(num_experts)]
        return join_weights(w13, stack=True), join_weights(w2, stack=True)
    inter, hidden = first_gate.shape
    w13 = first_gate.new_empty(num_experts, 2 * inter, hidden)
    w2 = first_gate.new_empty(num_experts, hidden, inter)
    for e in range(num_experts):
        w13[e, :inter], w13[e, inter:] = take(e, names.gate), take(e, names.up)
        w2[e] = take(e, names.down)
    return w13, w2


def moe_block_shapes(
    prefix: str, moe: MoEArch, hidden: int, names: ExpertNames
) -> dict[str, tuple[int, ...]]:
    """Shapes of one sparse block's HF weights under `prefix` (= `model.layers.N.`)."""
    p, inter = f"{prefix}{names.block}.", moe.expert_size
    shapes: dict[str, tuple[int, ...]] = {p + "gate.weight": (moe.num_experts, hidden)}
    for e in range(moe.num_experts):
        shapes.update(
            {
                f"{p}experts.{e}.{names.gate}.weight": (inter, hidden),
                f"{p}experts.{e}.{names.up}.weight": (inter, hidden),
                f"{p}experts.{e}.{names.down}.weight": (hidden, inter),
            }
        )
    if moe.correction_bias:
        shapes[p + "gate.e_score_correction_bias"] = (moe.num_experts,)
    if moe.shared_expert_size:
        s = moe.shared_expert_size
        shapes.update(
            {
                f"{p}{names.shared}.{names.gate}.weight": (s, hidden),
                f"{p}{names.shared}.{names.up}.weight": (s, hidden),
                f"{p}{names.shared}.{names.down}.weight": (hidden, s),
            }
        )
        if moe.shared_expert_gate:
            shapes[p + "shared_expert_gate.weight"] = (1, hidden)
    return shapes

"""What each rank holds: the rank-local architecture and the load-time slicing of HF weights.

Column-parallel (output rows split): q/k/v (by heads), gate/up (by width). Row-parallel (input
columns split, partial sums all-reduced): o_proj, down. KV heads are split when tp divides
them, else replicated (tp a multiple of the KV heads: rank r holds KV head r * kv // tp, the
one its query heads read). Embedding and lm_head: vocabulary rows split, the last shard padded
with zero rows. Norms, routers and the shared-expert gate are replicated. MoE experts: with
--ep-size E the experts are split into E groups (renumbered from 0 on each rank), and each
expert's width is split over the tp / E ranks of its group.

Slices are read straight from the safetensors files (`safe_open(...).get_slice`), so a rank
never holds another rank's weights; dummy weights are built one full tensor at a time (their
values depend on the global offset) and cut at once."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import torch

from radixgen.runtime.distributed.group import RankInfo, TensorParallel
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.moe import MoEBlock

# takes a sliceable full tensor (a torch tensor or a safetensors slice) -> this rank's part
Take = Callable[[Any], torch.Tensor]
_LAYER = re.compile(r"model\.layers\.\d+\.")
_EXPERT = re.compile(r"(.*\.experts\.)(\d+)(\..*)")
_COLUMN = ("gate_proj", "up_proj", "w1", "w3")
_ROW = ("down_proj", "w2")


def check_shardable(arch: ModelArch, info: RankInfo) -> None:
    """ValueError, saying which flag and which size, when `arch` cannot split as asked."""
    tp, ep = info.tp_size, info.ep_size
    if tp == 1 and ep == 1:
        return
    if arch.mla is not None:
        raise ValueError(
            f"--tp-size {tp}: {arch.architecture} (multi-head latent attention) is not sharded; "
            "tensor and expert parallelism cover the Llama-family and Qwen/Mixtral MoE models"
        )
    heads, kv = arch.num_heads, arch.num_kv_heads
    if heads % tp:
        raise ValueError(f"--tp-size {tp} does not divide the model's {heads} attention heads")
    if kv % tp and tp % kv:
        raise ValueError(f"--tp-size {tp} and the model's {kv} KV heads: one must divide the other")
    if arch.intermediate_size % tp:
        raise ValueError(
            f"--tp-size {tp} does not divide intermediate_size {arch.intermediate_size}"
        )
    if arch.moe is None:
        if ep > 1:
            raise ValueError(f"--ep-size {ep}: {arch.architecture} has no experts")
        return
    m, width = arch.moe, info.ranks_per_expert_group
    if m.num_experts % ep:
        raise ValueError(f"--ep-size {ep} does not divide the model's {m.num_experts} experts")
    if m.expert_size % width:
        raise ValueError(
            f"--tp-size / --ep-size = {width} does not divide the expert width {m.expert_size}"
        )
    if m.shared_expert_size % tp:
        raise ValueError(
            f"--tp-size {tp} does not divide the shared expert width {m.shared_expert_size}"
        )


def local_arch(arch: ModelArch, info: RankInfo) -> ModelArch:
    """The architecture one rank runs: its heads, widths and experts (vocab_size stays global:
    logits are gathered to full rows)."""
    tp = info.tp_size
    if tp == 1:
        return arch
    moe = arch.moe
    if moe is not None:
        moe = dataclasses.replace(
            moe,
            num_experts=moe.num_experts // info.ep_size,
            expert_size=moe.expert_size // info.ranks_per_expert_group,
            shared_expert_size=moe.shared_expert_size // tp,
        )
    return dataclasses.replace(
        arch,
        num_heads=arch.num_heads // tp,
        num_kv_heads=max(arch.num_kv_heads // tp, 1),
        intermediate_size=arch.intermediate_size // tp,
        moe=moe,
    )


class ShardPlan:
    """HF parameter name -> (the name this rank stores it under, how to cut it); None for a
    parameter this rank does not hold (another expert group's expert)."""

    def __init__(self, arch: ModelArch, info: RankInfo):
        self.arch, self.info = arch, info
        self.vocab_shard = -(-arch.vocab_size // info.tp_size)
        self.num_local_experts = arch.moe.num_experts // info.ep_size if arch.moe else 0

    def plan(self, name: str) -> tuple[str, Take] | None:
        info = self.info
        if info.tp_size == 1:
            return name, _whole
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            return name, self._vocab_rows
        leaf = _LAYER.sub("", name)
        if ".experts." in leaf:
            return self._expert(name)
        kind = leaf.rsplit(".", 2)[-2] if leaf.count(".") >= 1 else ""
        if kind in ("q_proj", "k_proj", "v_proj"):
            return name, self._heads(kind)
        if kind == "o_proj":
            q_local = self.arch.q_size // info.tp_size
            return name, _cols(info.rank * q_local, q_local)
        if kind in _COLUMN or kind in _ROW:  # dense MLPs and shared experts: split over all ranks
            return name, _split(kind, info.rank, info.tp_size)
        return name, _whole  # norms, routers, biases of replicated parts

    def _vocab_rows(self, t: Any) -> torch.Tensor:
        start = self.info.rank * self.vocab_shard
        rows = t[start : start + self.vocab_shard]
        if rows.shape[0] < self.vocab_shard:  # the last shard: zero rows up to the shard size
            pad = rows.new_zeros(self.vocab_shard - rows.shape[0], *rows.shape[1:])
            rows = torch.cat([rows, pad])
        return rows

    def _heads(self, kind: str) -> Take:
        a, info = self.arch, self.info
        d = a.head_dim
        if kind == "q_proj":
            count = a.num_heads // info.tp_size
            return _rows(info.rank * count * d, count * d)
        if a.num_kv_heads >= info.tp_size:
            count = a.num_kv_heads // info.tp_size
            return _rows(info.rank * count * d, count * d)
        head = info.rank * a.num_kv_heads // info.tp_size  # replicated: the head of my queries
        return _rows(head * d, d)

    def _expert(self, name: str) -> tuple[str, Take] | None:
        """Per-expert weights (`experts.{e}.{proj}.weight`) or stacked ones
        (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I])."""
        info, n = self.info, self.num_local_experts
        first = info.ep_rank * n
        width = info.ranks_per_expert_group
        part = info.expert_tp_rank
        match = _EXPERT.match(name)
        if match is None:
            stacked = name.rsplit(".", 1)[-1]
            if stacked == "gate_up_proj":
                return name, lambda t: _gate_up_part(t[first : first + n], part, width, dim=1)
            return name, lambda t: _split("w2", part, width)(t[first : first + n], dim=2)
        head, expert, tail = match.groups()
        local = int(expert) - first
        if not 0 <= local < n:
            return None
        kind = tail.split(".")[1]
        return f"{head}{local}{tail}", _split(kind, part, width)


def _rows(start: int, count: int) -> Take:
    return lambda t: t[start : start + count]


def _cols(start: int, count: int) -> Take:
    return lambda t: t[:, start : start + count]


def _whole(t: Any) -> torch.Tensor:
    return t[:]


def _shape(t: Any) -> list[int]:
    return list(t.shape) if isinstance(t, torch.Tensor) else t.get_shape()


def _split(kind: str, part: int, parts: int):
    """Part `part` of `parts` of a column-parallel (rows) or row-parallel (columns) weight;
    `dim` overrides the split dimension (stacked experts)."""
    column = kind in _COLUMN

    def take(t: Any, dim: int | None = None) -> torch.Tensor:
        axis = (0 if column else 1) if dim is None else dim
        shape = _shape(t)
        chunk = shape[axis] // parts
        index = [slice(None)] * len(shape)
        index[axis] = slice(part * chunk, (part + 1) * chunk)
        return t[tuple(index)]

    return take


def _gate_up_part(t: torch.Tensor, part: int, parts: int, dim: int) -> torch.Tensor:
    """This rank's rows of a stacked [gate; up] weight: its slice of the gate, then of the up."""
    gate, up = t.chunk(2, dim=dim)
    return torch.cat([g.chunk(parts, dim=dim)[part] for g in (gate, up)], dim=dim)


def shard_state_dict(weights: dict[str, torch.Tensor], plan: ShardPlan) -> dict[str, torch.Tensor]:
    """Cut an already loaded full state dict (consumed) into this rank's."""
    out = {}
    for name in list(weights):
        full = weights.pop(name)
        planned = plan.plan(name)
        if planned is not None:
            out[planned[0]] = planned[1](full).contiguous()
    return out


def rank_arch(arch: ModelArch, parallel: TensorParallel | None):
    """(the model's arch, this rank's arch, the loader's shard function or None)."""
    if parallel is None or parallel.info.tp_size == 1:
        return arch, arch, None
    check_shardable(arch, parallel.info)
    return arch, local_arch(arch, parallel.info), ShardPlan(arch, parallel.info).plan


def attach_parallel(model: Any, parallel: TensorParallel | None) -> None:
    """Point a built model at its tp collectives, and each expert-parallel MoE block at the
    first expert it holds."""
    if parallel is None or parallel.info.tp_size == 1:
        return
    model.parallel = parallel
    info = parallel.info
    for layer in model.layers:
        if isinstance(layer.mlp, MoEBlock):
            layer.mlp.first_expert = info.ep_rank * layer.mlp.w13.shape[0]

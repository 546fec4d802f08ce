"""Ranks, the torch.distributed process group, and the collectives a sharded model calls.

`SingleRank` is the null object every model holds by default (identity collectives);
`TensorParallel` is one rank of a tp group. Both are what `LlamaModel.parallel` points at:
- `embed`: vocab-parallel embedding, a masked lookup of this rank's rows plus an all-reduce;
- `all_reduce`: after each row-parallel projection (o_proj, down) and MoE block;
- `gather_vocab`: the lm_head's vocab-sharded logits all-gathered into full rows.
On CUDA the collectives are NCCL calls on the current stream, so a captured decode graph
records them (NCCL supports stream capture) and replays them with the forward."""

from __future__ import annotations

import datetime
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F


@dataclass(frozen=True)
class RankInfo:
    """Where one rank sits: its index in the tp group and, for MoE layers, its expert group
    (ep_rank) and its index inside that group (the ranks that split each expert's width)."""

    rank: int
    tp_size: int
    ep_size: int = 1

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @property
    def ranks_per_expert_group(self) -> int:
        return self.tp_size // self.ep_size

    @property
    def ep_rank(self) -> int:
        return self.rank // self.ranks_per_expert_group

    @property
    def expert_tp_rank(self) -> int:
        return self.rank % self.ranks_per_expert_group


class SingleRank:
    """One process holds the whole model: every collective is the identity."""

    info = RankInfo(0, 1)

    def embed(self, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, weight)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def gather_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def agree_min(self, value: float) -> float:
        return value


SINGLE_RANK = SingleRank()


class TensorParallel:
    """This rank of a tp group of `info.tp_size` ranks (the default process group)."""

    def __init__(self, info: RankInfo, vocab_size: int, device: torch.device):
        self.info, self.device = info, device
        self.vocab_size = vocab_size
        self.vocab_shard = -(-vocab_size // info.tp_size)  # rows per rank (the last is padded)

    def embed(self, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """[T] -> [T, hidden]: rows this rank holds are looked up, the others are zeros, and
        the sum over ranks is the full embedding. `weight` [vocab_shard, hidden]."""
        local = ids - self.info.rank * self.vocab_shard
        outside = (local < 0) | (local >= weight.shape[0])
        out = F.embedding(local.clamp(0, weight.shape[0] - 1), weight)
        out = out.masked_fill(outside.unsqueeze(-1), 0)
        return self.all_reduce(out)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of `x` over the ranks (in place)."""
        dist.all_reduce(x)
        return x

    def gather_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        """[N, vocab_shard] per rank -> [N, vocab] (the padding of the last shard cut off)."""
        logits = logits.contiguous()
        parts = [torch.empty_like(logits) for _ in range(self.info.tp_size)]
        dist.all_gather(parts, logits)
        return torch.cat(parts, dim=-1)[:, : self.vocab_size]

    def agree_min(self, value: float) -> float:
        """The smallest `value` over the ranks (sizes every rank must share, e.g. KV slots)."""
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return t.item()


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def rank_device(device: torch.device, local_rank: int) -> torch.device:
    """Each rank's own GPU (`cuda:<local rank>`); the CPU is shared."""
    return torch.device("cuda", local_rank) if device.type == "cuda" else device


def init_group(info: RankInfo, init_addr: str, device: torch.device, timeout_s: float) -> None:
    """Join the tp group's default process group by tcp rendezvous at `init_addr` (host:port,
    rank 0 listens). Collectives that wait longer than `timeout_s` raise instead of hanging.
    With tp > 1 on the CPU each rank uses one intra-op thread: ranks share the cores, and
    OpenMP threads of several processes spinning against each other thrash."""
    if device.type == "cpu" and info.tp_size > 1:
        torch.set_num_threads(1)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend_for(device),
        init_method=f"tcp://{init_addr}",
        rank=info.rank,
        world_size=info.tp_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        **({"device_id": device} if device.type == "cuda" else {}),
    )


def free_loopback_addr() -> str:
    """`127.0.0.1:<a free port>` for a one-machine rendezvous."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"

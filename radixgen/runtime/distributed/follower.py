"""Ranks 1 .. tp-1: the follower loop, the rank processes' entry point, and starting them.

A follower owns a ModelRunner over its shard of the weights and of the KV pools; it keeps no
requests, radix cache or grammar. It waits for rank 0's step messages (step.py) and runs each
one, so every rank enters the same collectives in the same order. It exits on STOP, and with
an error when rank 0 is gone (the broadcast fails) or silent past --dist-timeout."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import traceback
from pathlib import Path

import torch

from radixgen.config import EngineConfig
from radixgen.runtime.distributed.group import (
    RankInfo,
    TensorParallel,
    init_group,
    rank_device,
)
from radixgen.runtime.distributed.step import StepChannel, StepKind, decode_message
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model_runner import ModelRunner, resolve_device

logger = logging.getLogger(__name__)


def join_group(cfg: EngineConfig, rank: int, init_addr: str) -> tuple[EngineConfig, RankInfo]:
    """Join the tp group as `rank`: the engine config with this rank's device, and its place.
    The device's local index is the rank's place on its node."""
    par = cfg.parallel
    info = RankInfo(rank, par.tp_size, par.ep_size)
    device = rank_device(resolve_device(cfg.model.device), rank % par.ranks_per_node)
    init_group(info, init_addr, device, par.dist_timeout)
    model = dataclasses.replace(cfg.model, device=str(device))
    return dataclasses.replace(cfg, model=model), info


def rank_parallel(model_path: Path, cfg: EngineConfig, info: RankInfo) -> TensorParallel:
    """This rank's collectives (LoRA is refused under tp: adapters are not sharded)."""
    if cfg.lora.enable_lora and info.tp_size > 1:
        raise ValueError("--enable-lora with --tp-size > 1: LoRA adapters are not sharded")
    vocab = ModelArch.from_folder(model_path).vocab_size
    return TensorParallel(info, vocab, resolve_device(cfg.model.device))


def build_rank_runner(model_path: Path, cfg: EngineConfig, info: RankInfo) -> ModelRunner:
    """A follower's ModelRunner over its shard."""
    parallel = rank_parallel(model_path, cfg, info)
    return ModelRunner(
        model_path, cfg.model, cfg.cache, cfg.scheduler.max_running_requests, None, parallel
    )


@torch.inference_mode()
def follow(runner: ModelRunner) -> None:
    """Run rank 0's steps until STOP (returns) or a failed broadcast (raises)."""
    channel = StepChannel(runner.device)
    while True:
        msg = decode_message(*channel.receive())
        if msg.kind is StepKind.FORWARD:
            runner.model.forward(msg.batch, runner.pool, runner.attn)
        elif msg.kind is StepKind.DECODE_GRAPH:
            batch = msg.batch
            rows = torch.tensor(msg.rows, device=runner.table.table.device)
            runner.table.table[rows, : batch.kv_slots.shape[1]] = batch.kv_slots
            runner.graphs.run(
                msg.rows, batch.input_ids.tolist(), batch.positions.tolist(), batch.out_slots
            )
        elif msg.kind is StepKind.MOVE_KV:
            runner.move_kv(*msg.move)
        elif msg.kind is StepKind.STOP:
            return


def run_follower_process(
    model_path: str, cfg: EngineConfig, rank: int, init_addr: str, log_level: str
) -> None:
    """A follower rank's process (multiprocessing spawn): join the group, load the shard, follow.
    Exit code 0 after STOP, 1 on any failure."""
    from radixgen.runtime.server.ipc import setup_child

    setup_child(f"rank{rank}", log_level)
    try:
        cfg, info = join_group(cfg, rank, init_addr)
        runner = build_rank_runner(Path(model_path), cfg, info)
        logger.info("rank %d ready: %s", rank, runner.kv_summary())
        follow(runner)
    except Exception:  # noqa: BLE001 - logged, then the launcher's watchdog sees exit code 1
        logger.error("rank %d failed:\n%s", rank, traceback.format_exc())
        raise SystemExit(1) from None


def start_followers(
    model_path: Path, cfg: EngineConfig, ranks: range, init_addr: str, log_level: str
) -> dict[str, multiprocessing.Process]:
    """Started processes for follower `ranks` (spawn; daemons that die with their parent)."""
    spawn = multiprocessing.get_context("spawn")
    procs = {
        f"rank{rank}": spawn.Process(
            target=run_follower_process,
            name=f"radixgen-rank{rank}",
            daemon=True,
            args=(str(model_path), cfg, rank, init_addr, log_level),
        )
        for rank in ranks
    }
    for proc in procs.values():
        proc.start()
    return procs

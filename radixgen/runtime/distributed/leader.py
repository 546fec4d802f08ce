"""Rank 0's side of a tp group: joining it (and, for the offline Engine, starting the follower
processes of this node), and stopping the followers at the end."""

from __future__ import annotations

import logging
from pathlib import Path

import torch.distributed as dist

from radixgen.config import EngineConfig
from radixgen.runtime.distributed.follower import join_group, rank_parallel, start_followers
from radixgen.runtime.distributed.group import RankInfo, TensorParallel, free_loopback_addr
from radixgen.runtime.distributed.sharding import check_shardable
from radixgen.runtime.model.arch import ModelArch

logger = logging.getLogger(__name__)
FOLLOWER_EXIT_S = 5.0


class Leader:
    """Rank 0 of the group: `cfg` (with rank 0's device) and `parallel` for build_scheduler.
    `start_local`: start ranks 1 .. ranks_per_node - 1 here (the Engine; the server's launcher
    starts and supervises them itself)."""

    def __init__(
        self,
        model_path: Path,
        cfg: EngineConfig,
        init_addr: str | None = None,
        start_local: bool = False,
        log_level: str = "warning",
    ):
        if cfg.parallel.node_rank != 0:
            raise ValueError("rank 0 (scheduling, HTTP) runs on --node-rank 0")
        info = RankInfo(0, cfg.parallel.tp_size, cfg.parallel.ep_size)
        check_shardable(ModelArch.from_folder(model_path), info)  # bad flags: before any spawn
        self.init_addr = init_addr or cfg.parallel.dist_init_addr or free_loopback_addr()
        local = range(1, cfg.parallel.ranks_per_node) if start_local else range(0)
        self.procs = start_followers(model_path, cfg, local, self.init_addr, log_level)
        try:
            self.cfg, info = join_group(cfg, 0, self.init_addr)
            self.parallel: TensorParallel = rank_parallel(model_path, self.cfg, info)
        except BaseException:
            self._reap()
            raise

    def stop(self, steps) -> None:
        """Tell the followers to exit (`steps`: rank 0's StepBroadcaster), reap the local ones,
        leave the group. A follower that is already gone makes the STOP fail: logged only."""
        try:
            steps.stop()
        except Exception as exc:  # noqa: BLE001 - shutting down either way
            logger.warning("could not stop the follower ranks: %s", exc)
        self._reap()
        if dist.is_initialized():
            dist.destroy_process_group()

    def _reap(self) -> None:
        for proc in self.procs.values():
            proc.join(FOLLOWER_EXIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()

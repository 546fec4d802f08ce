"""The adapters a server holds, by name, and how a batch gets their slots.

`LoraManager` owns the loaded adapters (host copies, checked against the model) and the
device pool; the scheduler thread alone calls it. A request names its adapter; `resolve` gives
the adapter, whose `cache_key` (name and load number) goes into the request's radix namespace,
so no prefix is ever shared between two adapters, or between two loads of one name, or with the
base model. Unloading an adapter that requests still use is refused (409): draining would hold
the unload for as long as its longest request, and a client can retry once they finish.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import torch

from radixgen.config import LORA_TARGETS, LoraConfig
from radixgen.runtime.lora.adapter import LoraAdapter, LoraError, load_adapter, read_config
from radixgen.runtime.lora.batch import LoraBatch
from radixgen.runtime.lora.pool import LoraPool
from radixgen.runtime.model.arch import ModelArch

logger = logging.getLogger(__name__)
DEFAULT_MAX_RANK = 16


class LoraManager:
    def __init__(self, cfg: LoraConfig, arch: ModelArch, dtype: torch.dtype, device: torch.device):
        self.arch, self.dtype = arch, dtype
        startup = cfg.named_paths
        configs = {name: read_config(Path(path)) for name, path in startup.items()}
        self.max_rank = cfg.max_lora_rank or max(
            (c["r"] for c in configs.values()), default=DEFAULT_MAX_RANK
        )
        self.targets = cfg.lora_target_modules or LORA_TARGETS
        self.pool = LoraPool(
            arch, cfg.max_loras_per_batch, self.max_rank, self.targets, dtype, device
        )
        self.adapters: dict[str, LoraAdapter] = {}
        self.in_flight: dict[str, int] = {}  # name -> requests admitted and not finished
        self._load_ids = itertools.count(1)
        for name, path in startup.items():
            self.load(name, path)
        logger.info(
            "LoRA pool: %d slots, rank %d, targets %s (%.1f MB); adapters: %s",
            self.pool.num_slots,
            self.max_rank,
            ",".join(self.targets),
            self.pool.num_bytes / 1e6,
            ", ".join(self.adapters) or "none",
        )

    # ---- adapters ---------------------------------------------------------------------------
    def load(self, name: str, path: str, pinned: bool = False) -> dict[str, Any]:
        """Read and check the adapter; it serves requests from now on. Raises LoraError."""
        if not name:
            raise LoraError("lora_name is required", "invalid_lora_name")
        if name in self.adapters:
            raise LoraError(
                f"an adapter named {name!r} is already loaded (unload it first)",
                "lora_name_exists",
            )
        if pinned and len(self.pool.pinned) + 1 >= self.pool.num_slots:
            raise LoraError(
                f"pinning {name!r} would leave no adapter slot for unpinned adapters "
                f"(--max-loras-per-batch {self.pool.num_slots}, {len(self.pool.pinned)} pinned)",
                "lora_pool_pinned",
            )
        adapter = load_adapter(name, path, self.arch, self.dtype, self.max_rank, self.targets)
        adapter.cache_key = f"{name}#{next(self._load_ids)}"
        self.adapters[name] = adapter
        if pinned:
            self.pool.pinned.add(adapter.cache_key)
        return self.describe(adapter)

    def unload(self, name: str) -> dict[str, Any]:
        adapter = self.adapters.get(name)
        if adapter is None:
            raise LoraError(f"no adapter named {name!r} is loaded", "lora_not_found", 404)
        if self.in_flight.get(name):
            raise LoraError(
                f"adapter {name!r} has {self.in_flight[name]} requests in flight; retry once "
                "they finish",
                "lora_in_use",
                409,
            )
        del self.adapters[name]
        self.in_flight.pop(name, None)
        self.pool.evict(adapter.cache_key)
        return self.describe(adapter)

    def resolve(self, name: str) -> LoraAdapter:
        """The adapter a request names; counted in flight until `finished`."""
        adapter = self.adapters.get(name)
        if adapter is None:
            raise LoraError(
                f"unknown LoRA adapter {name!r}; loaded: {', '.join(self.adapters) or 'none'}",
                "lora_not_found",
            )
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        return adapter

    def finished(self, adapter: LoraAdapter) -> None:
        if self.in_flight.get(adapter.name):
            self.in_flight[adapter.name] -= 1

    @staticmethod
    def describe(adapter: LoraAdapter) -> dict[str, Any]:
        return {
            "lora_name": adapter.name,
            "lora_path": adapter.path,
            "rank": adapter.rank,
            "scaling": adapter.scaling,
            "target_modules": list(adapter.targets),
            "base_model_name_or_path": adapter.base_model,
        }

    def info(self) -> list[dict[str, Any]]:
        return [self.describe(a) for a in self.adapters.values()]

    # ---- batches ----------------------------------------------------------------------------
    def admissible(self, waiting: list, in_flight: list) -> tuple[list, list]:
        """(waiting requests a batch may admit, those deferred): the adapters of the admitted,
        of the requests in flight (which all run next step) and the pinned ones (which keep
        their slots) stay within the pool's slots."""
        active = {r.adapter.cache_key for r in in_flight if r.adapter is not None}
        active |= self.pool.pinned
        admit, deferred = [], []
        for req in waiting:
            key = req.adapter.cache_key if req.adapter is not None else None
            if key is None or key in active or len(active) < self.pool.num_slots:
                if key is not None:
                    active.add(key)
                admit.append(req)
            else:
                deferred.append(req)
        return admit, deferred

    def request_slots(self, reqs: list) -> list[int] | None:
        """Each request's pool slot (0: the base model), loading adapters as needed; None when
        every request is on the base model."""
        adapters = [r.adapter for r in reqs if r.adapter is not None]
        if not adapters:
            return None
        slots = self.pool.acquire(adapters)
        return [slots[r.adapter.cache_key] if r.adapter is not None else 0 for r in reqs]

    def batch(self, reqs: list, rows_per_req: list[int], decode: bool) -> LoraBatch | None:
        """The LoraBatch of a forward whose request i has rows_per_req[i] consecutive rows."""
        slots = self.request_slots(reqs)
        if slots is None:
            return None
        rows = [s for s, n in zip(slots, rows_per_req) for _ in range(n)]
        return LoraBatch.from_rows(self.pool, rows, decode)

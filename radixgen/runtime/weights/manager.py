"""Loads new weight versions beside the serving one, validates them, switches and rolls back.

`WeightManager` owns the resident versions: `active` (serving), `previous` (the rollback
target, resident until released) and at most one update in flight, which a background thread
loads, checks and builds while the scheduler keeps stepping. The scheduler thread alone
switches (`activate`, `rollback`), between two steps, once `VersionGate` has drained the
running batch; the loader thread never touches the serving model or the scheduler's state.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.layers import host_staging
from radixgen.runtime.model.loader import load_state_dict
from radixgen.runtime.model.registry import build_model
from radixgen.runtime.weights.checks import (
    Canary,
    WeightCheckError,
    check_architecture,
    check_finite,
    check_shapes,
)
from radixgen.runtime.weights.resident import (
    DEVICE,
    PINNED_HOST,
    ResidentWeights,
    exchange,
    fits_on_device,
    pin_weights,
)
from radixgen.runtime.weights.version import INITIAL_VERSION, WeightVersion, sampled_checksum

logger = logging.getLogger(__name__)

LOAD_FORMATS = ("auto", "safetensors", "dummy")


class WeightUpdateError(ValueError):
    """An update, rollback or release refused: HTTP `status`, an error `code`, and the failed
    check's name where a validation check failed."""

    def __init__(self, message: str, code: str, status: int = 400, check: str | None = None):
        super().__init__(message)
        self.message, self.code, self.status, self.check = message, code, status, check


@dataclass
class UpdateSource:
    """Where a new version comes from: a checkpoint folder, or named tensors (HF names)."""

    name: str | None = None
    model_path: str | None = None
    load_format: str = "auto"
    tensors: dict[str, torch.Tensor] | None = None


@dataclass
class Update:
    """One update in flight; the loader thread fills `ready` or `error` and the timings."""

    source: UpdateSource
    name: str
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    ready: ResidentWeights | None = None
    error: WeightUpdateError | None = None
    done: threading.Event = field(default_factory=threading.Event)


class WeightManager:
    def __init__(
        self, runner: Any, model_path: Path, load_format: str, canary: Canary, standby: str = "auto"
    ):
        self.runner, self.canary = runner, canary
        self.standby = standby  # auto, device or pinned_host (--weight-standby)
        weights_bytes = runner.weight_bytes
        initial = WeightVersion(
            INITIAL_VERSION, str(model_path), load_format, runner.weights_checksum, weights_bytes
        )
        self.active = ResidentWeights(initial, runner.model, runner.graphs, DEVICE)
        self.previous: ResidentWeights | None = None
        self.update: Update | None = None
        self._names = itertools.count(1)

    @property
    def names(self) -> set[str]:
        held = [self.active, self.previous, self.update.ready if self.update else None]
        return {r.version.name for r in held if r is not None} | (
            {self.update.name} if self.update else set()
        )

    # ---- update -------------------------------------------------------------------------
    def begin_update(self, source: UpdateSource) -> Update:
        """Start loading `source` on a background thread; refuses at once what it can tell
        without loading (an update in flight: 409; a taken name, a missing path: 400)."""
        if self.update is not None:
            raise WeightUpdateError(
                f"an update to {self.update.name!r} is in progress; retry once it finished",
                "update_in_progress",
                status=409,
            )
        name = source.name or self._fresh_name()
        if name in self.names:
            raise WeightUpdateError(
                f"weight version {name!r} is already loaded; choose another name", "version_exists"
            )
        if source.tensors is None:
            _check_path(source)
        self.update = Update(source, name)
        threading.Thread(
            target=self._load, args=(self.update,), name="weight-update", daemon=True
        ).start()
        return self.update

    def _fresh_name(self) -> str:
        return next(n for n in (f"v{i}" for i in self._names) if n not in self.names)

    def _load(self, update: Update) -> None:
        try:
            update.ready = self._build(update)
        except WeightUpdateError as exc:
            update.error = exc
        except WeightCheckError as exc:
            update.error = WeightUpdateError(str(exc), "weight_check_failed", check=exc.check)
        except Exception as exc:  # noqa: BLE001 - any load failure is answered, never raised
            logger.exception("weight update %s failed", update.name)
            update.error = WeightUpdateError(
                f"loading failed: {type(exc).__name__}: {exc}", "load_failed"
            )
        finally:
            update.done.set()

    def _build(self, update: Update) -> ResidentWeights:
        """Load, check and build the standby copy (loader thread)."""
        runner, src = self.runner, update.source
        arch = runner.arch
        if src.tensors is None and src.load_format != "dummy":
            check_architecture(arch, ModelArch.from_folder(src.model_path))
        placement = self._placement()
        target = runner.device if placement == DEVICE else torch.device("cpu")
        weights = (
            _cast(src.tensors, runner.dtype, target)
            if src.tensors is not None
            else load_state_dict(
                src.model_path,
                arch,
                runner.dtype,
                src.load_format,
                target,
                seed=_dummy_seed(update.name),
            )
        )
        update.timings["load_s"] = time.perf_counter() - update.started
        started = time.perf_counter()
        check_shapes(arch, weights)
        check_finite(weights)
        num_bytes = sum(t.numel() * t.element_size() for t in weights.values())
        version = WeightVersion(
            update.name,
            src.model_path or "tensor",
            src.load_format if src.tensors is None else "tensor",
            sampled_checksum(weights),
            num_bytes,
        )
        if placement == PINNED_HOST:
            weights = pin_weights(weights)
        resident = ResidentWeights(version, self._build_model(weights, placement), None, placement)
        self._run_canary(resident)
        if placement == DEVICE and self.active.graphs is not None:
            resident.graphs = runner.standby_graphs(resident.model)
            resident.graphs.prepare_like(self.active.graphs)  # captured now, not at the switch
        update.timings["validate_s"] = time.perf_counter() - started
        return resident

    def _placement(self) -> str:
        """Where the standby goes: the serving device (the only place on a CPU server), pinned
        host memory when asked to, or when the GPU's measured free memory lacks room."""
        if self.runner.device.type != "cuda" or self.standby == DEVICE:
            return DEVICE
        if self.standby == PINNED_HOST or not fits_on_device(
            self.runner.device, self.runner.weight_bytes
        ):
            return PINNED_HOST
        return DEVICE

    def _build_model(self, weights: dict[str, torch.Tensor], placement: str) -> Any:
        if placement == PINNED_HOST:
            with host_staging():
                model = build_model(self.runner.arch, weights, torch.device("cpu"))
        else:
            model = build_model(self.runner.arch, weights, self.runner.device)
        if self.runner.kv_rotation:
            model.rotate_qk()
        return model

    def _run_canary(self, candidate: ResidentWeights) -> None:
        """The canary on the candidate (where it lives) and, once per version, on the active."""
        arch = self.runner.arch
        if self.active.canary_entropy is None:
            self.active.canary_entropy = self.canary.entropy(
                self.active.model, arch, self.runner.device
            )
        device = self.runner.device if candidate.placement == DEVICE else torch.device("cpu")
        candidate.canary_entropy = self.canary.entropy(candidate.model, arch, device)
        self.canary.check(self.active.canary_entropy, candidate.canary_entropy)

    def finished_update(self) -> Update | None:
        """The update in flight once its thread is done (and no longer in flight), else None."""
        update = self.update
        if update is None or not update.done.is_set():
            return None
        self.update = None
        return update

    # ---- switching (scheduler thread, between steps, once drained) ------------------------
    def activate(self, standby: ResidentWeights) -> float:
        """Make `standby` serve; the serving version becomes `previous` (an older previous is
        released). Returns the switch's seconds."""
        started = time.perf_counter()
        self.previous = self._switch_to(standby)
        return time.perf_counter() - started

    def rollback(self) -> float:
        """Serve `previous` again; the version serving now becomes the previous one."""
        if self.previous is None:
            raise WeightUpdateError(
                "no previous weight version to roll back to", "no_previous_version"
            )
        started = time.perf_counter()
        self.previous = self._switch_to(self.previous)
        return time.perf_counter() - started

    def release_standby(self) -> str:
        """Free the previous version's memory; its name is returned."""
        if self.previous is None:
            raise WeightUpdateError("no standby weight version is resident", "no_standby_version")
        name, self.previous = self.previous.version.name, None
        if self.runner.device.type == "cuda":
            torch.cuda.empty_cache()
        return name

    def _switch_to(self, target: ResidentWeights) -> ResidentWeights:
        """Point the runner at `target`; returns the version that served until now."""
        old = self.active
        if target.placement == PINNED_HOST:  # contents exchanged: the serving objects stay
            exchange(old.model, target.model)
            target.model, old.model = old.model, target.model
            target.graphs, old.graphs = old.graphs, None
            target.placement, old.placement = DEVICE, PINNED_HOST
        self.runner.model, self.runner.graphs = target.model, target.graphs
        self.active = target
        return old

    def info(self) -> dict[str, Any]:
        return {
            "active": self.active.version.info() | {"placement": self.active.placement},
            "previous": (
                self.previous.version.info() | {"placement": self.previous.placement}
                if self.previous
                else None
            ),
            "updating": self.update.name if self.update else None,
        }


def _check_path(source: UpdateSource) -> None:
    if source.load_format not in LOAD_FORMATS:
        raise WeightUpdateError(
            f"load_format must be one of {', '.join(LOAD_FORMATS)}; got {source.load_format!r}",
            "invalid_load_format",
        )
    if not source.model_path:
        raise WeightUpdateError("model_path is required", "model_path_not_found")
    path = Path(source.model_path)
    if not path.is_dir():
        raise WeightUpdateError(
            f"model_path {source.model_path!r} is not a folder", "model_path_not_found"
        )
    if not (path / "config.json").is_file():
        raise WeightUpdateError(f"{source.model_path} has no config.json", "model_path_not_found")
    if source.load_format != "dummy" and not any(path.glob("*.safetensors")):
        raise WeightUpdateError(
            f"{source.model_path} has no *.safetensors weights", "model_path_not_found"
        )


def _cast(
    tensors: dict[str, torch.Tensor], dtype: torch.dtype, device: torch.device
) -> dict[str, torch.Tensor]:
    return {name: t.to(device=device, dtype=dtype) for name, t in tensors.items()}


def _dummy_seed(name: str) -> int:
    """Dummy weights of a new version differ from the startup ones (seed 0) and each other."""
    return sum(name.encode()) + 1

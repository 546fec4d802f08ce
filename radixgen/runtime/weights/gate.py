"""The drain rule: every response comes from exactly one weight version.

One forward runs one weight set, so a switch waits until no admitted request of the serving
version is left: requests already admitted (running, mid-prefill, or retracted and waiting to
be prefilled again, their output so far from this version) finish on it, while requests not
yet admitted are held. Between two steps, once drained, the switch happens, the held requests
are stamped with the new version and admitted. Running per-version forwards instead would let
new requests start at once but split every step's batch in two during a drain; holding
admissions keeps one forward per step, and the wait it adds is at most the running requests'
remaining decode.

`VersionGate` runs the operations queued by the frontend (update, rollback, release, pause,
continue) in order and collects their answers (`take_answers`) for whoever sent them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from radixgen.runtime.request import Request
from radixgen.runtime.weights.manager import Update, UpdateSource, WeightManager, WeightUpdateError
from radixgen.runtime.weights.version import CacheNamespace


@dataclass
class Answer:
    """The outcome of one operation: `result` on success, else `error`."""

    op_id: str
    result: dict[str, Any] | None = None
    error: WeightUpdateError | None = None


@dataclass
class _Switch:
    """A switch waiting for the drain: to a validated update's standby, or back (rollback)."""

    op_id: str
    update: Update | None  # None: a rollback
    queued: float = field(default_factory=time.perf_counter)


class VersionGate:
    def __init__(
        self, weights: WeightManager, on_switch: Callable[[float, str], None] | None = None
    ):
        self.weights = weights
        self.held: list[Request] = []  # not yet admitted, waiting for the switch
        self.switch: _Switch | None = None
        self.loading: dict[str, Update] = {}  # op_id -> update whose thread is still loading
        self.answers: list[Answer] = []
        self.on_switch = on_switch  # (seconds, "activate" | "rollback"): metrics

    @property
    def busy(self) -> bool:
        """Something to do between steps even with no request in flight."""
        return bool(self.switch or self.loading or self.held)

    def namespace(self, adapter: str | None) -> CacheNamespace:
        return CacheNamespace(self.weights.active.version.name, adapter)

    # ---- operations ---------------------------------------------------------------------
    def update(self, op_id: str, source: UpdateSource) -> None:
        """Start an update; answered once it is active (or failed)."""
        if self.switch is not None:
            self._answer_error(
                op_id,
                WeightUpdateError(
                    "a weight switch is waiting for running requests to finish; retry after it",
                    "update_in_progress",
                    409,
                ),
            )
            return
        try:
            self.loading[op_id] = self.weights.begin_update(source)
        except WeightUpdateError as exc:
            self._answer_error(op_id, exc)

    def rollback(self, op_id: str) -> None:
        """Queue a switch back to the previous version (answered once it serves)."""
        if self.switch is not None:
            self._answer_error(
                op_id,
                WeightUpdateError(
                    "a weight switch is already waiting for running requests to finish",
                    "update_in_progress",
                    409,
                ),
            )
        elif self.weights.previous is None:
            self._answer_error(
                op_id,
                WeightUpdateError(
                    "no previous weight version to roll back to", "no_previous_version"
                ),
            )
        else:
            self.switch = _Switch(op_id, None)

    def release(self, op_id: str) -> None:
        if self.switch is not None and self.switch.update is None:
            self._answer_error(
                op_id,
                WeightUpdateError(
                    "a rollback to the standby version is pending", "update_in_progress", 409
                ),
            )
            return
        try:
            released = self.weights.release_standby()
        except WeightUpdateError as exc:
            self._answer_error(op_id, exc)
            return
        self.answers.append(Answer(op_id, {"released_version": released, **self.weights.info()}))

    def _answer_error(self, op_id: str, error: WeightUpdateError) -> None:
        self.answers.append(Answer(op_id, error=error))

    def take_answers(self) -> list[Answer]:
        answers, self.answers = self.answers, []
        return answers

    # ---- between steps --------------------------------------------------------------------
    def before_step(
        self, waiting: list[Request], running: list[Request], chunked: list[Request]
    ) -> None:
        """Collect finished loads, hold admissions while a switch waits, switch once drained."""
        self._collect_loads()
        if self.switch is not None:
            self.held.extend(r for r in waiting if not r.started)
            waiting[:] = [
                r for r in waiting if r.started
            ]  # retracted: they finish on their version
            if running or chunked or waiting:
                return
            self._run_switch()
            waiting.extend(self.held)
            self.held = []
        self._stamp(waiting)

    def _stamp(self, waiting: list[Request]) -> None:
        """Requests not yet started run on the serving version: their namespace says so (one
        stamped before a switch, e.g. while its grammar compiled, is stamped again)."""
        name = self.weights.active.version.name
        for req in waiting:
            if not req.started and req.namespace.weight_version != name:
                req.namespace = CacheNamespace(name, req.namespace.adapter)

    def _collect_loads(self) -> None:
        for op_id, update in list(self.loading.items()):
            if not update.done.is_set():
                continue
            del self.loading[op_id]
            self.weights.finished_update()
            if update.error is not None:
                self._answer_error(op_id, update.error)
            else:
                self.switch = _Switch(op_id, update)

    def _run_switch(self) -> None:
        switch, self.switch = self.switch, None
        drain_s = time.perf_counter() - switch.queued
        if switch.update is None:
            seconds, kind = self.weights.rollback(), "rollback"
            timings = {"rollback_s": seconds}
        else:
            seconds, kind = self.weights.activate(switch.update.ready), "activate"
            timings = {**switch.update.timings, "activate_s": seconds}
        if self.on_switch is not None:
            self.on_switch(seconds, kind)
        active = self.weights.active
        self.answers.append(
            Answer(
                switch.op_id,
                {
                    "weight_version": active.version.name,
                    "placement": active.placement,
                    "previous_version": self.weights.previous.version.name
                    if self.weights.previous
                    else None,
                    "drain_s": drain_s,
                    **timings,
                    **self.weights.info(),
                },
            )
        )

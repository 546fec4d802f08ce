"""Admission: which requests get prompt tokens in the next step, and how many.

The step's token budget (the chunk size, or the smaller mixed chunk size while requests decode)
is shared by several prefills at once (`--max-num-partial-prefills`). A prompt with more than
`--long-prefill-token-threshold` uncached tokens is long: it gets at most that many tokens a
step, and at most `--max-long-partial-prefills` long prompts prefill at once. New short prompts
are planned first, so one that arrives while long prompts prefill runs in the very next step;
they may use the budget except a floor kept for the prompts mid-prefill and the long ones that
can start (up to half of it), so long prompts progress every step under any stream of short
ones; what is left after all of them goes to more short prompts. Among prompts mid-prefill the
one with the fewest tokens left goes first (it finishes soonest); each other one gets at least
`MIN_LONG_CHUNK` tokens (or its part of the budget). With a step-time target (`--max-step-ms`)
the long prompts' chunks are cut to what a cost model fitted to measured step times predicts
fits in it (step_cost.py).

Requests are admitted in the policy's order (`schedule_policy.order_waiting`) while the budget,
the running-request limit and their KV allow. While other requests hold KV, fitting includes a
reservation: every admitted request keeps `new_token_ratio` of its remaining new tokens (per
pool tier, see `KVManager.generated_need`) held back for its decode steps, and a prompt
mid-prefill keeps its remaining prompt positions, so admissions do not retract the requests
already running nor push a partly prefilled prompt back. Prompt-only scoring requests that
share a prompt become one token tree (`score_group`); a request that shares uncached tokens with
one prefilling this round waits a round (`schedule_policy.shares_uncached_prefix`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from radixgen.config import SchedulerConfig
from radixgen.runtime.kv_manager import KVManager
from radixgen.runtime.request import Request
from radixgen.runtime.schedule_policy import (
    PrefillPlan,
    in_batch_share_min,
    order_waiting,
    shares_uncached_prefix,
)
from radixgen.runtime.score_group import group_for, scoreable
from radixgen.runtime.step_cost import StepCostModel, StepShape

MIXED_CHUNK_CPU = 128  # measured: ITL p99 605 -> 340 ms, throughput and TTFT p50 unchanged (docs/benchmarks-history.md)
# the long-prompt threshold as a fraction of the chunk size: on the CPU prefill is compute-bound
# at any chunk (measured 215 vs 220 tok/s at 256 vs 512 tokens), on a GPU the step target cuts
# long chunks further and the threshold mostly says which prompts count as short
LONG_THRESHOLD_DIVISOR = {"cpu": 2, "gpu": 4}
MAX_STEP_MS_GPU = 50.0
MIN_LONG_CHUNK = 64  # tokens a long prompt gets each step at least, where the budget has them


@dataclass
class _Round:
    """One `plan` call's running totals."""

    plan: PrefillPlan
    budget: int  # prompt tokens left this step
    reserved: list[int]  # KV positions (tier 0, tier 1) held back for requests already admitted
    num_rows: int  # requests holding a table row after this round (the running-request limit)
    shape: StepShape  # the step planned so far, for the step-time target
    partial: int = 0  # requests left mid-prefill after this step
    long: int = 0  # long prompts among them
    chosen: list[Request] = field(default_factory=list)  # prefilling this round (in-batch sharing)


class PrefillPlanner:
    def __init__(self, kv: KVManager, cfg: SchedulerConfig, device_type: str, max_context_len: int):
        self.kv, self.cfg, self.max_context_len = kv, cfg, max_context_len
        chunk = cfg.chunked_prefill_size
        if chunk is None:
            chunk = 512 if device_type == "cpu" else 8192
        self.chunk_size = min(chunk if chunk > 0 else 1 << 30, cfg.max_prefill_tokens)
        mixed = cfg.mixed_chunk_size
        if mixed is None:
            mixed = MIXED_CHUNK_CPU if device_type == "cpu" else self.chunk_size
        self.mixed_chunk_size = min(mixed, self.chunk_size)
        self.share_min = in_batch_share_min(cfg, device_type)
        cpu = device_type == "cpu"
        self.long_threshold = cfg.long_prefill_token_threshold or max(
            self.chunk_size // LONG_THRESHOLD_DIVISOR["cpu" if cpu else "gpu"], 1
        )
        step_ms = (
            cfg.max_step_ms if cfg.max_step_ms is not None else (0.0 if cpu else MAX_STEP_MS_GPU)
        )
        self.max_step_s = step_ms / 1000
        self.step_cost = StepCostModel() if step_ms > 0 else None

    def plan(
        self, waiting: list[Request], running: list[Request], chunked: list[Request]
    ) -> PrefillPlan:
        """Prompt tokens for this step (see the module docstring). Admitted requests leave
        `waiting` (whose KV the caller then allocates); chunked prompts stay in `chunked`."""
        budget = self.mixed_chunk_size if running else self.chunk_size
        rnd = _Round(
            PrefillPlan(),
            budget,
            self._reserved(running, chunked),
            len(running) + len(chunked),
            self._decode_shape(running),
            chosen=list(chunked),
        )
        jumps = [r for r in chunked if r.output_ids and not self._is_long(r, r.kv_len)]
        in_flight = sorted(
            (r for r in chunked if r not in jumps), key=self._left
        )  # prompts mid-prefill
        rnd.partial, rnd.long = len(in_flight), sum(self._is_long(r, r.kv_len) for r in in_flight)
        for req in jumps:  # jump-forward runs: a few forced tokens' KV
            self._add(rnd, req, min(self._left(req), rnd.budget))
        cached = {id(r): self.kv.match(r) for r in waiting}
        ordered = order_waiting(waiting, cached, self.cfg) if waiting else []
        long_ids = {id(r) for r in ordered if self._is_long(r, cached[id(r)])}
        floor = self._long_floor(rnd, in_flight, [r for r in ordered if id(r) in long_ids], cached)
        self._admit_short(rnd, ordered, long_ids, waiting, cached, floor)
        self._plan_in_flight(rnd, in_flight)
        self._admit_long(rnd, [r for r in ordered if id(r) in long_ids], waiting, cached)
        self._admit_short(rnd, ordered, long_ids, waiting, cached, 0)  # what the prompts above left
        return rnd.plan

    # ---- the long prompts' share ---------------------------------------------------------
    def _is_long(self, req: Request, start: int) -> bool:
        return req.prefill_len - start > self.long_threshold

    @staticmethod
    def _left(req: Request) -> int:
        return req.prefill_len - req.kv_len

    def _long_floor(
        self, rnd: _Round, in_flight: list[Request], new_long: list[Request], cached: dict[int, int]
    ) -> int:
        """Budget kept from new short prompts for the prompts mid-prefill and the long ones
        that can start this step: what they want (<= the threshold each), at most half."""
        slots = max(
            0,
            min(
                self.cfg.max_long_partial_prefills - rnd.long,
                self.cfg.max_num_partial_prefills - rnd.partial,
            ),
        )
        wants = [min(self._left(r), self.long_threshold) for r in in_flight]
        wants += [min(r.prefill_len - cached[id(r)], self.long_threshold) for r in new_long[:slots]]
        return min(sum(wants), rnd.budget // 2)

    def _plan_in_flight(self, rnd: _Round, in_flight: list[Request]) -> None:
        """Chunks of the prompts mid-prefill, fewest tokens left first; each later one keeps
        its least share."""
        least = min(MIN_LONG_CHUNK, rnd.budget // max(len(in_flight), 1))  # each one's progress
        for i, req in enumerate(in_flight):
            later = sum(min(self._left(r), least) for r in in_flight[i + 1 :])
            self._continue(rnd, req, self._long_chunk(rnd, req, req.kv_len, self._left(req), later))

    def _admit_long(
        self, rnd: _Round, new: list[Request], waiting: list[Request], cached: dict[int, int]
    ) -> None:
        """Long prompts newly admitted while the limits allow."""
        for req in (r for r in new if r in waiting):  # (a scoring group may have taken some)
            if (
                rnd.budget <= 0
                or rnd.long >= self.cfg.max_long_partial_prefills
                or rnd.partial >= self.cfg.max_num_partial_prefills
                or rnd.num_rows >= self.cfg.max_running_requests
            ):
                return
            if shares_uncached_prefix(req, cached[id(req)], rnd.chosen, self.share_min):
                continue
            left = req.prefill_len - cached[id(req)]
            ext = self._long_chunk(rnd, req, cached[id(req)], left, 0)
            if ext > 0 and self._admit(rnd, req, cached[id(req)], ext, waiting) is None:
                return

    def _long_chunk(
        self, rnd: _Round, req: Request, start: int, left: int, later_floor: int
    ) -> int:
        """Tokens for one long prompt: <= the threshold and the budget (less the floor of the
        long prompts after it); with a step-time target, what the cost model says still fits,
        but at least MIN_LONG_CHUNK so it progresses."""
        cap = max(min(left, self.long_threshold, rnd.budget - later_floor), 0)
        if self.step_cost is None or cap == 0:
            return cap
        spare = self.max_step_s - self.step_cost.predict(rnd.shape)
        fitted = self.step_cost.max_chunk(start, spare, cap)
        return max(fitted, min(cap, MIN_LONG_CHUNK, rnd.budget))

    # ---- short prompts ---------------------------------------------------------------------
    def _admit_short(
        self,
        rnd: _Round,
        ordered: list[Request],
        long_ids: set[int],
        waiting: list[Request],
        cached: dict[int, int],
        floor: int,
    ) -> None:
        """Short prompts and scoring groups (of any length: one tree each) in the policy's
        order, within the budget less the long prompts' floor; one that would stay mid-prefill
        only while a partial slot is free. Long prompts are left to `_admit_long`."""
        grouped: set[int] = set()
        for req in ordered:
            short_budget = rnd.budget - floor
            if short_budget <= 0 or rnd.num_rows >= self.cfg.max_running_requests:
                return
            if id(req) in grouped or req not in waiting:
                continue
            if scoreable(req):
                group = group_for(req, waiting, cached, grouped, short_budget, self.max_context_len)
                if group is not None:
                    if not self._admit_group(rnd, group, waiting, grouped):
                        return
                    continue
            if id(req) in long_ids or shares_uncached_prefix(
                req, cached[id(req)], rnd.chosen, self.share_min
            ):
                continue
            ext = min(req.prefill_len - cached[id(req)], short_budget)
            if (
                ext < req.prefill_len - cached[id(req)]
                and rnd.partial >= self.cfg.max_num_partial_prefills
            ):
                continue
            if self._admit(rnd, req, cached[id(req)], ext, waiting) is None:
                return

    def _admit_group(self, rnd: _Round, group, waiting: list[Request], grouped: set[int]) -> bool:
        """Admit a scoring group (one tree of prefix-pool rows); False if its KV does not fit."""
        busy = self._busy(rnd)
        if not self.kv.fits(
            group.num_rows + (rnd.reserved[0] if busy else 0), rnd.reserved[1] if busy else 0
        ) or not self.kv.admit(group.leader):
            return False
        for member in group.members:
            waiting.remove(member)
            grouped.add(id(member))
        rnd.plan.groups.append(group)
        rnd.budget -= group.num_rows
        rnd.reserved[0] += group.num_rows
        rnd.num_rows += 1
        rnd.shape.add_prefill(group.cached_len, group.num_rows)
        return True

    # ---- bookkeeping -----------------------------------------------------------------------
    def _admit(
        self, rnd: _Round, req: Request, cached_len: int, ext: int, waiting: list[Request]
    ) -> int | None:
        """Admit a waiting request with `ext` prompt tokens this step if its KV fits (with the
        reservations while others hold KV: its whole remaining prompt and its decode share).
        Returns the tokens planned, None when it does not fit (admission stops)."""
        busy = self._busy(rnd)
        left = req.prefill_len - cached_len
        need = self.kv.split_positions(req, cached_len, left if busy else ext)
        if busy:
            own = self.reserve(req)
            need = (need[0] + rnd.reserved[0] + own[0], need[1] + rnd.reserved[1] + own[1])
        if not self.kv.fits(*need) or not self.kv.admit(req):
            return None
        waiting.remove(req)
        rnd.num_rows += 1
        first, second = self.kv.split_positions(req, req.kv_len, self._left(req))
        own = self.reserve(req)
        rnd.reserved = [rnd.reserved[0] + first + own[0], rnd.reserved[1] + second + own[1]]
        ext = min(ext, self._left(req))
        if ext < self._left(req):
            rnd.partial += 1
            rnd.long += self._is_long(req, req.kv_len)
        self._add(rnd, req, ext)
        return ext

    def _continue(self, rnd: _Round, req: Request, ext: int) -> None:
        """Plan the next chunk (ext may be 0: none this step) of a request already mid-prefill
        (its KV is reserved; prompts mid-prefill were counted as partial up front)."""
        if ext >= self._left(req):
            rnd.partial -= 1  # its last chunk
        if ext > 0:
            self._add(rnd, req, ext)

    @staticmethod
    def _add(rnd: _Round, req: Request, ext: int) -> None:
        rnd.plan.reqs.append(req)
        rnd.plan.extend_lens.append(ext)
        rnd.budget -= ext
        rnd.shape.add_prefill(req.kv_len, ext)
        if req not in rnd.chosen:
            rnd.chosen.append(req)

    @staticmethod
    def _busy(rnd: _Round) -> bool:
        """Whether other requests hold KV (else an admission needs no reservation)."""
        return rnd.num_rows > 0

    def _reserved(self, running: list[Request], chunked: list[Request]) -> list[int]:
        """KV positions (per tier) held back for requests already admitted: each one's decode
        share, and the remaining prompt of each one mid-prefill."""
        parts = [self.reserve(r) for r in running + chunked]
        parts += [self.kv.split_positions(r, r.kv_len, self._left(r)) for r in chunked]
        return [sum(t) for t in zip((0, 0), *parts)]

    def reserve(self, req: Request) -> tuple[int, int]:
        """KV tokens (tier 0, tier 1) held back at admission for the request's future decode
        steps."""
        return self.kv.generated_need(int(req.remaining_new_tokens * self.cfg.new_token_ratio))

    # ---- step timings ----------------------------------------------------------------------
    @staticmethod
    def _decode_shape(running: list[Request]) -> StepShape:
        shape = StepShape()
        for req in running:
            shape.add_decode(req.seq_len)
        return shape

    def observe_step(self, shape: StepShape, seconds: float) -> None:
        """A measured step with prompt tokens (device time included: the step read its
        sampled tokens back), for the step-time target's cost model."""
        if self.step_cost is not None:
            self.step_cost.observe(shape, seconds)

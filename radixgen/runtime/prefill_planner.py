"""Admission: which requests get prompt tokens in the next step, and how many.

Chunked prompts continue first. Then waiting requests are taken in the policy's order
(`schedule_policy.order_waiting`) while the step's token budget lasts, the running-request limit
allows, and their KV fits. While other requests hold KV, fitting includes a reservation: every
admitted request keeps `new_token_ratio` of its remaining new tokens (per pool tier, see
`KVManager.generated_need`) held back for its decode steps, so admissions do not retract the
requests already running. Prompt-only scoring requests that share a prompt become one token tree
(`score_group`); a request that shares uncached tokens with one admitted this round waits a round
(`schedule_policy.shares_uncached_prefix`).
"""

from __future__ import annotations

from radixgen.config import SchedulerConfig
from radixgen.runtime.kv_manager import KVManager
from radixgen.runtime.request import Request
from radixgen.runtime.schedule_policy import PrefillPlan, in_batch_share_min, order_waiting, shares_uncached_prefix
from radixgen.runtime.score_group import group_for, scoreable

MIXED_CHUNK_CPU = 128  # measured: ITL p99 605 -> 340 ms, throughput and TTFT p50 unchanged (docs/benchmarks-history.md)


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

    def plan(self, waiting: list[Request], running: list[Request], chunked: list[Request]) -> PrefillPlan:
        """Prompt tokens for this step: up to the chunk size, or the smaller mixed chunk size
        while requests decode (their step waits for the chunk: on the CPU a 512-token chunk
        costs a decode step about 5x its time). Admitted requests leave `waiting` (whose KV
        the caller then allocates); chunked prompts stay in `chunked`."""
        plan = PrefillPlan()
        budget = self.mixed_chunk_size if running else self.chunk_size
        for req in list(chunked):  # continue a chunked prompt first
            ext = min(req.prefill_len - req.kv_len, budget)
            plan.reqs.append(req)
            plan.extend_lens.append(ext)
            budget -= ext
        if budget <= 0 or not waiting:
            return plan
        cached = {id(r): self.kv.match(r) for r in waiting}
        reserved = [sum(t) for t in zip((0, 0), *(self.reserve(r) for r in running + chunked))]  # per tier
        grouped: set[int] = set()
        for req in order_waiting(waiting, cached, self.cfg):
            if budget <= 0 or len(running) + len(plan.reqs) + len(plan.groups) >= self.cfg.max_running_requests:
                break
            if id(req) in grouped:
                continue
            busy = running or chunked or plan.reqs or plan.groups  # else no reservation
            group = (group_for(req, waiting, cached, grouped, budget, self.max_context_len)
                     if scoreable(req) else None)
            if group is not None:
                if not self.kv.fits(group.num_rows + (reserved[0] if busy else 0), reserved[1] if busy else 0) \
                        or not self.kv.admit(group.leader):
                    break
                for member in group.members:
                    waiting.remove(member)
                    grouped.add(id(member))
                plan.groups.append(group)
                budget -= group.num_rows
                reserved[0] += group.num_rows
                continue
            if shares_uncached_prefix(req, cached[id(req)], plan.reqs + [g.leader for g in plan.groups],
                                      self.share_min):
                continue
            ext = min(req.prefill_len - cached[id(req)], budget)
            need = self.kv.split_positions(req, cached[id(req)], ext)
            if busy:
                own = self.reserve(req)
                need = (need[0] + reserved[0] + own[0], need[1] + reserved[1] + own[1])
            if not self.kv.fits(*need) or not self.kv.admit(req):
                break
            waiting.remove(req)
            ext = min(req.prefill_len - req.kv_len, budget)
            plan.reqs.append(req)
            plan.extend_lens.append(ext)
            budget -= ext
            first, second = self.kv.split_positions(req, req.kv_len, ext)
            own = self.reserve(req)
            reserved = [reserved[0] + first + own[0], reserved[1] + second + own[1]]
        return plan

    def reserve(self, req: Request) -> tuple[int, int]:
        """KV tokens (tier 0, tier 1) held back at admission for the request's future decode
        steps."""
        return self.kv.generated_need(int(req.remaining_new_tokens * self.cfg.new_token_ratio))

"""Which waiting requests to prefill next, and how many of their tokens.

Order: `lpm` puts the longest cached prefix first, so requests that share a system prompt run
while it is cached; a request waiting longer than `aging_seconds` goes ahead of all younger
ones, so cache-cold requests never starve. `fcfs` keeps arrival order.
In-batch sharing: a request whose prompt shares >= `min_shared` uncached tokens with a request
already chosen this round waits one round, then hits the cache that request filled. Waiting
costs the request one step of latency and saves computing the shared tokens again: worth it
for fewer tokens where prefill is compute-bound (CPU) than where a step is cheap (GPU). A
prompt-only request (a select's scoring prompts, a prefix pin) has no first token to hurry and
waits for any shared token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from radixgen.config import SchedulerConfig
from radixgen.runtime.request import Request
from radixgen.runtime.score_group import ScoreGroup

IN_BATCH_SHARE_MIN_GPU = 32
IN_BATCH_SHARE_MIN_CPU = 8


@dataclass
class PrefillPlan:
    reqs: list[Request] = field(default_factory=list)
    extend_lens: list[int] = field(default_factory=list)
    groups: list[ScoreGroup] = field(default_factory=list)  # scoring prompts, one tree each


def order_waiting(
    waiting: list[Request],
    cached_lens: dict[int, int],
    cfg: SchedulerConfig,
    now: float | None = None,
) -> list[Request]:
    """Waiting requests in the order they should be admitted."""
    if cfg.schedule_policy == "fcfs":
        return sorted(waiting, key=lambda r: r.arrival)
    now = time.monotonic() if now is None else now
    aged = sorted(
        (r for r in waiting if now - r.arrival >= cfg.aging_seconds), key=lambda r: r.arrival
    )
    young = [r for r in waiting if now - r.arrival < cfg.aging_seconds]
    young.sort(key=lambda r: (-cached_lens[id(r)], r.arrival))
    return aged + young


def in_batch_share_min(cfg: SchedulerConfig, device_type: str) -> int:
    """The configured in-batch sharing threshold, or the device's default."""
    if cfg.in_batch_prefix_tokens is not None:
        return cfg.in_batch_prefix_tokens
    return IN_BATCH_SHARE_MIN_CPU if device_type == "cpu" else IN_BATCH_SHARE_MIN_GPU


def shares_uncached_prefix(
    req: Request, cached_len: int, chosen: list[Request], min_shared: int
) -> bool:
    """True if req's prompt shares >= min_shared not-yet-cached prefix tokens with a chosen
    request (>= 1 for a prompt-only req)."""
    min_shared = 1 if req.is_prompt_only else min_shared
    ids = req.all_ids
    for other in chosen:
        if _common_prefix_len(ids, other.all_ids) - cached_len >= min_shared:
            return True
    return False


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo

"""Which waiting requests to prefill next, and how many of their tokens.

Order: `lpm` puts the longest cached prefix first, so requests that share a system prompt run
while it is cached; a request waiting longer than `aging_seconds` goes ahead of all younger
ones, so cache-cold requests never starve. `fcfs` keeps arrival order.
In-batch sharing: a request whose prompt shares >= IN_BATCH_SHARE_MIN uncached tokens with a
request already chosen this round waits one round, then hits the cache that request filled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from radixgen.config import SchedulerConfig
from radixgen.runtime.request import Request

IN_BATCH_SHARE_MIN = 32


@dataclass
class PrefillPlan:
    reqs: list[Request] = field(default_factory=list)
    extend_lens: list[int] = field(default_factory=list)


def order_waiting(waiting: list[Request], cached_lens: dict[int, int], cfg: SchedulerConfig,
                  now: float | None = None) -> list[Request]:
    """Waiting requests in the order they should be admitted."""
    if cfg.schedule_policy == "fcfs":
        return sorted(waiting, key=lambda r: r.arrival)
    now = time.monotonic() if now is None else now
    aged = sorted((r for r in waiting if now - r.arrival >= cfg.aging_seconds), key=lambda r: r.arrival)
    young = [r for r in waiting if now - r.arrival < cfg.aging_seconds]
    young.sort(key=lambda r: (-cached_lens[id(r)], r.arrival))
    return aged + young


def shares_uncached_prefix(req: Request, cached_len: int, chosen: list[Request]) -> bool:
    """True if req's prompt shares a long not-yet-cached prefix with a chosen request."""
    ids = req.all_ids
    for other in chosen:
        if _common_prefix_len(ids, other.all_ids) - cached_len >= IN_BATCH_SHARE_MIN:
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

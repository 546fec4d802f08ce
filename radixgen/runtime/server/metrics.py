"""Prometheus metrics (`GET /metrics`), named as SGLang's with the `radixgen:` prefix.

Latencies and token counts are measured in the main process from the arrival of the
detokenizer's text deltas; queue, KV and cache gauges are read from the scheduler process (its
info request) at each scrape. Every metric carries a `model_name` label."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                               generate_latest)

from radixgen.runtime.messages import TextOut

router = APIRouter()

# SGLang's buckets (seconds)
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 120, 160)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06,
               0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 150, 200, 250,
               300, 350, 500, 1000)

# gauge name -> the scheduler statistic it shows (`scheduler_proc.scheduler_stats`)
SCHEDULER_GAUGES = {
    "num_running_reqs": ("num_running_reqs", "requests decoding or being prefilled"),
    "num_queue_reqs": ("num_waiting_reqs", "requests waiting for admission"),
    "token_usage": ("token_usage", "fraction of KV slots in use (by requests or the radix cache)"),
    "cache_hit_rate": ("cache_hit_rate", "cached prompt tokens / prompt tokens since start"),
    # per KV pool (mixed precision; with one pool it is reported as the prefix pool)
    **{f"{pool}_pool_{key}": (f"{pool}_pool_{key}", f"{pool} KV pool: {doc}")
       for pool in ("prefix", "branch") for key, doc in (
           ("capacity_tokens", "capacity in tokens"), ("token_usage", "fraction of slots in use"),
           ("cached_tokens", "tokens held by the radix cache"),
           ("cache_hit_rate", "prompt tokens served from this pool's cache / prompt tokens"))},
    # speculative decoding (0 while it is off)
    "spec_accept_length": ("spec_accept_length", "mean tokens emitted per speculative verify step"),
    "spec_accept_rate": ("spec_accept_rate", "accepted draft tokens / draft tokens verified"),
    "spec_verify_steps": ("spec_verify_steps", "speculative verify steps (request-steps) since start"),
    "spec_draft_tokens_pruned": ("spec_draft_tokens_pruned", "draft tokens cut by the grammar before verification"),
}


@dataclass
class _Timing:
    """One request in flight: when it arrived, its prompt length, its last token's arrival."""

    arrival: float
    prompt_tokens: int
    last: float | None = None


class ServerMetrics:
    """A private CollectorRegistry (so several servers in one process never collide). The
    TokenizerManager calls `on_submit` / `on_output` / `on_drop`; `/metrics` calls `render`."""

    def __init__(self, model_name: str):
        self.registry = CollectorRegistry()
        # the children of model_name: every metric is exposed (at 0) from the start
        self.gauges = {name: self._metric(Gauge, name, doc, model_name)
                       for name, (_, doc) in SCHEDULER_GAUGES.items()}
        self.prompt_tokens = self._metric(Counter, "prompt_tokens_total",
                                          "prompt tokens of ended requests", model_name)
        self.generation_tokens = self._metric(Counter, "generation_tokens_total", "tokens generated",
                                              model_name)
        self.num_requests = self._metric(Counter, "num_requests_total",
                                         "requests ended (finished or aborted)", model_name)
        self.ttft = self._metric(Histogram, "time_to_first_token_seconds", "arrival to first token",
                                 model_name, buckets=TTFT_BUCKETS)
        self.itl = self._metric(Histogram, "inter_token_latency_seconds", "time between output tokens",
                                model_name, buckets=ITL_BUCKETS)
        self.e2e = self._metric(Histogram, "e2e_request_latency_seconds", "arrival to the last token",
                                model_name, buckets=E2E_BUCKETS)
        self.position_accept = Gauge("radixgen:spec_position_accept_rate",
                                     "per draft depth: verify steps accepting a token there / steps drafting it",
                                     ["model_name", "position"], registry=self.registry)
        self.model_name = model_name
        self._timings: dict[str, _Timing] = {}

    def _metric(self, kind: type, name: str, doc: str, model_name: str, **kwargs: Any) -> Any:
        return kind(f"radixgen:{name}", doc, ["model_name"], registry=self.registry,
                    **kwargs).labels(model_name=model_name)

    def on_submit(self, rid: str, prompt_tokens: int, arrival: float | None = None) -> None:
        """A request was sent to the scheduler; `arrival` (perf_counter) defaults to now."""
        self._timings[rid] = _Timing(time.perf_counter() if arrival is None else arrival, prompt_tokens)

    def on_output(self, out: TextOut) -> None:
        """A text delta arrived: TTFT on the first token, then one inter-token latency per
        token (a delta with k tokens after a gap g counts k latencies of g / k); the request
        ends with its finish message."""
        timing = self._timings.get(out.rid)
        if timing is None:
            return
        now = time.perf_counter()
        if out.token_ids:
            self._observe_tokens(timing, now, len(out.token_ids))
        if out.finish is not None:
            self.e2e.observe(now - timing.arrival)
            self.on_drop(out.rid)

    def _observe_tokens(self, timing: _Timing, now: float, num_new: int) -> None:
        if timing.last is None:
            self.ttft.observe(now - timing.arrival)
        else:
            for _ in range(num_new):
                self.itl.observe((now - timing.last) / num_new)
        timing.last = now
        self.generation_tokens.inc(num_new)

    def on_drop(self, rid: str) -> None:
        """The request ended (finished, or aborted because its client left)."""
        timing = self._timings.pop(rid, None)
        if timing is not None:
            self.prompt_tokens.inc(timing.prompt_tokens)
            self.num_requests.inc()

    def forget_all(self) -> None:
        """The runtime died: nothing in flight will end normally."""
        self._timings.clear()

    def render(self, stats: dict[str, Any]) -> bytes:
        """The text exposition, with the scheduler gauges set from `stats`."""
        for name, (key, _) in SCHEDULER_GAUGES.items():
            self.gauges[name].set(float(stats.get(key, 0.0)))
        for depth, rate in enumerate(stats.get("spec_position_accept_rate", []), start=1):
            self.position_accept.labels(model_name=self.model_name, position=str(depth)).set(rate)
        return generate_latest(self.registry)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text format (needs the API key like every route but /health)."""
    tm = request.app.state.server.tm
    stats = await tm.get_stats()
    return Response(tm.metrics.render(stats), media_type=CONTENT_TYPE_LATEST)

"""Prometheus metrics (`GET /metrics`): SGLang's metric names, every one with the `radixgen:`
prefix (one spelling, never `radixgen_`), in a private registry.

Per-request series are measured in the main process from the detokenizer's text deltas: token
and request counters (cache hits included, so a hit rate is `rate(cached_tokens_total) /
rate(prompt_tokens_total)`), TTFT, inter-token and end-to-end latencies, and TTFT split into
queue (arrival → admitted into a batch), prefill (admitted → the prompt's prefill forward
returned) and first decode (→ the first token reached this process: sampling, grammar mask,
detokenizer), from the timestamps the scheduler sends once per request (`ReqTimes`). They carry
`model_name`, `weight_version` (the version the request ran on, from its first output) and
`lora` (the request's LoRA adapter, `base` for the base model) labels. Weight switches are
histograms of their phases (`weight_swap_duration_seconds` by `phase`: load, validate, drain,
activate) and of rollbacks (`weight_rollback_duration_seconds`: the switch itself). Scheduler
gauges and counters (the loaded LoRA adapters among them) come from `scheduler_metrics`. With a
tracer, every request is also one OpenTelemetry span."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from radixgen.runtime.messages import ReqTimes, TextOut
from radixgen.runtime.server.scheduler_metrics import PREFIX, SchedulerCollector

router = APIRouter()

WEIGHT_VERSION = "default"  # the weights loaded at startup (SGLang's default weight_version)
ADAPTER = "base"  # the `lora` label of a base-model request
REQUEST_LABELS = ("model_name", "weight_version", "lora")

# SGLang's buckets (seconds)
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 120, 160)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
)
E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    150,
    200,
    250,
    300,
    350,
    500,
    1000,
)
# the parts of TTFT: from a millisecond (a cached prompt's prefill) up
STAGE_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
)
SWITCH_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
)
SWAP_PHASES = ("load", "validate", "drain", "activate")


@dataclass
class _Timing:
    """One request in flight: its arrival (perf_counter, and the same moment in unix seconds),
    prompt length, cache hits, the scheduler's timestamps, its last token's arrival."""

    arrival: float
    arrival_wall: float
    prompt_tokens: int
    labels: tuple[str, ...]
    cached_tokens: int = 0
    times: ReqTimes | None = None
    last: float | None = None

    def wall(self, now: float) -> float:
        """A perf_counter reading as unix seconds (on the clock the scheduler stamps with)."""
        return self.arrival_wall + (now - self.arrival)


class ServerMetrics:
    """A private CollectorRegistry (so several servers in one process never collide). The
    TokenizerManager calls `on_submit` / `on_output` / `on_drop`; `/metrics` calls `render`.
    `tracer` (a `tracing.RequestTracer`, or None) gets the same moments as spans."""

    def __init__(self, model_name: str, tracer: Any = None):
        self.registry = CollectorRegistry()
        self.model_name, self.tracer = model_name, tracer
        self.scheduler = SchedulerCollector(model_name)
        self.registry.register(self.scheduler)
        self._labels = (model_name, WEIGHT_VERSION, ADAPTER)
        counter = self._counter
        self.prompt_tokens = counter("prompt_tokens", "prompt tokens of ended requests")
        self.cached_tokens = counter(
            "cached_tokens", "prompt tokens of ended requests served from the radix cache"
        )
        self.generation_tokens = counter("generation_tokens", "tokens generated")
        self.num_requests = counter("num_requests", "requests ended (finished or aborted)")
        self.num_aborted = counter(
            "num_aborted_requests", "requests aborted (by the client, or refused by the scheduler)"
        )
        histogram = self._histogram
        self.ttft = histogram("time_to_first_token_seconds", "arrival to first token", TTFT_BUCKETS)
        self.itl = histogram(
            "inter_token_latency_seconds", "time between output tokens", ITL_BUCKETS
        )
        self.e2e = histogram(
            "e2e_request_latency_seconds", "arrival to the last token", E2E_BUCKETS
        )
        self.queue_time = histogram(
            "queue_time_seconds", "TTFT part 1: arrival to admission into a batch", STAGE_BUCKETS
        )
        self.prefill_time = histogram(
            "prefill_time_seconds",
            "TTFT part 2: admission to the end of the prompt's prefill forward",
            STAGE_BUCKETS,
        )
        self.first_decode_time = histogram(
            "first_decode_time_seconds",
            "TTFT part 3: end of prefill to the "
            "first token's arrival (sampling, grammar mask, detokenizer)",
            STAGE_BUCKETS,
        )
        self.swap_time = Histogram(
            PREFIX + "weight_swap_duration_seconds",
            "a weight update's phases: load, "
            "validate (shapes, NaN/Inf, canary), drain (running requests of the old "
            "version finishing), activate (the switch)",
            ("model_name", "phase"),
            registry=self.registry,
            buckets=SWITCH_BUCKETS,
        )
        self.rollback_time = Histogram(
            PREFIX + "weight_rollback_duration_seconds",
            "a rollback's switch to the previous weight version",
            ("model_name",),
            registry=self.registry,
            buckets=SWITCH_BUCKETS,
        )
        for phase in SWAP_PHASES:
            self.swap_time.labels(model_name, phase)
        self.rollback_time.labels(model_name)
        self._timings: dict[str, _Timing] = {}
        for metric in (
            self.prompt_tokens,
            self.cached_tokens,
            self.generation_tokens,
            self.num_requests,
            self.num_aborted,
            self.ttft,
            self.itl,
            self.e2e,
            self.queue_time,
            self.prefill_time,
            self.first_decode_time,
        ):
            metric.labels(*self._labels)  # every series is exposed, at 0, from the start

    def _counter(self, name: str, doc: str) -> Counter:
        return Counter(PREFIX + name, doc, REQUEST_LABELS, registry=self.registry)

    def _histogram(self, name: str, doc: str, buckets: tuple) -> Histogram:
        return Histogram(
            PREFIX + name, doc, REQUEST_LABELS, registry=self.registry, buckets=buckets
        )

    def _child(self, metric: Any, timing: _Timing) -> Any:
        return metric.labels(*timing.labels)

    def on_submit(
        self,
        rid: str,
        prompt_tokens: int,
        arrival: float | None = None,
        weight_version: str = WEIGHT_VERSION,
        adapter: str | None = None,
    ) -> None:
        """A request was sent to the scheduler; `arrival` (perf_counter) defaults to now;
        `weight_version` is the serving one (its outputs tell the one it ran on); `adapter` its
        LoRA adapter (None: the base model)."""
        now = time.perf_counter()
        arrival = now if arrival is None else arrival
        labels = (self.model_name, weight_version, adapter or ADAPTER)
        timing = _Timing(arrival, time.time() - (now - arrival), prompt_tokens, labels)
        self._timings[rid] = timing
        if self.tracer is not None:
            self.tracer.start(rid, timing.arrival_wall, prompt_tokens)

    def on_output(self, out: TextOut) -> None:
        """A text delta arrived: TTFT (and its parts) on the first token, then one inter-token
        latency per token (a delta with k tokens after a gap g counts k latencies of g / k);
        the request ends with its finish message."""
        timing = self._timings.get(out.rid)
        if timing is None:
            return
        now = time.perf_counter()
        timing.cached_tokens = out.cached_tokens
        if out.weight_version is not None and out.weight_version != timing.labels[1]:
            timing.labels = (self.model_name, out.weight_version, timing.labels[2])
        if out.times is not None:
            timing.times = out.times
        if out.token_ids:
            self._observe_tokens(timing, now, len(out.token_ids))
        if self.tracer is not None:
            self.tracer.observe(out, timing.wall(now))
        if out.finish is not None:
            self._child(self.e2e, timing).observe(now - timing.arrival)
            self._end(out.rid, aborted=out.finish.get("type") == "abort", finish=out.finish)

    def _observe_tokens(self, timing: _Timing, now: float, num_new: int) -> None:
        if timing.last is None:
            self._child(self.ttft, timing).observe(now - timing.arrival)
            if timing.times is not None:
                self._observe_ttft_parts(timing, timing.wall(now))
        else:
            itl = self._child(self.itl, timing)
            for _ in range(num_new):
                itl.observe((now - timing.last) / num_new)
        timing.last = now
        self._child(self.generation_tokens, timing).inc(num_new)

    def _observe_ttft_parts(self, timing: _Timing, first_token_wall: float) -> None:
        """The three parts sum to TTFT (each clamped at 0 against clock rounding)."""
        times = timing.times
        self._child(self.queue_time, timing).observe(max(times.admitted - timing.arrival_wall, 0.0))
        self._child(self.prefill_time, timing).observe(max(times.prefilled - times.admitted, 0.0))
        self._child(self.first_decode_time, timing).observe(
            max(first_token_wall - times.prefilled, 0.0)
        )

    def on_weight_switch(self, result: dict[str, Any]) -> None:
        """A weight update or rollback completed (its answer's timings)."""
        if "rollback_s" in result:
            self.rollback_time.labels(self.model_name).observe(result["rollback_s"])
            return
        for phase in SWAP_PHASES:
            if f"{phase}_s" in result:
                self.swap_time.labels(self.model_name, phase).observe(result[f"{phase}_s"])

    def on_drop(self, rid: str) -> None:
        """The request's client left (it was aborted without a finish message)."""
        self._end(rid, aborted=True, finish=None)

    def _end(self, rid: str, aborted: bool, finish: dict | None) -> None:
        timing = self._timings.pop(rid, None)
        if timing is None:
            return
        self._child(self.prompt_tokens, timing).inc(timing.prompt_tokens)
        self._child(self.cached_tokens, timing).inc(timing.cached_tokens)
        self._child(self.num_requests, timing).inc()
        if aborted:
            self._child(self.num_aborted, timing).inc()
        if self.tracer is not None:
            self.tracer.end(rid, timing.wall(time.perf_counter()), finish)

    def forget_all(self) -> None:
        """The runtime died: nothing in flight will end normally."""
        for rid in list(self._timings):
            if self.tracer is not None:
                self.tracer.end(rid, time.time(), {"type": "abort", "message": "the runtime died"})
        self._timings.clear()

    def render(self, stats: dict[str, Any]) -> bytes:
        """The text exposition, with the scheduler's series from `stats`."""
        self.scheduler.update(stats)
        return generate_latest(self.registry)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text format (needs the API key like every route but /health)."""
    tm = request.app.state.server.tm
    stats = await tm.get_stats()
    return Response(tm.metrics.render(stats), media_type=CONTENT_TYPE_LATEST)

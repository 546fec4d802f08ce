"""OpenTelemetry request traces (`--otlp-traces-endpoint`): one span per request, exported over
OTLP HTTP/protobuf, child of the W3C `traceparent` the HTTP request carried.

A span runs from the request's arrival to its end, with events at the moments the scheduler
stamped (`queued`: it received the request, `prefill_start`: admitted into a batch,
`prefill_end`: the prompt's prefill forward returned), the first token's arrival here
(`first_token`) and `decode_end`, and vLLM's `gen_ai.*` attributes (token counts, finish
reason, time in queue, prefill and decode). Off by default: opentelemetry is imported only
when a tracer is built, and without one no middleware runs."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from radixgen.runtime.messages import TextOut

SPAN_NAME = "llm_request"  # vLLM's
EXPORT_DELAY_MS = 1000  # how long a finished span may wait before its batch is exported
TRACE_HEADERS = (b"traceparent", b"tracestate")

# the W3C trace headers of the HTTP request being handled (None: it sent none)
INCOMING_TRACE_HEADERS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "radixgen_incoming_trace_headers", default=None
)


class TraceContextMiddleware:
    """Pure ASGI: keeps the request's `traceparent` / `tracestate` in INCOMING_TRACE_HEADERS
    while its handler runs (tasks the handler starts copy the value), so the span started at
    submission is the caller's child."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers") or []
            if name in TRACE_HEADERS
        }
        token = INCOMING_TRACE_HEADERS.set(carrier or None)
        try:
            await self.app(scope, receive, send)
        finally:
            INCOMING_TRACE_HEADERS.reset(token)


@dataclass
class _LiveSpan:
    span: Any
    start: float  # unix seconds, as every time below
    first_token: float | None = None
    admitted: float | None = None
    prefilled: float | None = None
    completion_tokens: int = 0
    cached_tokens: int = 0


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class RequestTracer:
    """Spans of the requests in flight, keyed by rid. `ServerMetrics` calls `start` at
    submission, `observe` for every text delta and `end` once; times are unix seconds."""

    def __init__(self, exporter: Any, model_name: str, batch: bool = True):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        # a private provider (never the global one): flushed at interpreter exit
        self.provider = TracerProvider(resource=Resource.create({"service.name": "radixgen"}))
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=EXPORT_DELAY_MS)
            if batch
            else SimpleSpanProcessor(exporter)
        )
        self.tracer = self.provider.get_tracer("radixgen")
        self.propagator = TraceContextTextMapPropagator()
        self.model_name = model_name
        self.spans: dict[str, _LiveSpan] = {}

    def start(self, rid: str, start: float, prompt_tokens: int) -> None:
        from opentelemetry.trace import SpanKind

        headers = INCOMING_TRACE_HEADERS.get()
        parent = self.propagator.extract(headers) if headers else None
        span = self.tracer.start_span(
            SPAN_NAME,
            context=parent,
            kind=SpanKind.SERVER,
            start_time=_ns(start),
            attributes={
                "gen_ai.request.id": rid,
                "gen_ai.response.model": self.model_name,
                "gen_ai.usage.prompt_tokens": prompt_tokens,
            },
        )
        self.spans[rid] = _LiveSpan(span, start)

    def observe(self, out: TextOut, now: float) -> None:
        live = self.spans.get(out.rid)
        if live is None:
            return
        live.completion_tokens, live.cached_tokens = out.completion_tokens, out.cached_tokens
        if out.times is not None:
            live.admitted, live.prefilled = out.times.admitted, out.times.prefilled
            for name, moment in (
                ("queued", out.times.received),
                ("prefill_start", out.times.admitted),
                ("prefill_end", out.times.prefilled),
            ):
                live.span.add_event(name, timestamp=_ns(moment))
        if out.token_ids and live.first_token is None:
            live.first_token = now
            live.span.add_event("first_token", timestamp=_ns(now))

    def end(self, rid: str, now: float, finish: dict | None) -> None:
        """`finish` None: the client left; an `abort` finish: refused or aborted (both an
        error status)."""
        from opentelemetry.trace import Status, StatusCode

        live = self.spans.pop(rid, None)
        if live is None:
            return
        span = live.span
        span.set_attributes(self._end_attributes(live, now, finish))
        if live.first_token is not None:
            span.add_event("decode_end", timestamp=_ns(now))
        if finish is None or finish.get("type") == "abort":
            message = finish.get("message", "aborted") if finish else "the client disconnected"
            span.set_status(Status(StatusCode.ERROR, message))
        span.end(end_time=_ns(now))

    @staticmethod
    def _end_attributes(live: _LiveSpan, now: float, finish: dict | None) -> dict[str, Any]:
        attributes = {
            "gen_ai.usage.completion_tokens": live.completion_tokens,
            "gen_ai.usage.cached_tokens": live.cached_tokens,
            "gen_ai.response.finish_reasons": [finish.get("type", "") if finish else "abort"],
            "gen_ai.latency.e2e": now - live.start,
        }
        if live.admitted is not None:
            attributes["gen_ai.latency.time_in_queue"] = live.admitted - live.start
            attributes["gen_ai.latency.time_in_model_prefill"] = live.prefilled - live.admitted
        if live.first_token is not None:
            attributes["gen_ai.latency.time_to_first_token"] = live.first_token - live.start
            attributes["gen_ai.latency.time_in_model_decode"] = now - live.first_token
        return attributes

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporter thread."""
        self.provider.shutdown()


def build_tracer(traces_url: str | None, model_name: str) -> RequestTracer | None:
    """A tracer exporting to `traces_url` (an OTLP HTTP/protobuf `/v1/traces` URL), None without one."""
    if not traces_url:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return RequestTracer(OTLPSpanExporter(endpoint=traces_url), model_name)

"""OpenTelemetry request traces: spans recorded in memory carry the incoming traceparent's trace
id and the request's queue, prefill and decode events; a real server started with SGLang's
`--oltp-traces-endpoint` spelling exports them over OTLP HTTP to a receiver on loopback."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from radixgen.__main__ import build_parser, serve_configs
from radixgen.runtime.messages import ReqTimes, TextOut
from radixgen.runtime.server.metrics import ServerMetrics
from radixgen.runtime.server.tracing import INCOMING_TRACE_HEADERS, RequestTracer
from tests.runtime.server.conftest import TINY_ARGS, ServerProcess

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
EVENTS = ["queued", "prefill_start", "prefill_end", "first_token", "decode_end"]


def _traced() -> tuple[ServerMetrics, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return ServerMetrics("m", RequestTracer(exporter, "m", batch=False)), exporter


def _out(
    rid: str, tokens: int, finish: dict | None = None, times: ReqTimes | None = None
) -> TextOut:
    return TextOut(
        rid=rid,
        text="x" * tokens,
        token_ids=[7] * tokens,
        prompt_tokens=4,
        cached_tokens=1,
        completion_tokens=tokens,
        finish=finish,
        times=times,
    )


def _run_request(metrics: ServerMetrics, rid: str, traceparent: str | None) -> None:
    token = INCOMING_TRACE_HEADERS.set({"traceparent": traceparent} if traceparent else None)
    try:
        metrics.on_submit(rid, prompt_tokens=4)
    finally:
        INCOMING_TRACE_HEADERS.reset(token)
    start = metrics._timings[rid].arrival_wall
    time.sleep(0.005)  # the first token arrives after the prefill the scheduler stamped
    times = ReqTimes(received=start + 1e-3, admitted=start + 2e-3, prefilled=start + 3e-3)
    metrics.on_output(_out(rid, 1, times=times))
    metrics.on_output(_out(rid, 2))
    metrics.on_output(_out(rid, 0, {"type": "length"}))


def test_a_span_continues_the_callers_trace_with_the_request_events():
    metrics, exporter = _traced()
    _run_request(metrics, "a", TRACEPARENT)
    (span,) = exporter.get_finished_spans()
    assert span.name == "llm_request"
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert [e.name for e in span.events] == EVENTS
    stamps = [span.start_time, *(e.timestamp for e in span.events), span.end_time]
    assert stamps == sorted(stamps)
    attrs = span.attributes
    assert attrs["gen_ai.request.id"] == "a" and attrs["gen_ai.usage.prompt_tokens"] == 4
    assert attrs["gen_ai.usage.completion_tokens"] == 0  # the finishing message's count
    assert attrs["gen_ai.response.finish_reasons"] == ("length",)
    assert 0 < attrs["gen_ai.latency.time_to_first_token"] <= attrs["gen_ai.latency.e2e"]
    assert span.status.status_code is StatusCode.UNSET


def test_without_a_traceparent_each_request_is_a_new_trace():
    metrics, exporter = _traced()
    _run_request(metrics, "a", None)
    _run_request(metrics, "b", None)
    spans = exporter.get_finished_spans()
    assert [s.parent for s in spans] == [None, None]
    assert spans[0].context.trace_id != spans[1].context.trace_id


def test_a_request_whose_client_left_ends_its_span_with_an_error():
    metrics, exporter = _traced()
    metrics.on_submit("a", prompt_tokens=4)
    metrics.on_output(_out("a", 1))
    metrics.on_drop("a")
    metrics.on_submit("b", prompt_tokens=4)
    metrics.on_output(_out("b", 0, {"type": "abort", "message": "the constraint is invalid"}))
    dropped, refused = exporter.get_finished_spans()
    assert (
        dropped.status.status_code is StatusCode.ERROR
        and "disconnected" in dropped.status.description
    )
    assert refused.status.description == "the constraint is invalid"
    assert metrics.tracer.spans == {}


def test_both_flag_spellings_set_the_endpoint():
    for flag in ("--otlp-traces-endpoint", "--oltp-traces-endpoint"):
        _, server_cfg = serve_configs(build_parser().parse_args(["serve", flag, "collector:4318"]))
        assert server_cfg.otlp_traces_url == "http://collector:4318/v1/traces"
    _, server_cfg = serve_configs(build_parser().parse_args(["serve"]))
    assert server_cfg.otlp_traces_url is None


class _Receiver(ThreadingHTTPServer):
    """A minimal OTLP HTTP collector: keeps every span POSTed to /v1/traces."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.spans: list = []
        self.paths: list[str] = []


class _ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                self.server.spans.extend(scope_spans.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver():
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_exports_its_spans_over_otlp_http(tiny_model_path, tmp_path, receiver):
    endpoint = f"127.0.0.1:{receiver.server_address[1]}"
    server = ServerProcess(
        tiny_model_path, tmp_path, *TINY_ARGS, "--oltp-traces-endpoint", endpoint
    )
    try:
        with server.wait_healthy().client() as client:
            body = {
                "text": "hello there",
                "sampling_params": {"max_new_tokens": 3, "ignore_eos": True},
            }
            assert (
                client.post(
                    "/generate", json=body, headers={"traceparent": TRACEPARENT}
                ).status_code
                == 200
            )
            assert client.post("/generate", json=body).status_code == 200
            chat = {
                "model": client.get("/v1/models").json()["data"][0]["id"],
                "max_tokens": 3,
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
            }
            with client.stream(
                "POST", "/v1/chat/completions", json=chat, headers={"traceparent": TRACEPARENT}
            ) as resp:
                assert resp.status_code == 200 and "[DONE]" in "".join(resp.iter_lines())
            deadline = time.monotonic() + 30
            while len(receiver.spans) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        server.stop()
    assert set(receiver.paths) == {"/v1/traces"}
    traced = [s for s in receiver.spans if s.trace_id.hex() == TRACE_ID]
    untraced = [s for s in receiver.spans if s.trace_id.hex() != TRACE_ID]
    assert len(traced) == 2 and len(untraced) == 1, receiver.spans
    assert (
        all(s.parent_span_id.hex() == PARENT_ID for s in traced) and not untraced[0].parent_span_id
    )
    for span in receiver.spans:
        assert span.name == "llm_request" and [e.name for e in span.events] == EVENTS
        attrs = {a.key: a.value for a in span.attributes}
        assert 1 <= attrs["gen_ai.usage.completion_tokens"].int_value <= 3

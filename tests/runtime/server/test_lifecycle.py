"""Process lifecycle: SIGTERM drains in-flight requests, then reaps every child; a dead child
turns /health to 503 within 1 s, fails in-flight requests and makes the server exit non-zero
within 5 s; a model that fails to load or a port in use ends the server with the error;
startup says each phase; the SGLang flags users type are honoured."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import time
from typing import Any, Callable

import httpx
import pytest

from tests.runtime.server.conftest import TINY_ARGS, ServerProcess, sse_events

LONG = {"max_new_tokens": 900, "ignore_eos": True, "temperature": 0}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _pids(server: ServerProcess) -> dict[str, int]:
    pids = httpx.get(f"{server.url}/get_server_info").json()["pids"]
    assert set(pids) == {"scheduler", "detokenizer"} and all(_alive(p) for p in pids.values())
    return pids


def _stream_events(server: ServerProcess, sampling_params: dict) -> list:
    """Every SSE payload of one /generate stream, read to its end."""
    body = {"text": "Go on", "stream": True, "sampling_params": sampling_params}
    with httpx.stream("POST", f"{server.url}/generate", json=body, timeout=60) as resp:
        assert resp.status_code == 200, resp.read()
        return sse_events(resp.iter_lines())


def _wait_running(server: ServerProcess, num: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (
            httpx.get(f"{server.url}/get_server_info").json()["scheduler"]["num_running_reqs"]
            >= num
        ):
            return
        time.sleep(0.02)
    raise AssertionError("the request never started running")


@pytest.mark.slow
def test_sigterm_shuts_down_and_reaps_children(tiny_model_path, tmp_path):
    server = ServerProcess(tiny_model_path, tmp_path, *TINY_ARGS).wait_healthy()
    try:
        pids = _pids(server)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(15) == 0, server.output()
        assert not any(_alive(p) for p in pids.values())
    finally:
        server.stop()


def _sigterm_mid_stream(
    server: ServerProcess, sampling_params: dict, during: Callable[[], Any] = lambda: None
) -> tuple[list, Any]:
    """SIGTERM while one /generate stream runs: the stream's events, and what `during()`
    returned (called just after the signal); then checks the exit code 0 and that no child
    is left."""
    pids = _pids(server)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        inflight = pool.submit(_stream_events, server, sampling_params)
        _wait_running(server)
        server.proc.send_signal(signal.SIGTERM)
        seen = during()
        events = inflight.result(timeout=60)
    assert server.proc.wait(15) == 0, server.output()
    assert not any(_alive(p) for p in pids.values())
    return events, seen


def _health_and_new_request(server: ServerProcess) -> tuple[httpx.Response, httpx.Response]:
    time.sleep(0.3)
    return (
        httpx.get(f"{server.url}/health", timeout=5),
        httpx.post(f"{server.url}/generate", json={"text": "Hi"}, timeout=5),
    )


def test_sigterm_drains_in_flight_requests_and_refuses_new_ones(tiny_model_path, tmp_path):
    server = ServerProcess(
        tiny_model_path, tmp_path, *TINY_ARGS, "--shutdown-timeout", "60"
    ).wait_healthy()
    try:
        events, (health, new) = _sigterm_mid_stream(
            server, LONG, lambda: _health_and_new_request(server)
        )
    finally:
        server.stop()
    assert health.status_code == 503 and new.status_code == 503, (health.text, new.text)
    assert new.json()["error"]["message"]
    assert events[-1] == "[DONE]" and events[-2]["meta_info"]["finish_reason"]["type"] == "length"
    assert events[-2]["meta_info"]["completion_tokens"] == LONG["max_new_tokens"]


@pytest.mark.slow
def test_streams_running_at_the_drain_timeout_end_with_an_error_event(tiny_model_path, tmp_path):
    server = ServerProcess(
        tiny_model_path, tmp_path, *TINY_ARGS, "--shutdown-timeout", "0.5"
    ).wait_healthy()
    try:
        events, _ = _sigterm_mid_stream(server, {**LONG, "max_new_tokens": 1000})
    finally:
        server.stop()
    assert events[-1] == "[DONE]"
    error = events[-2]["error"]
    assert "shut down" in error["message"] and error["code"] == "server_unavailable"


def _watch_health(server: ServerProcess, killed_at: float, timeout: float = 15) -> float | None:
    """Seconds from `killed_at` to the first 503 of /health (None if none came); returns once
    the server has exited."""
    first_503 = None
    deadline = time.monotonic() + timeout
    while server.proc.poll() is None and time.monotonic() < deadline:
        try:
            status = httpx.get(f"{server.url}/health", timeout=1).status_code
            if status == 503 and first_503 is None:
                first_503 = time.monotonic() - killed_at
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    return first_503


@pytest.mark.parametrize(
    "child", ["scheduler", pytest.param("detokenizer", marks=pytest.mark.slow)]
)
def test_dead_child_fails_health_and_exits_nonzero(tiny_model_path, tmp_path, child):
    server = ServerProcess(tiny_model_path, tmp_path, *TINY_ARGS).wait_healthy()
    try:
        pids = _pids(server)
        body = {
            "text": "Go",
            "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True, "top_p": 0.9},
        }
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            inflight = pool.submit(httpx.post, f"{server.url}/generate", json=body, timeout=30)
            _wait_running(server)
            os.kill(pids[child], signal.SIGKILL)
            killed_at = time.monotonic()
            to_503 = _watch_health(server, killed_at)
            server.proc.wait(15)
            to_exit = time.monotonic() - killed_at
            resp = inflight.result(timeout=10)
        assert server.proc.returncode not in (None, 0), server.output()
        assert to_503 is not None and to_503 < 1.0, to_503
        assert to_exit < 5.0, to_exit
        assert resp.status_code == 503 and child in resp.json()["error"]["message"]
        assert not any(_alive(p) for p in pids.values())
    finally:
        server.stop()


@pytest.mark.slow
def test_model_load_failure_exits_with_the_error(tiny_model_path, tmp_path):
    # the tiny folder has a config and a tokenizer but no weights: loading safetensors fails
    server = ServerProcess(tiny_model_path, tmp_path, "--load-format", "safetensors")
    try:
        assert server.proc.wait(60) == 1
        assert "failed to load" in server.output()
    finally:
        server.stop()


def test_port_in_use_is_refused_before_the_model_loads(tiny_model_path, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServerProcess(
            tiny_model_path, tmp_path, *TINY_ARGS, "--port", str(port), "--log-level", "info"
        )
        try:
            assert server.proc.wait(60) == 1
            out = server.output()
            assert f"127.0.0.1:{port}" in out and "already in use" in out
            assert "loading model" not in out, out
        finally:
            server.stop()


@pytest.mark.slow
def test_startup_says_each_phase_and_honours_sglang_flags(tiny_model_path, tmp_path):
    # the embedded tokenizer lives next to the tiny model's config: --tokenizer-path points at it
    server = ServerProcess(
        tiny_model_path,
        tmp_path,
        *TINY_ARGS,
        "--log-level",
        "info",
        "--context-length",
        "256",
        "--tokenizer-path",
        str(tiny_model_path),
        "--trust-remote-code",
        "--enable-metrics",
        "--tp-size",
        "1",
    ).wait_healthy()
    try:
        info = httpx.get(f"{server.url}/get_model_info").json()
        too_long = httpx.post(
            f"{server.url}/generate",
            timeout=30,
            json={"input_ids": [5] * 250, "sampling_params": {"max_new_tokens": 10}},
        )
        assert httpx.get(f"{server.url}/metrics").status_code == 200
    finally:
        server.stop()
    out = server.log_path.read_text()
    assert info["max_context_length"] == 256
    assert too_long.status_code == 400 and "256" in too_long.json()["error"]["message"]
    lines = [line for line in out.splitlines() if " INFO " in line or " WARNING " in line]
    phases = ["loading model", "weights:", "KV pool: 8192 tokens", "serving"]
    at = [next(i for i, line in enumerate(lines) if phase in line) for phase in phases]
    assert at == sorted(at), lines
    assert (
        "GiB" in lines[at[2]]
        and f"at {server.url}" in lines[at[3]]
        and tiny_model_path.name in lines[at[3]]
    )
    assert any("--trust-remote-code has no effect" in line for line in lines)

"""Real server subprocesses for the server tests: one tiny dummy-weight server (with an API
key) shared by the API-shape tests, fresh ones for the lifecycle tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

API_KEY = "test-key"
STARTUP_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m radixgen serve ...` on a free port; output goes to a log file."""

    def __init__(self, model_path: Path, log_dir: Path, *args: str, api_key: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.log_path = log_dir / f"server-{self.port}.log"
        cmd = [
            sys.executable,
            "-m",
            "radixgen",
            "serve",
            "--model-path",
            str(model_path),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *args,
        ]
        if api_key:
            cmd += ["--api-key", api_key]
        self.log = open(self.log_path, "w")
        # one intra-op thread: on a shared 2-core machine OpenMP spin-waiting against another
        # busy process makes a forward up to ~80x slower
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_healthy(self, timeout: float = STARTUP_TIMEOUT_S) -> "ServerProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not healthy after {timeout}s:\n{self.output()}")

    def client(self, timeout: float = 60) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        terminate(self.proc)
        self.log.close()


def terminate(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL after `timeout` s; reaped either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


TINY_ARGS = ("--load-format", "dummy", "--max-total-tokens", "8192")


@pytest.fixture(scope="session")
def tiny_server(tiny_model_path, tmp_path_factory):
    server = ServerProcess(
        tiny_model_path, tmp_path_factory.mktemp("logs"), *TINY_ARGS, api_key=API_KEY
    )
    try:
        yield server.wait_healthy()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def embedded_server(model_path, tmp_path_factory):
    """A server on the embedded SmolLM2 model (no API key)."""
    server = ServerProcess(model_path, tmp_path_factory.mktemp("e2e"), "--max-total-tokens", "4096")
    try:
        yield server.wait_healthy()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def model_name_e2e(model_path) -> str:
    return model_path.name


@pytest.fixture
def client(tiny_server):
    with tiny_server.client() as c:
        yield c


@pytest.fixture(scope="session")
def model_name(tiny_model_path) -> str:
    return tiny_model_path.name


def sse_events(lines) -> list:
    """Parsed `data:` payloads of an SSE stream; the final `[DONE]` kept as the string."""
    events = []
    for line in lines:
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def assert_error(resp: httpx.Response, status: int = 400) -> dict:
    """The OpenAI error shape, with the given status."""
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def scrape(client: httpx.Client) -> dict[str, float]:
    """`/metrics` parsed as Prometheus text: sample name -> value (histogram buckets left out,
    labels summed over)."""
    resp = client.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            if "le" not in sample.labels:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def wait_idle(client: httpx.Client, timeout: float = 10.0) -> dict:
    """The scheduler's statistics once no request is running or waiting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = client.get("/get_server_info").json()["scheduler"]
        if stats["num_running_reqs"] == 0 and stats["num_waiting_reqs"] == 0:
            return stats
        time.sleep(0.05)
    raise AssertionError(f"requests still running: {stats}")

"""`radixgen serve --dp-size N`: the replicas' command lines rebuild the same configs, and (slow)
N replicas start behind sglang-router and stop together on SIGTERM."""

from __future__ import annotations

import dataclasses
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from radixgen.__main__ import build_parser, serve_configs
from radixgen.runtime.server.replicas import (
    REPLICA_HOST,
    metrics_port,
    offset_endpoint,
    replica_command,
    router_command,
)
from tests.runtime.server.conftest import TINY_ARGS


def _configs(*argv: str):
    return serve_configs(build_parser().parse_args(["serve", *argv]))


def test_replica_command_rebuilds_every_flag():
    engine, server = _configs(
        "--model-path", "/m", "--max-total-tokens", "4096", "--disable-radix-cache",
        "--dtype", "float32", "--port", "8000", "--dp-size", "3", "--api-key", "k",
        "--shutdown-timeout", "12.5", "--host", "0.0.0.0",
    )  # fmt: skip
    cmd = replica_command(engine, server, 8002)
    assert cmd[:4] == [sys.executable, "-m", "radixgen", "serve"]
    replica_engine, replica_server = _configs(*cmd[4:])
    assert replica_engine == engine
    assert replica_server == dataclasses.replace(server, host=REPLICA_HOST, port=8002, dp_size=1)


def test_each_replica_publishes_kv_events_on_its_own_endpoints():
    events = '{"enable_kv_cache_events": true, "endpoint": "tcp://*:5557", "replay_endpoint": '
    events += '"tcp://*:5600", "topic": "kv"}'
    engine, server = _configs("--port", "8000", "--dp-size", "2", "--kv-events-config", events)
    first, second = (_configs(*replica_command(engine, server, p)[4:])[0] for p in (8001, 8002))
    assert first.cache.kv_events == engine.cache.kv_events
    moved = second.cache.kv_events
    assert (moved.endpoint, moved.replay_endpoint, moved.topic) == (
        "tcp://*:5558",
        "tcp://*:5601",
        "kv",
    )
    assert offset_endpoint("ipc:///tmp/kv", 2) == "ipc:///tmp/kv_dp2"


def test_router_command_fronts_every_replica():
    _, server = _configs("--port", "8000", "--dp-size", "2", "--shutdown-timeout", "40")
    urls = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    cmd = router_command(server, urls)
    assert cmd[cmd.index("--worker-urls") + 1 :] == urls
    assert cmd[cmd.index("--policy") + 1] == "cache_aware"
    assert cmd[cmd.index("--port") + 1] == "8000"
    assert cmd[cmd.index("--prometheus-port") + 1] == str(metrics_port(server)) == "8003"
    assert cmd[cmd.index("--shutdown-grace-period-secs") + 1] == "40"


def _free_port_run(count: int) -> int:
    """A port p with p..p+count-1 all free."""
    for base in range(31500, 40000, 7):
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no run of free ports")


def _wait_ready(url: str, workers: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"radixgen serve --dp-size exited ({proc.returncode})"
        try:
            ready = httpx.get(f"{url}/readiness", timeout=1)
            if ready.status_code == 200 and ready.json()["healthy_workers"] == workers:
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"router not ready after {timeout}s")


@pytest.mark.slow
def test_dp_size_serves_through_the_router_and_stops_on_sigterm(tiny_model_path, tmp_path):
    port = _free_port_run(4)
    cmd = [sys.executable, "-m", "radixgen", "serve", "--model-path", str(tiny_model_path)]
    cmd += [*TINY_ARGS, "--port", str(port), "--dp-size", "2", "--log-level", "warning"]
    log = open(tmp_path / "dp.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, 2, proc, timeout=300)
        out = httpx.post(
            f"{url}/v1/completions",
            json={"model": tiny_model_path.name, "prompt": "Hi", "max_tokens": 2},
            timeout=60,
        )
        assert out.status_code == 200, out.text
        for replica_port in (port + 1, port + 2):
            assert httpx.get(f"http://127.0.0.1:{replica_port}/health").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        for replica_port in (port, port + 1, port + 2):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{replica_port}/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()

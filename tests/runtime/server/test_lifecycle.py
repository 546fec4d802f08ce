"""Process lifecycle: SIGTERM reaps every child; a dead scheduler turns /health to 503, fails
in-flight requests and makes the server exit non-zero; a model that fails to load ends the
server with the error."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time

import httpx

from tests.runtime.server.conftest import TINY_ARGS, ServerProcess


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


def test_sigterm_shuts_down_and_reaps_children(tiny_model_path, tmp_path):
    server = ServerProcess(tiny_model_path, tmp_path, *TINY_ARGS).wait_healthy()
    try:
        pids = _pids(server)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(15) == 0, server.output()
        assert not any(_alive(p) for p in pids.values())
    finally:
        server.stop()


def test_dead_scheduler_fails_health_and_exits_nonzero(tiny_model_path, tmp_path):
    server = ServerProcess(tiny_model_path, tmp_path, *TINY_ARGS).wait_healthy()
    try:
        pids = _pids(server)
        body = {"text": "Go", "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True, "top_p": 0.9}}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            inflight = pool.submit(httpx.post, f"{server.url}/generate", json=body, timeout=30)
            time.sleep(0.3)
            os.kill(pids["scheduler"], signal.SIGKILL)
            statuses = set()
            deadline = time.monotonic() + 10
            while server.proc.poll() is None and time.monotonic() < deadline:
                try:
                    statuses.add(httpx.get(f"{server.url}/health", timeout=1).status_code)
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            resp = inflight.result(timeout=10)
        assert server.proc.poll() not in (None, 0), server.output()
        assert 503 in statuses
        assert resp.status_code == 503 and resp.json()["error"]["message"]
        assert not _alive(pids["detokenizer"])
    finally:
        server.stop()


def test_model_load_failure_exits_with_the_error(tiny_model_path, tmp_path):
    # the tiny folder has a config and a tokenizer but no weights: loading safetensors fails
    server = ServerProcess(tiny_model_path, tmp_path, "--load-format", "safetensors")
    try:
        assert server.proc.wait(60) == 1
        assert "failed to load" in server.output()
    finally:
        server.stop()

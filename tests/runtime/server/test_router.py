"""Two radixgen replicas behind sglang-router (unmodified, from PyPI) on loopback: the router
registers them (its probes answer), forwards every request with the fields it adds, keeps each
shared prefix on one replica (cache-aware policy), and routes around a killed replica."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.runtime.server.conftest import TINY_ARGS, ServerProcess, free_port, terminate

openai = pytest.importorskip("openai")
pytest.importorskip("sglang_router")

pytestmark = pytest.mark.slow  # two servers and a router start (~1 min on a loaded machine)

NUM_SYSTEM_PROMPTS = 4
REQUESTS_PER_PROMPT = 32
REPLICA_STARTUP_S = 300.0  # two servers importing torch at once on a shared 2-core machine
TOPICS = ("astronomy", "cooking", "tax law", "sailing")


class RouterProcess:
    """`python -m sglang_router.launch_router` with the cache-aware policy on a free port."""

    def __init__(self, worker_urls: list[str], log_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.num_workers = len(worker_urls)
        self.log = open(log_dir / f"router-{self.port}.log", "w")
        cmd = [
            sys.executable,
            "-m",
            "sglang_router.launch_router",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--prometheus-port",  # its default (29000) would collide with another router
            str(free_port()),
            "--policy",
            "cache_aware",
            "--health-check-interval-secs",
            "1",
            "--log-level",
            "warn",
            "--worker-urls",
            *worker_urls,
        ]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0) -> "RouterProcess":
        """Until the router has registered every worker as healthy."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"router exited ({self.proc.returncode})"
            try:
                ready = httpx.get(f"{self.url}/readiness", timeout=1)
                if ready.status_code == 200 and ready.json()["healthy_workers"] == self.num_workers:
                    return self
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"router not ready after {timeout}s")

    def stop(self) -> None:
        terminate(self.proc)
        self.log.close()


@pytest.fixture(scope="module")
def replicas(tiny_model_path, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("replicas")
    servers = [ServerProcess(tiny_model_path, log_dir, *TINY_ARGS) for _ in range(2)]
    try:
        yield [server.wait_healthy(REPLICA_STARTUP_S) for server in servers]
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def router(replicas, tmp_path_factory):
    proc = RouterProcess([r.url for r in replicas], tmp_path_factory.mktemp("router"))
    try:
        yield proc.wait_ready()
    finally:
        proc.stop()


@pytest.fixture
def oai(router):
    return openai.OpenAI(base_url=f"{router.url}/v1", api_key="unused", max_retries=0)


def test_openai_client_through_router(oai, model_name):
    chat = oai.chat.completions.create(
        model=model_name,
        messages=[{"role": "user", "content": "Say hi"}],
        max_tokens=4,
        temperature=0,
        stop=["\n\n"],
    )
    assert chat.choices[0].finish_reason in ("length", "stop")
    assert chat.usage.completion_tokens >= 1
    completion = oai.completions.create(model=model_name, prompt="Once upon", max_tokens=3)
    assert completion.usage.completion_tokens == 3
    stream = oai.chat.completions.create(
        model=model_name,
        messages=[{"role": "user", "content": "Count"}],
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage.completion_tokens == 3
    assert [m.id for m in oai.models.list().data] == [model_name]


def test_native_generate_and_probes_through_router(router):
    with httpx.Client(base_url=router.url, timeout=60) as c:
        out = c.post(
            "/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 2}}
        ).json()
        assert out["meta_info"]["completion_tokens"] == 2 and len(out["output_ids"]) == 2
        loads = c.get("/get_loads").json()["workers"]
        assert len(loads) == 2 and all(w["load"] >= 0 for w in loads)  # -1: no /get_load
        flushed = c.post("/flush_cache").json()
        assert flushed["workers_flushed"] == 2, flushed


def _system_prompt(topic: str) -> str:
    rules = " ".join(f"Rule {i}: answer questions about {topic} precisely." for i in range(12))
    return f"You are an expert in {topic}. {rules}"


def _optimal_cached_tokens(prompts: list[list[int]]) -> int:
    """What one server caches, in request order: each prompt's longest common prefix with any
    prompt before it."""
    total = 0
    for i, ids in enumerate(prompts):
        total += max((_common_prefix_len(ids, earlier) for earlier in prompts[:i]), default=0)
    return total


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cache_counts(replicas) -> list[tuple[int, int]]:
    """(prompt tokens, cached prompt tokens) each replica's scheduler counted so far."""
    counts = []
    for r in replicas:
        stats = httpx.get(f"{r.url}/get_server_info", timeout=10).json()["scheduler"]
        counts.append((stats["num_prompt_tokens"], stats["num_cached_tokens"]))
    return counts


def test_cache_aware_routing_keeps_each_prefix_on_one_replica(
    router, replicas, oai, model_name, tokenizer
):
    httpx.post(f"{router.url}/flush_cache", timeout=30).raise_for_status()
    prompts = [
        f"{_system_prompt(topic)}\nQuestion {q}: what should a beginner learn first ({q * 7})?"
        for topic in TOPICS
        for q in range(REQUESTS_PER_PROMPT)
    ]
    random.Random(0).shuffle(prompts)
    before = _cache_counts(replicas)

    def send(prompt: str) -> int:
        out = oai.completions.create(model=model_name, prompt=prompt, max_tokens=2)
        return out.usage.prompt_tokens

    with ThreadPoolExecutor(4) as pool:
        prompt_tokens = list(pool.map(send, prompts))
    after = _cache_counts(replicas)
    ids = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    assert prompt_tokens == [len(x) for x in ids]  # the optimum is computed on the same ids
    cached = sum(a[1] - b[1] for a, b in zip(after, before))
    optimum = _optimal_cached_tokens(ids)
    print(f"cached {cached} of the single-server optimum {optimum} ({cached / optimum:.3f})")
    assert cached >= 0.9 * optimum, (cached, optimum, before, after)
    assert all(a[0] > b[0] for a, b in zip(after, before))  # both replicas served some


def test_requests_succeed_with_one_replica_killed(router, replicas, oai, model_name):
    """Last in the module: it kills a replica (SIGKILL: no drain, connections refused)."""
    victim = replicas[1]
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait(10)
    for i in range(8):
        out = oai.completions.create(model=model_name, prompt=f"Request {i}", max_tokens=2)
        assert out.usage.completion_tokens == 2

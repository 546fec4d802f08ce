"""`radixgen serve --dp-size N`: N server processes (replicas) on loopback ports port+1..port+N,
one GPU each when there are GPUs, behind sglang-router (the Rust router from PyPI, unmodified)
on --host:--port with its cache-aware policy, which sends each shared prefix to the replica
whose radix tree holds it.

Every process is a child of this supervisor. SIGTERM/SIGINT is passed to all of them: the
replicas drain (--shutdown-timeout) and the router waits as long for its requests in flight.
A replica that dies is routed around by the router (its health checks); the router dying, or
every replica, ends the whole group with exit code 1."""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from radixgen.config import EngineConfig, ServerConfig, to_arguments
from radixgen.runtime.server.launcher import READY_TIMEOUT_S, bind_socket

logger = logging.getLogger("radixgen.replicas")

REPLICA_HOST = "127.0.0.1"  # only the router in front talks to a replica
POLL_S = 0.2
PR_SET_PDEATHSIG = 1  # linux/prctl.h
KILL_MARGIN_S = 10.0  # past --shutdown-timeout: what still runs then is killed


class ReplicaError(Exception):
    """The replicas cannot be started as asked (a clear message for the user)."""


def launch_replicas(engine_cfg: EngineConfig, server_cfg: ServerConfig) -> int:
    """Run N replicas and the router until SIGTERM/SIGINT (exit 0) or a failure (1)."""
    logging.basicConfig(
        level=server_cfg.log_level.upper(),
        format="%(asctime)s [replicas] %(levelname)s %(name)s: %(message)s",
    )
    try:
        ports = _check_ports(server_cfg)
        envs = replica_envs(engine_cfg.model.device, server_cfg.dp_size)
    except ReplicaError as exc:
        logger.error("cannot start: %s", exc)
        return 1
    group = _Group()
    signal.signal(signal.SIGTERM, group.on_signal)
    signal.signal(signal.SIGINT, group.on_signal)
    urls = [f"http://{REPLICA_HOST}:{port}" for port in ports]
    for port, env in zip(ports, envs):
        group.start(replica_command(engine_cfg, server_cfg, port), env)
    group.router = group.start(router_command(server_cfg, urls), dict(os.environ))
    logger.info("router on %s:%d in front of %s", server_cfg.host, server_cfg.port, ", ".join(urls))
    return group.supervise(server_cfg.shutdown_timeout)


def _check_ports(cfg: ServerConfig) -> list[int]:
    """The replicas' ports; ReplicaError when sglang-router is missing or a port is in use
    (found before any model loads)."""
    if importlib.util.find_spec("sglang_router") is None:
        raise ReplicaError("--dp-size > 1 runs sglang-router in front: pip install sglang-router")
    ports = [cfg.port + 1 + i for i in range(cfg.dp_size)]
    checks = [(cfg.host, cfg.port)] + [(REPLICA_HOST, p) for p in ports + [metrics_port(cfg)]]
    for host, port in checks:
        try:
            bind_socket(host, port).close()
        except OSError as exc:
            raise ReplicaError(str(exc)) from None
    return ports


def metrics_port(cfg: ServerConfig) -> int:
    """Where the router's own Prometheus metrics are served."""
    return cfg.port + cfg.dp_size + 1


def replica_envs(device: str, dp_size: int) -> list[dict[str, str]]:
    """Each replica's environment: with GPUs, CUDA_VISIBLE_DEVICES naming its own one."""
    base = dict(os.environ)
    if device == "cpu":
        return [dict(base) for _ in range(dp_size)]
    import torch

    num_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if num_gpus == 0:
        if device.startswith("cuda"):
            raise ReplicaError(f"--device {device} but no GPU is visible")
        return [dict(base) for _ in range(dp_size)]
    if num_gpus < dp_size:
        raise ReplicaError(
            f"--dp-size {dp_size} gives each replica its own GPU, but {num_gpus} are visible"
        )
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = listed.split(",") if listed else [str(i) for i in range(num_gpus)]
    return [{**base, "CUDA_VISIBLE_DEVICES": visible[i].strip()} for i in range(dp_size)]


def replica_command(engine_cfg: EngineConfig, server_cfg: ServerConfig, port: int) -> list[str]:
    """`radixgen serve` with every flag given to this one, on a loopback port, as one replica
    (its KV events on the endpoints offset by its index, as vLLM offsets them per DP rank)."""
    rank = port - server_cfg.port - 1
    replica = dataclasses.replace(server_cfg, host=REPLICA_HOST, port=port, dp_size=1)
    cache = engine_cfg.cache
    if cache.kv_events_config:
        values = json.loads(cache.kv_events_config)
        for key in ("endpoint", "replay_endpoint"):
            if values.get(key):
                values[key] = offset_endpoint(values[key], rank)
        cache = dataclasses.replace(cache, kv_events_config=json.dumps(values))
    args: list[str] = []
    for part in (engine_cfg.model, cache, engine_cfg.scheduler, engine_cfg.speculative):
        args += to_arguments(part)
    return [sys.executable, "-m", "radixgen", "serve", *args, *to_arguments(replica)]


def offset_endpoint(endpoint: str, rank: int) -> str:
    """A ZMQ endpoint of replica `rank`: a tcp port + rank, else the address + '_dp<rank>'."""
    if rank == 0:
        return endpoint
    if endpoint.startswith("tcp://"):
        address, _, port = endpoint.rpartition(":")
        return f"{address}:{int(port) + rank}"
    return f"{endpoint}_dp{rank}"


def router_command(cfg: ServerConfig, worker_urls: list[str]) -> list[str]:
    level = {"warning": "warn"}.get(cfg.log_level, cfg.log_level)
    cmd = [
        sys.executable,
        "-m",
        "sglang_router.launch_router",
        "--host",
        cfg.host,
        "--port",
        str(cfg.port),
        "--policy",
        "cache_aware",
        "--prometheus-host",
        cfg.host,
        "--prometheus-port",
        str(metrics_port(cfg)),
        "--worker-startup-timeout-secs",
        str(int(READY_TIMEOUT_S)),  # as long as one server may take to load its model
        "--shutdown-grace-period-secs",
        str(int(cfg.shutdown_timeout)),
        "--log-level",
        level,
        "--worker-urls",
        *worker_urls,
    ]
    return cmd + (["--api-key", cfg.api_key] if cfg.api_key else [])


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the supervisor dies, even by SIGKILL, so
    no replica outlives it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class _Group:
    """The child processes, and the first signal received."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.router: subprocess.Popen | None = None
        self.signalled = False

    def start(self, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent)
        self.procs.append(proc)
        return proc

    def on_signal(self, signum: int, frame: Any) -> None:
        if self.signalled:  # a second signal: stop at once
            self._kill()
            return
        self.signalled = True
        logger.info("shutting down the router and %d replicas", len(self.procs) - 1)
        self._send(signal.SIGTERM)

    def supervise(self, shutdown_timeout: float) -> int:
        """Until a signal (0) or the router or every replica exits (1); every child reaped."""
        code = 0
        while not self.signalled:
            replicas = [p for p in self.procs if p is not self.router]
            if self.router.poll() is not None or all(p.poll() is not None for p in replicas):
                logger.error(self._why())
                code = 1
                self._send(signal.SIGTERM)
                break
            time.sleep(POLL_S)
        self._reap(shutdown_timeout + KILL_MARGIN_S)
        return code

    def _why(self) -> str:
        if self.router.poll() is not None:
            return f"the router exited (code {self.router.returncode}); stopping the replicas"
        return "every replica exited; stopping the router"

    def _send(self, sig: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(sig)

    def _kill(self) -> None:
        self._send(signal.SIGKILL)

    def _reap(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

"""Starts and supervises the server: the main process (FastAPI on uvicorn + TokenizerManager),
the scheduler process and the detokenizer process (multiprocessing spawn).

The port is bound before the model loads (a port in use ends startup at once). The first
SIGTERM/SIGINT drains: /health and new requests get 503 while in-flight ones run up to
--shutdown-timeout; what still runs then fails (a stream ends with an error event, then
[DONE]); then the children are stopped. A second signal stops at once.

Exit codes: 0 after SIGTERM/SIGINT (every child reaped), 1 when the model fails to load, a
child dies, or the port cannot be bound."""

from __future__ import annotations

import asyncio
import errno
import logging
import multiprocessing
import shutil
import signal
import socket
from pathlib import Path
from typing import Any, Callable, Coroutine

import uvicorn

from radixgen.config import EngineConfig, ServerConfig
from radixgen.runtime.engine import load_tokenizer
from radixgen.runtime.model.embedded import default_model_path
from radixgen.runtime.server.app import build_app
from radixgen.runtime.server.detokenizer_proc import run_detokenizer_process
from radixgen.runtime.server.http_common import ServerState
from radixgen.runtime.server.ipc import Endpoints
from radixgen.runtime.server.metrics import ServerMetrics
from radixgen.runtime.server.scheduler_proc import run_scheduler_process
from radixgen.runtime.server.tokenizer_manager import StartupError, TokenizerManager
from radixgen.runtime.server.tracing import build_tracer

logger = logging.getLogger("radixgen.server")

READY_TIMEOUT_S = 1800.0  # loading (and first-time conversion of) a model
WATCH_INTERVAL_S = 0.1  # a dead child is noticed (and /health turns 503) this fast
EXIT_GRACE_S = 1.0  # a dead child: /health reports it this long before the server exits
STOP_TIMEOUT_S = 3.0  # a child's SIGTERM exit; SIGKILL after
RESPONSE_GRACE_S = 3.0  # after the drain: handlers write their last bytes
DRAIN_POLL_S = 0.05


class Interrupted(Exception):
    """SIGTERM/SIGINT arrived before the server was up."""


class Children:
    """The scheduler and detokenizer processes."""

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        cfg: EngineConfig,
        endpoints: Endpoints,
        log_level: str,
    ):
        spawn = multiprocessing.get_context("spawn")
        self.procs = {
            "scheduler": spawn.Process(
                target=run_scheduler_process,
                name="radixgen-scheduler",
                daemon=True,
                args=(str(model_path), str(tokenizer_path), cfg, endpoints, log_level),
            ),
            "detokenizer": spawn.Process(
                target=run_detokenizer_process,
                name="radixgen-detokenizer",
                daemon=True,
                args=(str(tokenizer_path), endpoints, log_level),
            ),
        }

    def start(self) -> None:
        for proc in self.procs.values():
            proc.start()

    def dead(self) -> str | None:
        """'<name> process exited (code N)' for the first child that is gone, else None."""
        for name, proc in self.procs.items():
            if proc.pid is not None and not proc.is_alive():
                return f"the {name} process exited (code {proc.exitcode})"
        return None

    def stop(self) -> None:
        """SIGTERM every child, SIGKILL what is left after STOP_TIMEOUT_S; reap all."""
        for proc in self.procs.values():
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs.values():
            proc.join(STOP_TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()


class _Signals:
    """Records SIGTERM/SIGINT outside uvicorn's own handling (uvicorn re-raises the signal
    to this handler after its graceful shutdown)."""

    def __init__(self) -> None:
        self.received: int | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum

    def check(self) -> None:
        if self.received is not None:
            raise Interrupted


def launch_server(engine_cfg: EngineConfig, server_cfg: ServerConfig) -> int:
    """Run the server until SIGTERM/SIGINT or a failure; returns the exit code."""
    logging.basicConfig(
        level=server_cfg.log_level.upper(),
        format="%(asctime)s [main] %(levelname)s %(name)s: %(message)s",
    )
    signals = _Signals()
    try:
        sock = bind_socket(server_cfg.host, server_cfg.port)
    except OSError as exc:
        logger.error("cannot start: %s", exc)
        return 1
    try:
        model_path = (
            Path(engine_cfg.model.model_path)
            if engine_cfg.model.model_path
            else default_model_path()
        )
        if not (model_path / "config.json").is_file():
            raise StartupError(f"{model_path} is not a model folder (no config.json)")
        tokenizer_path = Path(engine_cfg.model.tokenizer_path or model_path)
        _warn_no_ops(engine_cfg)
        logger.info("loading model %s (tokenizer %s)", model_path, tokenizer_path)
        tokenizer = load_tokenizer(tokenizer_path)
    except Exception as exc:  # noqa: BLE001 - reported to the user, then exit 1
        logger.error("cannot start: %s", exc)
        sock.close()
        return 1
    if signals.received is not None:
        sock.close()
        return 0
    with sock:
        return asyncio.run(
            _serve(model_path, tokenizer_path, tokenizer, engine_cfg, server_cfg, signals, sock)
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound now so that a port in use is refused before the
    model loads (uvicorn listens on it later); OSError with a clear message otherwise."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(
        socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
    )  # as uvicorn does: TIME_WAIT is no conflict
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = "it is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise OSError(f"cannot listen on {host}:{port}: {why}") from None
    return sock


def _warn_no_ops(cfg: EngineConfig) -> None:
    if cfg.model.trust_remote_code:
        logger.warning(
            "--trust-remote-code has no effect: radixgen runs its own model code, never the model folder's"
        )


async def _serve(
    model_path: Path,
    tokenizer_path: Path,
    tokenizer: Any,
    engine_cfg: EngineConfig,
    server_cfg: ServerConfig,
    signals: _Signals,
    sock: socket.socket,
) -> int:
    endpoints, ipc_dir = Endpoints.in_new_dir()
    model_name = server_cfg.served_model_name or model_path.name
    metrics = ServerMetrics(model_name, build_tracer(server_cfg.otlp_traces_url, model_name))
    tm = TokenizerManager(tokenizer, endpoints, metrics, engine_cfg.scheduler.grammar_whitespace)
    children = Children(model_path, tokenizer_path, engine_cfg, endpoints, server_cfg.log_level)
    children.start()
    try:
        await tm.wait_ready(lambda: signals.check() or children.dead(), READY_TIMEOUT_S)
        tm.start()
        state = ServerState(
            tm,
            model_path,
            model_name,
            engine_cfg,
            server_cfg,
            {name: p.pid for name, p in children.procs.items()},
        )
        return await _run_http(state, children, sock)
    except StartupError as exc:
        logger.error("%s", exc)
        return 1
    except Interrupted:
        logger.info("interrupted during startup")
        return 0
    finally:
        await tm.close()
        children.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)
        logger.info("server stopped; every child process reaped")


async def _run_http(state: ServerState, children: Children, sock: socket.socket) -> int:
    """uvicorn until SIGTERM/SIGINT and the drain (exit code 0) or a dead child (1)."""
    cfg = state.server_cfg
    quiet = (
        cfg.log_level if cfg.log_level in ("debug", "error") else "warning"
    )  # our lines tell each phase
    server = _DrainingServer(
        uvicorn.Config(
            build_app(state),
            log_level=quiet,
            timeout_graceful_shutdown=RESPONSE_GRACE_S,
            access_log=cfg.log_level == "debug",
        ),
        lambda: _drain(state.tm, server, cfg.shutdown_timeout),
    )
    exit_code = [0]
    watchdog = asyncio.create_task(_watch(children, state, server, exit_code))
    try:
        await server.serve(sockets=[sock])
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, *server.drains, return_exceptions=True)
    return exit_code[0]


class _DrainingServer(uvicorn.Server):
    """uvicorn whose first SIGTERM/SIGINT starts `drain()` (which sets should_exit when done)
    instead of closing the listener at once: new requests still get an answer, a 503. A
    second signal, or one before the server started, is uvicorn's own handling."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Coroutine[Any, Any, None]]):
        super().__init__(config)
        self._start_drain = drain
        self._loop = asyncio.get_running_loop()
        self.drains: list[asyncio.Task] = []

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.drains or not self.started:
            super().handle_exit(sig, frame)
            return
        # a signal handler runs between the loop's callbacks: schedule, never await, here
        self.drains.append(self._loop.create_task(self._start_drain()))


async def _drain(tm: TokenizerManager, server: uvicorn.Server, timeout: float) -> None:
    """Refuse new requests, wait up to `timeout` s for the in-flight ones, fail the rest."""
    tm.start_drain("the server is shutting down")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    logger.info(
        "shutting down: %d requests in flight, waiting up to %.0fs", tm.num_inflight, timeout
    )
    while tm.num_inflight and loop.time() < deadline and not server.should_exit:
        await asyncio.sleep(DRAIN_POLL_S)
    if tm.num_inflight:
        logger.warning(
            "%d requests still running after %.0fs: ending them", tm.num_inflight, timeout
        )
        tm.fail_all(
            f"the server shut down before this request finished (--shutdown-timeout {timeout:g}s)"
        )
    server.should_exit = True


def _url(sock: Any) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def _watch(
    children: Children, state: ServerState, server: uvicorn.Server, exit_code: list[int]
) -> None:
    """Says where the server listens once it does. A dead child fails every waiting request,
    turns /health to 503, then stops the server with exit code 1."""
    announced = False
    while not server.should_exit:
        if server.started and not announced:
            announced = True
            logger.info(
                "serving %r at %s", state.served_model_name, _url(server.servers[0].sockets[0])
            )
        dead = children.dead()
        if dead:
            logger.error("%s; shutting down", dead)
            state.tm.fail_all(dead)
            exit_code[0] = 1
            await asyncio.sleep(EXIT_GRACE_S)
            server.should_exit = True
            return
        await asyncio.sleep(WATCH_INTERVAL_S)

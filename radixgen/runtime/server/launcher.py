"""Starts and supervises the server: the main process (FastAPI on uvicorn + TokenizerManager),
the scheduler process and the detokenizer process (multiprocessing spawn).

Exit codes: 0 after SIGTERM/SIGINT (every child reaped), 1 when the model fails to load, a
child dies, or the port cannot be bound."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import shutil
import signal
from pathlib import Path
from typing import Any

import uvicorn

from radixgen.config import EngineConfig, ServerConfig
from radixgen.runtime.engine import load_tokenizer
from radixgen.runtime.model.embedded import default_model_path
from radixgen.runtime.server.app import build_app
from radixgen.runtime.server.detokenizer_proc import run_detokenizer_process
from radixgen.runtime.server.http_common import ServerState
from radixgen.runtime.server.ipc import Endpoints
from radixgen.runtime.server.metrics import ServerMetrics
from radixgen.runtime.server.tracing import build_tracer
from radixgen.runtime.server.scheduler_proc import run_scheduler_process
from radixgen.runtime.server.tokenizer_manager import StartupError, TokenizerManager

logger = logging.getLogger("radixgen.server")

READY_TIMEOUT_S = 1800.0  # loading (and first-time conversion of) a model
WATCH_INTERVAL_S = 0.5
EXIT_GRACE_S = 1.0  # a dead child: /health reports it this long before the server exits
STOP_TIMEOUT_S = 5.0


class Interrupted(Exception):
    """SIGTERM/SIGINT arrived before the server was up."""


class Children:
    """The scheduler and detokenizer processes."""

    def __init__(self, model_path: Path, cfg: EngineConfig, endpoints: Endpoints, log_level: str):
        spawn = multiprocessing.get_context("spawn")
        self.procs = {
            "scheduler": spawn.Process(target=run_scheduler_process, name="radixgen-scheduler", daemon=True,
                                       args=(str(model_path), cfg, endpoints, log_level)),
            "detokenizer": spawn.Process(target=run_detokenizer_process, name="radixgen-detokenizer",
                                         daemon=True, args=(str(model_path), endpoints, log_level)),
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
    logging.basicConfig(level=server_cfg.log_level.upper(),
                        format="%(asctime)s [main] %(levelname)s %(name)s: %(message)s")
    signals = _Signals()
    try:
        model_path = Path(engine_cfg.model.model_path) if engine_cfg.model.model_path else default_model_path()
        if not (model_path / "config.json").is_file():
            raise StartupError(f"{model_path} is not a model folder (no config.json)")
        tokenizer = load_tokenizer(model_path)
    except Exception as exc:  # noqa: BLE001 - reported to the user, then exit 1
        logger.error("cannot start: %s", exc)
        return 1
    if signals.received is not None:
        return 0
    try:
        return asyncio.run(_serve(model_path, tokenizer, engine_cfg, server_cfg, signals))
    except SystemExit as exc:  # uvicorn exits this way when it cannot bind the port
        return exc.code if isinstance(exc.code, int) else 1


async def _serve(model_path: Path, tokenizer: Any, engine_cfg: EngineConfig,
                 server_cfg: ServerConfig, signals: _Signals) -> int:
    endpoints, ipc_dir = Endpoints.in_new_dir()
    model_name = server_cfg.served_model_name or model_path.name
    metrics = ServerMetrics(model_name, build_tracer(server_cfg.otlp_traces_url, model_name))
    tm = TokenizerManager(tokenizer, endpoints, metrics, engine_cfg.scheduler.grammar_whitespace)
    children = Children(model_path, engine_cfg, endpoints, server_cfg.log_level)
    children.start()
    try:
        await tm.wait_ready(lambda: signals.check() or children.dead(), READY_TIMEOUT_S)
        tm.start()
        state = ServerState(tm, model_path, model_name, engine_cfg, server_cfg,
                            {name: p.pid for name, p in children.procs.items()})
        return await _run_http(state, children)
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


async def _run_http(state: ServerState, children: Children) -> int:
    """uvicorn until SIGTERM/SIGINT (exit code 0) or a dead child (1)."""
    cfg = state.server_cfg
    server = uvicorn.Server(uvicorn.Config(
        build_app(state), host=cfg.host, port=cfg.port, log_level=cfg.log_level,
        timeout_graceful_shutdown=3, access_log=cfg.log_level == "debug"))
    exit_code = [0]
    watchdog = asyncio.create_task(_watch(children, state.tm, server, exit_code))
    try:
        await server.serve()
    finally:
        watchdog.cancel()
    return exit_code[0]


async def _watch(children: Children, tm: TokenizerManager, server: uvicorn.Server,
                 exit_code: list[int]) -> None:
    """A dead child fails every waiting request, turns /health to 503, then stops the server
    with exit code 1."""
    while not server.should_exit:
        dead = children.dead()
        if dead:
            logger.error("%s; shutting down", dead)
            tm.fail_all(dead)
            exit_code[0] = 1
            await asyncio.sleep(EXIT_GRACE_S)
            server.should_exit = True
            return
        await asyncio.sleep(WATCH_INTERVAL_S)

"""Server mode: FastAPI + TokenizerManager in the main process, a scheduler process and a
detokenizer process, connected by ZMQ PUSH/PULL over ipc:// sockets.

    HTTP ─► main (FastAPI, TokenizerManager) ─► scheduler ─► detokenizer ─► main
    (each arrow a PUSH socket; the scheduler also answers control messages to main directly)

Entry point: `launch_server(EngineConfig, ServerConfig)` (the `radixgen serve` command); with
--dp-size N > 1, N such servers behind sglang-router (replicas.py)."""

from __future__ import annotations

from typing import Any


def launch_server(engine_cfg: Any, server_cfg: Any) -> int:
    """See `launcher.launch_server` and `replicas.launch_replicas` (imported lazily: they pull
    in torch and uvicorn)."""
    if server_cfg.dp_size > 1:
        from radixgen.runtime.server.replicas import launch_replicas

        return launch_replicas(engine_cfg, server_cfg)
    from radixgen.runtime.server.launcher import launch_server as _launch

    return _launch(engine_cfg, server_cfg)


__all__ = ["launch_server"]

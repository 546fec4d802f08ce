"""Server mode: FastAPI + TokenizerManager in the main process, a scheduler process and a
detokenizer process, connected by ZMQ PUSH/PULL over ipc:// sockets.

    HTTP ─► main (FastAPI, TokenizerManager) ─► scheduler ─► detokenizer ─► main
    (each arrow a PUSH socket; the scheduler also answers control messages to main directly)

Entry point: `launch_server(EngineConfig, ServerConfig)` (the `radixgen serve` command)."""

from __future__ import annotations

from typing import Any


def launch_server(*args: Any, **kwargs: Any) -> int:
    """See `launcher.launch_server` (imported lazily: it pulls in torch and uvicorn)."""
    from radixgen.runtime.server.launcher import launch_server as _launch

    return _launch(*args, **kwargs)


__all__ = ["launch_server"]

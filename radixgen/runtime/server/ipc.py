"""ZMQ plumbing shared by the server processes: `ipc://` endpoints in a private temp dir,
msgspec (msgpack) codecs for one message family per socket, and child-process helpers."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import zmq


@dataclass(frozen=True)
class Endpoints:
    """Where each process's PULL socket is bound (the others PUSH to it)."""

    scheduler: str
    detokenizer: str
    frontend: str

    @classmethod
    def in_new_dir(cls) -> tuple["Endpoints", Path]:
        folder = Path(tempfile.mkdtemp(prefix="radixgen-ipc-"))
        return cls(
            *(f"ipc://{folder / name}" for name in ("scheduler", "detokenizer", "frontend"))
        ), folder


class Codec:
    """Encoder + a decoder for one tagged-union message family."""

    def __init__(self, family: Any):
        self.encoder = msgspec.msgpack.Encoder()
        self.decoder = msgspec.msgpack.Decoder(family)

    def encode(self, msg: Any) -> bytes:
        return self.encoder.encode(msg)

    def decode(self, data: bytes) -> Any:
        """Decoded message; raises msgspec.DecodeError / ValidationError on a bad frame."""
        return self.decoder.decode(data)


def pull_socket(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)
    return sock


def push_socket(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


class ParentWatch:
    """A child's check that the main process is still there (it exits if not)."""

    def __init__(self) -> None:
        self.ppid = os.getppid()

    def parent_alive(self) -> bool:
        return os.getppid() == self.ppid


def setup_child(name: str, log_level: str) -> None:
    """Common start of a child process: logging, Ctrl-C left to the main process, SIGTERM
    turned into a clean SystemExit (so sockets close)."""
    logging.basicConfig(
        level=log_level.upper(), format=f"%(asctime)s [{name}] %(levelname)s %(name)s: %(message)s"
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    die_with_parent()


PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send `sig` to this process when its parent dies, even by SIGKILL (Linux;
    elsewhere ParentWatch's polling is the only check). The parent that spawned this process
    must outlive the thread that started it: true of the main process's main thread."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)

"""How the CPU kernels (the C++ decode kernel, the C vocabulary lexer) are built and loaded: once
per process on first use (`load_once`), into a cache directory per machine (`build_dir`: a
kernel built with -march=native on another machine must never be loaded here, so the directory
is keyed by the CPU's feature flags as well as by what was built)."""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import threading
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)


def enabled() -> bool:
    """False when RADIXGEN_CPU_KERNELS=0 (keep the torch / numpy paths)."""
    return os.environ.get("RADIXGEN_CPU_KERNELS", "1") != "0"


def load_once(
    state: dict, lock: threading.Lock, what: str, fallback: str, load: Callable[[], Any]
) -> bool:
    """True once `load()` succeeded (`state["lib"]`: what it returned). Only the first call
    runs it, unless RADIXGEN_CPU_KERNELS=0; a failure (no compiler, a failed build) is kept in
    `state["error"]` and logged, and the callers keep `fallback`."""
    with lock:
        if "ok" not in state:
            state["ok"] = False
            if not enabled():
                state["error"] = "disabled by RADIXGEN_CPU_KERNELS=0"
            else:
                try:
                    state["lib"] = load()
                    state["ok"] = True
                except Exception as exc:  # no compiler, no ninja, a failed build
                    text = str(exc).strip()
                    state["error"] = (
                        f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}"
                    )
                    log.warning("%s unavailable, using %s (%s)", what, fallback, state["error"])
        return bool(state["ok"])


def build_dir(kind: str, *parts: bytes) -> Path:
    """<radixgen cache>/<kind>/<hash of parts and the CPU's flags>."""
    key = hashlib.sha256()
    for part in parts:
        key.update(part)
    key.update(cpu_flags().encode())
    root = (
        os.environ.get("RADIXGEN_CACHE_DIR") or Path.home() / ".cache" / "radixgen"
    )  # the model's cache
    return Path(root) / kind / key.hexdigest()[:16]


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()

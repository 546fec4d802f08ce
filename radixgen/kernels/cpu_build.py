"""Where the CPU kernels compiled on this machine are kept (shared by the C++ decode kernel and
the C vocabulary lexer). A kernel built with -march=native on another machine must never be
loaded here, so the directory is keyed by the CPU's feature flags as well as by what was built."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path


def enabled() -> bool:
    """False when RADIXGEN_CPU_KERNELS=0 (keep the torch / numpy paths)."""
    return os.environ.get("RADIXGEN_CPU_KERNELS", "1") != "0"


def build_dir(kind: str, *parts: bytes) -> Path:
    """<radixgen cache>/<kind>/<hash of parts and the CPU's flags>."""
    key = hashlib.sha256()
    for part in parts:
        key.update(part)
    key.update(cpu_flags().encode())
    root = os.environ.get("RADIXGEN_CACHE_DIR") or Path.home() / ".cache" / "radixgen"  # the model's cache
    return Path(root) / kind / key.hexdigest()[:16]


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()

"""One embedded-model server for the whole folder, started through the frontend's own
`Runtime` (so the launcher is exercised too) and shut down after the folder's last test."""

from __future__ import annotations

import pytest

LIVE_FLAGS = {"max_total_tokens": 16384}
# one intra-op thread: on a shared 2-core machine OpenMP spin-waiting against another busy
# process makes a forward much slower (see tests/runtime/server/conftest.py)
LIVE_ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="package")
def live_runtime():
    from radixgen.frontend_lang import Runtime

    runtime = Runtime(env=LIVE_ENV, **LIVE_FLAGS)
    proc = runtime.proc
    try:
        yield runtime
    finally:
        runtime.shutdown()
    assert proc.poll() is not None, "Runtime.shutdown left the server running"


@pytest.fixture
def backend(live_runtime):
    return live_runtime.endpoint

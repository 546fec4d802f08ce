"""`Runtime`: a local server subprocess (`python -m radixgen serve`) with an endpoint to it,
shut down by `shutdown()`, at the end of a `with` block, or when the interpreter exits."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from radixgen.frontend_lang.backend import BackendError
from radixgen.frontend_lang.endpoint import RuntimeEndpoint

STARTUP_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 15.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(model_path: str | None, port: int, flags: dict[str, Any]) -> list[str]:
    """`serve` command-line arguments: `flag_name=value` becomes `--flag-name value`, True a
    bare `--flag-name`, False and None are left out."""
    args = ["--port", str(port)]
    if model_path:
        args += ["--model-path", str(model_path)]
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not None and value is not False:
            args += [flag, str(value)]
    return args


class Runtime:
    """`Runtime(model_path=None, **server_flags)`: the embedded model when no path is given;
    `env` adds environment variables for the server (e.g. OMP_NUM_THREADS). Use it as a
    backend (`set_default_backend(rt)`) or through `rt.endpoint`."""

    def __init__(
        self,
        model_path: str | None = None,
        port: int | None = None,
        api_key: str | None = None,
        log_level: str = "warning",
        startup_timeout: float = STARTUP_TIMEOUT_S,
        env: dict[str, str] | None = None,
        **server_flags: Any,
    ):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        flags = {"api_key": api_key, "log_level": log_level, **server_flags}
        cmd = [
            sys.executable,
            "-m",
            "radixgen",
            "serve",
            *server_args(model_path, self.port, flags),
        ]
        self.log = tempfile.NamedTemporaryFile(
            "w+", prefix="radixgen-runtime-", suffix=".log", delete=False
        )
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})}
        self.proc: subprocess.Popen | None = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env
        )
        atexit.register(self.shutdown)
        try:
            self._wait_healthy(startup_timeout)
        except BaseException:
            self.shutdown()
            raise
        self.endpoint = RuntimeEndpoint(self.url, api_key=api_key)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server was not healthy after {timeout:.0f}s:\n{self.output()}")

    # ---- SGLang's Runtime methods (JSON strings, as SGLang returns them) ---------------------
    def generate(
        self,
        prompt: str | list[str],
        sampling_params: dict[str, Any] | None = None,
        return_logprob: bool = False,
        logprob_start_len: int | None = None,
        top_logprobs_num: int | None = None,
        **fields: Any,
    ) -> str:
        """One native /generate, answered as SGLang's Runtime does: the JSON text."""
        request = {
            "return_logprob": return_logprob or None,
            "logprob_start_len": logprob_start_len,
            "top_logprobs_num": top_logprobs_num,
            **fields,
        }
        result = self.endpoint.generate(
            prompt, dict(sampling_params or {}), {k: v for k, v in request.items() if v is not None}
        )
        return json.dumps(result)

    def encode(self, prompt: str | list[str]) -> str:
        """SGLang's /encode (embeddings), as JSON text. radixgen serves generative models and
        has no /encode route: the server's 404 comes back as a BackendError saying so."""
        try:
            return json.dumps(self.endpoint._request("POST", "/encode", {"text": prompt}))
        except BackendError as exc:
            if exc.status == 404:
                raise BackendError(
                    "encode needs an embedding model and the /encode route, which radixgen's "
                    "server does not have",
                    404,
                ) from exc
            raise

    def get_tokenizer(self) -> Any:
        """The served model's Hugging Face tokenizer (loaded here from its model path)."""
        from transformers import AutoTokenizer  # loaded only when asked for

        return AutoTokenizer.from_pretrained(self.endpoint.get_model_name())

    def cache_prefix(self, prefix: str) -> None:
        self.endpoint.cache_prefix(prefix)

    def get_server_info(self) -> dict[str, Any]:
        return self.endpoint.get_server_info()

    def output(self) -> str:
        """The server's log so far."""
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def shutdown(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if getattr(self, "endpoint", None) is not None:
            self.endpoint.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)
        atexit.unregister(self.shutdown)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"Runtime({self.url!r}, running={self.proc is not None and self.proc.poll() is None})"
        )

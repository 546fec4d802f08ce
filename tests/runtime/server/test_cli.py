"""`radixgen serve` flags are generated from the config dataclasses; the SGLang flags users type
are accepted (or refused with a clear error); `make serve` installs no test-only packages."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from radixgen.__main__ import build_parser, main, serve_configs
from radixgen.config import EngineConfig, ServerConfig


def test_serve_flags_map_onto_configs():
    args = build_parser().parse_args(
        [
            "serve",
            "--model-path",
            "/m",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--api-key",
            "k",
            "--dtype",
            "bfloat16",
            "--load-format",
            "dummy",
            "--max-total-tokens",
            "64",
            "--mem-fraction-static",
            "0.5",
            "--chunked-prefill-size",
            "32",
            "--max-running-requests",
            "4",
            "--schedule-policy",
            "fcfs",
            "--disable-radix-cache",
            "--log-level",
            "debug",
        ]
    )
    engine, server = serve_configs(args)
    assert (engine.model.model_path, engine.model.dtype, engine.model.load_format) == (
        "/m",
        "bfloat16",
        "dummy",
    )
    assert (engine.cache.max_total_tokens, engine.cache.mem_fraction_static) == (64, 0.5)
    assert engine.cache.disable_radix_cache
    assert (engine.scheduler.chunked_prefill_size, engine.scheduler.max_running_requests) == (32, 4)
    assert engine.scheduler.schedule_policy == "fcfs"
    assert server == ServerConfig(host="0.0.0.0", port=8000, api_key="k", log_level="debug")


def test_serve_defaults():
    engine, server = serve_configs(build_parser().parse_args(["serve"]))
    assert engine == EngineConfig() and server == ServerConfig()
    assert (server.host, server.port, server.api_key) == ("127.0.0.1", 30000, None)


def test_bad_flag_values_are_rejected():
    for bad in (["serve", "--port", "x"], ["serve", "--log-level", "loud"], ["serve", "--nope"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(bad)


def test_sglang_flags_map_onto_configs():
    engine, server = serve_configs(
        build_parser().parse_args(
            [
                "serve",
                "--context-length",
                "512",
                "--tokenizer-path",
                "/t",
                "--trust-remote-code",
                "--enable-metrics",
                "--tp-size",
                "1",
                "--shutdown-timeout",
                "2.5",
            ]
        )
    )
    assert (engine.model.context_length, engine.model.tokenizer_path) == (512, "/t")
    assert engine.model.trust_remote_code and server.enable_metrics and engine.parallel.tp_size == 1
    assert server.shutdown_timeout == 2.5


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--tp-size", "2", "--ep-size", "3"], "--ep-size 3 must divide --tp-size 2"),
        (["--nnodes", "2", "--tp-size", "2"], "--nnodes > 1 needs --dist-init-addr"),
        (["--context-length", "1"], "context_length must be >= 2"),
        (["--shutdown-timeout", "-1"], "shutdown_timeout must be >= 0"),
        (["--dp-size", "0"], "dp_size must be >= 1"),
        (["--kv-events-config", "{"], "kv_events_config is not JSON"),
        (["--kv-events-config", '{"bogus": 1}'], "unknown key 'bogus'"),
        (["--kv-events-config", '{"endpoint": 5}'], "endpoint has the wrong type"),
        (["--kv-events-config", '{"publisher": "kafka"}'], "publisher must be 'zmq' or 'null'"),
        (
            ["--kv-events-config", '{"enable_kv_cache_events": true}', "--disable-radix-cache"],
            "drop --disable-radix-cache",
        ),
        (["--kv-events-config", '{"block_size": 6}', "--page-size", "4"], "multiple of page_size"),
    ],
)
def test_unsupported_flag_values_are_clear_errors(flags, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", *flags])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_make_serve_installs_no_test_extra():
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    root = Path(__file__).resolve().parents[3]

    def commands(target: str) -> str:  # -n: print, run nothing; -B: as on a fresh clone
        return subprocess.run(
            ["make", "-n", "-B", target], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    assert "pip install -e ." in commands("serve") and "[test]" not in commands("serve")
    assert "[test]" in commands("test")

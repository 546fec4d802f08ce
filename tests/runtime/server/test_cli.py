"""`radixgen serve` flags are generated from the config dataclasses."""

from __future__ import annotations

import pytest

from radixgen.__main__ import build_parser, serve_configs
from radixgen.config import EngineConfig, ServerConfig


def test_serve_flags_map_onto_configs():
    args = build_parser().parse_args([
        "serve", "--model-path", "/m", "--host", "0.0.0.0", "--port", "8000", "--api-key", "k",
        "--dtype", "bfloat16", "--load-format", "dummy", "--max-total-tokens", "64",
        "--mem-fraction-static", "0.5", "--chunked-prefill-size", "32", "--max-running-requests", "4",
        "--schedule-policy", "fcfs", "--disable-radix-cache", "--log-level", "debug"])
    engine, server = serve_configs(args)
    assert (engine.model.model_path, engine.model.dtype, engine.model.load_format) == ("/m", "bfloat16", "dummy")
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

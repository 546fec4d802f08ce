import argparse

import pytest

from radixgen.config import (
    CacheConfig,
    EngineConfig,
    SchedulerConfig,
    add_arguments,
    from_namespace,
)
from radixgen.core import FinishReason, SamplingParams


def test_sampling_params_from_dict_and_validation():
    p = SamplingParams.from_dict({"max_new_tokens": 5, "stop": "x", "temperature": 0})
    assert p.stop == ("x",) and p.is_greedy
    for bad in (
        {"temperature": -1},
        {"top_p": 0},
        {"top_k": 0},
        {"min_p": 2},
        {"max_new_tokens": -1},
        {"frequency_penalty": 3},
        {"stop": [""]},
        {"top_logprobs_num": 99},
        {"bogus": 1},
        {"temperature": float("nan")},
    ):
        with pytest.raises(ValueError):
            SamplingParams.from_dict(bad)


def test_tool_calls_constraint_spec_is_checked():
    good = {"schema": {"type": "object"}, "open": "<t>", "close": "</t>"}
    p = SamplingParams.from_dict({"tool_calls": good})
    assert p.constraint.kind == "tool_calls"
    assert p.constraint.spec == '{"schema":{"type":"object"},"open":"<t>","close":"</t>"}'
    for bad in (
        "{",
        {"schema": {}},
        {**good, "open": ""},
        {**good, "extra": 1},
        {**good, "schema": []},
    ):
        with pytest.raises(ValueError, match="tool_calls"):
            SamplingParams.from_dict({"tool_calls": bad})


def test_unknown_keys_are_named():
    with pytest.raises(ValueError, match="frobnicate"):
        SamplingParams.from_dict({"frobnicate": True})


def test_finish_reason_dict():
    assert FinishReason("stop", matched=2).to_dict() == {"type": "stop", "matched": 2}
    assert FinishReason("length").to_dict() == {"type": "length"}


def test_cli_flags_are_generated_from_fields():
    parser = argparse.ArgumentParser()
    add_arguments(parser, CacheConfig)
    add_arguments(parser, SchedulerConfig)
    args = parser.parse_args(
        ["--max-total-tokens", "123", "--disable-radix-cache", "--schedule-policy", "fcfs"]
    )
    cache, sched = from_namespace(CacheConfig, args), from_namespace(SchedulerConfig, args)
    assert cache.max_total_tokens == 123 and cache.disable_radix_cache
    assert (
        sched.schedule_policy == "fcfs"
        and sched.max_running_requests == SchedulerConfig().max_running_requests
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--schedule-policy", "random"])


def test_engine_config_routes_flat_kwargs():
    cfg = EngineConfig.from_kwargs(dtype="float32", max_total_tokens=64, chunked_prefill_size=8)
    assert (cfg.model.dtype, cfg.cache.max_total_tokens, cfg.scheduler.chunked_prefill_size) == (
        "float32",
        64,
        8,
    )
    with pytest.raises(ValueError, match="nonsense"):
        EngineConfig.from_kwargs(nonsense=1)


@pytest.mark.parametrize(
    "value, window", [("4,16", (4, 16)), ("0,0", (0, 0)), (" none ", None), ("NONE", None)]
)
def test_branch_window_parses(value, window):
    assert CacheConfig(kv_branch_window=value).branch_window == window


@pytest.mark.parametrize("value", ["4", "4,16,2", "a,b", "-1,16", ""])
def test_bad_branch_window_is_refused(value):
    with pytest.raises(ValueError, match="kv_branch_window"):
        CacheConfig(kv_branch_window=value)

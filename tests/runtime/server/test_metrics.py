"""GET /metrics on the tiny dummy-weight server: Prometheus text that parses, one prefix
spelling, counters and histograms that move by what a request did (TTFT and its three parts),
gauges and per-pool series that agree with the scheduler; ServerMetrics' bookkeeping on its
own; and the scheduler's per-request timestamps."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq, ReqTimes, TextOut
from radixgen.runtime.server.metrics import ServerMetrics
from tests.runtime.server.conftest import assert_error, scrape, wait_idle

GAUGES = (
    "num_running_reqs",
    "num_queue_reqs",
    "num_grammar_queue_reqs",
    "token_usage",
    "cache_hit_rate",
    "max_total_num_tokens",
)
COUNTERS = (
    "prompt_tokens_total",
    "cached_tokens_total",
    "generation_tokens_total",
    "num_requests_total",
    "num_aborted_requests_total",
    "num_retracted_requests_total",
)
HISTOGRAMS = (
    "time_to_first_token_seconds",
    "inter_token_latency_seconds",
    "e2e_request_latency_seconds",
    "queue_time_seconds",
    "prefill_time_seconds",
    "first_decode_time_seconds",
)
TTFT_PARTS = ("queue_time_seconds", "prefill_time_seconds", "first_decode_time_seconds")
DASHBOARD = Path(__file__).parents[3] / "deploy" / "grafana" / "radixgen.json"
METRIC_NAME = re.compile(r"radixgen:[A-Za-z0-9_:]+")
SUFFIXES = {"_bucket": "histogram", "_sum": "histogram", "_count": "histogram", "_total": "counter"}


def test_metrics_needs_the_key_and_has_every_metric(tiny_server, client):
    assert_error(httpx.get(f"{tiny_server.url}/metrics"), 401)
    values = scrape(client)
    expected = [
        *GAUGES,
        *COUNTERS,
        *(f"{h}_{part}" for h in HISTOGRAMS for part in ("count", "sum")),
    ]
    missing = [name for name in expected if f"radixgen:{name}" not in values]
    assert not missing, sorted(values)
    assert 0 <= values["radixgen:token_usage"] <= 1 and 0 <= values["radixgen:cache_hit_rate"] <= 1


def test_counters_and_histograms_move_by_one_request(client, tokenizer):
    ids = tokenizer.encode("The quick brown fox jumps", add_special_tokens=False)
    wait_idle(client)
    before = scrape(client)
    out = client.post(
        "/generate",
        json={
            "input_ids": ids,
            "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True},
        },
    ).json()
    after = scrape(client)

    def moved(name: str) -> float:
        return after[f"radixgen:{name}"] - before[f"radixgen:{name}"]

    assert out["meta_info"]["prompt_tokens"] == len(ids)
    assert moved("prompt_tokens_total") == len(ids)
    assert moved("generation_tokens_total") == 4 and moved("num_requests_total") == 1
    assert moved("time_to_first_token_seconds_count") == 1
    assert moved("inter_token_latency_seconds_count") == 3  # one per token after the first
    assert moved("e2e_request_latency_seconds_count") == 1
    assert moved("e2e_request_latency_seconds_sum") >= moved("time_to_first_token_seconds_sum") > 0
    # TTFT = queue + prefill + first decode, each measured once
    assert all(moved(f"{part}_count") == 1 for part in TTFT_PARTS)
    parts = sum(moved(f"{part}_sum") for part in TTFT_PARTS)
    assert parts == pytest.approx(moved("time_to_first_token_seconds_sum"), abs=1e-3)
    assert moved("prefill_time_seconds_sum") > 0


def test_gauges_agree_with_the_scheduler(client):
    body = {"text": "one two three four five six", "sampling_params": {"max_new_tokens": 2}}
    client.post("/generate", json=body)
    client.post("/generate", json=body)  # a cache hit
    stats = wait_idle(client)
    values = scrape(client)
    assert values["radixgen:num_running_reqs"] == values["radixgen:num_queue_reqs"] == 0
    assert values["radixgen:token_usage"] == stats["token_usage"]
    assert values["radixgen:cache_hit_rate"] == stats["cache_hit_rate"] > 0
    # idle: only the radix cache holds KV slots
    assert stats["token_usage"] == round(stats["cache_size"] / stats["num_slots"], 4)


def _out(rid: str, num_tokens: int, finish: dict | None = None) -> TextOut:
    return TextOut(
        rid=rid,
        text="x" * num_tokens,
        token_ids=[7] * num_tokens,
        prompt_tokens=5,
        cached_tokens=0,
        completion_tokens=0,
        finish=finish,
    )


def test_server_metrics_counts_tokens_and_ended_requests():
    metrics = ServerMetrics("m")
    metrics.on_submit("a", prompt_tokens=5)
    metrics.on_submit("b", prompt_tokens=3)
    for out in (
        _out("a", 1),
        _out("a", 3),
        _out("a", 0, {"type": "stop"}),
        _out("b", 2),
        _out("zzz", 9),
    ):
        metrics.on_output(out)
    metrics.on_drop("b")  # its client left
    metrics.on_output(_out("b", 1))  # a late delta of a dropped request is not counted
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(metrics.render({}).decode())
        for s in f.samples
        if "le" not in s.labels
    }
    assert (
        values["radixgen:prompt_tokens_total"] == 8 and values["radixgen:num_requests_total"] == 2
    )
    assert values["radixgen:generation_tokens_total"] == 6
    assert values["radixgen:time_to_first_token_seconds_count"] == 2
    assert values["radixgen:inter_token_latency_seconds_count"] == 3  # a delta of 3 tokens: 3 gaps
    assert values["radixgen:e2e_request_latency_seconds_count"] == 1  # only `a` finished


def test_speculation_gauges_follow_the_scheduler_stats():
    metrics = ServerMetrics("m")
    stats = {
        "spec_accept_length": 3.5,
        "spec_accept_rate": 0.625,
        "spec_verify_steps": 12,
        "spec_draft_tokens_pruned": 4,
        "spec_position_accept_rate": [0.9, 0.5],
    }
    samples = [
        s for f in text_string_to_metric_families(metrics.render(stats).decode()) for s in f.samples
    ]
    values = {s.name: s.value for s in samples}
    assert (
        values["radixgen:spec_accept_length"] == 3.5
        and values["radixgen:spec_accept_rate"] == 0.625
    )
    assert (
        values["radixgen:spec_verify_steps"] == 12
        and values["radixgen:spec_draft_tokens_pruned"] == 4
    )
    by_position = {
        s.labels["position"]: s.value
        for s in samples
        if s.name == "radixgen:spec_position_accept_rate"
    }
    assert by_position == {"1": 0.9, "2": 0.5}


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_every_family_has_the_one_prefix_spelling(client):
    text = client.get("/metrics").text
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names and all(name.startswith("radixgen:") for name in names), sorted(names)
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(line.startswith("radixgen:") for line in samples)
    assert "radixgen_" not in text and "sglang" not in text


def test_cache_hits_are_counters_and_pools_are_labels(client):
    body = {
        "text": "a prompt shared by two requests in a row",
        "sampling_params": {"max_new_tokens": 1},
    }
    before = scrape(client)
    first = client.post("/generate", json=body).json()
    second = client.post("/generate", json=body).json()
    stats = wait_idle(client)
    after = scrape(client)
    cached = second["meta_info"]["cached_tokens"] + first["meta_info"]["cached_tokens"]
    assert second["meta_info"]["cached_tokens"] > 0
    assert after["radixgen:cached_tokens_total"] - before["radixgen:cached_tokens_total"] == cached
    families = _families(client.get("/metrics").text)
    by_pool = {
        s.labels["pool"]: s.value for s in families["radixgen:kv_pool_cache_hit_tokens"].samples
    }
    assert set(by_pool) == {"prefix", "branch"}
    assert (
        sum(by_pool.values()) == stats["num_cached_tokens"]
    )  # the scheduler's own total, monotonic
    capacity = {
        s.labels["pool"]: s.value for s in families["radixgen:kv_pool_capacity_tokens"].samples
    }
    assert capacity == {
        pool: stats[f"{pool}_pool_capacity_tokens"] for pool in ("prefix", "branch")
    }
    assert not any(
        "_pool_" in name and not name.startswith("radixgen:kv_pool_") for name in families
    )


def test_request_series_carry_the_version_and_adapter_slots(client):
    family = _families(client.get("/metrics").text)["radixgen:num_requests"]
    labels = {tuple(sorted(s.labels.items())) for s in family.samples if s.name.endswith("_total")}
    assert labels == {
        (
            ("lora", "base"),
            ("model_name", client.get("/v1/models").json()["data"][0]["id"]),
            ("weight_version", "default"),
        )
    }


def test_ttft_parts_sum_to_ttft_from_the_scheduler_times():
    metrics = ServerMetrics("m")
    arrival = time.perf_counter() - 1.0  # arrived a second ago
    metrics.on_submit("a", prompt_tokens=5, arrival=arrival)
    start = metrics._timings["a"].arrival_wall
    times = ReqTimes(received=start + 0.05, admitted=start + 0.25, prefilled=start + 0.75)
    metrics.on_output(
        TextOut(
            rid="a",
            text="x",
            token_ids=[7],
            prompt_tokens=5,
            cached_tokens=2,
            completion_tokens=1,
            times=times,
        )
    )
    metrics.on_output(_out("a", 0, {"type": "stop"}))
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(metrics.render({}).decode())
        for s in f.samples
        if "le" not in s.labels
    }
    assert values["radixgen:queue_time_seconds_sum"] == pytest.approx(0.25, abs=1e-3)
    assert values["radixgen:prefill_time_seconds_sum"] == pytest.approx(0.5, abs=1e-6)
    ttft = values["radixgen:time_to_first_token_seconds_sum"]
    assert ttft >= 1.0
    assert values["radixgen:first_decode_time_seconds_sum"] == pytest.approx(ttft - 0.75, abs=1e-3)
    assert values["radixgen:cached_tokens_total"] == 0  # `_out` reports the latest count: 0


def test_aborted_requests_are_counted():
    metrics = ServerMetrics("m")
    for rid in "abc":
        metrics.on_submit(rid, prompt_tokens=2)
    metrics.on_drop("a")  # its client left
    metrics.on_output(_out("b", 0, {"type": "abort", "message": "refused"}))
    metrics.on_output(_out("c", 1, {"type": "length"}))
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(metrics.render({}).decode())
        for s in f.samples
    }
    assert (
        values["radixgen:num_aborted_requests_total"] == 2
        and values["radixgen:num_requests_total"] == 3
    )


def test_the_scheduler_sends_its_timestamps_once_after_the_prefill(tiny_model_path):
    engine = Engine(
        str(tiny_model_path), load_format="dummy", chunked_prefill_size=8, max_total_tokens=512
    )
    sched = engine.scheduler
    params = SamplingParams(max_new_tokens=3, ignore_eos=True, temperature=0)
    before = time.time()
    sched.handle(
        GenerateReq(rid="a", input_ids=list(range(100, 130)), params=params)
    )  # 4 prefill chunks
    outs = []
    while sched.has_work or sched.outputs:
        outs += [(out, time.time()) for out in sched.step()]
    stamped = [(out, at) for out, at in outs if out.times is not None]
    assert len(stamped) == 1
    out, at = stamped[0]
    assert out.token_ids and out is next(
        o for o, _ in outs if o.token_ids
    )  # the first token's message
    assert before <= out.times.received <= out.times.admitted <= out.times.prefilled <= at


def _family_of(name: str, types: dict[str, str]) -> tuple[str, str] | None:
    """(family, type) of a sample name PromQL refers to: a histogram's `_bucket` / `_sum` /
    `_count` or a counter's `_total` belong to the family without the suffix; anything else
    must be a family itself (a gauge)."""
    for suffix, kind in SUFFIXES.items():
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) == kind:
            return base, kind
    return (name, types[name]) if types.get(name) == "gauge" else None


def _panel_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels if p["type"] != "row" for t in p["targets"]]


def test_every_dashboard_query_names_a_live_metric(client):
    types = {f.name: f.type for f in text_string_to_metric_families(client.get("/metrics").text)}
    queries = _panel_queries()
    assert len(queries) >= 20
    for title, expr in queries:
        names = METRIC_NAME.findall(expr)
        assert names, f"{title}: {expr}"
        for name in names:
            family = _family_of(name, types)
            assert family is not None, (
                f"panel {title!r} refers to {name}, which /metrics does not expose"
            )
        for name in re.findall(
            r"rate\((radixgen:[A-Za-z0-9_:]+)", expr
        ):  # rate() only over counters
            assert _family_of(name, types)[1] in ("counter", "histogram"), (
                f"{title}: rate() of a gauge {name}"
            )


def test_the_dashboard_covers_the_serving_signals():
    exprs = " ".join(expr for _, expr in _panel_queries())
    for name in (
        "generation_tokens_total",
        "time_to_first_token_seconds_bucket",
        *(f"{p}_sum" for p in TTFT_PARTS),
        "inter_token_latency_seconds_bucket",
        "e2e_request_latency_seconds_bucket",
        "num_queue_reqs",
        "kv_pool_token_usage",
        "cached_tokens_total",
        "spec_accept_length",
    ):
        assert f"radixgen:{name}" in exprs, name
    assert _family_of("radixgen:num_requests_count", {"radixgen:num_requests": "counter"}) is None

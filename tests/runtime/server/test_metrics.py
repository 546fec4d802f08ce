"""GET /metrics on the tiny dummy-weight server: Prometheus text that parses, counters and
histograms that move by what a request did, gauges that agree with the scheduler; and
ServerMetrics' bookkeeping on its own."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from radixgen.runtime.messages import TextOut
from radixgen.runtime.server.metrics import ServerMetrics
from tests.runtime.server.conftest import assert_error, scrape, wait_idle

GAUGES = ("num_running_reqs", "num_queue_reqs", "token_usage", "cache_hit_rate")
COUNTERS = ("prompt_tokens_total", "generation_tokens_total", "num_requests_total")
HISTOGRAMS = ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds")


def test_metrics_needs_the_key_and_has_every_metric(tiny_server, client):
    assert_error(httpx.get(f"{tiny_server.url}/metrics"), 401)
    values = scrape(client)
    expected = [*GAUGES, *COUNTERS, *(f"{h}_{part}" for h in HISTOGRAMS for part in ("count", "sum"))]
    missing = [name for name in expected if f"radixgen:{name}" not in values]
    assert not missing, sorted(values)
    assert 0 <= values["radixgen:token_usage"] <= 1 and 0 <= values["radixgen:cache_hit_rate"] <= 1


def test_counters_and_histograms_move_by_one_request(client, tokenizer):
    ids = tokenizer.encode("The quick brown fox jumps", add_special_tokens=False)
    wait_idle(client)
    before = scrape(client)
    out = client.post("/generate", json={"input_ids": ids, "sampling_params": {
        "max_new_tokens": 4, "temperature": 0, "ignore_eos": True}}).json()
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
    return TextOut(rid=rid, text="x" * num_tokens, token_ids=[7] * num_tokens, prompt_tokens=5,
                   cached_tokens=0, completion_tokens=0, finish=finish)


def test_server_metrics_counts_tokens_and_ended_requests():
    metrics = ServerMetrics("m")
    metrics.on_submit("a", prompt_tokens=5)
    metrics.on_submit("b", prompt_tokens=3)
    for out in (_out("a", 1), _out("a", 3), _out("a", 0, {"type": "stop"}), _out("b", 2), _out("zzz", 9)):
        metrics.on_output(out)
    metrics.on_drop("b")  # its client left
    metrics.on_output(_out("b", 1))  # a late delta of a dropped request is not counted
    values = {s.name: s.value for f in text_string_to_metric_families(metrics.render({}).decode())
              for s in f.samples if "le" not in s.labels}
    assert values["radixgen:prompt_tokens_total"] == 8 and values["radixgen:num_requests_total"] == 2
    assert values["radixgen:generation_tokens_total"] == 6
    assert values["radixgen:time_to_first_token_seconds_count"] == 2
    assert values["radixgen:inter_token_latency_seconds_count"] == 3  # a delta of 3 tokens: 3 gaps
    assert values["radixgen:e2e_request_latency_seconds_count"] == 1  # only `a` finished


def test_speculation_gauges_follow_the_scheduler_stats():
    metrics = ServerMetrics("m")
    stats = {"spec_accept_length": 3.5, "spec_accept_rate": 0.625, "spec_verify_steps": 12,
             "spec_draft_tokens_pruned": 4, "spec_position_accept_rate": [0.9, 0.5]}
    samples = [s for f in text_string_to_metric_families(metrics.render(stats).decode()) for s in f.samples]
    values = {s.name: s.value for s in samples}
    assert values["radixgen:spec_accept_length"] == 3.5 and values["radixgen:spec_accept_rate"] == 0.625
    assert values["radixgen:spec_verify_steps"] == 12 and values["radixgen:spec_draft_tokens_pruned"] == 4
    by_position = {s.labels["position"]: s.value for s in samples if s.name == "radixgen:spec_position_accept_rate"}
    assert by_position == {"1": 0.9, "2": 0.5}

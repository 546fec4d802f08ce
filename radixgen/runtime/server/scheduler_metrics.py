"""The scheduler's side of `/metrics`: a Prometheus collector over the statistics the scheduler
process answers at each scrape (`scheduler_proc.scheduler_stats`).

Gauges show the state now (queues, KV usage, ratios since start); counters are the scheduler's
own monotonic totals, exposed as they are (so `rate()` works on them), never a value
overwritten per batch. Per-pool series carry a `pool` label ("prefix" holds prompt tokens,
"branch" generated tokens when the two KV precisions differ; with one precision there is only
the prefix pool, and the branch pool reports capacity 0)."""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "radixgen:"
POOLS = ("prefix", "branch")

# metric name -> (the scheduler statistic it shows, help)
GAUGES = {
    "lora_adapters_loaded": ("num_lora_adapters", "LoRA adapters loaded (servable by name)"),
    "lora_adapters_resident": (
        "num_lora_resident",
        "LoRA adapters resident in the device pool's slots",
    ),
    "num_running_reqs": ("num_running_reqs", "requests decoding or being prefilled"),
    "num_queue_reqs": ("num_waiting_reqs", "requests waiting for admission"),
    "num_grammar_queue_reqs": (
        "num_grammar_queue_reqs",
        "requests waiting for their grammar to compile",
    ),
    "token_usage": ("token_usage", "fraction of KV slots in use (by requests or the radix cache)"),
    "max_total_num_tokens": ("num_slots", "KV slots of every pool"),
    "cache_hit_rate": ("cache_hit_rate", "cached prompt tokens / prompt tokens since start"),
    # speculative decoding (0 while it is off)
    "spec_accept_length": ("spec_accept_length", "mean tokens emitted per speculative verify step"),
    "spec_accept_rate": ("spec_accept_rate", "accepted draft tokens / draft tokens verified"),
    "spec_verify_steps": (
        "spec_verify_steps",
        "speculative verify steps (request-steps) since start",
    ),
    "spec_draft_tokens_pruned": (
        "spec_draft_tokens_pruned",
        "draft tokens cut by the grammar before verification",
    ),
}
# per pool: metric name -> (statistic suffix after '<pool>_pool_', help)
POOL_GAUGES = {
    "lora_adapters_loaded": ("num_lora_adapters", "LoRA adapters loaded (servable by name)"),
    "lora_adapters_resident": (
        "num_lora_resident",
        "LoRA adapters resident in the device pool's slots",
    ),
    "kv_pool_capacity_tokens": ("capacity_tokens", "KV pool capacity in tokens"),
    "kv_pool_token_usage": ("token_usage", "fraction of the KV pool's slots in use"),
    "kv_pool_cache_tokens": ("cached_tokens", "tokens of the KV pool held by the radix cache"),
    "kv_pool_cache_hit_rate": (
        "cache_hit_rate",
        "prompt tokens served from this pool's cache / prompt tokens",
    ),
}
COUNTERS = {
    "num_retracted_requests": (
        "num_retractions",
        "requests sent back to the queue because the KV pool was full",
    ),
}
POOL_COUNTERS = {
    "kv_pool_cache_hit_tokens": (
        "cache_hit_tokens",
        "prompt tokens served from this pool's radix cache",
    ),
}


class SchedulerCollector(Collector):
    """Exposes the latest scheduler statistics (`update` before each scrape); every series
    exists, at 0, before the first one."""

    def __init__(self, model_name: str):
        self.model_name = model_name
        self.stats: dict[str, Any] = {}

    def update(self, stats: dict[str, Any]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        for name, (key, doc) in GAUGES.items():
            yield self._one(GaugeMetricFamily, name, doc, key)
        for name, (key, doc) in COUNTERS.items():
            yield self._one(CounterMetricFamily, name, doc, key)
        for name, (suffix, doc) in POOL_GAUGES.items():
            yield self._per_pool(GaugeMetricFamily, name, doc, suffix)
        for name, (suffix, doc) in POOL_COUNTERS.items():
            yield self._per_pool(CounterMetricFamily, name, doc, suffix)
        yield self._position_accept()

    def _one(self, kind: type, name: str, doc: str, key: str) -> Metric:
        family = kind(PREFIX + name, doc, labels=["model_name"])
        family.add_metric([self.model_name], float(self.stats.get(key, 0.0)))
        return family

    def _per_pool(self, kind: type, name: str, doc: str, suffix: str) -> Metric:
        family = kind(PREFIX + name, doc, labels=["model_name", "pool"])
        for pool in POOLS:
            family.add_metric(
                [self.model_name, pool], float(self.stats.get(f"{pool}_pool_{suffix}", 0.0))
            )
        return family

    def _position_accept(self) -> Metric:
        family = GaugeMetricFamily(
            PREFIX + "spec_position_accept_rate",
            "per draft depth: verify steps accepting a token there / steps drafting it",
            labels=["model_name", "position"],
        )
        for depth, rate in enumerate(self.stats.get("spec_position_accept_rate", []), start=1):
            family.add_metric([self.model_name, str(depth)], float(rate))
        return family

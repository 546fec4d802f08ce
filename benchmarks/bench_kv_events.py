"""What KV events cost the radix cache (CPU, no model): the same insert / evict churn with
events off (the null object), with the recorder the scheduler thread feeds (its share of the
cost: raw records, taken once per step), and with the publisher thread's work too (hashing
into events and msgpack-encoding one batch per step).

Workload: requests of a shared 256-token system prompt (one of 4) + 256 own tokens, inserted
into a tree held to a fixed size by evicting LRU leaves, as a full KV pool does.

Usage: python benchmarks/bench_kv_events.py [--requests 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import msgspec
import torch

from radixgen.radix import RadixCache
from radixgen.radix.kv_events import BlockEventRecorder, KVEventBatch

CAPACITY = 16_384  # tokens the tree may hold before evicting
BLOCK = 16


def workload(num_requests: int) -> list[list[int]]:
    rng = random.Random(0)
    systems = [[rng.randrange(49152) for _ in range(256)] for _ in range(4)]
    return [
        rng.choice(systems) + [rng.randrange(49152) for _ in range(256)]
        for _ in range(num_requests)
    ]


def run(prompts: list[list[int]], mode: str) -> float:
    """Seconds for the churn; `mode`: off, record (scheduler side), publish (both sides)."""
    recorder = BlockEventRecorder(BLOCK, "CPU") if mode != "off" else None
    cache = RadixCache(1, lambda slots: None, events=recorder)
    encoder = msgspec.msgpack.Encoder()
    slots = torch.arange(len(prompts[0]))
    start = time.perf_counter()
    for ids in prompts:  # one request per step
        over = cache.total_size() + len(ids) - CAPACITY
        if over > 0:
            cache.evict(over)
        cache.insert(ids, slots)
        if recorder is not None:
            records = recorder.take()
            if mode == "publish" and records:
                encoder.encode(KVEventBatch(ts=time.time(), events=recorder.to_events(records)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    prompts = workload(args.requests)
    for mode in ("off", "record", "publish"):
        times = [run(prompts, mode) for _ in range(args.repeats)]
        per_request = statistics.median(times) / len(prompts) * 1e6
        print(f"{mode:8s} {per_request:8.1f} us per request (median of {args.repeats})")


if __name__ == "__main__":
    main()

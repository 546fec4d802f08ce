"""A server started with --kv-events-config publishes its radix cache's changes over ZMQ as vLLM
does: a subscriber sees each prompt's blocks stored, blocks removed when the small KV pool
evicts, all cleared on a flush, in consecutive sequence numbers, and can replay them."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest
import zmq

from tests.radix.test_kv_events import Replica, VllmBlockRemoved, VllmKVEventBatch
from tests.runtime.server.conftest import ServerProcess, free_port

pytestmark = pytest.mark.slow  # a server of its own (~40 s to start on a loaded machine)

BLOCK = 4
TOPIC = "kv"
QUIET_S = 1.5  # no event for this long: the step's batches are all out


@pytest.fixture(scope="module")
def events_server(tiny_model_path, tmp_path_factory):
    pub, replay = free_port(), free_port()
    config = {
        "enable_kv_cache_events": True,
        "endpoint": f"tcp://*:{pub}",  # '*': the publisher binds (vLLM's rule)
        "replay_endpoint": f"tcp://127.0.0.1:{replay}",
        "topic": TOPIC,
        "block_size": BLOCK,
    }
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.connect(f"tcp://127.0.0.1:{pub}")  # retried by ZMQ until the server binds
    sub.setsockopt(zmq.SUBSCRIBE, TOPIC.encode())
    args = ("--load-format", "dummy", "--max-total-tokens", "256", "--chunked-prefill-size", "64")
    server = ServerProcess(
        tiny_model_path,
        tmp_path_factory.mktemp("kv-events"),
        *args,
        "--kv-events-config",
        json.dumps(config),
    )
    try:
        server.wait_healthy(300)
        yield server, sub, config
    finally:
        server.stop()
        ctx.destroy(linger=0)


def receive(sub: zmq.Socket) -> list[tuple[int, VllmKVEventBatch]]:
    frames = []
    while sub.poll(QUIET_S * 1000):
        topic, seq, payload = sub.recv_multipart()
        assert topic == TOPIC.encode()
        batch = msgspec.msgpack.decode(payload, type=VllmKVEventBatch)
        frames.append((int.from_bytes(seq, "big"), batch))
    return frames


def generate(server: ServerProcess, ids: list[int]) -> dict:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 3, "temperature": 0}}
    out = httpx.post(f"{server.url}/generate", json=body, timeout=60)
    assert out.status_code == 200, out.text
    return out.json()


def test_events_follow_inserts_evictions_and_a_flush(events_server):
    server, sub, config = events_server
    replica, stored_tokens, seqs = Replica(BLOCK), [], []
    first = list(range(100, 160))
    out = generate(server, first)
    for seq, batch in receive(sub):
        seqs.append(seq)
        for event in batch.events:
            replica.apply(event)
            stored_tokens += event.token_ids
    # the prompt (and what was generated) as whole blocks, the path's first one first
    assert stored_tokens == (first + out["output_ids"])[: len(stored_tokens)]
    assert len(stored_tokens) >= len(first) // BLOCK * BLOCK
    assert seqs == list(range(len(seqs))) and seqs
    for i in range(6):  # 6 x ~63 tokens through a 256-token pool: older paths are evicted
        generate(server, [1000 + 100 * i + j for j in range(60)])
    removed = 0
    for seq, batch in receive(sub):
        seqs.append(seq)
        for event in batch.events:
            replica.apply(event)  # checks each removal names a block stored before
            removed += isinstance(event, VllmBlockRemoved)
    assert removed > 0
    assert httpx.post(f"{server.url}/flush_cache", timeout=10).status_code == 200
    (seq, batch), *_ = receive(sub)
    seqs.append(seq)
    assert [type(e).__name__ for e in batch.events] == ["VllmAllBlocksCleared"]
    assert seqs == list(range(len(seqs)))
    _check_replay(config["replay_endpoint"], len(seqs))


def _check_replay(endpoint: str, num_batches: int) -> None:
    """vLLM's replay protocol: [b"", first wanted seq] to the ROUTER; one [b"", seq, payload]
    per kept batch from there, then seq -1 (a DEALER, so every answer frame is received)."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(endpoint)
    replayed = []
    try:
        dealer.send_multipart((b"", (num_batches - 2).to_bytes(8, "big")))
        while dealer.poll(5000):
            _, seq, payload = dealer.recv_multipart()
            if int.from_bytes(seq, "big", signed=True) == -1:
                break
            replayed.append(int.from_bytes(seq, "big"))
            msgspec.msgpack.decode(payload, type=VllmKVEventBatch)
    finally:
        ctx.destroy(linger=0)
    assert replayed == [num_batches - 2, num_batches - 1]

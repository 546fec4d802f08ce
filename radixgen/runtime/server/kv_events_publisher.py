"""Publishes the radix cache's KV events (radix/kv_events.py) over ZMQ, framed as vLLM's
ZmqEventPublisher frames them, so a subscriber written for vLLM reads them unchanged:

    PUB multipart  [topic (utf-8), seq (8 bytes, big-endian, from 0), msgpack(KVEventBatch)]
    replay ROUTER  request [seq (8 bytes)] -> each kept batch from seq on as [seq, payload],
                   then [-1 (8 bytes, signed), b""]

The scheduler thread only hands over a step's raw records (`publish_step`, once per loop
iteration, one batch per step that changed the tree); hashing, encoding and sending run on the
publisher's own thread. With events off, `NullKVEventPublisher` does nothing."""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import threading
import time

import msgspec
import zmq

from radixgen.config import KVEventsConfig
from radixgen.radix.kv_events import BlockEventRecorder, KVEventBatch

logger = logging.getLogger(__name__)

END_SEQ = (-1).to_bytes(8, "big", signed=True)
POLL_S = 0.1
CLOSE_TIMEOUT_S = 1.0


class NullKVEventPublisher:
    def publish_step(self) -> None:
        pass

    def close(self) -> None:
        pass


class ZmqKVEventPublisher:
    """PUB socket (bound or connected, as vLLM decides: bound for '*', '::', ipc:// and
    inproc://), an optional replay ROUTER, and the thread that owns both once started."""

    def __init__(self, cfg: KVEventsConfig, recorder: BlockEventRecorder, ctx: zmq.Context):
        self.recorder = recorder
        self.topic = cfg.topic.encode()
        self._queue: queue.Queue = queue.Queue(maxsize=cfg.max_queue_size)
        self._kept: collections.deque = collections.deque(maxlen=cfg.buffer_steps)
        self._pub = ctx.socket(zmq.PUB)
        self._pub.set_hwm(cfg.hwm)
        self._pub.setsockopt(zmq.LINGER, 0)
        if _binds(cfg.endpoint):
            self._pub.bind(cfg.endpoint)
        else:
            self._pub.connect(cfg.endpoint)
        self._replay = None
        if cfg.replay_endpoint:
            self._replay = ctx.socket(zmq.ROUTER)
            self._replay.setsockopt(zmq.LINGER, 0)
            self._replay.bind(cfg.replay_endpoint)
        # the sockets are used by the thread only from here on (ZMQ sockets are not
        # thread-safe; handing them over before first use is allowed)
        self._thread = threading.Thread(target=self._run, name="kv-events", daemon=True)
        self._thread.start()
        logger.info("publishing KV events on %s (topic %r)", cfg.endpoint, cfg.topic)

    def publish_step(self) -> None:
        """Hand over what the tree recorded since the last call (nothing when it did not
        change). Blocks only if max_queue_size batches wait: events are never dropped."""
        records = self.recorder.take()
        if records:
            self._queue.put((time.time(), records))

    def close(self) -> None:
        """Send what is queued (up to CLOSE_TIMEOUT_S), then close the sockets."""
        self._queue.put(None)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self._pub.close()
            if self._replay is not None:
                self._replay.close()

    def _run(self) -> None:
        encoder = msgspec.msgpack.Encoder()
        seqs = itertools.count()
        while True:
            if self._replay is not None and self._replay.poll(0):
                self._serve_replay()
            try:
                item = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if item is None:
                return
            ts, records = item
            batch = KVEventBatch(ts=ts, events=self.recorder.to_events(records))
            payload, seq = encoder.encode(batch), next(seqs)
            self._pub.send_multipart((self.topic, seq.to_bytes(8, "big"), payload))
            self._kept.append((seq, payload))

    def _serve_replay(self) -> None:
        frames = self._replay.recv_multipart()
        if len(frames) != 3:  # [identity, empty delimiter (a REQ client's), start seq]
            logger.warning("ignored a malformed KV-events replay request (%d frames)", len(frames))
            return
        client, _, start = frames
        first = int.from_bytes(start, "big")
        for seq, payload in list(self._kept):
            if seq >= first:
                self._replay.send_multipart((client, b"", seq.to_bytes(8, "big"), payload))
        self._replay.send_multipart((client, b"", END_SEQ, b""))


def _binds(endpoint: str) -> bool:
    return (
        "*" in endpoint
        or "::" in endpoint
        or endpoint.startswith("ipc://")
        or endpoint.startswith("inproc://")
    )

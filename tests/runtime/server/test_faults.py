"""Faults a server must survive: a client that reads its stream slowly holds up no one else,
and a KV pool oversubscribed 4x still completes every request with the greedy outputs of a
server with room to spare."""

from __future__ import annotations

import concurrent.futures
import socket
import time

import httpx
import pytest

from tests.runtime.server.conftest import API_KEY, ServerProcess, sse_events, wait_idle

SLOW_TOKENS = 1000
OTHER_TIMEOUT_S = 60.0  # generous for a loaded 2-core CI machine; each takes well under 1 s alone


def _open_slow_stream(server: ServerProcess) -> socket.socket:
    """A /generate stream on a socket with a tiny receive buffer that nobody reads yet."""
    body = (
        b'{"text": "Go on", "stream": true, "sampling_params": {"max_new_tokens": %d, '
        b'"ignore_eos": true, "temperature": 0}}' % SLOW_TOKENS
    )
    sock = socket.socket()
    sock.setsockopt(
        socket.SOL_SOCKET, socket.SO_RCVBUF, 4096
    )  # set before connect: the window stays small
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + API_KEY.encode() + b"\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    return sock


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(60)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _other_request(client: httpx.Client, i: int) -> float:
    start = time.monotonic()
    resp = client.post(
        "/generate",
        json={
            "text": f"Other {i}",
            "sampling_params": {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0},
        },
    )
    assert resp.status_code == 200 and resp.json()["meta_info"]["completion_tokens"] == 16, (
        resp.text
    )
    return time.monotonic() - start


def test_a_slow_stream_reader_holds_up_no_other_request(tiny_server, client):
    wait_idle(client)
    slow = _open_slow_stream(tiny_server)
    try:
        time.sleep(1.0)  # its output now fills the socket buffers: the server's writes wait
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            took = list(pool.map(lambda i: _other_request(client, i), range(8)))
        assert max(took) < OTHER_TIMEOUT_S, took
        # the generation itself went on without the reader: only its delivery waits
        wait_idle(client, timeout=60)
        raw = _read_all(slow)
    finally:
        slow.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    events = sse_events(_dechunk(body).decode().splitlines())
    assert events[-1] == "[DONE]" and events[-2]["meta_info"]["completion_tokens"] == SLOW_TOKENS


def _dechunk(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body's payload."""
    out, pos = [], 0
    while True:
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2


PROMPTS = [f"Request {i}: tell me about the number {i}" for i in range(8)]
OVERSUBSCRIBED = {"max_new_tokens": 120, "ignore_eos": True, "temperature": 0}


def _greedy_outputs(server: ServerProcess) -> tuple[list[list[int]], int]:
    """Output ids of PROMPTS, sent all at once, and their prompt tokens in all."""
    with (
        server.client(timeout=300) as c,
        concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool,
    ):
        resps = list(
            pool.map(
                lambda p: c.post("/generate", json={"text": p, "sampling_params": OVERSUBSCRIBED}),
                PROMPTS,
            )
        )
    assert all(r.status_code == 200 for r in resps), [r.text for r in resps if r.status_code != 200]
    metas = [r.json()["meta_info"] for r in resps]
    assert all(m["finish_reason"]["type"] == "length" for m in metas)
    return [r.json()["output_ids"] for r in resps], sum(m["prompt_tokens"] for m in metas)


@pytest.mark.slow
def test_an_oversubscribed_kv_pool_completes_every_request_unchanged(
    tiny_model_path, tmp_path, tiny_server
):
    small = ServerProcess(
        tiny_model_path,
        tmp_path,
        "--load-format",
        "dummy",
        "--max-total-tokens",
        "256",
        api_key=API_KEY,
    ).wait_healthy()
    try:
        outputs, prompt_tokens = _greedy_outputs(small)
        with small.client() as c:
            stats = wait_idle(c)
    finally:
        small.stop()
    needed = prompt_tokens + len(PROMPTS) * OVERSUBSCRIBED["max_new_tokens"]
    assert needed >= 4 * stats["num_slots"], (needed, stats["num_slots"])
    assert stats["num_free_slots"] + stats["cache_size"] == stats["num_slots"]  # nothing leaked
    assert outputs == _greedy_outputs(tiny_server)[0]

"""The event loop never blocks on a large input: /health answers while the largest body the
server accepts is parsed and tokenized, small requests complete beside it, and a body over
--max-request-bytes is a 413 before it is read."""

from __future__ import annotations

import concurrent.futures
import json
import time

from tests.runtime.server.conftest import assert_error

MAX_REQUEST_BYTES = 8 * 1024 * 1024  # the default of --max-request-bytes
HEALTH_BOUND_S = 1.0  # generous for a loaded 2-core CI machine; the target is < 100 ms


def _largest_completion_body(model_name: str) -> bytes:
    head = json.dumps({"model": model_name, "max_tokens": 1, "prompt": ""}).encode()
    words = (MAX_REQUEST_BYTES - len(head) - 16) // 5
    return head[:-2] + b"word " * words + b'"}'  # head ends with the prompt's empty string


def test_health_answers_while_the_largest_body_is_handled(tiny_server, model_name):
    body = _largest_completion_body(model_name)
    assert MAX_REQUEST_BYTES - 64 < len(body) <= MAX_REQUEST_BYTES
    headers = {"content-type": "application/json"}
    with (
        tiny_server.client(timeout=300) as big,
        tiny_server.client(timeout=30) as small,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(big.post, "/v1/completions", content=body, headers=headers)
        latencies, small_status = [], None
        while not pending.done():
            start = time.perf_counter()
            assert small.get("/health").status_code == 200
            latencies.append(time.perf_counter() - start)
            if small_status is None and len(latencies) > 5:  # a small request beside the big one
                small_status = small.post(
                    "/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}}
                ).status_code
            time.sleep(0.05)
        err = assert_error(pending.result())
    assert err["code"] == "context_length_exceeded"  # tokenized in full, then refused
    assert len(latencies) >= 5 and small_status == 200
    print(
        f"/health during an {len(body)}-byte body: {len(latencies)} polls, "
        f"max {max(latencies) * 1000:.1f} ms, median {sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms"
    )
    assert max(latencies) < HEALTH_BOUND_S


def test_a_body_over_the_limit_is_a_413_before_it_is_read(client, model_name):
    body = _largest_completion_body(model_name) + b" " * 1024
    err = assert_error(
        client.post("/v1/completions", content=body, headers={"content-type": "application/json"}),
        413,
    )
    assert err["code"] == "request_too_large" and str(MAX_REQUEST_BYTES) in err["message"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(9):
            yield b" " * (1024 * 1024)

    assert_error(
        client.post("/generate", content=chunks(), headers={"content-type": "application/json"}),
        413,
    )
    assert client.get("/health_generate").status_code == 200

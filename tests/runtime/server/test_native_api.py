"""The native API on the tiny dummy-weight server: /generate (text, ids, batches, streaming,
logprobs, stop strings), info routes, cache flush, aborts."""

from __future__ import annotations

import concurrent.futures
import os
import time

import httpx
import pytest

from tests.runtime.server.conftest import assert_error, sse_events, wait_idle

GREEDY = {"temperature": 0, "max_new_tokens": 8}


def test_health_needs_no_key_and_info_routes_answer(tiny_server, client, model_name):
    assert httpx.get(f"{tiny_server.url}/health").status_code == 200
    assert client.get("/health_generate").status_code == 200
    info = client.get("/get_model_info").json()
    assert info["max_context_length"] == 1024 and info["vocab_size"] == 49152
    assert info["served_model_name"] == model_name and info["is_generation"]
    server = client.get("/get_server_info").json()
    assert server["engine_config"]["cache"]["max_total_tokens"] == 8192
    assert server["server_config"]["api_key"] == "<set>"  # never echoed
    stats = server["scheduler"]
    assert stats["num_slots"] == 8192 and {"cache_size", "num_free_slots", "cache_hit_rate"} <= set(
        stats
    )
    assert stats["kv_rotation"] is (
        stats["prefix_pool_dtype"] in ("fp8_e4m3", "nvfp4")
    )  # --kv-rotation auto


def test_generate_text_ids_and_batches(client, tokenizer):
    one = client.post("/generate", json={"text": "Hello there", "sampling_params": GREEDY}).json()
    meta = one["meta_info"]
    assert len(one["output_ids"]) == meta["completion_tokens"] == 8
    assert meta["prompt_tokens"] == 2 and meta["finish_reason"] == {"type": "length", "length": 8}
    assert {"id", "cached_tokens", "e2e_latency"} <= set(meta)
    assert one["text"] == tokenizer.decode(one["output_ids"])
    ids = tokenizer.encode("Hello there", add_special_tokens=False)
    by_ids = client.post("/generate", json={"input_ids": ids, "sampling_params": GREEDY}).json()
    assert by_ids["output_ids"] == one["output_ids"]
    batch = client.post(
        "/generate",
        json={
            "text": ["Hello there", "Hi"],
            "sampling_params": [GREEDY, {**GREEDY, "max_new_tokens": 3}],
        },
    ).json()
    assert [len(r["output_ids"]) for r in batch] == [8, 3] and batch[0]["text"] == one["text"]
    id_batch = client.post(
        "/generate", json={"input_ids": [ids, ids[:1]], "sampling_params": GREEDY}
    ).json()
    assert len(id_batch) == 2 and id_batch[0]["output_ids"] == one["output_ids"]


def test_generate_stream_text_is_cumulative_and_matches(client):
    body = {"text": "Once upon", "sampling_params": GREEDY}
    full = client.post("/generate", json=body).json()
    with client.stream("POST", "/generate", json={**body, "stream": True}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[-1]["text"] == full["text"] and chunks[-1]["output_ids"] == full["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_generate_logprobs(client):
    out = client.post(
        "/generate",
        json={
            "text": "Hi",
            "sampling_params": GREEDY,
            "return_logprob": True,
            "top_logprobs_num": 3,
        },
    ).json()
    meta = out["meta_info"]
    assert [t for _, t in meta["output_token_logprobs"]] == out["output_ids"]
    assert all(len(top) == 3 for top in meta["output_top_logprobs"])
    # greedy: the chosen token is the most likely one
    assert [top[0][1] for top in meta["output_top_logprobs"]] == out["output_ids"]


def test_prompt_logprobs_score_choices_over_a_cached_prefix(client):
    """What the frontend's select does: prompt logprobs of several continuations in one
    batch, with max_new_tokens 0; the shared prefix comes from the cache."""
    prefix = "The capital of France is"
    pinned = client.post(
        "/generate", json={"text": prefix, "sampling_params": {"max_new_tokens": 0}}
    )
    n_prefix = pinned.json()["meta_info"]["prompt_tokens"]
    texts = [prefix + " Paris", prefix + " a banana"]
    outs = client.post(
        "/generate",
        json={
            "text": texts,
            "sampling_params": {"max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_len": n_prefix,
        },
    ).json()
    scores = []
    for out in outs:
        meta = out["meta_info"]
        # the prefix's last token is computed for its logits; a second prompt reuses that row
        assert out["output_ids"] == [] and n_prefix - 1 <= meta["cached_tokens"] <= n_prefix
        pairs = meta["input_token_logprobs"]
        assert len(pairs) == meta["prompt_tokens"] - n_prefix and all(lp <= 0 for lp, _ in pairs)
        scores.append(sum(lp for lp, _ in pairs) / len(pairs))
    assert scores[0] > scores[1]  # Paris is the likelier continuation


def test_prompt_logprobs_from_the_common_prefix_of_a_batch(client, tokenizer):
    """`logprob_start_common_prefix`: one request scores continuations of a prefix whose token
    count the client does not know; the same logprobs as with an explicit start."""
    prefix = "The capital of France is "
    texts = [prefix, prefix + "Paris", prefix + "a banana"]
    ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    common = len(os.path.commonprefix(ids))
    base = {"text": texts, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True}
    outs = client.post("/generate", json={**base, "logprob_start_common_prefix": True}).json()
    ref = client.post("/generate", json={**base, "logprob_start_len": common}).json()
    for out, r, seq in zip(outs, ref, ids):
        pairs, ref_pairs = (
            out["meta_info"]["input_token_logprobs"],
            r["meta_info"]["input_token_logprobs"],
        )
        assert (
            out["meta_info"]["logprob_start_len"] == common
            and [t for _, t in pairs] == seq[common:]
        )
        assert [lp for lp, _ in pairs] == pytest.approx([lp for lp, _ in ref_pairs], abs=1e-4)


def test_stop_string_is_trimmed_in_both_modes(client):
    base = client.post(
        "/generate", json={"text": "The story", "sampling_params": {**GREEDY, "max_new_tokens": 12}}
    ).json()
    stop = base["text"][len(base["text"]) // 2 :][:4]
    assert stop.strip(), base["text"]
    body = {
        "text": "The story",
        "sampling_params": {**GREEDY, "max_new_tokens": 12, "stop": [stop]},
    }
    out = client.post("/generate", json=body).json()
    assert out["text"] == base["text"][: base["text"].find(stop)]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    with client.stream("POST", "/generate", json={**body, "stream": True}) as resp:
        chunks = sse_events(resp.iter_lines())[:-1]
    assert chunks[-1]["text"] == out["text"] and all(stop not in c["text"] for c in chunks)


def test_repeated_prompt_hits_the_cache_and_flush_clears_it(client):
    assert client.post("/flush_cache").status_code == 200
    body = {
        "text": "a b c d e f g h i j k l m n o p",
        "sampling_params": {**GREEDY, "max_new_tokens": 2},
    }
    assert client.post("/generate", json=body).json()["meta_info"]["cached_tokens"] == 0
    assert client.post("/generate", json=body).json()["meta_info"]["cached_tokens"] > 0
    assert client.post("/flush_cache").json()["success"]
    assert client.post("/generate", json=body).json()["meta_info"]["cached_tokens"] == 0


def _long_body(rid: str | None = None, stream: bool = False) -> dict:
    """A request that runs for seconds (top-p sampling sorts the vocabulary every step)."""
    body = {
        "text": "Go on",
        "stream": stream,
        "sampling_params": {
            "max_new_tokens": 1000,
            "ignore_eos": True,
            "temperature": 1.0,
            "top_p": 0.9,
        },
    }
    return {**body, "rid": rid} if rid else body


def test_abort_request_by_rid(tiny_server, client):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(
            lambda: tiny_server.client().post("/generate", json=_long_body("abort-me")).json()
        )
        for _ in range(100):
            if client.post("/abort_request", json={"rid": "abort-me"}).status_code == 200:
                break
            time.sleep(0.05)
        out = fut.result(timeout=30)
    assert out["meta_info"]["finish_reason"]["type"] == "abort"
    assert out["meta_info"]["completion_tokens"] < 1000
    assert_error(client.post("/abort_request", json={"rid": "no-such-request"}), 404)


def test_client_disconnect_aborts_streaming_and_plain_requests(tiny_server, client):
    before = wait_idle(client)["num_abort_requests"]
    with (
        tiny_server.client() as c,
        c.stream("POST", "/generate", json=_long_body(stream=True)) as resp,
    ):
        lines = resp.iter_lines()
        assert next(lines).startswith("data: ")
    stats = wait_idle(client)
    assert stats["num_abort_requests"] == before + 1
    assert stats["num_free_slots"] + stats["cache_size"] == stats["num_slots"]  # no KV leaked
    try:
        tiny_server.client(timeout=0.5).post("/generate", json=_long_body())
    except httpx.TimeoutException:
        pass
    assert wait_idle(client)["num_abort_requests"] == before + 2

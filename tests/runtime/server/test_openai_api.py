"""The OpenAI-compatible API on the tiny dummy-weight server, through raw HTTP and through
the official `openai` client."""

from __future__ import annotations

import pytest

from tests.runtime.server.conftest import API_KEY, sse_events

openai = pytest.importorskip("openai")

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]


def _chat(client, model_name, **fields):
    resp = client.post(
        "/v1/chat/completions", json={"model": model_name, "messages": CHAT, **fields}
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_models(client, model_name):
    data = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == [model_name] and data[0]["object"] == "model"


def test_chat_completion_shape_and_usage(client, model_name):
    out = _chat(client, model_name, max_tokens=6, temperature=0)
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    choice = out["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "length"
    usage = out["usage"]
    assert usage["completion_tokens"] == 6 and usage["total_tokens"] == usage["prompt_tokens"] + 6
    assert "cached_tokens" in usage["prompt_tokens_details"]
    again = _chat(client, model_name, max_completion_tokens=6, temperature=0)
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]


def test_chat_stream_matches_non_stream(client, model_name):
    full = _chat(client, model_name, max_tokens=8, temperature=0)
    body = {
        "model": model_name,
        "messages": CHAT,
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == full["choices"][0]["message"]["content"]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8


def test_n_samples_share_the_prompt_kv(client, model_name):
    client.post("/flush_cache")
    out = _chat(client, model_name, max_tokens=5, n=3, temperature=1.0, seed=7)
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert len({c["message"]["content"] for c in out["choices"]}) > 1  # seeds seed+i differ
    usage = out["usage"]
    assert usage["completion_tokens"] == 15
    # the prompt is counted once: its cached tokens are what its first sample found cached
    assert usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]
    again = _chat(client, model_name, max_tokens=5, n=3, temperature=1.0, seed=7)
    assert [c["message"] for c in again["choices"]] == [c["message"] for c in out["choices"]]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - 1
    # copies of one prompt are prefilled once: the others read its KV
    client.post("/flush_cache")
    copies = client.post(
        "/generate", json={"text": ["Say hi"] * 3, "sampling_params": {"max_new_tokens": 2}}
    ).json()
    prompt_len = copies[0]["meta_info"]["prompt_tokens"]
    assert [c["meta_info"]["cached_tokens"] for c in copies] == [0, prompt_len - 1, prompt_len - 1]


def test_chat_stream_with_n_samples(client, model_name):
    body = {
        "model": model_name,
        "messages": CHAT,
        "max_tokens": 4,
        "n": 2,
        "seed": 3,
        "stream": True,
    }
    with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        chunks = sse_events(resp.iter_lines())[:-1]
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == index]
        assert mine[0]["delta"]["role"] == "assistant" and mine[-1]["finish_reason"] == "length"
    streamed = [
        "".join(
            c["choices"][0]["delta"].get("content", "")
            for c in chunks
            if c["choices"][0]["index"] == i
        )
        for i in (0, 1)
    ]
    full = _chat(client, model_name, max_tokens=4, n=2, seed=3)
    assert streamed == [c["message"]["content"] for c in full["choices"]]


def test_chat_stop_and_logprobs(client, model_name):
    base = _chat(client, model_name, max_tokens=10, temperature=0)["choices"][0]["message"][
        "content"
    ]
    stop = base[len(base) // 2 :][:3]
    out = _chat(
        client, model_name, max_tokens=10, temperature=0, stop=stop, logprobs=True, top_logprobs=2
    )
    choice = out["choices"][0]
    assert (
        choice["message"]["content"] == base[: base.find(stop)]
        and choice["finish_reason"] == "stop"
    )
    content = choice["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"]
    assert all(len(c["top_logprobs"]) == 2 and c["logprob"] <= 0 for c in content)
    assert all(c["top_logprobs"][0]["token"] == c["token"] for c in content)  # greedy


def test_completions_prompt_forms(client, model_name, tokenizer):
    def complete(**fields):
        resp = client.post(
            "/v1/completions",
            json={"model": model_name, "max_tokens": 4, "temperature": 0, **fields},
        )
        assert resp.status_code == 200, resp.text
        return resp.json()

    text = complete(prompt="Hello world")
    assert text["object"] == "text_completion" and text["usage"]["completion_tokens"] == 4
    ids = tokenizer.encode("Hello world", add_special_tokens=False)
    assert complete(prompt=ids)["choices"][0]["text"] == text["choices"][0]["text"]
    many = complete(prompt=[ids, ids[:1]], n=2)
    assert [c["index"] for c in many["choices"]] == [0, 1, 2, 3]
    assert many["choices"][0]["text"] == text["choices"][0]["text"]
    listed = complete(prompt=["Hello world", "Bye"])
    bye = tokenizer.encode("Bye", add_special_tokens=False)
    assert len(listed["choices"]) == 2 and listed["usage"]["prompt_tokens"] == len(ids) + len(bye)
    echo = complete(prompt="Hello world", echo=True)
    assert echo["choices"][0]["text"] == "Hello world" + text["choices"][0]["text"]
    lp = complete(prompt="Hello world", logprobs=2)["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4


def test_completions_stream(client, model_name):
    body = {"model": model_name, "prompt": "Hello", "max_tokens": 5, "temperature": 0}
    full = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as resp:
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]"
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == full
    assert events[-2]["choices"][0]["finish_reason"] == "length"


def test_official_client(tiny_server, model_name):
    api = openai.OpenAI(base_url=f"{tiny_server.url}/v1", api_key=API_KEY, max_retries=0)
    assert [m.id for m in api.models.list()] == [model_name]
    chat = api.chat.completions.create(
        model=model_name, messages=CHAT, max_tokens=5, temperature=0, seed=1
    )
    assert chat.choices[0].finish_reason == "length" and chat.usage.completion_tokens == 5
    stream = api.chat.completions.create(
        model=model_name,
        messages=CHAT,
        max_tokens=5,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == chat.choices[0].message.content
    )
    assert chunks[-1].usage.completion_tokens == 5
    comp = api.completions.create(model=model_name, prompt="Hi", max_tokens=3, temperature=0)
    assert comp.usage.completion_tokens == 3
    with pytest.raises(openai.NotFoundError) as exc:
        api.chat.completions.create(model="gpt-4o", messages=CHAT)
    assert exc.value.code == "model_not_found"

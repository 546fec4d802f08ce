"""Many clients at once on the tiny dummy-weight server: the official async OpenAI client,
concurrent greedy streams equal to the same requests run one at a time, and 200 streams cut
mid-way (running or still queued) give back every KV slot."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.runtime.server.conftest import API_KEY, scrape, wait_idle

openai = pytest.importorskip("openai")

CHAT = [{"role": "user", "content": "Say hi"}]
NUM_STREAMS = 32
NUM_CUT = 200


def _async_api(server) -> "openai.AsyncOpenAI":
    return openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=60
    )


def test_async_openai_client(tiny_server, model_name):
    async def run() -> None:
        async with _async_api(tiny_server) as api:
            assert [m.id async for m in api.models.list()] == [model_name]
            chat = await api.chat.completions.create(
                model=model_name, messages=CHAT, max_tokens=5, temperature=0
            )
            assert chat.choices[0].finish_reason == "length" and chat.usage.completion_tokens == 5
            stream = await api.chat.completions.create(
                model=model_name, messages=CHAT, max_tokens=5, temperature=0, stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            assert text == chat.choices[0].message.content
            with pytest.raises(openai.AuthenticationError):
                await openai.AsyncOpenAI(
                    base_url=f"{tiny_server.url}/v1", api_key="wrong", max_retries=0
                ).models.list()

    asyncio.run(run())


async def _stream_completion(api, model_name: str, prompt: str) -> tuple[str, str, int]:
    """(text, finish_reason, completion tokens) of one greedy streamed completion."""
    stream = await api.completions.create(
        model=model_name,
        prompt=prompt,
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    text, finish, tokens = "", None, 0
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return text, finish, tokens


def test_concurrent_streams_equal_sequential_ones(tiny_server, model_name):
    prompts = [f"Request {i}: count to {i % 7 + 2}" for i in range(NUM_STREAMS)]

    async def run() -> tuple[list, list]:
        async with _async_api(tiny_server) as api:
            together = await asyncio.gather(
                *(_stream_completion(api, model_name, p) for p in prompts)
            )
            alone = [await _stream_completion(api, model_name, p) for p in prompts]
        return list(together), alone

    together, alone = asyncio.run(run())
    assert all(finish == "length" and tokens == 8 for _, finish, tokens in together)
    assert together == alone
    assert len({text for text, _, _ in together}) > 1  # the prompts really differ


async def _cut_stream(server, index: int) -> None:
    """Start a long streaming request, then close the connection: even indices after its
    first chunk (it runs), odd ones as soon as the headers arrive (it is most likely still
    queued: 200 of them do not fit the KV pool at once)."""
    body = {
        "text": f"Go on {index}",
        "stream": True,
        "sampling_params": {
            "max_new_tokens": 1000,
            "ignore_eos": True,
            "temperature": 1.0,
            "top_p": 0.9,
        },
    }
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as c:
        async with c.stream("POST", "/generate", json=body) as resp:
            assert resp.status_code == 200
            if index % 2:
                return
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    return


def test_streams_cut_mid_way_free_their_kv(tiny_server, client):
    before = wait_idle(client)["num_abort_requests"]

    async def run() -> None:
        await asyncio.gather(*(_cut_stream(tiny_server, i) for i in range(NUM_CUT)))

    asyncio.run(run())
    stats = wait_idle(client, timeout=60)
    assert stats["num_abort_requests"] == before + NUM_CUT
    # no request holds KV: only the radix cache does
    assert stats["num_free_slots"] + stats["cache_size"] == stats["num_slots"]
    values = scrape(client)
    assert values["radixgen:token_usage"] == round(stats["cache_size"] / stats["num_slots"], 4)
    assert values["radixgen:num_running_reqs"] == 0

"""End to end on the embedded SmolLM2 model: the server's greedy chat completion equals the
offline Engine on the same chat-templated prompt, and one greedy prompt (as token ids) gives the
same tokens through /generate, /v1/completions and the Engine."""

from __future__ import annotations

import pytest
import torch

import radixgen
from tests.runtime.prompts import chat_ids

pytestmark = pytest.mark.model

QUESTION = "What is the capital of France?"
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def engine(model_path):
    engine = radixgen.Engine(str(model_path), max_total_tokens=4096)
    yield engine
    engine.shutdown()


def engine_generate(engine, ids: list[int], max_new_tokens: int) -> dict:
    """A greedy Engine generation, on one thread like the server (see conftest): robust to a
    busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return engine.generate(
            input_ids=ids, sampling_params={"max_new_tokens": max_new_tokens, "temperature": 0}
        )
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def engine_text(engine, tokenizer):
    return engine_generate(engine, chat_ids(tokenizer, QUESTION), MAX_TOKENS)["text"]


def test_greedy_chat_equals_the_engine(embedded_server, engine_text, model_path):
    with embedded_server.client() as client:
        out = client.post(
            "/v1/chat/completions",
            json={
                "model": model_path.name,
                "messages": [{"role": "user", "content": QUESTION}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
            },
        ).json()
    assert out["choices"][0]["message"]["content"] == engine_text
    assert "Paris" in engine_text


def test_streamed_chat_equals_the_engine(embedded_server, engine_text, model_path):
    openai = pytest.importorskip("openai")
    api = openai.OpenAI(base_url=f"{embedded_server.url}/v1", api_key="none", max_retries=0)
    stream = api.chat.completions.create(
        model=model_path.name,
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == engine_text


def test_generate_completions_and_engine_give_the_same_tokens(
    embedded_server, engine, tokenizer, model_path
):
    ids = tokenizer.encode("The three primary colors are", add_special_tokens=False)
    expected = engine_generate(engine, ids, MAX_TOKENS)
    with embedded_server.client() as client:
        native = client.post(
            "/generate",
            json={
                "input_ids": ids,
                "sampling_params": {"max_new_tokens": MAX_TOKENS, "temperature": 0},
            },
        ).json()
        completion = client.post(
            "/v1/completions",
            json={
                "model": model_path.name,
                "prompt": ids,
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "logprobs": 0,
            },
        ).json()["choices"][0]
    assert native["output_ids"] == expected["output_ids"] and native["text"] == expected["text"]
    # completions name tokens by their text: one entry per token, in order
    assert completion["logprobs"]["tokens"] == [
        tokenizer.decode([t]) for t in expected["output_ids"]
    ]
    assert completion["text"] == expected["text"] and len(expected["output_ids"]) > 1

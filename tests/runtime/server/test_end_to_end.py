"""End to end on the embedded SmolLM2 model: the server's greedy chat completion equals the
offline Engine on the same chat-templated prompt."""

from __future__ import annotations

import pytest
import torch

import radixgen
from tests.runtime.prompts import chat_ids
from tests.runtime.server.conftest import ServerProcess

pytestmark = pytest.mark.model

QUESTION = "What is the capital of France?"
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def embedded_server(model_path, tmp_path_factory):
    server = ServerProcess(model_path, tmp_path_factory.mktemp("e2e"), "--max-total-tokens", "4096")
    try:
        yield server.wait_healthy()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def engine_text(model_path, tokenizer):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server's (see conftest): robust to a busy machine
    try:
        engine = radixgen.Engine(str(model_path), max_total_tokens=4096)
        out = engine.generate(input_ids=chat_ids(tokenizer, QUESTION),
                              sampling_params={"max_new_tokens": MAX_TOKENS, "temperature": 0})
        engine.shutdown()
    finally:
        torch.set_num_threads(threads)
    return out["text"]


def test_greedy_chat_equals_the_engine(embedded_server, engine_text, model_path):
    with embedded_server.client() as client:
        out = client.post("/v1/chat/completions", json={
            "model": model_path.name, "messages": [{"role": "user", "content": QUESTION}],
            "max_tokens": MAX_TOKENS, "temperature": 0}).json()
    assert out["choices"][0]["message"]["content"] == engine_text
    assert "Paris" in engine_text


def test_streamed_chat_equals_the_engine(embedded_server, engine_text, model_path):
    openai = pytest.importorskip("openai")
    api = openai.OpenAI(base_url=f"{embedded_server.url}/v1", api_key="none", max_retries=0)
    stream = api.chat.completions.create(model=model_path.name, messages=[{"role": "user", "content": QUESTION}],
                                         max_tokens=MAX_TOKENS, temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == engine_text

"""A server with `--quantization fp8` serves a JSON-schema constrained chat request whose
answer validates against the schema."""

import json

import httpx
import jsonschema
import pytest

from tests.runtime.server.conftest import TINY_ARGS, ServerProcess

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"enum": ["ann", "bob"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def fp8_server(tiny_model_path, tmp_path_factory):
    server = ServerProcess(
        tiny_model_path, tmp_path_factory.mktemp("logs"), *TINY_ARGS, "--quantization", "fp8"
    )
    yield server.wait_healthy()
    server.stop()


def test_constrained_request_on_fp8_weights(fp8_server, model_name):
    body = {
        "model": model_name,
        "messages": [{"role": "user", "content": "a person"}],
        "max_tokens": 64,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
    }
    resp = httpx.post(f"{fp8_server.url}/v1/chat/completions", json=body, timeout=120)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMA)

"""Bad input is a 400 with the OpenAI error body (never a 500 or a hang), the server stays
healthy; the API key guards every route but /health."""

from __future__ import annotations

import httpx
import pytest

from tests.runtime.server.conftest import assert_error

MODEL = "__model__"  # replaced by the served name
MSGS = [{"role": "user", "content": "hi"}]
LONG = "word " * 1100  # > the tiny model's 1024-token context

BAD_CHAT = [
    ({"messages": MSGS}, "model"),
    ({"model": MODEL, "messages": []}, "messages"),
    ({"model": MODEL}, "messages"),
    ({"model": MODEL, "messages": "hi"}, "messages"),
    ({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
    ({"model": MODEL, "messages": [{"role": "user"}]}, "messages.0.content"),
    (
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        },
        None,
    ),
    ({"model": MODEL, "messages": MSGS, "temperature": "hot"}, "temperature"),
    ({"model": MODEL, "messages": MSGS, "temperature": 3}, "temperature"),
    ({"model": MODEL, "messages": MSGS, "top_p": 0}, "top_p"),
    ({"model": MODEL, "messages": MSGS, "max_tokens": 0}, "max_tokens"),
    ({"model": MODEL, "messages": MSGS, "max_tokens": "5"}, "max_tokens"),
    ({"model": MODEL, "messages": MSGS, "max_tokens": 5000}, "messages"),
    ({"model": MODEL, "messages": MSGS, "n": 0}, "n"),
    ({"model": MODEL, "messages": MSGS, "stop": 5}, "stop"),
    ({"model": MODEL, "messages": MSGS, "stop": [""]}, None),
    ({"model": MODEL, "messages": MSGS, "presence_penalty": 9}, "presence_penalty"),
    ({"model": MODEL, "messages": MSGS, "top_logprobs": 3}, "top_logprobs"),
    ({"model": MODEL, "messages": MSGS, "logprobs": True, "top_logprobs": 50}, "top_logprobs"),
    ({"model": MODEL, "messages": MSGS, "seed": 1.5}, "seed"),
    ({"model": MODEL, "messages": MSGS, "seed": 2**64}, "seed"),
    ({"model": MODEL, "messages": MSGS, "seed": -(2**63) - 1}, "seed"),
    ({"model": MODEL, "messages": MSGS, "n": 65}, "n"),
    ({"model": MODEL, "messages": MSGS, "n": 2**70}, "n"),
    ({"model": MODEL, "messages": MSGS, "max_tokens": 2**64}, "max_tokens"),
    ({"model": MODEL, "messages": MSGS, "max_completion_tokens": -1}, "max_completion_tokens"),
    ({"model": MODEL, "messages": MSGS, "logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"model": MODEL, "messages": MSGS, "logprobs": 3}, "logprobs"),
    ({"model": MODEL, "messages": MSGS, "top_k": 2**40}, "top_k"),
    ({"model": MODEL, "messages": MSGS, "stop_token_ids": [2**64]}, "stop_token_ids.0"),
    ({"model": MODEL, "messages": MSGS, "stop_token_ids": [10**6]}, "stop_token_ids"),
    ({"model": MODEL, "messages": MSGS, "logit_bias": {"1": 101}}, "logit_bias.1"),
    ({"model": MODEL, "messages": MSGS, "logit_bias": {"x": 1}}, "logit_bias"),
    ({"model": MODEL, "messages": MSGS, "logit_bias": {"99999999": 1}}, "logit_bias"),
    ({"model": MODEL, "messages": MSGS, "logit_bias": [1]}, "logit_bias"),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": "get_weather"}],
                },
                *MSGS,
            ],
        },
        "messages.0.tool_calls.0.function",
    ),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": {"a": 1}},
                        }
                    ],
                },
                *MSGS,
            ],
        },
        "messages.0.tool_calls.0.function.arguments",
    ),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{no"},
                        }
                    ],
                },
                *MSGS,
            ],
        },
        "messages.0.tool_calls.0.function.arguments",
    ),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "retrieval",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                *MSGS,
            ],
        },
        "messages.0.tool_calls.0.type",
    ),
    (
        {"model": MODEL, "messages": [{"role": "assistant", "tool_calls": "f"}, *MSGS]},
        "messages.0.tool_calls",
    ),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": "x",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                }
            ],
        },
        "messages.0.tool_calls",
    ),
    (
        {"model": MODEL, "messages": [{"role": "tool", "content": "sunny"}, *MSGS]},
        "messages.0.tool_call_id",
    ),
    (
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                }
            ],
        },
        "messages.0.content.0",
    ),
    (
        {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
        "messages.0.content.0.text",
    ),
    (
        {"model": MODEL, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
        "messages.0.content.0.type",
    ),
    ({"model": MODEL, "messages": [{"role": "user", "content": {"a": 1}}]}, "messages.0.content"),
    ({"model": MODEL, "messages": [{"content": "x"}]}, "messages.0.role"),
    ({"model": MODEL, "messages": [[1]]}, "messages.0"),
    (
        {
            "model": MODEL,
            "messages": MSGS,
            "tool_choice": {"type": "function", "function": "f"},
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
        "tool_choice",
    ),
    ({"model": MODEL, "messages": MSGS, "regex": "a+", "guided_choice": ["a"]}, "guided_choice"),
    (
        {
            "model": MODEL,
            "messages": MSGS,
            "regex": "a+",
            "response_format": {"type": "json_object"},
        },
        "response_format",
    ),
    (
        {
            "model": MODEL,
            "messages": MSGS,
            "guided_json": {"type": "object"},
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
        "tools",
    ),
    ({"model": MODEL, "messages": MSGS, "regex": "a(b"}, "regex"),
    ({"model": MODEL, "messages": MSGS, "guided_choice": []}, "guided_choice"),
    ({"model": MODEL, "messages": MSGS, "json_schema": "{no"}, "json_schema"),
    ({"model": MODEL, "messages": MSGS, "rid": ""}, "rid"),
    (
        {"model": MODEL, "messages": MSGS, "response_format": {"type": "xml"}},
        "response_format.type",
    ),
    (
        {
            "model": MODEL,
            "messages": MSGS,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {
                        "type": "array",
                        "items": {"type": "integer", "maximum": 5},
                        "uniqueItems": True,
                        "minItems": 2,
                    },
                },
            },
        },
        "response_format",
    ),
    ({"model": MODEL, "messages": MSGS, "tools": [{"type": "function"}]}, "tools.0"),
    (
        {
            "model": MODEL,
            "messages": MSGS,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {
                            "type": "object",
                            "properties": {"a": {"not": {"type": "string"}}},
                        },
                    },
                }
            ],
            "tool_choice": "required",
        },
        "tools",
    ),
    ({"model": MODEL, "messages": MSGS, "tool_choice": "auto"}, "tool_choice"),
    ({"model": MODEL, "messages": MSGS, "logit_bias": {"1": 5}}, "logit_bias"),
    ({"model": MODEL, "messages": MSGS, "frobnicate": True}, "frobnicate"),
    (
        {"model": MODEL, "messages": MSGS, "stream_options": {"include_usage": True}},
        "stream_options",
    ),
    (
        {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "max_tokens": 1},
        "messages",
    ),
]

BAD_COMPLETIONS = [
    ({"model": MODEL, "prompt": ""}, "prompt"),
    ({"model": MODEL, "prompt": []}, "prompt"),
    ({"model": MODEL, "prompt": [1, "a"]}, None),  # which union member is meant is unclear
    ({"model": MODEL, "prompt": [[-1]]}, "prompt"),
    ({"model": MODEL, "prompt": [10**9]}, "prompt"),
    ({"model": MODEL, "prompt": LONG}, "prompt"),
    ({"model": MODEL, "prompt": "hi", "logprobs": 9}, "logprobs"),
    ({"model": MODEL, "prompt": "hi", "echo": True, "logprobs": 1}, "echo"),
    ({"model": MODEL, "prompt": "hi", "suffix": "x"}, "suffix"),
    ({"model": MODEL, "prompt": "hi", "best_of": 3}, "best_of"),
    ({"model": MODEL, "prompt": "hi", "seed": 2**64}, "seed"),
    ({"model": MODEL, "prompt": "hi", "max_tokens": 2**63}, "max_tokens"),
    ({"model": MODEL, "prompt": "hi", "logprobs": -1}, "logprobs"),
    ({"model": MODEL, "prompt": "hi", "n": 0}, "n"),
    ({"model": MODEL, "prompt": [2**64]}, "prompt"),
    ({"model": MODEL, "prompt": "hi", "guided_regex": "(a"}, "guided_regex"),
    ({"model": MODEL, "prompt": "hi", "ebnf": "root ::= ("}, "ebnf"),
]

BAD_GENERATE = [
    ({}, "text"),
    ({"text": "hi", "input_ids": [1]}, "text"),
    ({"text": 5}, "text"),
    ({"input_ids": []}, "input_ids"),
    ({"input_ids": [[]]}, "input_ids"),
    ({"input_ids": [1, 10**9]}, "input_ids"),
    ({"text": "hi", "sampling_params": {"temperature": -1}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"bogus": 1}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"max_new_tokens": "many"}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"ignore_eos": [1]}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"stop_token_ids": 5}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"stop_token_ids": [2**64]}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"stop_token_ids": ["a"]}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"seed": 2**64}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"seed": -(2**63) - 1}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"max_new_tokens": 2**64}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"max_new_tokens": True}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"top_k": 2**63}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"top_logprobs_num": 2**63}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"logprob_start_len": 2**63}}, "sampling_params"),
    ({"text": "hi", "sampling_params": 5}, "sampling_params"),
    ({"text": "hi", "logprob_start_len": 2**64}, "logprob_start_len"),
    ({"input_ids": [2**64]}, "input_ids"),
    ({"text": "hi", "sampling_params": {"regex": "a(b"}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"json_schema": "{not json"}}, "sampling_params"),
    (
        {
            "text": "hi",
            "sampling_params": {"json_schema": {"type": "string", "pattern": "(?=(?!b)a)"}},
        },
        "sampling_params",
    ),
    ({"text": "hi", "sampling_params": {"ebnf": "root ::= ("}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"lark": "start: undefined_rule"}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"lark": "no_such_grammar"}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"choices": []}}, "sampling_params"),
    ({"text": "hi", "sampling_params": {"regex": "a", "choices": ["a"]}}, "sampling_params"),
    ({"text": ["a", "b"], "sampling_params": [{}]}, "sampling_params"),
    ({"text": "hi", "top_logprobs_num": 99}, "top_logprobs_num"),
    ({"text": "hi", "rid": ["a", "b"]}, "rid"),
    ({"text": ["a b", "a c"], "logprob_start_common_prefix": True}, "logprob_start_common_prefix"),
    (
        {"text": "a b", "return_logprob": True, "logprob_start_common_prefix": True},
        "logprob_start_common_prefix",
    ),
    (
        {"text": ["a b"], "return_logprob": True, "logprob_start_common_prefix": True},
        "logprob_start_common_prefix",
    ),
    (
        {
            "text": ["a b", "a c"],
            "return_logprob": True,
            "logprob_start_len": 0,
            "logprob_start_common_prefix": True,
        },
        "logprob_start_common_prefix",
    ),
    (
        {"text": ["a b", "a c"], "return_logprob": True, "logprob_start_common_prefix": "yes"},
        "logprob_start_common_prefix",
    ),
    ({"text": LONG}, "text"),
]


def _fill(body: dict, model_name: str) -> dict:
    return {k: (model_name if v == MODEL else v) for k, v in body.items()}


@pytest.mark.parametrize("body, param", BAD_CHAT)
def test_bad_chat_requests(client, model_name, body, param):
    err = assert_error(client.post("/v1/chat/completions", json=_fill(body, model_name)))
    assert err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param


@pytest.mark.parametrize(
    "choice", ["auto", "required", {"type": "function", "function": {"name": "g"}}]
)
def test_bad_tool_parameters_name_their_tool(client, model_name, choice):
    tools = [
        {"type": "function", "function": {"name": name, "parameters": params}}
        for name, params in (
            ("f", {"type": "object"}),
            ("g", {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.3}}}),
        )
    ]
    body = {"model": model_name, "messages": MSGS, "tools": tools, "tool_choice": choice}
    err = assert_error(client.post("/v1/chat/completions", json=body))
    assert err["param"] == "tools"
    assert (
        "tools[1].function.parameters.properties.n" in err["message"]
        and "$defs.tool" not in err["message"]
    )


@pytest.mark.parametrize("body, param", BAD_COMPLETIONS)
def test_bad_completion_requests(client, model_name, body, param):
    err = assert_error(client.post("/v1/completions", json=_fill(body, model_name)))
    if param:
        assert err["param"] == param


@pytest.mark.parametrize("body, param", BAD_GENERATE)
def test_bad_generate_requests(client, body, param):
    err = assert_error(client.post("/generate", json=body))
    if param:
        assert err["param"] == param


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b"null", b'{"text": NaN}'])
def test_malformed_bodies(client, raw):
    for path in ("/generate", "/v1/chat/completions", "/v1/completions"):
        assert_error(client.post(path, content=raw, headers={"content-type": "application/json"}))


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/chat/completions", {"model": "gpt-4o", "messages": MSGS}),
        ("/v1/completions", {"model": "gpt-4o", "prompt": "hi"}),
    ],
)
def test_unknown_model_is_a_404(client, path, body):
    err = assert_error(client.post(path, json=body), 404)
    assert err["code"] == "model_not_found" and err["param"] == "model"


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63)])
def test_seeds_at_the_int64_edges_with_n_samples(client, model_name, seed):
    """seed + i wraps within int64, so the n samples still get distinct, reproducible seeds."""
    body = {"model": model_name, "messages": MSGS, "n": 2, "seed": seed, "max_tokens": 4}
    first, again = (client.post("/v1/chat/completions", json=body) for _ in range(2))
    assert first.status_code == again.status_code == 200, first.text
    assert [c["message"] for c in first.json()["choices"]] == [
        c["message"] for c in again.json()["choices"]
    ]


def test_unknown_route_and_method(client):
    assert_error(client.get("/nope"), 404)
    assert_error(client.get("/generate"), 405)


def test_server_still_healthy_after_bad_input(client):
    assert client.get("/health_generate").status_code == 200


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/completions"),
        ("POST", "/generate"),
        ("GET", "/get_server_info"),
        ("GET", "/get_model_info"),
        ("POST", "/flush_cache"),
        ("GET", "/health_generate"),
        ("POST", "/abort_request"),
    ],
)
def test_api_key_guards_every_route_but_health(tiny_server, method, path):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-key"}):
        err = assert_error(
            httpx.request(method, tiny_server.url + path, headers=headers, json={}), 401
        )
        assert err["code"] == "invalid_api_key"
    assert httpx.get(tiny_server.url + "/health").status_code == 200

"""What OpenAI, SGLang and vLLM clients expect beyond the basic shapes: constraints as
top-level fields (`extra_body`), aborted requests as errors (never finish_reason "abort"),
`/version` and `system_fingerprint`, and an OpenAPI spec that describes every request body."""

from __future__ import annotations

import concurrent.futures
import re
import time

import pytest

from tests.runtime.server.conftest import API_KEY, assert_error, sse_events

openai = pytest.importorskip("openai")

CHAT = [{"role": "user", "content": "Pick one"}]
OPENAI_FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter"}


@pytest.mark.parametrize("route", ["chat", "completions"])
@pytest.mark.parametrize(
    "fields, check",
    [
        ({"regex": "[0-9]{3}-[a-z]{2}"}, lambda text: re.fullmatch("[0-9]{3}-[a-z]{2}", text)),
        ({"guided_regex": "(yes|no)!"}, lambda text: text in ("yes!", "no!")),
        ({"guided_choice": ["red", "green"]}, lambda text: text in ("red", "green")),
        ({"ebnf": 'root ::= "a" ("b" | "c")'}, lambda text: text in ("ab", "ac")),
        ({"guided_grammar": 'root ::= "x" "y"'}, lambda text: text == "xy"),
        ({"json_schema": {"type": "boolean"}}, lambda text: text in ("true", "false")),
        ({"guided_json": '{"enum": [1, 2]}'}, lambda text: text in ("1", "2")),
    ],
)
def test_constraints_through_extra_body(tiny_server, model_name, route, fields, check):
    api = openai.OpenAI(base_url=f"{tiny_server.url}/v1", api_key=API_KEY, max_retries=0)
    if route == "chat":
        out = api.chat.completions.create(
            model=model_name,
            messages=CHAT,
            max_tokens=30,
            temperature=1.0,
            seed=3,
            extra_body=fields,
        )
        text = out.choices[0].message.content
    else:
        out = api.completions.create(
            model=model_name,
            prompt="Pick one",
            max_tokens=30,
            temperature=1.0,
            seed=3,
            extra_body=fields,
        )
        text = out.choices[0].text
    assert check(text), text
    assert out.choices[0].finish_reason == "stop"


def test_version_and_system_fingerprint(client, model_name):
    version = client.get("/version").json()["version"]
    assert isinstance(version, str) and version
    assert client.get("/get_server_info").json()["version"] == version
    chat = client.post(
        "/v1/chat/completions", json={"model": model_name, "messages": CHAT, "max_tokens": 2}
    ).json()
    comp = client.post(
        "/v1/completions", json={"model": model_name, "prompt": "a", "max_tokens": 2}
    ).json()
    fingerprint = chat["system_fingerprint"]
    assert fingerprint.startswith("fp_") and comp["system_fingerprint"] == fingerprint
    body = {"model": model_name, "messages": CHAT, "max_tokens": 2, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        events = sse_events(resp.iter_lines())
    assert {e["system_fingerprint"] for e in events[:-1]} == {fingerprint}


def _abort_while_running(tiny_server, client, rid: str, request) -> object:
    """`request()` runs in a thread while /abort_request aborts rid; its result."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(request)
        for _ in range(200):
            if client.post("/abort_request", json={"rid": rid}).status_code == 200:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the request never ran: {fut.result()}")
        return fut.result(timeout=60)


LONG = {"max_tokens": 900, "ignore_eos": True, "temperature": 1.0, "top_p": 0.9}


def test_an_aborted_request_is_an_error_not_a_finish_reason(tiny_server, client, model_name):
    body = {"model": model_name, "messages": CHAT, "rid": "oa-abort", **LONG}
    with tiny_server.client() as c:
        resp = _abort_while_running(
            tiny_server, client, "oa-abort", lambda: c.post("/v1/chat/completions", json=body)
        )
    err = assert_error(resp)
    assert err["code"] == "request_aborted" and "abort" in err["message"]
    body = {
        "model": model_name,
        "prompt": "Go on",
        "rid": "oa-abort-stream",
        "stream": True,
        **LONG,
    }

    def stream():
        with tiny_server.client() as c, c.stream("POST", "/v1/completions", json=body) as r:
            return r.status_code, sse_events(r.iter_lines())

    status, events = _abort_while_running(tiny_server, client, "oa-abort-stream", stream)
    assert status == 200 and events[-1] == "[DONE]"
    assert events[-2]["error"]["code"] == "request_aborted"
    reasons = {c["finish_reason"] for e in events[:-2] for c in e["choices"]}
    assert reasons <= {None}  # no chunk claims a finish


def test_finish_reasons_are_openai_values(client, model_name):
    for body in (
        {"max_tokens": 3},
        {"max_tokens": 50, "stop": ["e", "a", "o", " "]},
        {"regex": "ab"},
    ):
        out = client.post(
            "/v1/chat/completions", json={"model": model_name, "messages": CHAT, **body}
        ).json()
        assert out["choices"][0]["finish_reason"] in OPENAI_FINISH_REASONS


NO_BODY_ROUTES = {
    "/flush_cache",
    "/rollback_weights",
    "/release_standby_weights",
    "/continue_generation",
}


def test_openapi_describes_every_request_body(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    posts = {path: ops["post"] for path, ops in spec["paths"].items() if "post" in ops}
    assert {"/generate", "/v1/chat/completions", "/v1/completions", "/abort_request"} <= set(posts)
    for path, op in posts.items():
        if path in NO_BODY_ROUTES:
            continue
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = schemas[ref.rsplit("/", 1)[1]]
        assert schema["properties"], path
    chat = schemas["ChatCompletionRequest"]
    assert {"messages", "model", "seed", "regex", "guided_json"} <= set(chat["properties"])
    refs = re.findall(r'"\$ref": "#/components/schemas/(\w+)"', str(spec).replace("'", '"'))
    assert refs and set(refs) <= set(schemas)  # every reference resolves

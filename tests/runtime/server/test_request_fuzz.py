"""Property test: no request body a client can send gets a 5xx. Bodies start valid (one per
route) and hypothesis mutates fields of the route's pydantic model: wrong types, integers past
every bound, nested junk, unknown fields; each answer is a success or a 4xx with the OpenAI
error body, and the server stays healthy."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radixgen.runtime.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    GenerateRequest,
)

EDGE_INTS = [
    -1,
    0,
    1,
    2,
    20,
    21,
    64,
    65,
    2**31 - 1,
    2**31,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(EDGE_INTS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# fields whose valid values could make a request run long: junk for them is never a small count
LONG_RUNNING = {"max_tokens", "max_completion_tokens", "max_new_tokens", "n"}
SLOW_FREE = st.one_of(st.sampled_from([-1, 0, 2**31, 2**63, 2**64, 1.5, "4", None, True, [4]]))

MSGS = [{"role": "user", "content": "hi"}]
ROUTES = {
    "/v1/chat/completions": (ChatCompletionRequest, {"messages": MSGS, "max_tokens": 2}),
    "/v1/completions": (CompletionRequest, {"prompt": "hi", "max_tokens": 2}),
    "/generate": (GenerateRequest, {"text": "hi", "sampling_params": {"max_new_tokens": 2}}),
}
MESSAGE_JUNK = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "x"])},
        optional={
            "content": JUNK,
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "id": JUNK,
                        "type": JUNK,
                        "function": st.one_of(
                            JUNK,
                            st.fixed_dictionaries({}, optional={"name": JUNK, "arguments": JUNK}),
                        ),
                    },
                ),
                max_size=2,
            ),
            "tool_call_id": JUNK,
            "name": JUNK,
        },
    ),
    max_size=3,
)
SAMPLING_KEYS = [
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "stop_token_ids",
    "regex",
    "json_schema",
    "choices",
    "min_p",
    "ignore_eos",
    "bogus",
]


def _value(field: str) -> st.SearchStrategy:
    if field in LONG_RUNNING:
        return SLOW_FREE
    if field == "messages":
        return st.one_of(MESSAGE_JUNK, JUNK)
    if field == "sampling_params":
        return st.one_of(
            JUNK,
            st.dictionaries(st.sampled_from(SAMPLING_KEYS), JUNK, max_size=4).map(
                lambda d: (
                    {**d, "max_new_tokens": d.get("max_new_tokens", 2)}
                    if not isinstance(d.get("max_new_tokens"), int) or d["max_new_tokens"] > 8
                    else d
                )
            ),
        )
    return JUNK


@st.composite
def bodies(draw, path: str) -> dict:
    model, base = ROUTES[path]
    body = {**base, **({"model": "__model__"} if "model" in model.model_fields else {})}
    fields = draw(
        st.lists(
            st.sampled_from(sorted(model.model_fields) + ["frobnicate"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    for field in fields:
        if field != "model":
            body[field] = draw(_value(field))
    return body


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_no_body_gets_a_5xx(client, model_name, path):
    @settings(
        max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(bodies(path))
    def check(body):
        body = {k: (model_name if v == "__model__" else v) for k, v in body.items()}
        if isinstance(body.get("max_new_tokens"), int) and body["max_new_tokens"] > 8:
            body["max_new_tokens"] = 8
        resp = client.post(
            path, content=json.dumps(body), headers={"content-type": "application/json"}
        )
        assert resp.status_code < 500, (body, resp.text)
        if resp.status_code >= 400:
            err = resp.json()["error"]
            assert set(err) == {"message", "type", "param", "code"} and err["message"], resp.text

    check()
    assert client.get("/health").status_code == 200

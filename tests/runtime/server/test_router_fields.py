"""What sglang-router (0.3.2) sends a worker, byte for byte as it forwarded these requests (it
re-serializes every body with its own defaults filled in), and the probes it makes when it
registers a worker. The router itself runs in test_router.py (slow)."""

from __future__ import annotations

from tests.runtime.server.conftest import assert_error

# the router's body for {"messages": [...], "max_tokens": 4}
ROUTER_CHAT = {
    "messages": [{"role": "user", "content": "hi"}],
    "logprobs": False,
    "max_completion_tokens": 4,
    "stream": False,
    "no_stop_trim": False,
    "ignore_eos": False,
    "continue_final_message": False,
    "skip_special_tokens": True,
    "separate_reasoning": True,
    "stream_reasoning": True,
    "return_hidden_states": False,
}
ROUTER_COMPLETION = {
    "prompt": "hi",
    "max_tokens": 4,
    "stream": False,
    "echo": False,
    "no_stop_trim": False,
    "ignore_eos": False,
    "skip_special_tokens": True,
    "return_hidden_states": False,
}
ROUTER_GENERATE = {
    "text": "hi",
    "model": None,
    "sampling_params": {"max_new_tokens": 4},
    "return_text_in_logprobs": False,
    "stream": False,
    "log_metrics": True,
    "return_hidden_states": False,
    "background": False,
    "no_logs": False,
    "return_bytes": False,
    "return_entropy": False,
}


def test_router_bodies_are_accepted(client, model_name):
    chat = client.post("/v1/chat/completions", json={**ROUTER_CHAT, "model": model_name})
    assert chat.status_code == 200, chat.text
    assert chat.json()["usage"]["completion_tokens"] == 4
    completion = client.post("/v1/completions", json={**ROUTER_COMPLETION, "model": model_name})
    assert completion.status_code == 200, completion.text
    assert completion.json()["usage"]["completion_tokens"] == 4
    out = client.post("/generate", json=ROUTER_GENERATE)
    assert out.status_code == 200, out.text
    assert len(out.json()["output_ids"]) == 4
    named = client.post("/generate", json={**ROUTER_GENERATE, "model": model_name})
    assert named.status_code == 200, named.text


def test_router_probes_answer(client, model_name):
    assert client.get("/server_info").json()["served_model_name"] == model_name
    info = client.get("/server_info").json()
    assert info["dp_size"] == 1 and info["tp_size"] == 1
    assert client.get("/model_info").json() == client.get("/get_model_info").json()
    (load,) = client.get("/get_load").json()
    assert load["dp_rank"] == 0
    assert {"num_reqs", "num_waiting_reqs", "num_tokens"} <= set(load)
    assert all(isinstance(load[k], int) and load[k] >= 0 for k in ("num_reqs", "num_tokens"))


def test_fields_that_would_change_the_output_are_honoured_or_refused(client, model_name):
    err = assert_error(
        client.post(
            "/v1/chat/completions",
            json={**ROUTER_CHAT, "model": model_name, "return_hidden_states": True},
        )
    )
    assert err["param"] == "return_hidden_states"
    for name in ("return_entropy", "return_bytes", "background"):
        err = assert_error(client.post("/generate", json={**ROUTER_GENERATE, name: True}))
        assert err["param"] == name and err["code"] == "unsupported_field"
    missing = client.post("/generate", json={**ROUTER_GENERATE, "model": "other"})
    assert assert_error(missing, 404)["code"] == "model_not_found"


def test_no_stop_trim_keeps_the_stop_string_in_openai_routes(client, model_name):
    base = {**ROUTER_COMPLETION, "model": model_name, "max_tokens": 12, "temperature": 0}
    full = client.post("/v1/completions", json=base).json()["choices"][0]["text"]
    stop = full[len(full) // 2 :][:4]
    assert stop.strip(), full
    trimmed = client.post("/v1/completions", json={**base, "stop": [stop]}).json()
    kept = client.post("/v1/completions", json={**base, "stop": [stop], "no_stop_trim": True})
    cut = trimmed["choices"][0]["text"]
    assert cut == full[: full.find(stop)]
    kept_text = kept.json()["choices"][0]["text"]  # up to the end of the token completing it
    assert kept_text.startswith(cut + stop) and full.startswith(kept_text)


def test_continue_final_message_extends_the_assistant_turn(client, model_name):
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello the"}]
    base = {**ROUTER_CHAT, "model": model_name, "messages": history, "max_completion_tokens": 1}
    opened = client.post("/v1/chat/completions", json=base).json()
    continued = client.post(
        "/v1/chat/completions", json={**base, "continue_final_message": True}
    ).json()
    # a new turn adds the end of the assistant message and the opening of the next one
    assert continued["usage"]["prompt_tokens"] < opened["usage"]["prompt_tokens"]
    err = assert_error(
        client.post(
            "/v1/chat/completions",
            json={**ROUTER_CHAT, "model": model_name, "continue_final_message": True},
        )
    )
    assert err["param"] == "continue_final_message"

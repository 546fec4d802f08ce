"""The OpenAI backend's request and answer shapes over a fake HTTP transport, and SGLang's
API speculative execution (num_api_spec_tokens) in completion and chat mode."""

import json

import httpx
import pytest

import radixgen.frontend_lang as sgl


class FakeAPI:
    """Answers /completions and /chat/completions with scripted texts; records the bodies."""

    def __init__(self, texts):
        self.texts, self.bodies = list(texts), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append((request.url.path, body))
        text = self.texts.pop(0)
        usage = {
            "prompt_tokens": len(str(body.get("prompt", body.get("messages")))),
            "completion_tokens": 3,
        }
        if request.url.path.endswith("/chat/completions"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        else:
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
        return httpx.Response(200, json={"choices": [choice], "usage": usage})


def _backend(texts, chat):
    api = FakeAPI(texts)
    backend = sgl.OpenAI(
        "m",
        is_chat_model=chat,
        base_url="http://x/v1",
        api_key="k",
        transport=httpx.MockTransport(api),
    )
    return backend, api


def test_completion_fields_and_constraints_go_out_as_vllm_fields():
    backend, api = _backend(["42"], chat=False)

    @sgl.function
    def prog(s):
        s += "n=" + sgl.gen("n", max_tokens=4, min_tokens=1, dtype=int, temperature=0)

    state = prog.run(backend=backend)
    path, body = api.bodies[0]
    assert path == "/v1/completions" and state["n"] == "42"
    assert body["prompt"] == "n=" and body["max_tokens"] == 4 and body["min_tokens"] == 1
    assert "guided_regex" in body and backend.token_usage.completion_tokens == 3


def test_chat_gen_must_open_the_assistant_message_without_speculation():
    backend, api = _backend(["Hi!"], chat=True)

    @sgl.function
    def ok(s):
        s += sgl.user("hello")
        s += sgl.assistant(sgl.gen("a"))

    assert ok.run(backend=backend)["a"] == "Hi!"
    assert api.bodies[0][1]["messages"] == [{"role": "user", "content": "hello"}]

    @sgl.function
    def bad(s):
        s += sgl.user("hello")
        s += sgl.assistant("Name: " + sgl.gen("a"))

    with pytest.raises(RuntimeError, match="num_api_spec_tokens"):
        bad.run(backend=backend)


def _character(s):
    s += "Name:" + sgl.gen("name", stop="\n") + "\nBirthday:" + sgl.gen("birthday", stop="\n")
    s += "\nJob:" + sgl.gen("job", stop="\n") + "\n"


def test_completion_speculation_fills_three_gens_from_one_request():
    spec = sgl.function(num_api_spec_tokens=64)(_character)
    backend, api = _backend([" Ada\nBirthday: 1815\nJob: analyst\nmore"], chat=False)
    state = spec.run(backend=backend)
    assert (state["name"], state["birthday"], state["job"]) == (" Ada", " 1815", " analyst")
    assert (
        len(api.bodies) == 1
        and "stop" not in api.bodies[0][1]
        and api.bodies[0][1]["max_tokens"] == 64
    )
    plain, api2 = _backend([" Ada", " 1815", " analyst"], chat=False)
    sgl.function(_character).run(backend=plain)
    assert (
        len(api2.bodies) == 3
        and backend.token_usage.prompt_tokens < plain.token_usage.prompt_tokens
    )


def test_completion_speculation_asks_again_when_the_text_diverges():
    spec = sgl.function(num_api_spec_tokens=16)(_character)
    backend, api = _backend([" Ada\nAge: 3", " 1815\nJob: analyst\n"], chat=False)
    state = spec.run(backend=backend)
    assert (state["name"], state["birthday"], state["job"]) == (" Ada", " 1815", " analyst")
    assert (
        len(api.bodies) == 2
    )  # "\nBirthday:" did not follow " Ada": the second gen speculated again


def test_chat_speculation_generates_the_whole_message_once():
    @sgl.function(num_api_spec_tokens=128)
    def prog(s):
        s += sgl.user("Make a character.")
        s += sgl.assistant(
            "Name:" + sgl.gen("name", stop="\n") + "\nJob:" + sgl.gen("job", stop="\n")
        )

    backend, api = _backend(["Name: Ada\nJob: analyst"], chat=True)
    state = prog.run(backend=backend)
    assert (state["name"], state["job"]) == (" Ada", " analyst")
    assert len(api.bodies) == 1 and api.bodies[0][1]["max_tokens"] == 128
    assert state.messages()[-1]["content"] == "Name: Ada\nJob: analyst"
    assert state.get_meta_info("job")["api_spec_matched"] is True


def test_select_scores_from_echo_logprobs_else_falls_back_to_guided_choice():
    def echo(request):
        body = json.loads(request.content)
        if body.get("echo"):
            choices = [
                {
                    "index": i,
                    "text": p,
                    "logprobs": {
                        "tokens": ["Q:", " Yes" if p.endswith("Yes") else " No"],
                        "token_logprobs": [None, -0.2 if p.endswith("No") else -2.0],
                        "text_offset": [0, 2],
                    },
                }
                for i, p in enumerate(body["prompt"])
            ]
            return httpx.Response(200, json={"choices": choices})
        return httpx.Response(200, json={"choices": [{"index": 0, "text": "Yes"}]})

    backend = sgl.OpenAI(
        "m", is_chat_model=False, base_url="http://x/v1", transport=httpx.MockTransport(echo)
    )

    @sgl.function
    def prog(s):
        s += "Q:" + sgl.select("a", [" Yes", " No"])

    assert prog.run(backend=backend)["a"] == " No"

    def refuse(request):
        body = json.loads(request.content)
        if body.get("echo"):
            return httpx.Response(
                400, json={"error": {"message": "echo with logprobs is not supported"}}
            )
        return httpx.Response(
            200, json={"choices": [{"index": 0, "text": body["guided_choice"][0]}]}
        )

    fallback = sgl.OpenAI(
        "m", is_chat_model=False, base_url="http://x/v1", transport=httpx.MockTransport(refuse)
    )
    state = prog.run(backend=fallback)
    assert state["a"] == " Yes" and state.get_meta_info("a")["constrained"] is True

"""Chat-template derivation, choice scoring and the HTTP endpoint's request/response handling
(httpx MockTransport: no server)."""

import json

import httpx
import pytest

from radixgen.frontend_lang import BackendError, RuntimeEndpoint
from radixgen.frontend_lang.chat_template import (
    REGISTRY,
    from_jinja,
    resolve_template,
    template_for_name,
)
from radixgen.frontend_lang.runtime import server_args
from radixgen.frontend_lang.select_scoring import (
    argmax,
    logprob_start,
    normalize,
    score_choices,
    starts_at_common_prefix,
)

SMOLLM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nDefault.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA3_TEMPLATE = (
    "{{- bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
LLAMA2_TEMPLATE = (  # the system prompt folded into the first user turn: not splittable per message
    "{% for m in messages %}{% if m['role'] == 'system' %}{% set sys = m['content'] %}"
    "{% elif m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]{% else %} {{ m['content'] }}</s>"
    "{% endif %}{% endfor %}"
)


def test_template_from_jinja_chatml_with_default_system():
    t = from_jinja(SMOLLM_TEMPLATE, bos_token="<|im_start|>")
    assert (
        t.role_prefix["user"] == "<|im_start|>user\n"
        and t.role_suffix["assistant"] == "<|im_end|>\n"
    )
    assert t.default_system == "<|im_start|>system\nDefault.<|im_end|>\n"
    assert t.bos == ""  # the template never writes bos_token
    assert (
        t.begin("user", is_first=True)
        == "<|im_start|>system\nDefault.<|im_end|>\n<|im_start|>user\n"
    )
    assert t.begin("system", is_first=True) == "<|im_start|>system\n"


def test_template_from_jinja_llama3_and_fallbacks():
    t = from_jinja(LLAMA3_TEMPLATE, bos_token="<|begin_of_text|>")
    assert t.bos == "<|begin_of_text|>" and t.role_suffix["user"] == "<|eot_id|>"
    assert (
        t.begin("system", True) == "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    )
    assert from_jinja(LLAMA2_TEMPLATE) is None
    assert from_jinja("{% broken") is None
    assert template_for_name("/models/Meta-Llama-3-8B-Instruct").name == "llama-3"
    assert template_for_name("Qwen2-7B").name == "chatml"
    assert template_for_name("gpt2").name == "plain"


def test_resolve_template_prefers_the_server_template_then_override():
    info = {"model_path": "/nowhere/SmolLM2", "chat_template": LLAMA3_TEMPLATE, "bos_token": "<s>"}
    assert resolve_template(info).role_suffix["user"] == "<|eot_id|>"
    assert resolve_template(info, "chatml") is REGISTRY["chatml"]
    assert resolve_template({"model_path": "/nowhere/SmolLM2"}).name == "chatml"
    with pytest.raises(ValueError, match="unknown chat template"):
        resolve_template(info, "nope")


def test_score_choices_aligns_on_the_first_divergence():
    # prefix tail ids [5, 6, 7]; choice A keeps them and adds [8, 9]; choice B merges 7 into 70
    prefix = [[-0.1, 5], [-0.2, 6], [-0.3, 7]]
    a = [[-0.1, 5], [-0.2, 6], [-0.3, 7], [-1.0, 8], [-1.0, 9]]
    b = [[-0.1, 5], [-0.2, 6], [-0.5, 70]]
    sums, counts = score_choices(prefix, [a, b])
    assert sums == pytest.approx([-2.3, -0.5]) and counts == [3, 1]  # both from position 2 on
    assert normalize(sums, counts) == pytest.approx([-2.3 / 3, -0.5])
    assert argmax([-1.0, -0.5, -0.5]) == 1
    assert logprob_start(100) == 96 and logprob_start(2) == 1 and logprob_start(1) == 0


def test_score_choices_skips_the_null_first_position():
    sums, counts = score_choices([], [[[None, 1], [-2.0, 2]], [[None, 1], [-1.0, 3], [-1.0, 4]]])
    assert sums == [-2.0, -2.0] and counts == [1, 2]
    # SGLang's entries carry the token text as a third item
    assert score_choices([[-1.0, 1, "a"]], [[[-1.0, 1, "a"], [-3.0, 2, "b"]]]) == ([-3.0], [1])


def _endpoint(handler) -> RuntimeEndpoint:
    ep = RuntimeEndpoint("http://test")
    ep.client = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    return ep


def _meta(prompt_tokens, entries=None, start=None):
    meta = {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "cached_tokens": 0}
    if entries is not None:
        meta["input_token_logprobs"] = entries
    if start is not None:
        meta["logprob_start_len"] = start
    return {"text": "", "output_ids": [], "meta_info": meta}


TAILS = {"Q: ": [[-0.1, 1]], "Q: yes": [[-0.1, 1], [-0.5, 2]], "Q: no": [[-0.1, 1], [-2.0, 3]]}


def test_endpoint_select_is_one_batched_request_from_the_common_prefix():
    bodies = []

    def handler(request):  # the prompts part after 7 common tokens
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200, json=[_meta(len(TAILS[t]) + 6, TAILS[t][1:], start=7) for t in bodies[-1]["text"]]
        )

    res = _endpoint(handler).select("Q: ", ["yes", "no"])
    assert (
        res.choice == "yes"
        and res.scores == pytest.approx([-0.5, -2.0])
        and res.num_tokens == [1, 1]
    )
    assert bodies == [
        {
            "text": ["Q: ", "Q: yes", "Q: no"],
            "sampling_params": {"max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_common_prefix": True,
        }
    ]


def test_endpoint_select_falls_back_to_a_pin_when_the_server_lacks_the_field():
    """An SGLang server refuses `logprob_start_common_prefix`: SGLang's pin + scoring batch,
    and the endpoint stops trying the field."""
    bodies = []

    def handler(request):
        body = json.loads(request.content)
        bodies.append(body)
        if body.get("logprob_start_common_prefix"):
            return httpx.Response(
                400,
                json={
                    "error": {
                        "message": "unexpected keyword argument 'logprob_start_common_prefix'"
                    }
                },
            )
        if isinstance(body["text"], str):
            return httpx.Response(200, json=_meta(10))
        return httpx.Response(200, json=[_meta(11, TAILS[t]) for t in body["text"]])

    ep = _endpoint(handler)
    for _ in range(2):
        res = ep.select("Q: ", ["yes", "no"])
        assert res.choice == "yes" and res.scores == pytest.approx([-0.5, -2.0])
    assert [b.get("logprob_start_common_prefix", False) for b in bodies] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert bodies[1] == {"text": "Q: ", "sampling_params": {"max_new_tokens": 0}}
    assert bodies[2]["text"] == ["Q: ", "Q: yes", "Q: no"]
    assert bodies[2]["logprob_start_len"] == 6 and bodies[2]["return_logprob"] is True


def test_endpoint_select_falls_back_when_the_server_ignores_the_field():
    """A server that drops the unknown field answers with logprobs from elsewhere (here: no
    start reported, the last prompt token only): detected, and the pin path is used."""
    bodies = []

    def handler(request):
        body = json.loads(request.content)
        bodies.append(body)
        if isinstance(body["text"], str):
            return httpx.Response(200, json=_meta(10))
        if body.get("logprob_start_common_prefix"):
            return httpx.Response(200, json=[_meta(11, TAILS[t][-1:]) for t in body["text"]])
        return httpx.Response(200, json=[_meta(11, TAILS[t]) for t in body["text"]])

    ep = _endpoint(handler)
    res = ep.select("Q: ", ["yes", "no"])
    assert res.choice == "yes" and res.scores == pytest.approx([-0.5, -2.0]) and len(bodies) == 3
    assert not ep._common_prefix_logprobs


def test_starts_at_common_prefix():
    metas = [
        {"prompt_tokens": 7, "logprob_start_len": 7},
        {"prompt_tokens": 8, "logprob_start_len": 7},
    ]
    assert starts_at_common_prefix(metas, [[], [[-1.0, 5]]])  # the prefix ends at the start
    metas = [{"prompt_tokens": 9, "logprob_start_len": 6}] * 2
    assert starts_at_common_prefix(metas, [[[-1.0, 5]], [[-1.0, 6]]])  # they differ at the start
    assert not starts_at_common_prefix(metas, [[[-1.0, 5]], [[-1.0, 5]]])  # the start is too early
    assert not starts_at_common_prefix([{"prompt_tokens": 9}] * 2, [[[-1.0, 5]], [[-1.0, 6]]])


def test_endpoint_select_other_errors_are_raised():
    def handler(request):
        return httpx.Response(400, json={"error": {"message": "the prompt has 9000 tokens"}})

    with pytest.raises(BackendError, match="9000 tokens"):
        _endpoint(handler).select("Q: ", ["yes", "no"])


def test_endpoint_errors_carry_the_server_message():
    def handler(request):
        return httpx.Response(
            400,
            json={
                "error": {
                    "message": "temperature must be >= 0",
                    "type": "x",
                    "param": None,
                    "code": None,
                }
            },
        )

    with pytest.raises(BackendError, match="temperature must be >= 0") as info:
        _endpoint(handler).generate("hi", {"temperature": -1})
    assert info.value.status == 400 and info.value.message == "temperature must be >= 0"


def test_endpoint_stream_deltas_and_error_chunk():
    chunks = [
        {"text": "He", "meta_info": {}},
        {"text": "Hello", "meta_info": {"completion_tokens": 2}},
    ]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    ep = _endpoint(lambda request: httpx.Response(200, text=sse))
    assert [d for d, _ in ep.generate_stream("x", {})] == ["He", "llo"]
    bad = 'data: {"error": {"message": "the runtime died"}}\n\ndata: [DONE]\n\n'
    with pytest.raises(BackendError, match="the runtime died"):
        list(_endpoint(lambda request: httpx.Response(200, text=bad)).generate_stream("x", {}))


def test_endpoint_sends_the_api_key():
    seen = []

    def handler(request):
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json=_meta(3))

    ep = RuntimeEndpoint("http://test", api_key="secret")
    ep.client = httpx.Client(
        base_url="http://test", headers=ep.client.headers, transport=httpx.MockTransport(handler)
    )
    ep.cache_prefix("abc")
    assert seen == ["Bearer secret"]


def test_runtime_server_args():
    args = server_args(
        "/m", 1234, {"api_key": None, "disable_radix_cache": True, "page_size": 16, "x": False}
    )
    assert args == [
        "--port",
        "1234",
        "--model-path",
        "/m",
        "--disable-radix-cache",
        "--page-size",
        "16",
    ]

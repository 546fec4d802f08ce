"""The DSL against a live server on the embedded model: every primitive, both role forms,
fork prefix sharing, select scores, run_batch, streaming and server errors."""

import json
import math
from pathlib import Path

import pytest

import radixgen as rg
from radixgen.frontend_lang import BackendError, RuntimeEndpoint

pytestmark = pytest.mark.model

SYSTEM = (
    "You are a careful assistant for a travel agency. You answer questions about cities, "
    "countries, flights and hotels. Keep every answer short, factual and polite, and never "
    "invent prices or schedules you do not know."
)


def _render_whole_chat(backend, messages):
    """The model's Jinja template over the whole conversation at once (as HF renders it)."""
    from radixgen.frontend_lang.chat_template import _renderer

    config = json.loads(
        (Path(backend.get_model_info()["model_path"]) / "tokenizer_config.json").read_text()
    )
    return _renderer(config["chat_template"], config.get("bos_token") or "")(messages, False)


def test_roles_render_like_the_model_chat_template(backend):
    @rg.function
    def chat(s, question):
        s += rg.system("Answer in one short sentence.")
        s += rg.user(question)
        s += rg.assistant(rg.gen("first", max_tokens=4))
        with s.user():
            s += "And of Germany?"
        with s.assistant():
            s += rg.gen("second", max_tokens=4)

    state = chat.run(question="What is the capital of France?", backend=backend, temperature=0)
    messages = state.messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert messages[2]["content"] == state["first"] and messages[4]["content"] == state["second"]
    assert state.text() == _render_whole_chat(backend, messages)
    first_prompt = state.get_meta_info("first")["prompt_tokens"]
    assert (
        state.get_meta_info("second")["cached_tokens"] >= first_prompt - 1
    )  # the first turn was cached


def test_gen_arguments_reach_the_server(backend):
    @rg.function
    def prog(s):
        s += "Count: 1, 2, 3," + rg.gen("rest", max_tokens=6, stop=",", temperature=0, top_k=5)

    state = prog.run(backend=backend)
    meta = state.get_meta_info("rest")
    assert meta["completion_tokens"] <= 6 and "," not in state["rest"]
    assert state.text() == "Count: 1, 2, 3," + state["rest"]


def test_fork_branches_hit_the_pinned_prefix(backend):
    @rg.function
    def ideas(s):
        s += rg.system(SYSTEM)
        s += rg.user("Suggest a city to visit.")
        s += rg.assistant_begin()
        forks = s.fork(3)
        for i, f in enumerate(forks):
            f += f"Option {i + 1}:" + rg.gen("idea", max_tokens=3, temperature=0.8, seed=i)
        forks.join()
        s.forks = forks

    state = ideas.run(backend=backend)
    assert len(state["idea"]) == 3
    prefix_tokens = state.forks.prefix_meta["prompt_tokens"]
    for branch in state.forks:
        meta = branch.get_meta_info("idea")
        assert meta["cached_tokens"] >= prefix_tokens - 2, (meta, prefix_tokens)


def test_select_returns_a_choice_with_its_scores(backend):
    @rg.function
    def pick(s):
        s += "The capital of France is" + rg.select("city", [" Paris", " London", " Berlin"])

    state = pick.run(backend=backend)
    meta = state.get_meta_info("city")
    assert state["city"] == " Paris"
    assert len(meta["scores"]) == 3 and all(math.isfinite(x) and x < 0 for x in meta["scores"])
    assert meta["num_tokens"] == [1, 1, 1]
    # a prefix ending in a space: "is " + "Paris" tokenizes as "is" + " Paris", and the scores
    # are those of the same tokens
    merged = backend.select("The capital of France is ", ["Paris", "London", "Berlin"])
    assert merged.choice == "Paris" and merged.scores == pytest.approx(meta["scores"], abs=2e-3)


def test_select_scores_equal_the_model_logprobs(backend):
    prefix = "The capital of France is"
    greedy = backend.generate(
        prefix, {"max_new_tokens": 1, "temperature": 0, "return_logprob": True}
    )
    token_text, (logprob, _) = greedy["text"], greedy["meta_info"]["output_token_logprobs"][0]
    res = backend.select(prefix, [token_text, " zebra"])
    assert res.choice == token_text
    assert res.unnormalized_logprobs[0] == pytest.approx(logprob, abs=2e-3)


def test_one_request_select_scores_like_the_pinned_two_request_select(backend):
    """The common-prefix scoring request gives SGLang's pin + scoring result."""
    prefix = "Review: the hotel was dirty and loud.\nSentiment: "
    choices = ["positive", "negative", "neutral"]
    one = backend.select(prefix, choices)
    two = RuntimeEndpoint(backend.url)
    two._common_prefix_logprobs = False  # the path taken against a server without the field
    ref = two.select(prefix, choices)
    assert one.choice == ref.choice and one.num_tokens == ref.num_tokens
    assert one.unnormalized_logprobs == pytest.approx(ref.unnormalized_logprobs, abs=2e-3)


def test_run_batch_of_32_programs_shares_the_system_prompt(backend):
    @rg.function
    def classify(s, item):
        s += rg.system(SYSTEM)
        s += rg.user(f"Is '{item}' a city? Answer yes or no.")
        s += rg.assistant(rg.gen("answer", max_tokens=2, temperature=0))

    items = [f"Place number {i}" for i in range(32)]
    states = classify.run_batch([{"item": x} for x in items], backend=backend, progress_bar=True)
    assert [s.error() for s in states] == [None] * 32
    metas = [s.get_meta_info("answer") for s in states]
    cached = sum(m["cached_tokens"] for m in metas)
    assert cached > 0.6 * sum(m["prompt_tokens"] for m in metas)


def test_server_errors_become_exceptions_and_stay_per_program(backend):
    @rg.function
    def prog(s, temp):  # (`temperature` itself would be run()'s default sampling parameter)
        s += "Hello" + rg.gen("x", max_tokens=2, temperature=temp)

    with pytest.raises(BackendError, match="temperature must be >= 0") as info:
        prog.run(temp=-1.0, backend=backend)
    assert info.value.status == 400
    states = prog.run_batch([{"temp": 0.0}, {"temp": -1.0}, {"temp": 0.0}], backend=backend)
    assert states[0].error() is None and states[2].error() is None
    assert "temperature must be >= 0" in str(states[1].error())


def test_constraints_pass_through_and_bad_ones_raise(backend):
    @rg.function
    def prog(s, regex):
        s += "Digits: " + rg.gen("d", max_tokens=4, regex=regex)

    assert prog.run(regex="[0-9]+", backend=backend)["d"].isdigit()
    with pytest.raises(ValueError, match="invalid regex"):  # refused before anything is sent
        prog.run(regex="[0-9", backend=backend)
    with pytest.raises(BackendError, match="regex") as info:  # the server's own check
        backend.generate("Digits: ", {"max_new_tokens": 4, "regex": "[0-9"})
    assert info.value.status == 400


def test_stream_text_iter(backend):
    @rg.function
    def prog(s):
        s += rg.user("Say hello.")
        s += rg.assistant(rg.gen("reply", max_tokens=4, temperature=0))

    state = prog.run(stream=True, backend=backend)
    chunks = list(state.text_iter())
    assert len(chunks) >= 3 and "".join(chunks) == state.text()
    assert state["reply"] and state["reply"] in state.text()

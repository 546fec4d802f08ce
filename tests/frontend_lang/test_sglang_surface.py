"""SGLang's public language surface, name by name, against the fake backend (no server)."""

import asyncio
import inspect
import json
import re

import pytest

import radixgen.frontend_lang as sgl
from radixgen.frontend_lang.api import DTYPE_REGEX
from radixgen.frontend_lang.choices import GreedyTokenSelection
from tests.frontend_lang.fake_backend import FakeBackend

SGLANG_NAMES = (
    "function",
    "Runtime",
    "set_default_backend",
    "flush_cache",
    "get_server_info",
    "gen",
    "gen_int",
    "gen_string",
    "image",
    "video",
    "select",
    "system",
    "user",
    "assistant",
    "system_begin",
    "system_end",
    "user_begin",
    "user_end",
    "assistant_begin",
    "assistant_end",
    "separate_reasoning",
    "global_config",
    "RuntimeEndpoint",
    "OpenAI",
    "token_length_normalized",
    "greedy_token_selection",
    "unconditional_likelihood_normalized",
    "REGEX_INT",
    "REGEX_FLOAT",
    "REGEX_BOOL",
    "REGEX_STR",
)


def test_every_sglang_name_exists():
    missing = [n for n in SGLANG_NAMES if not hasattr(sgl, n)]
    assert missing == []


def test_gen_positional_order_is_sglangs():
    params = list(inspect.signature(sgl.gen).parameters)
    assert params[:8] == [
        "name",
        "max_tokens",
        "min_tokens",
        "n",
        "stop",
        "stop_token_ids",
        "stop_regex",
        "temperature",
    ]
    g = sgl.gen("x", 10, 3, None, "\n")
    assert g.sampling_params == {"max_new_tokens": 10, "min_new_tokens": 3, "stop": ["\n"]}


def test_gen_sends_sglang_fields_and_logprob_fields_at_the_request_level():
    backend = FakeBackend(reply=lambda t, p: "ok")

    @sgl.function
    def prog(s):
        s += sgl.gen(
            "a",
            min_tokens=4,
            stop_regex=r"\d",
            return_logprob=True,
            top_logprobs_num=2,
            logprob_start_len=0,
            return_text_in_logprobs=True,
        )

    state = prog.run(backend=backend)
    assert state["a"] == "ok"
    assert backend.calls[0][2] == {
        "min_new_tokens": 4,
        "stop_regex": [r"\d"],
        "return_logprob": True,
        "top_logprobs_num": 2,
        "logprob_start_len": 0,
        "return_text_in_logprobs": True,
    }


@pytest.mark.parametrize(
    "dtype,kind", [(int, "int"), (float, "float"), (bool, "bool"), (str, "str"), ("int", "int")]
)
def test_dtype_gen_is_a_regex_constraint_that_parses(dtype, kind):
    backend = FakeBackend(reply=lambda t, p: "1")

    @sgl.function
    def prog(s):
        s += "A: " + sgl.gen("v", dtype=dtype, stop="\n")

    prog.run(backend=backend)
    params = backend.calls[0][2]
    assert params["regex"] == DTYPE_REGEX[kind]
    assert ("stop" in params) == (kind == "str")  # a stop string could cut a number short
    samples = {"int": "-42", "float": "3.25", "bool": "True", "str": '"a \\"b\\" c"'}
    assert re.fullmatch(DTYPE_REGEX[kind], samples[kind])
    parse = {
        "int": int,
        "float": float,
        "bool": lambda v: v in ("True", "False"),
        "str": json.loads,
    }
    assert parse[kind](samples[kind]) is not None


def test_gen_int_and_gen_string_and_bad_dtype():
    assert sgl.gen_int("n").sampling_params["regex"] == DTYPE_REGEX["int"]
    assert sgl.gen_string("s", min_tokens=2).sampling_params["min_new_tokens"] == 2
    assert list(inspect.signature(sgl.gen_int).parameters)[:3] == ["name", "max_tokens", "n"]
    with pytest.raises(ValueError, match="dtype"):
        sgl.gen(dtype=list)
    with pytest.raises(ValueError, match="not both"):
        sgl.gen(dtype=int, regex="[0-9]")
    with pytest.raises(ValueError, match="invalid regex"):
        sgl.gen(regex="(")


def test_regex_constants_match_what_they_name():
    assert re.fullmatch(sgl.REGEX_INT, "365\n") and re.fullmatch(sgl.REGEX_FLOAT, "48.85 ")
    assert re.fullmatch(sgl.REGEX_BOOL, "False") and re.fullmatch(sgl.REGEX_STR, '"Paris"')


def test_gen_with_choices_is_a_scored_select():
    g = sgl.gen("c", choices=["a", "bb"], choices_method=sgl.greedy_token_selection)
    assert (
        isinstance(g, sgl.select("x", ["a"]).__class__) and g.method is sgl.greedy_token_selection
    )


def _reference_greedy(rows):
    width = max(len(r) for r in rows)
    padded = [r + [sum(r) / len(r)] * (width - len(r)) for r in rows]
    alive = list(range(len(rows)))
    for j in range(width):
        best = max(padded[i][j] for i in alive)
        alive = [i for i in alive if padded[i][j] == best]
        if len(alive) == 1:
            break
    return alive[0]


LOGPROBS = {"Paris": [-0.05, -3.0], "Par": [-0.1], "London": [-2.0, -0.01, -0.01]}
UNCOND = {"Paris": [-5.0, -4.0], "Par": [-0.05], "London": [-12.0, -0.5, -0.5]}


@pytest.mark.parametrize(
    "method",
    ["token_length_normalized", "greedy_token_selection", "unconditional_likelihood_normalized"],
)
def test_choice_methods_pick_sglangs_choice_on_the_same_logprobs(method):
    backend = FakeBackend()
    backend.logprobs, backend.unconditional = LOGPROBS, UNCOND
    choices = list(LOGPROBS)

    @sgl.function
    def prog(s):
        s += "City: " + sgl.select("c", choices, choices_method=getattr(sgl, method))

    state = prog.run(backend=backend)
    means = [sum(v) / len(v) for v in LOGPROBS.values()]
    reference = {
        "token_length_normalized": means.index(max(means)),
        "greedy_token_selection": _reference_greedy(list(LOGPROBS.values())),
        "unconditional_likelihood_normalized": max(
            range(3),
            key=lambda i: (
                sum(a - b for a, b in zip(LOGPROBS[choices[i]], UNCOND[choices[i]]))
                / len(LOGPROBS[choices[i]])
            ),
        ),
    }[method]
    assert state["c"] == choices[reference]
    assert backend.calls[0][2]["unconditional"] == (method == "unconditional_likelihood_normalized")
    assert state.get_meta_info("c")["choices_method"] == method


def test_the_methods_disagree_on_these_logprobs():
    picks = set()
    for method in (
        sgl.token_length_normalized,
        sgl.greedy_token_selection,
        sgl.unconditional_likelihood_normalized,
    ):
        entries = [[[lp, 0] for lp in v] for v in LOGPROBS.values()]
        uncond = [[[lp, 0] for lp in v] for v in UNCOND.values()]
        means = [sum(v) / len(v) for v in LOGPROBS.values()]
        picks.add(
            method(
                choices=list(LOGPROBS),
                normalized_prompt_logprobs=means,
                input_token_logprobs=entries,
                output_token_logprobs=[[]] * 3,
                unconditional_token_logprobs=uncond,
            ).decision
        )
    assert len(picks) == 3
    assert GreedyTokenSelection.logprob_matrix([[[-1.0, 0]], [[-1.0, 0], [-3.0, 1]]]) == [
        [-1.0, -1.0],
        [-1.0, -3.0],
    ]


def test_state_methods_var_scope_setitem_copy_error_and_meta():
    backend = FakeBackend(reply=lambda t, p: "X")

    @sgl.function
    def prog(s):
        with s.var_scope("block"):
            s += "{" + sgl.gen("a") + "}"
        s["mine"] = 5
        with s.copy() as c:
            c += sgl.gen("inner")
        s.user("hello")

    state = prog.run(backend=backend)
    assert state["block"] == "{X}" and state["mine"] == 5 and state["inner"] == ["X"]
    assert state.get_meta_info("block") is None and state.get_meta_info("a")["prompt_tokens"] == 1
    assert state.error() is None and "mine" in state
    assert state.messages()[-1] == {"role": "user", "content": "hello"}


def test_empty_role_call_is_an_empty_message():
    @sgl.function
    def prog(s):
        s += sgl.user()
        s += sgl.assistant("hi")

    state = prog.run(backend=FakeBackend())
    assert state.messages() == [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "hi"},
    ]


def test_forks_take_a_lambda_an_expression_or_a_list_and_join_both_spellings():
    backend = FakeBackend(reply=lambda t, p: "g")

    @sgl.function
    def prog(s):
        s += "The shared prefix of every fork in this program. "
        forks = s.fork(3)
        forks += lambda i: f"[{i}]"
        forks += ["a", "b", "c"]
        forks += sgl.gen("v")
        forks.join("concate_and_append")
        more = s.fork()
        more += "!"
        more.join("concat_and_append")

    state = prog.run(backend=backend)
    assert state.text().endswith("[0]ag[1]bg[2]cg!")
    with pytest.raises(ValueError, match="3 forks"):
        sgl.ProgramState(backend).fork(3).__iadd__(["a"])


def test_text_iter_without_stream_and_async_iter_with_logprobs():
    backend = FakeBackend(reply=lambda t, p: "abc")

    @sgl.function
    def prog(s):
        s += "Q: " + sgl.gen("a", return_logprob=True)

    state = prog.run(backend=backend)
    assert list(state.text_iter()) == ["Q: abc"] and list(state.text_iter("a")) == ["abc"]

    async def collect():
        streamed = prog.run(backend=backend, stream=True)
        return [item async for item in streamed.text_async_iter("a", return_meta_data=True)]

    items = asyncio.run(collect())
    assert "".join(t for t, _ in items) == "abc"
    assert [m["output_token_logprobs"] for _, m in items] == [[[-0.5, 1]], [[-0.5, 2]], [[-0.5, 3]]]


def test_image_and_video_fail_naming_the_missing_vision_support():
    @sgl.function
    def prog(s):
        s += sgl.user(sgl.image("cat.png") + "What is this?")

    with pytest.raises(NotImplementedError, match="vision-language model"):
        prog.run(backend=FakeBackend())
    assert sgl.video("clip.mp4", 8).num_frames == 8


def test_separate_reasoning_moves_the_thinking_into_its_own_variable():
    backend = FakeBackend(reply=lambda t, p: "<think>count the letters</think>Five.")

    @sgl.function
    def prog(s):
        s += sgl.assistant(sgl.separate_reasoning(sgl.gen("answer"), model_type="deepseek-r1"))

    state = prog.run(backend=backend)
    assert state["answer"] == "Five." and state["answer_reasoning_content"] == "count the letters"
    assert "think" not in state.text()


def test_run_options_n_and_logprobs_reach_each_gen():
    backend = FakeBackend(reply=lambda t, p: "z")

    @sgl.function
    def prog(s):
        s += sgl.gen("a") + sgl.gen("b", n=1)

    state = prog.run(backend=backend, n=2, return_logprob=True, min_new_tokens=1)
    assert state["a"] == ["z", "z"] and state["b"] == "z"
    assert backend.calls[0][1] == ["", ""] and backend.calls[0][2]["return_logprob"] is True
    assert backend.calls[0][2]["min_new_tokens"] == 1
    with pytest.raises(TypeError, match="unknown run option"):
        prog.run_batch([{}], backend=backend, tempreature=0)


def test_run_batch_takes_tuples_and_generator_style():
    backend = FakeBackend(reply=lambda t, p: t[-2])

    @sgl.function
    def prog(s, a, b="-"):
        s += a + b + " " + sgl.gen("o")

    states = prog.run_batch([("x", "1"), ("y",), {"a": "z", "b": "3"}], backend=backend)
    assert [s["o"] for s in states] == ["1", "-", "3"]
    gen = prog.run_batch([("q",)], backend=backend, generator_style=True, num_threads=1)
    assert not isinstance(gen, list) and [s["o"] for s in gen] == ["-"]
    with pytest.raises(TypeError, match="1 to 2 arguments"):
        prog.run_batch([("a", "b", "c")], backend=backend)


def test_trace_and_cache():
    backend = FakeBackend()

    @sgl.function
    def prog(s):
        s += "A long fixed preamble that every run of the program starts with. "
        s += "Name: " + sgl.gen("name") + " Pick: " + sgl.select("p", ["x", "y"])

    traced = prog.trace()
    assert traced.text().endswith("Name: {name} Pick: x") and traced["name"] == "{name}"
    assert prog.cache(backend).startswith("A long fixed preamble")
    assert [c[0] for c in backend.calls] == ["cache_prefix"]


def test_module_helpers_use_the_default_backend():
    class WithCache(FakeBackend):
        def flush_cache(self):
            return True

        def get_server_info(self):
            return {"version": "x"}

    sgl.set_default_backend(None)
    assert sgl.flush_cache() is False and sgl.get_server_info() is None
    sgl.set_default_backend(WithCache())
    try:
        assert sgl.global_config.default_backend is not None
        assert sgl.flush_cache() is True and sgl.get_server_info() == {"version": "x"}
    finally:
        sgl.set_default_backend(None)
    with pytest.raises(ValueError, match="num_api_spec_tokens"):
        sgl.function(num_api_spec_tokens=0)(lambda s: None)

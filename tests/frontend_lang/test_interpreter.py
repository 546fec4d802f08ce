"""The interpreter against a fake backend: text, variables, roles, fork/join, select, run,
run_batch, streaming and errors (no server)."""

import json
import subprocess
import sys
import threading

import pytest

import radixgen as rg
from radixgen.frontend_lang import BackendError
from radixgen.frontend_lang.batch import shared_prefix
from tests.frontend_lang.fake_backend import FakeBackend


def test_text_gen_and_sampling_params():
    backend = FakeBackend(reply=lambda text, params: "Paris")

    @rg.function
    def prog(s, city):
        s += (
            "Q: capital of "
            + city
            + "? A: "
            + rg.gen("a", max_tokens=5, stop="\n", temperature=0.5, json_schema={"type": "string"})
        )

    state = prog.run(city="France", backend=backend, temperature=0, top_p=0.9)
    assert state["a"] == "Paris"
    assert state.text() == "Q: capital of France? A: Paris"
    kind, text, params = backend.calls[0]
    assert (kind, text) == ("generate", "Q: capital of France? A: ")
    assert params == {
        "max_new_tokens": 5,
        "stop": ["\n"],
        "temperature": 0.5,
        "top_p": 0.9,
        "json_schema": json.dumps({"type": "string"}),
    }
    assert state.get_meta_info("a")["prompt_tokens"] == len(text)


def test_both_role_forms_render_the_same_chat():
    @rg.function
    def call_form(s):
        s += rg.system("Be brief.")
        s += rg.user("Hi")
        s += rg.assistant(rg.gen("reply"))

    @rg.function
    def block_form(s):
        with s.system():
            s += "Be brief."
        with s.user():
            s += "Hi"
        with s.assistant():
            s += rg.gen("reply")

    a = call_form.run(backend=FakeBackend(reply=lambda t, p: "Hello!"))
    b = block_form.run(backend=FakeBackend(reply=lambda t, p: "Hello!"))
    assert (
        a.text()
        == b.text()
        == (
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
        )
    )
    assert (
        a.messages()
        == b.messages()
        == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
        ]
    )


def test_default_system_prompt_and_nesting_error():
    from radixgen.frontend_lang.chat_template import REGISTRY, ChatTemplate

    chatml = REGISTRY["chatml"]
    template = ChatTemplate("t", chatml.role_prefix, chatml.role_suffix, default_system="<sys>")

    @rg.function
    def prog(s):
        s += rg.user("Hi")

    assert (
        prog.run(backend=FakeBackend(template=template))
        .text()
        .startswith("<sys><|im_start|>user\n")
    )

    @rg.function
    def nested(s):
        with s.user():
            s += rg.assistant("no")

    with pytest.raises(RuntimeError, match="inside the open user message"):
        nested.run(backend=FakeBackend())


def test_fork_pins_the_prefix_then_branches_run_in_parallel():
    backend = FakeBackend(reply=lambda t, p: t[-1], delay=0.2)

    @rg.function
    def prog(s):
        s += "shared prefix "
        forks = s.fork(3)
        for i, f in enumerate(forks):
            f += str(i) + rg.gen("x")
        forks.join()
        s += "done"

    state = prog.run(backend=backend)
    assert backend.calls[0] == ("cache_prefix", "shared prefix ", {"max_new_tokens": 0})
    assert sorted(c[1] for c in backend.calls[1:]) == [
        "shared prefix 0",
        "shared prefix 1",
        "shared prefix 2",
    ]
    assert backend.max_active == 3  # the three branches were in flight together
    assert state["x"] == ["0", "1", "2"]
    assert state.text() == "shared prefix done"


def test_join_concat_and_append():
    @rg.function
    def prog(s):
        s += "A"
        forks = s.fork(2)
        forks[0] += "b"
        forks[1] += "c"
        forks.join("concat_and_append")

    assert prog.run(backend=FakeBackend()).text() == "Abc"


def test_select_and_constraint_select():
    backend = FakeBackend(reply=lambda t, p: p["choices"][1])

    @rg.function
    def prog(s):
        s += "Pick: " + rg.select("a", ["long one", "short"])
        s += " / " + rg.select("b", ["x", "y"], choices_method="constraint")

    state = prog.run(backend=backend)
    assert state["a"] == "short" and state["b"] == "y"
    assert state.get_meta_info("a")["scores"] == [-8.0, -5.0]
    assert state.text() == "Pick: short / y"
    assert backend.calls[1][2]["choices"] == ["x", "y"] and backend.calls[1][2]["temperature"] == 0
    with pytest.raises(ValueError):
        rg.select("c", [])
    with pytest.raises(ValueError, match="temperature"):
        rg.select("c", ["a"], 0.5)


def test_gen_n_samples_and_nested_programs_and_bind():
    @rg.function
    def inner(s, word):
        s += word + rg.gen("w")

    @rg.function()
    def outer(s, word):
        inner(s, word)
        s += rg.gen("many", n=3)
        return "returned"

    state = outer.bind(word="go ").run(backend=FakeBackend(reply=lambda t, p: "!"))
    assert state["w"] == "!" and state["many"] == ["!", "!", "!"]
    assert state.ret_value == "returned"
    assert state.text() == "go !!"


def test_run_raises_the_server_message():
    @rg.function
    def prog(s):
        s += "bad" + rg.gen("x")

    with pytest.raises(BackendError, match="refused: bad"):
        prog.run(backend=FakeBackend(fail_on="bad"))


def test_run_batch_keeps_order_isolates_errors_and_precaches():
    backend = FakeBackend(reply=lambda t, p: t.split()[-1].upper(), fail_on="poison")
    shared = "You are a classifier of short words; answer with the word in capitals. Word: "

    @rg.function
    def prog(s, word):
        s += shared + word + " " + rg.gen("out")

    words = [f"w{i}" for i in range(10)] + ["poison"]
    states = prog.run_batch([{"word": w} for w in words], num_threads=4, backend=backend)
    assert [s.error() is None for s in states] == [True] * 10 + [False]
    assert isinstance(states[-1].error(), BackendError)
    assert [s["out"] for s in states[:10]] == [w.upper() for w in words[:10]]
    assert backend.calls[0] == ("cache_prefix", shared, {"max_new_tokens": 0})
    assert sum(c[0] == "cache_prefix" for c in backend.calls) == 1


def test_shared_prefix_cuts_at_a_boundary():
    assert shared_prefix(["x" * 40 + " alpha", "x" * 40 + " alps"]) == "x" * 40 + " "
    assert shared_prefix(["short a", "short b"]) == ""
    assert shared_prefix(["only one text that is long enough to count"]) == ""


def test_stream_text_iter():
    @rg.function
    def prog(s):
        s += "Say: " + rg.gen("x")
        s += " end"

    state = prog.run(stream=True, backend=FakeBackend(reply=lambda t, p: "abc"))
    assert "".join(state.text_iter()) == "Say: abc end"
    assert list(state.text_iter("x")) == []  # already consumed; the iterator ends
    state2 = prog.run(stream=True, backend=FakeBackend(reply=lambda t, p: "abc"))
    assert list(state2.text_iter("x")) == ["a", "b", "c"]
    assert state2["x"] == "abc"


def test_stream_raises_after_the_last_chunk():
    @rg.function
    def prog(s):
        s += "bad " + rg.gen("x")

    state = prog.run(stream=True, backend=FakeBackend(fail_on="bad"))
    with pytest.raises(BackendError):
        list(state.text_iter())
    assert isinstance(state.error(), BackendError)


def test_default_backend_and_unknown_variable():
    rg.set_default_backend(FakeBackend(reply=lambda t, p: "ok"))

    @rg.function
    def prog(s):
        s += rg.gen("x")

    state = prog.run()
    assert state["x"] == "ok"
    with pytest.raises(KeyError, match="no variable 'y'"):
        state["y"]


def test_states_are_thread_safe_per_program():
    backend = FakeBackend(reply=lambda t, p: t[-1])

    @rg.function
    def prog(s, i):
        for k in range(5):
            s += str(i) + rg.gen()

    results = {}

    def work(i):
        results[i] = prog.run(i=i, backend=backend).text()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i] == str(i) * 10 for i in range(8))


def test_import_radixgen_stays_light():
    code = (
        "import sys, radixgen; radixgen.function; radixgen.RuntimeEndpoint;"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

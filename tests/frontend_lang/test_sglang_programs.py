"""Ports of the shapes of SGLang's own test programs (test_programs.py), written against
`radixgen.frontend_lang as sgl` with SGLang's calls unchanged. The fake backend answers, so
these check the API (every program runs, variables exist with the right types), not a model."""

import json
import re

import pytest

import radixgen.frontend_lang as sgl
from tests.frontend_lang.fake_backend import FakeBackend


def _reply(text, params):
    if params.get("regex"):
        return (
            '"Paris"'
            if params["regex"].startswith(('"', '\\"'))
            else ("True" if "True" in params["regex"] else "24")
        )
    return " Search" if "Action" in text[-12:] else " 42"


@pytest.fixture(autouse=True)
def default_backend():
    sgl.set_default_backend(FakeBackend(reply=_reply))
    yield
    sgl.set_default_backend(None)


def few_shot_qa():
    @sgl.function
    def qa(s, question):
        s += "Q: What is the capital of France?\nA: Paris\nQ: " + question + "\n"
        s += "A:" + sgl.gen("answer", stop="\n", temperature=0)

    assert isinstance(qa.run(question="US?")["answer"], str)
    rets = qa.run_batch([{"question": "Japan?"}, {"question": "UK?"}], temperature=0.1)
    assert all(isinstance(r["answer"], str) for r in rets)


def mt_bench():
    @sgl.function
    def answer(s, question_1, question_2):
        s += sgl.system("You are a helpful assistant.")
        s += sgl.user(question_1)
        s += sgl.assistant(sgl.gen("answer_1"))
        with s.user():
            s += question_2
        with s.assistant():
            s += sgl.gen("answer_2")

    assert (
        len(
            answer.run(
                question_1="a", question_2="b", temperature=0.7, max_new_tokens=64
            ).messages()
        )
        == 5
    )


def select():
    @sgl.function
    def true_or_false(s, statement):
        s += (
            "Statement: "
            + statement
            + "\nAnswer:"
            + sgl.select("answer", ["True", "False", "Unknown"])
        )

    assert true_or_false.run(statement="x")["answer"] in ["True", "False", "Unknown"]


def decode_int():
    @sgl.function
    def prog(s):
        s += "Hours in a day: " + sgl.gen_int("hours") + "\n"

    assert int(prog.run(temperature=0.1)["hours"]) == 24


def decode_json_regex():
    from radixgen.frontend_lang import REGEX_FLOAT, REGEX_INT, REGEX_STR

    @sgl.function
    def prog(s):
        with s.var_scope("json_output"):
            s += "{\n" + '  "name": ' + sgl.gen(regex=REGEX_STR) + ",\n"
            s += '  "population": ' + sgl.gen(regex=REGEX_INT, stop=[" ", "\n"]) + ",\n"
            s += '  "latitude": ' + sgl.gen(regex=REGEX_FLOAT, stop=[" ", "\n"]) + "\n}"

    assert isinstance(json.loads(prog.run(temperature=0.0)["json_output"])["population"], int)


def decode_json():
    @sgl.function
    def prog(s):
        with s.var_scope("json_output"):
            s += "{\n" + '  "name": ' + sgl.gen_string() + ",\n"
            s += '  "area": ' + sgl.gen(dtype=int) + ",\n" + '  "tz": ' + sgl.gen(dtype=str) + "\n}"

    obj = json.loads(prog.run(max_new_tokens=64)["json_output"])
    assert isinstance(obj["name"], str) and isinstance(obj["area"], int)


def expert_answer():
    @sgl.function
    def prog(s, question):
        s += "Question: " + question + "\nExpert:" + sgl.gen("expert", stop=[".", "\n"]) + ".\n"
        s += (
            "For example," + s["expert"] + " would answer that " + sgl.gen("answer", stop=".") + "."
        )

    assert "would answer" in prog.run(question="q", temperature=0.1).text()


def tool_use():
    @sgl.function
    def prog(s, lhs, rhs):
        s += f"What is {lhs} * {rhs}? calculate(" + sgl.gen("expression", stop=")") + ") = "
        with s.var_scope("answer"):
            s += str(len(s["expression"]))

    assert int(prog(lhs=2, rhs=3, temperature=0)["answer"]) == 3


def react():
    @sgl.function
    def prog(s, question):
        s += "Question: " + question + "\n"
        for i in range(1, 3):
            s += f"Thought {i}:" + sgl.gen(stop=[".", "\n"]) + ".\n"
            s += f"Action {i}: " + sgl.select(f"action_{i}", ["Search", "Finish"])
            if s[f"action_{i}"] == "Search":
                s += " [" + sgl.gen(stop="]") + "].\n"
            else:
                s += " [" + sgl.gen("answer", stop="]") + "].\n"
                break

    assert prog.run(question="q", temperature=0.1)["action_1"] in ("Search", "Finish")


def parallel_decoding():
    @sgl.function
    def prog(s, topic):
        s += "Tips for " + topic + ":\n"
        forks = s.fork(3)
        for i in range(3):
            forks[i] += f"Tip {i + 1}:"
            forks[i] += sgl.gen("detailed_tip", 64, stop=["\n\n"])
        forks.join()
        for i in range(3):
            s += f"Tip {i + 1}:" + forks[i]["detailed_tip"] + "\n"
        s += "\nIn summary," + sgl.gen("summary", max_tokens=512)

    ret = prog.run(topic="blogs", temperature=0.3)
    assert isinstance(ret["summary"], str) and len(ret["detailed_tip"]) == 3


def parallel_encoding():
    @sgl.function
    def prog(s, question, context_0, context_1):
        contexts = [context_0, context_1]
        forks = s.fork(len(contexts))
        forks += lambda i: f"Statement {i}: " + contexts[i] + "\n"
        forks.join(mode="concate_and_append")
        s += "Question: " + question + "\nASSISTANT:" + sgl.gen("answer", max_tokens=64)

    ret = prog.run(question="q", context_0="a", context_1="b", temperature=0)
    assert "Statement 1: b" in ret.text()


def stream():
    @sgl.function
    def qa(s, question):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen("answer"))

    assert "".join(qa(question="q", stream=True).text_iter()) and "".join(
        qa(question="q", stream=True).text_iter("answer")
    )


def regex():
    pattern = r"((25[0-5]|2[0-4]\d|[01]?\d\d?).){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)"

    @sgl.function
    def prog(s):
        s += "A: " + sgl.gen("answer", temperature=0, regex=pattern)

    assert prog.run().get_meta_info("answer") is not None


def dtype_gen():
    @sgl.function
    def prog(s):
        s += (
            "A: " + sgl.gen("int_res", dtype=int) + "\nA: " + sgl.gen("bool_res", dtype=bool) + "\n"
        )

    state = prog.run()
    state["int_res"] = int(state["int_res"])
    assert state["int_res"] == 24 and state["bool_res"] == "True"


def completion_speculative():
    @sgl.function(num_api_spec_tokens=64)
    def spec(s):
        s += "Name:" + sgl.gen("name", stop="\n") + "\nJob:" + sgl.gen("job", stop="\n") + "\n"

    state = spec.run()
    assert isinstance(state["name"], str) and isinstance(state["job"], str)


def gen_min_new_tokens():
    @sgl.function
    def convo(s):
        s += sgl.user("Capital of the US?")
        s += sgl.assistant(sgl.gen("answer", min_tokens=64, max_tokens=128))

    assert convo.run().get_meta_info("answer") is not None


PROGRAMS = [
    few_shot_qa,
    mt_bench,
    select,
    decode_int,
    decode_json_regex,
    decode_json,
    expert_answer,
    tool_use,
    react,
    parallel_decoding,
    parallel_encoding,
    stream,
    regex,
    dtype_gen,
    completion_speculative,
    gen_min_new_tokens,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_sglang_program_runs_unchanged(program):
    program()

"""Grammar-constrained decoding end to end on the embedded model: every constrained output
parses and validates (JSON Schema via `jsonschema`, regex fullmatch, choices, SQL through its
Lark grammar), greedy output is the same with jump-forward on and off, OpenAI response_format
and tool calls work through the official client, and a bad constraint only fails its own
request."""

from __future__ import annotations

import concurrent.futures
import json
import re

import pytest

from tests.grammar.schemas import SUPPORTED

pytestmark = pytest.mark.model
jsonschema = pytest.importorskip("jsonschema")
openai = pytest.importorskip("openai")

PROMPT = "<|im_start|>user\nGive an example answer as JSON.<|im_end|>\n<|im_start|>assistant\n"
GREEDY = {"temperature": 0, "max_new_tokens": 160}


def _generate(server, texts, params):
    with server.client(timeout=600) as c:
        resp = c.post("/generate", json={"text": texts, "sampling_params": params})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_json_schemas_always_validate(embedded_server):
    """One batched request over every supported schema of the grammar tests (> 30). A 135M model
    can loop inside an open-ended value (additionalProperties, a free string) until
    max_new_tokens; its matcher then closes the value in the last tokens, so every output
    validates, those cut at the limit too."""
    names = sorted(SUPPORTED)
    assert len(names) >= 30
    outs = _generate(
        embedded_server,
        [PROMPT] * len(names),
        [{**GREEDY, "json_schema": json.dumps(SUPPORTED[n])} for n in names],
    )
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER  # RFC 3339 "time" (with its offset)
    for name, out in zip(names, outs):
        jsonschema.validate(json.loads(out["text"]), SUPPORTED[name], format_checker=checker)
    at_limit = [o for o in outs if o["meta_info"]["finish_reason"]["type"] == "length"]
    assert all(len(o["output_ids"]) <= GREEDY["max_new_tokens"] for o in at_limit)


def test_outputs_cut_short_still_validate(embedded_server):
    """Limits far below what the model would write: the JSON closes within each of them."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "tags"],
    }
    prompt = PROMPT.replace(
        "Give an example answer as JSON.",
        "Describe ten programming languages as JSON, with many tags for each.",
    )
    free = _generate(embedded_server, prompt, {**GREEDY, "json_schema": json.dumps(schema)})
    limits = [12, 16, 20, 28]
    assert len(free["output_ids"]) > max(limits), free[
        "text"
    ]  # each limit cuts into the free output
    outs = _generate(
        embedded_server,
        [prompt] * len(limits),
        [{**GREEDY, "max_new_tokens": n, "json_schema": json.dumps(schema)} for n in limits],
    )
    for n, out in zip(limits, outs):
        assert len(out["output_ids"]) <= n
        jsonschema.validate(json.loads(out["text"]), schema)


def test_regex_choices_and_sql(embedded_server):
    regex = r"(Paris|London), [0-9]{1,3} km"
    sql_prompt = PROMPT.replace(
        "Give an example answer as JSON.",
        "Write a SQL query that lists the names of users older than 30.",
    )
    outs = _generate(
        embedded_server,
        [PROMPT, PROMPT, sql_prompt],
        [
            {**GREEDY, "regex": regex},
            {**GREEDY, "choices": ["yes", "no", "maybe not"]},
            {**GREEDY, "lark": "sql"},
        ],
    )
    assert re.fullmatch(regex, outs[0]["text"]), outs[0]["text"]
    assert outs[1]["text"] in ("yes", "no", "maybe not")
    from radixgen.grammar.cfg.grammar import build_lark, shipped_grammar

    assert outs[2]["meta_info"]["finish_reason"]["type"] == "stop", outs[2]["text"]
    build_lark(shipped_grammar("sql")).parse(outs[2]["text"])


def test_jump_forward_keeps_greedy_output(embedded_server):
    schema = json.dumps(SUPPORTED["nested"])
    on, off = _generate(
        embedded_server,
        [PROMPT] * 2,
        [
            {**GREEDY, "json_schema": schema},
            {**GREEDY, "json_schema": schema, "no_jump_forward": True},
        ],
    )
    assert on["output_ids"] == off["output_ids"]


def test_bad_constraint_fails_only_its_own_request(embedded_server):
    def good():
        return _generate(embedded_server, PROMPT, {**GREEDY, "choices": ["A", "B"]})

    with embedded_server.client() as c, concurrent.futures.ThreadPoolExecutor(2) as pool:
        future = pool.submit(good)
        bad = c.post(
            "/generate",
            json={"text": PROMPT, "sampling_params": {"json_schema": {"type": "bogus"}}},
        )
        assert bad.status_code == 400 and "error" in bad.json()
        assert future.result()["text"] in ("A", "B")


def _client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=600)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "maxLength": 20}},
            "required": ["timezone"],
        },
    },
}


def test_response_format_json_schema(embedded_server, model_name_e2e):
    schema = SUPPORTED["flat"]
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "Describe a person."}],
        temperature=0,
        max_tokens=100,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
    )
    jsonschema.validate(json.loads(resp.choices[0].message.content), schema)
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "Any JSON object."}],
        temperature=0,
        max_tokens=100,
        response_format={"type": "json_object"},
    )
    assert isinstance(json.loads(resp.choices[0].message.content), dict)


def test_a_schema_too_large_for_one_regex_generates_valid_json(embedded_server, model_name_e2e):
    """Compiled to the CFG matcher (json_grammar.cfg): through response_format, greedy and cut short."""
    from tests.grammar.json_grammar.test_cfg import _too_large_schema

    schema = _too_large_schema()
    for max_tokens in (12, 120):
        resp = _client(embedded_server).chat.completions.create(
            model=model_name_e2e,
            messages=[{"role": "user", "content": "Describe a nested config."}],
            temperature=0,
            max_tokens=max_tokens,
            response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
        )
        jsonschema.validate(json.loads(resp.choices[0].message.content), schema)


def test_openai_outputs_cut_by_max_tokens_still_parse(embedded_server, model_name_e2e):
    """max_tokens far below what the model writes: the content and the tool call's arguments
    close in time (finish_reason says the limit was reached)."""
    schema = {
        "type": "object",
        "properties": {
            "story": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["story", "tags"],
    }
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "Tell a long story with many tags."}],
        temperature=0,
        max_tokens=14,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    )
    assert (
        resp.usage.completion_tokens <= 14 and resp.choices[0].finish_reason == "length"
    )  # (it loops to any limit)
    jsonschema.validate(json.loads(resp.choices[0].message.content), schema)
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_tokens=20,
    )  # (the model writes 27)
    calls = resp.choices[0].message.tool_calls
    assert calls and resp.usage.completion_tokens <= 20
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER["function"]["parameters"])


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "get_time"}}]
)
def test_tool_calls_parse_into_declared_arguments(embedded_server, model_name_e2e, tool_choice):
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=[WEATHER, TIME],
        tool_choice=tool_choice,
        temperature=0,
        max_tokens=120,
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    declared = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
    for call in choice.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), declared[call.function.name])
    if isinstance(tool_choice, dict):
        assert [c.function.name for c in choice.message.tool_calls] == ["get_time"]


def test_tool_calls_stream_as_deltas(embedded_server, model_name_e2e):
    """As OpenAI streams them: the call's id, type and name first (arguments ""), then argument
    fragments as the tokens arrive; they add up to the non-stream response's arguments."""
    request = dict(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "Weather in Rome?"}],
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_tokens=120,
    )
    chunks = list(_client(embedded_server).chat.completions.create(**request, stream=True))
    deltas = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices]
    streamed = []
    for index in sorted({d.index for d in deltas}):
        first, *fragments = [d for d in deltas if d.index == index]
        assert first.id and first.type == "function" and first.function.name == "get_weather"
        assert first.function.arguments == ""
        assert len(fragments) > 3 and all(
            d.id is None and d.function.name is None for d in fragments
        )
        streamed.append(("get_weather", "".join(d.function.arguments for d in fragments)))
        jsonschema.validate(json.loads(streamed[-1][1]), WEATHER["function"]["parameters"])
    assert (
        chunks[-1].choices[0].finish_reason == "tool_calls"
        and not chunks[-1].choices[0].delta.tool_calls
    )
    whole = (
        _client(embedded_server).chat.completions.create(**request).choices[0].message.tool_calls
    )
    assert [(c.function.name, c.function.arguments) for c in whole] == streamed


def test_tool_choice_auto_answers_text_or_a_valid_call(embedded_server, model_name_e2e):
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        messages=[{"role": "user", "content": "What's the weather in Oslo?"}],
        tools=[WEATHER],
        tool_choice="auto",
        temperature=0,
        max_tokens=120,
    )
    message = resp.choices[0].message
    if message.tool_calls:
        jsonschema.validate(
            json.loads(message.tool_calls[0].function.arguments), WEATHER["function"]["parameters"]
        )
    else:
        assert message.content and not message.content.startswith("<")


def test_tool_choice_auto_with_parameters_too_large_for_one_regex(embedded_server, model_name_e2e):
    """The calls compile to the CFG matcher beside free text (tool_calls): asked again after an
    earlier call, the model calls (greedy), with valid arguments; asked something else, it answers."""
    from tests.grammar.json_grammar.test_cfg import _too_large_schema

    params = _too_large_schema()
    tool = {"type": "function", "function": {"name": "configure", "parameters": params}}
    earlier = [
        {"role": "user", "content": "Call it."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "configure", "arguments": '{"s": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    answers = {}
    for content in ("Call it again.", "What's the weather in Oslo?"):
        resp = _client(embedded_server).chat.completions.create(
            model=model_name_e2e,
            messages=[*earlier, {"role": "user", "content": content}],
            tools=[tool],
            tool_choice="auto",
            temperature=0,
            max_tokens=120,
        )
        answers[content] = message = resp.choices[0].message
        for call in message.tool_calls or []:
            assert call.function.name == "configure"
            jsonschema.validate(json.loads(call.function.arguments), params)
    assert answers["Call it again."].tool_calls
    weather = answers["What's the weather in Oslo?"]
    assert weather.tool_calls or (weather.content and not weather.content.startswith("<"))


TAGS = {
    "type": "function",
    "function": {
        "name": "tag_photo",
        "parameters": {
            "type": "object",
            "properties": {
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "uniqueItems": True,
                    "minItems": 4,
                    "maxItems": 6,
                }
            },
            "required": ["tags"],
        },
    },
}


@pytest.mark.parametrize("tool_choice", ["required", "auto"])
def test_tool_call_sets_of_strings_stay_unique(embedded_server, model_name_e2e, tool_choice):
    """pydantic set[str] arguments: the model, asked to repeat a tag, still calls with distinct
    tags (UniqueGuard), in both the json_schema (required) and the tool_calls (auto) grammar."""
    resp = _client(embedded_server).chat.completions.create(
        model=model_name_e2e,
        tools=[TAGS],
        tool_choice=tool_choice,
        temperature=0,
        max_tokens=120,
        messages=[
            {"role": "user", "content": "Call tag_photo with the tags apple, apple, apple, apple."}
        ],
    )
    message = resp.choices[0].message
    assert message.tool_calls or tool_choice == "auto"
    for call in message.tool_calls or []:
        jsonschema.validate(json.loads(call.function.arguments), TAGS["function"]["parameters"])

"""The native API driven with the request bodies SGLang's own frontend client
(`sglang.lang.backend.runtime_endpoint.RuntimeEndpoint`) sends, checked for the response keys
that client reads: generate with every field, streaming with per-chunk logprobs, select's
scoring request, the info, cache and health routes; plus the fields radixgen refuses. The
offline Engine answers the same requests with the same meta_info."""

from __future__ import annotations

import re

import pytest

from radixgen.runtime.engine import Engine
from tests.runtime.server.conftest import TINY_ARGS, assert_error, sse_events

# SglSamplingParams.to_srt_kwargs() with SGLang's defaults, plus the two flags the client adds
SGLANG_SAMPLING = {
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "max_new_tokens": 8,
    "min_new_tokens": 0,
    "n": 1,
    "stop": [],
    "stop_token_ids": [],
    "stop_regex": [],
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "ignore_eos": False,
    "regex": None,
    "json_schema": None,
}
META_KEYS = {"id", "prompt_tokens", "completion_tokens", "cached_tokens", "finish_reason"}


def _body(text: str, stream: bool = False, **sampling) -> dict:
    body = {
        "text": text,
        "sampling_params": {**SGLANG_SAMPLING, **sampling},
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": 2,
        "return_text_in_logprobs": True,
    }
    return {**body, "stream": True} if stream else body


def _is_entry(entry, tokenizer, with_text: bool = True) -> bool:
    logprob, token_id, *text = entry
    ok = (logprob is None or logprob <= 0) and isinstance(token_id, int)
    return ok and (text == [tokenizer.decode([token_id])] if with_text else text == [None])


def test_generate_with_every_field_sglang_sends(client, tokenizer):
    out = client.post("/generate", json=_body("Hello there")).json()
    meta = out["meta_info"]
    assert META_KEYS <= set(meta) and isinstance(out["text"], str)
    assert (
        meta["finish_reason"] == {"type": "length", "length": 8} and meta["completion_tokens"] == 8
    )
    assert [e[1] for e in meta["output_token_logprobs"]] == out["output_ids"]
    assert [e[1] for e in meta["input_token_logprobs"]] == tokenizer.encode(
        "Hello there", add_special_tokens=False
    )
    assert meta["input_token_logprobs"][0][0] is None  # the first prompt token has no logprob
    for key in ("input_token_logprobs", "output_token_logprobs"):
        assert all(_is_entry(e, tokenizer) for e in meta[key])
    assert (
        len(meta["input_top_logprobs"]) == meta["prompt_tokens"]
        and meta["input_top_logprobs"][0] is None
    )
    for tops in meta["input_top_logprobs"][1:] + meta["output_top_logprobs"]:
        assert len(tops) == 2 and all(_is_entry(e, tokenizer) for e in tops)
    # greedy: the chosen token is the top one
    assert [tops[0][1] for tops in meta["output_top_logprobs"]] == out["output_ids"]


def test_min_new_tokens_holds_off_stop_token_ids(client):
    """The token a short greedy answer stops on is made a stop token: min_new_tokens keeps
    it out (and ignores stops) until that many tokens exist."""
    base = client.post(
        "/generate", json={"text": "Once upon", "sampling_params": SGLANG_SAMPLING}
    ).json()
    first = base["output_ids"][0]
    stopped = client.post(
        "/generate",
        json={
            "text": "Once upon",
            "sampling_params": {**SGLANG_SAMPLING, "stop_token_ids": [first]},
        },
    ).json()
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": first}
    held = client.post(
        "/generate",
        json={
            "text": "Once upon",
            "sampling_params": {**SGLANG_SAMPLING, "stop_token_ids": [first], "min_new_tokens": 5},
        },
    ).json()
    assert held["meta_info"]["completion_tokens"] >= 5 and first not in held["output_ids"][:4]


def test_stop_regex_stops_and_trims_like_a_stop_string(client):
    base = client.post(
        "/generate",
        json={"text": "The story", "sampling_params": {**SGLANG_SAMPLING, "max_new_tokens": 12}},
    ).json()
    word = re.escape(base["text"][len(base["text"]) // 2 :][:3])
    assert word.strip(), base["text"]
    sampling = {**SGLANG_SAMPLING, "max_new_tokens": 12, "stop_regex": [word]}
    out = client.post("/generate", json={"text": "The story", "sampling_params": sampling}).json()
    cut = re.search(word, base["text"]).start()
    assert out["text"] == base["text"][:cut] and out["meta_info"]["finish_reason"]["type"] == "stop"
    kept = client.post(
        "/generate",
        json={"text": "The story", "sampling_params": {**sampling, "no_stop_trim": True}},
    ).json()
    assert re.search(word, kept["text"]) and kept["text"].startswith(out["text"])
    err = assert_error(
        client.post("/generate", json={"text": "x", "sampling_params": {"stop_regex": "(unclosed"}})
    )
    assert "stop_regex" in err["message"]


def test_stream_sends_each_chunk_its_own_logprobs(client, tokenizer):
    full = client.post("/generate", json=_body("Once upon")).json()
    with client.stream("POST", "/generate", json=_body("Once upon", stream=True)) as resp:
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    # what SGLang's generate_stream does: text deltas from the cumulative text
    pos, text = 0, ""
    for chunk in chunks:
        text += chunk["text"][pos:]
        pos = len(chunk["text"])
    assert text == full["text"]
    streamed = [e for c in chunks for e in c["meta_info"]["output_token_logprobs"]]
    tops = [t for c in chunks for t in c["meta_info"]["output_top_logprobs"]]
    assert [e[1] for e in streamed] == full["output_ids"] and len(tops) == len(streamed)
    assert [e[0] for e in streamed] == pytest.approx(
        [e[0] for e in full["meta_info"]["output_token_logprobs"]], abs=1e-4
    )
    # prompt logprobs are complete on every chunk, so the last one has them
    assert (
        chunks[-1]["meta_info"]["input_token_logprobs"] == full["meta_info"]["input_token_logprobs"]
    )


def test_select_scoring_requests(client, tokenizer):
    """SGLang's select: pin the prefix, score `text + choice` prompt logprobs from two tokens
    before the prefix's end (token healing) with token texts, then unconditional logprobs of
    the choices' ids."""
    prefix = "The capital of France is"
    pin = client.post(
        "/generate", json={"text": prefix, "sampling_params": {"max_new_tokens": 0}}
    ).json()
    start = max(pin["meta_info"]["prompt_tokens"] - 2, 0)
    outs = client.post(
        "/generate",
        json={
            "text": [prefix + c for c in (" Paris", " a banana")],
            "sampling_params": {"max_new_tokens": 0, "temperature": 0},
            "return_logprob": True,
            "return_text_in_logprobs": True,
            "logprob_start_len": start,
        },
    ).json()
    for out in outs:
        meta = out["meta_info"]
        entries = meta["input_token_logprobs"]
        assert meta["output_token_logprobs"] == [] and len(entries) == meta["prompt_tokens"] - start
        assert entries[0][-1] in prefix and all(_is_entry(e, tokenizer) for e in entries)
    ids = [[e[1] for e in out["meta_info"]["input_token_logprobs"]] for out in outs]
    uncond = client.post(
        "/generate",
        json={"input_ids": ids, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True},
    ).json()
    assert [u["meta_info"]["input_token_logprobs"] for u in uncond] == [
        [],
        [],
    ]  # -1: output logprobs only


def test_n_samples_and_batched_fields(client):
    one = client.post(
        "/generate",
        json={
            "text": "Hi",
            "sampling_params": {
                "max_new_tokens": 4,
                "n": 3,
                "temperature": 1.0,
                "sampling_seed": 7,
            },
        },
    ).json()
    assert len(one) == 3 and all(r["meta_info"]["completion_tokens"] == 4 for r in one)
    again = client.post(
        "/generate",
        json={
            "text": "Hi",
            "sampling_params": {
                "max_new_tokens": 4,
                "n": 3,
                "temperature": 1.0,
                "sampling_seed": 7,
            },
        },
    ).json()
    assert [r["output_ids"] for r in again] == [r["output_ids"] for r in one]  # seeded
    batch = client.post(
        "/generate",
        json={
            "text": ["Hi", "Yo"],
            "rid": "pair",
            "sampling_params": {"max_new_tokens": 2, "n": 2},
            "return_logprob": [True, False],
        },
    ).json()
    assert [r["meta_info"]["id"] for r in batch] == ["pair-0", "pair-1", "pair-2", "pair-3"]
    assert ["output_token_logprobs" in r["meta_info"] for r in batch] == [True, True, False, False]


@pytest.mark.parametrize(
    "field, value",
    [
        ("image_data", "http://example.com/cat.png"),
        ("token_ids_logprob", [1, 2]),
        ("return_hidden_states", True),
        ("custom_logit_processor", "{}"),
        ("lora_id", "adapter"),
    ],
)
def test_fields_radixgen_cannot_honour_are_400s_naming_them(client, field, value):
    err = assert_error(client.post("/generate", json={"text": "Hi", field: value}))
    assert err["param"] == field and field in err["message"]


@pytest.mark.parametrize(
    "field, value",
    [("logit_bias", {"1": 2.0}), ("structural_tag", "{}"), ("n", 0), ("min_new_tokens", 9)],
)
def test_sampling_fields_that_cannot_be_honoured_or_are_invalid(client, field, value):
    err = assert_error(
        client.post(
            "/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 4, field: value}}
        )
    )
    assert field in err["message"] or field in (err["param"] or "")


def test_info_cache_and_health_routes(tiny_server, client):
    info = client.get("/get_model_info").json()
    assert info["model_path"] and "is_generation" in info  # the client reads model_path
    assert "version" in client.get("/get_server_info").json()
    assert client.post("/flush_cache", json={"empty_cache": True}).status_code == 200
    assert (
        client.get("/health").status_code == 200
        and client.get("/health_generate").status_code == 200
    )


def test_openai_routes_take_min_tokens_and_stop_regex(client, model_name):
    out = client.post(
        "/v1/completions",
        json={
            "model": model_name,
            "prompt": "Hi",
            "max_tokens": 6,
            "min_tokens": 6,
            "temperature": 0,
            "stop_regex": ["zzz+"],
        },
    ).json()
    assert out["usage"]["completion_tokens"] == 6
    assert_error(
        client.post(
            "/v1/completions",
            json={"model": model_name, "prompt": "Hi", "max_tokens": 2, "min_tokens": 3},
        )
    )


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_path):
    """The tiny server's model (the same seeded dummy weights), in-process."""
    max_total_tokens = int(TINY_ARGS[TINY_ARGS.index("--max-total-tokens") + 1])
    engine = Engine(str(tiny_model_path), load_format="dummy", max_total_tokens=max_total_tokens)
    yield engine
    engine.shutdown()


def _shape(value):
    """A result's structure: dict keys, list lengths and leaf types (tuples read as JSON lists)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shape(v) for v in value]
    return None if value is None else type(value).__name__


@pytest.mark.parametrize("with_text", [True, False])
def test_engine_meta_info_has_the_servers_keys_and_shapes(client, tiny_engine, with_text):
    body = {**_body("Hello there", ignore_eos=True), "return_text_in_logprobs": with_text}
    served = client.post("/generate", json=body).json()
    # the Engine takes SamplingParams' fields: no n, and no None standing for a default
    sampling = {k: v for k, v in body["sampling_params"].items() if v is not None and k != "n"}
    local = tiny_engine.generate(
        body["text"],
        sampling,
        return_logprob=True,
        logprob_start_len=0,
        top_logprobs_num=2,
        return_text_in_logprobs=with_text,
    )
    assert _shape(local) == _shape(served)
    meta = local["meta_info"]
    assert (
        meta["finish_reason"]
        == served["meta_info"]["finish_reason"]
        == {"type": "length", "length": 8}
    )
    entries = meta["output_token_logprobs"]
    assert all(
        isinstance(e, tuple) and len(e) == 3 for e in entries
    )  # SGLang's (logprob, id, text)
    assert [e[1] for e in entries] == local["output_ids"]
    texts = [e[2] for e in meta["input_token_logprobs"]]
    assert texts == (
        [tiny_engine.tokenizer.decode([e[1]]) for e in meta["input_token_logprobs"]]
        if with_text
        else [None] * len(texts)
    )


def test_engine_logprob_defaults_and_streaming_match_the_servers(client, tiny_engine):
    """Without logprob_start_len, input_token_logprobs is []; a stream's chunks carry only
    their own output logprobs."""
    sampling = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
    served = client.post(
        "/generate", json={"text": "Once upon", "sampling_params": sampling, "return_logprob": True}
    ).json()
    local = tiny_engine.generate("Once upon", sampling, return_logprob=True)
    assert _shape(local) == _shape(served) and local["meta_info"]["input_token_logprobs"] == []
    chunks = list(tiny_engine.generate("Once upon", sampling, stream=True, return_logprob=True))
    streamed = [e for c in chunks for e in c["meta_info"]["output_token_logprobs"]]
    assert streamed == local["meta_info"]["output_token_logprobs"] and len(chunks) > 1
    assert "".join(c["delta"] for c in chunks) == local["text"] == chunks[-1]["text"]
    with pytest.raises(ValueError, match="return_logprob has 1 values for 2 prompts"):
        tiny_engine.generate(["a", "b"], sampling, return_logprob=[True])

"""LoRA over HTTP on the tiny dummy model: an adapter chosen by the OpenAI `model` field or the
native `lora_path` field, listed by /v1/models, loaded and unloaded at run time, every refusal
an OpenAI-style error after which the server keeps serving, and the `lora` metrics label."""

from __future__ import annotations

import threading

import pytest
from safetensors.torch import load_file, save_file

from radixgen.runtime.model.arch import ModelArch
from tests.runtime.lora.peft_files import write_adapter
from tests.runtime.server.conftest import TINY_ARGS, ServerProcess, assert_error

GREEDY = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def arch(tiny_model_path):
    return ModelArch.from_folder(tiny_model_path)


@pytest.fixture(scope="module")
def lora_server(tiny_model_path, tmp_path_factory, arch):
    root = tmp_path_factory.mktemp("adapters")
    write_adapter(root / "alpha", arch, rank=8, std=0.3, seed=1)
    server = ServerProcess(
        tiny_model_path,
        tmp_path_factory.mktemp("logs"),
        *TINY_ARGS,
        "--enable-lora",
        "--lora-paths",
        f"alpha={root / 'alpha'}",
        "--max-lora-rank",
        "16",
        "--max-loras-per-batch",
        "2",
    )
    try:
        yield server.wait_healthy()
    finally:
        server.stop()


@pytest.fixture
def client(lora_server):
    with lora_server.client() as c:
        yield c


def generate(client, **fields):
    resp = client.post("/generate", json={"text": PROMPT, "sampling_params": GREEDY, **fields})
    assert resp.status_code == 200, resp.text
    return resp.json()["output_ids"]


def test_model_field_and_lora_path_pick_the_adapter(client, tiny_model_path):
    models = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in models] == [tiny_model_path.name, "alpha"]
    assert models[1]["parent"] == tiny_model_path.name
    base, adapted = generate(client), generate(client, lora_path="alpha")
    assert base != adapted
    completion = client.post(
        "/v1/completions",
        json={"model": "alpha", "prompt": PROMPT, "max_tokens": 6, "temperature": 0},
    ).json()
    assert (
        completion["choices"][0]["text"]
        == client.post(
            "/generate",
            json={
                "text": PROMPT,
                "sampling_params": GREEDY | {"ignore_eos": False},
                "lora_path": "alpha",
            },
        ).json()["text"]
    )
    err = assert_error(client.post("/generate", json={"text": PROMPT, "lora_path": "nope"}))
    assert err["code"] == "lora_not_found" and err["param"] == "lora_path"
    err = assert_error(
        client.post("/v1/completions", json={"model": "nope", "prompt": PROMPT}), 404
    )
    assert err["code"] == "model_not_found" and "alpha" in err["message"]


def test_bad_adapters_are_400s_and_the_server_keeps_serving(client, arch, tmp_path):
    too_big = write_adapter(tmp_path / "big", arch, rank=32)
    other = write_adapter(tmp_path / "other", arch, layers=[7])  # the tiny model has 2 layers
    head = write_adapter(tmp_path / "head", arch)
    tensors = load_file(str(head / "adapter_model.safetensors"))
    tensors["base_model.model.lm_head.lora_A.weight"] = next(iter(tensors.values())).clone()
    save_file(tensors, str(head / "adapter_model.safetensors"))
    cases = [
        ("big", too_big, "lora_rank_too_large"),
        ("head", head, "lora_target_not_supported"),
        ("missing", tmp_path / "missing", "lora_path_not_found"),
        ("other", other, "lora_shape_mismatch"),
        ("alpha", other, "lora_name_exists"),
    ]
    for name, path, code in cases:
        resp = client.post("/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)})
        assert assert_error(resp)["code"] == code, name
    assert_error(client.post("/load_lora_adapter", json={"lora_name": "x"}))  # no lora_path
    assert_error(client.post("/unload_lora_adapter", json={"lora_name": "nope"}), 404)
    assert [m["id"] for m in client.get("/v1/models").json()["data"]][1:] == ["alpha"]
    assert generate(client, lora_path="alpha")  # still serving


def test_load_serve_unload_and_the_in_flight_refusal(client, arch, tmp_path):
    path = write_adapter(tmp_path / "beta", arch, rank=4, std=0.3, seed=5)
    resp = client.post("/load_lora_adapter", json={"lora_name": "beta", "lora_path": str(path)})
    assert resp.status_code == 200, resp.text
    assert set(resp.json()["loaded_adapters"]) == {"alpha", "beta"}
    beta = generate(client, lora_path="beta")
    assert beta not in (generate(client), generate(client, lora_path="alpha"))
    long = {"max_new_tokens": 400, "temperature": 0, "ignore_eos": True}
    started = threading.Event()

    def stream():
        body = {"text": PROMPT, "sampling_params": long, "lora_path": "beta", "stream": True}
        with client.stream("POST", "/generate", json=body) as r:
            for _ in r.iter_lines():
                started.set()

    thread = threading.Thread(target=stream)
    thread.start()
    assert started.wait(30)
    err = assert_error(client.post("/unload_lora_adapter", json={"lora_name": "beta"}), 409)
    assert err["code"] == "lora_in_use"
    thread.join(120)
    resp = client.post("/unload_lora_adapter", json={"lora_name": "beta"})
    assert resp.status_code == 200, resp.text
    assert set(resp.json()["loaded_adapters"]) == {"alpha"}
    assert assert_error(client.post("/generate", json={"text": PROMPT, "lora_path": "beta"}))


def test_metrics_carry_the_lora_label_and_the_adapter_count(client):
    generate(client, lora_path="alpha")
    text = client.get("/metrics").text
    assert 'lora="alpha"' in text and 'lora="base"' in text
    gauge = [line for line in text.splitlines() if line.startswith("radixgen:lora_adapters_loaded")]
    assert gauge and float(gauge[0].rsplit(" ", 1)[1]) >= 1

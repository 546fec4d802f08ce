"""Weight versions over HTTP on a tiny dummy-weight server: clients streaming through an update
and a rollback see no failure and every response from one version, with that version's own
greedy output; each refusal is a 400 (409 for a concurrent update) with the OpenAI error body
while the server keeps serving; the version is reported by /get_model_info, /v1/models,
meta_info and the OpenAI metadata, and labels the metrics."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import pytest
from safetensors.torch import save

from radixgen.runtime.engine import Engine
from tests.runtime.checkpoints import tiny_weights, write_checkpoint
from tests.runtime.server.conftest import TINY_ARGS, ServerProcess, assert_error, sse_events

PROMPTS = ["Hello there, general", "The weather today is", "1 2 3 4 5"]
GREEDY = {"max_new_tokens": 8, "temperature": 0}
LAYER_OUTPUT_SCALE = 10.0  # v1's layers, not the tied embedding, decide its greedy tokens


@pytest.fixture(scope="module")
def v1_weights(tiny_model_path):
    weights = tiny_weights(tiny_model_path, seed=7)
    return {
        k: v * (LAYER_OUTPUT_SCALE if k.endswith(("down_proj.weight", "o_proj.weight")) else 1.0)
        for k, v in weights.items()
    }


@pytest.fixture(scope="module")
def folders(tiny_model_path, v1_weights, tmp_path_factory):
    root = tmp_path_factory.mktemp("http-versions")
    return {
        "v1": write_checkpoint(root / "v1", tiny_model_path, v1_weights),
        "mistral": write_checkpoint(
            root / "mistral",
            tiny_model_path,
            v1_weights,
            {"architectures": ["MistralForCausalLM"], "model_type": "mistral"},
        ),
    }


@pytest.fixture(scope="module")
def server(tiny_model_path, tmp_path_factory):
    # the tiny model's weights (13 MB, 17 MB as base64) fit in one /update_weights_from_tensor body
    proc = ServerProcess(
        tiny_model_path,
        tmp_path_factory.mktemp("weights-logs"),
        *TINY_ARGS,
        "--max-request-bytes",
        str(64 << 20),
    )
    try:
        yield proc.wait_healthy()
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server):
    with server.client() as c:
        yield c


def greedy_ids(client: httpx.Client) -> list[list[int]]:
    results = client.post("/generate", json={"text": PROMPTS, "sampling_params": GREEDY}).json()
    return [r["output_ids"] for r in results]


def stream_once(client: httpx.Client, prompt: str) -> tuple[set, list[int]]:
    """(weight versions seen in the chunks, output ids) of one streamed greedy request."""
    body = {"text": prompt, "stream": True, "sampling_params": GREEDY}
    with client.stream("POST", "/generate", json=body) as resp:
        assert resp.status_code == 200, resp.read()
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]" and all("error" not in e for e in events[:-1]), events
    return {e["meta_info"]["weight_version"] for e in events[:-1]}, events[-2]["output_ids"]


def test_swap_and_rollback_under_load(server, client, folders):
    before = greedy_ids(client)
    with Engine(str(folders["v1"]), max_total_tokens=2048) as eng:
        reference = {
            "default": before,
            "v1": [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)],
        }
    assert reference["v1"] != before
    results, failures, stop = [], [], threading.Event()

    def stream_until_stopped(offset: int) -> None:
        with server.client() as own:
            i = offset
            while not stop.is_set():
                try:
                    results.append((i % len(PROMPTS), *stream_once(own, PROMPTS[i % len(PROMPTS)])))
                except Exception as exc:  # noqa: BLE001 - counted, then asserted on
                    failures.append(repr(exc))
                i += 1

    threads = [threading.Thread(target=stream_until_stopped, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    update = client.post(
        "/update_weights_from_disk", json={"model_path": str(folders["v1"]), "version": "v1"}
    )
    time.sleep(0.5)
    rollback = client.post("/rollback_weights")
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join(60)
    assert update.status_code == 200 and update.json()["weight_version"] == "v1", update.text
    assert rollback.status_code == 200 and rollback.json()["weight_version"] == "default", (
        rollback.text
    )
    assert update.json()["success"] and rollback.json()["rollback_s"] < 1.0
    assert not failures, failures
    versions = [next(iter(seen)) for _, seen, _ in results]
    assert all(len(seen) == 1 for _, seen, _ in results)  # no response mixes versions
    assert {"default", "v1"} <= set(versions)
    for (prompt, _, ids), version in zip(results, versions):
        assert ids == reference[version][prompt], version


def test_version_is_reported_everywhere(client, folders, model_name):
    resp = client.post(
        "/update_weights_from_disk", json={"model_path": str(folders["v1"]), "weight_version": "r2"}
    )
    assert resp.status_code == 200, resp.text
    assert client.get("/get_model_info").json()["weight_version"] == "r2"
    assert client.get("/v1/models").json()["data"][0]["weight_version"] == "r2"
    assert client.get("/get_weight_version").json()["weight_version"] == "r2"
    one = client.post("/generate", json={"text": PROMPTS[0], "sampling_params": GREEDY}).json()
    assert one["meta_info"]["weight_version"] == "r2"
    completion = client.post(
        "/v1/completions", json={"model": model_name, "prompt": PROMPTS[0], "max_tokens": 2}
    )
    assert completion.json()["metadata"] == {"weight_version": "r2"}
    metrics = client.get("/metrics").text
    assert 'radixgen:num_requests_total{lora="base",model_name="' in metrics
    assert 'weight_version="r2"' in metrics
    assert 'radixgen:weight_swap_duration_seconds_count{model_name="' in metrics
    swaps = [
        line
        for line in metrics.splitlines()
        if line.startswith("radixgen:weight_swap_duration_seconds_count")
        and 'phase="activate"' in line
    ]
    assert float(swaps[0].split()[-1]) >= 1
    assert client.post("/rollback_weights").status_code == 200


def test_update_from_tensor(client, v1_weights):
    raw = base64.b64encode(save({k: v.contiguous() for k, v in v1_weights.items()})).decode()
    resp = client.post(
        "/update_weights_from_tensor",
        json={"serialized_named_tensors": [raw], "weight_version": "from-trainer"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["active"]["source"] == "tensor"
    assert client.post("/rollback_weights").status_code == 200


def test_errors_are_400_and_the_server_serves_on(client, folders, tmp_path):
    checks = [
        (
            "/update_weights_from_disk",
            {"model_path": str(tmp_path / "missing")},
            "model_path_not_found",
        ),
        (
            "/update_weights_from_disk",
            {"model_path": str(folders["mistral"])},
            "architecture_check_failed",
        ),
        (
            "/update_weights_from_disk",
            {"model_path": str(folders["v1"]), "version": "default"},
            "version_exists",
        ),
        ("/update_weights_from_tensor", {"serialized_named_tensors": ["not base64!"]}, None),
        (
            "/update_weights_from_tensor",
            {"serialized_named_tensors": [base64.b64encode(b"junk").decode()]},
            "invalid_tensors",
        ),
        ("/update_weights_from_disk", {"model_path": 3}, None),
    ]
    for path, body, code in checks:
        err = assert_error(client.post(path, json=body))
        assert code is None or err["code"] == code, err
    while client.post("/release_standby_weights").status_code == 200:
        pass
    assert assert_error(client.post("/release_standby_weights"))["code"] == "no_standby_version"
    assert assert_error(client.post("/rollback_weights"))["code"] == "no_previous_version"
    assert client.get("/health_generate").status_code == 200


def test_concurrent_update_is_409_and_pause_holds_the_switch(server, client, folders):
    """With generation paused in place, an update loads but cannot switch (a request of the old
    version is running): a second update meanwhile is refused with 409; continuing lets the
    running request finish on the old version, then the update completes."""
    long_body = {
        "text": PROMPTS[0],
        "sampling_params": {"max_new_tokens": 400, "temperature": 0, "ignore_eos": True},
        "stream": True,
    }
    answers, decoding = {}, threading.Event()

    def stream_long() -> None:
        with server.client() as own, own.stream("POST", "/generate", json=long_body) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    decoding.set()  # its first tokens are out: it runs on the serving version
                    answers["long"] = json.loads(line[len("data: ") :])

    running = threading.Thread(target=stream_long)
    running.start()
    assert decoding.wait(60)
    assert client.post("/pause_generation", json={"mode": "in_place"}).json()["success"]

    def update() -> None:
        with server.client() as own:
            answers["update"] = own.post(
                "/update_weights_from_disk",
                json={"model_path": str(folders["v1"]), "version": "held"},
            )

    updating = threading.Thread(target=update)
    updating.start()
    time.sleep(0.5)
    second = client.post(
        "/update_weights_from_disk", json={"model_path": str(folders["v1"]), "version": "other"}
    )
    assert assert_error(second, 409)["code"] == "update_in_progress"
    assert client.post("/continue_generation").json()["success"]
    running.join(60)
    updating.join(60)
    assert answers["long"]["meta_info"]["weight_version"] == "default"
    assert (
        answers["update"].status_code == 200
        and answers["update"].json()["weight_version"] == "held"
    )
    assert client.post("/rollback_weights").status_code == 200

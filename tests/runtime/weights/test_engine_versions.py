"""Weight versions on the Engine (tiny dummy model): an update serves exactly what a fresh
engine on that checkpoint serves, a rollback brings back the old outputs and their cache hits,
running requests finish on the version they started on, and every refusal names its reason."""

from __future__ import annotations

import math

import pytest
import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq
from radixgen.runtime.weights.manager import UpdateSource, WeightUpdateError
from radixgen.runtime.weights.version import sampled_checksum
from tests.runtime.checkpoints import tiny_weights, write_checkpoint

GREEDY = {"max_new_tokens": 6, "temperature": 0}
LAYER_OUTPUT_SCALE = 10.0
PROMPTS = ["Hello there, general", "The weather today is", "1 2 3 4 5"]


@pytest.fixture(scope="module")
def v1_weights(tiny_model_path) -> dict[str, torch.Tensor]:
    return perturbed_weights(tiny_model_path)


@pytest.fixture(scope="module")
def checkpoints(tiny_model_path, tmp_path_factory, v1_weights):
    """Folders of the tiny model: v1 (other dummy weights, its layers' outputs scaled up so
    they, not the tied embedding, decide the greedy tokens), nan, spiky (logits x 1000), wide
    (another MLP size) and mistral (another architecture)."""
    root = tmp_path_factory.mktemp("versions")
    v1 = v1_weights
    nan = {k: v.clone() for k, v in v1.items()}
    nan["model.layers.0.mlp.down_proj.weight"][0, 0] = math.nan
    spiky = {k: v * (1000.0 if k == "model.embed_tokens.weight" else 1.0) for k, v in v1.items()}
    wide = {k: v for k, v in v1.items()}
    return {
        "v1": write_checkpoint(root / "v1", tiny_model_path, v1),
        "nan": write_checkpoint(root / "nan", tiny_model_path, nan),
        "spiky": write_checkpoint(root / "spiky", tiny_model_path, spiky),
        "wide": write_checkpoint(root / "wide", tiny_model_path, wide, {"intermediate_size": 256}),
        "mistral": write_checkpoint(
            root / "mistral",
            tiny_model_path,
            v1,
            {"architectures": ["MistralForCausalLM"], "model_type": "mistral"},
        ),
    }


@pytest.fixture(scope="module")
def reference(checkpoints):
    """Greedy ids of each prompt on a fresh engine of the v1 checkpoint."""
    with Engine(str(checkpoints["v1"]), max_total_tokens=2048) as eng:
        return [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)]


def perturbed_weights(tiny_model_path) -> dict[str, torch.Tensor]:
    weights = tiny_weights(tiny_model_path, seed=7)
    return {
        k: v * (LAYER_OUTPUT_SCALE if k.endswith(("down_proj.weight", "o_proj.weight")) else 1.0)
        for k, v in weights.items()
    }


@pytest.fixture(scope="module")
def shared_engine(tiny_model_path):
    with Engine(str(tiny_model_path), load_format="dummy", max_total_tokens=2048) as eng:
        yield eng


@pytest.fixture
def engine(shared_engine):
    """The shared engine, back on its startup weights with nothing standby after each test."""
    yield shared_engine
    gate = shared_engine.scheduler.gate
    while gate.busy or shared_engine.scheduler.has_work:
        shared_engine.scheduler.step()
    gate.take_answers()
    if gate.weights.active.version.name != "default":
        shared_engine.rollback_weights()
    if gate.weights.previous is not None:
        shared_engine.release_standby_weights()
    shared_engine.scheduler.cache.reset()


def ids_of(eng: Engine) -> list[list[int]]:
    return [r["output_ids"] for r in eng.generate(PROMPTS, GREEDY)]


def test_update_serves_the_new_checkpoint_and_rollback_the_old(engine, checkpoints, reference):
    before = ids_of(engine)
    result = engine.update_weights(model_path=str(checkpoints["v1"]), version="v1")
    assert result["weight_version"] == "v1" and result["previous_version"] == "default"
    assert result["placement"] == "device" and result["active"]["source"] == str(checkpoints["v1"])
    after = engine.generate(PROMPTS, GREEDY)
    assert [r["output_ids"] for r in after] == reference != before
    assert {r["meta_info"]["weight_version"] for r in after} == {"v1"}
    assert all(r["meta_info"]["cached_tokens"] == 0 for r in after)  # the old KV is not matched
    assert engine.rollback_weights()["weight_version"] == "default"
    again = engine.generate(PROMPTS, GREEDY)
    assert [r["output_ids"] for r in again] == before
    assert all(
        r["meta_info"]["cached_tokens"] > 0 for r in again
    )  # the old version's KV hits again
    assert engine.release_standby_weights()["released_version"] == "v1"
    with pytest.raises(WeightUpdateError) as err:
        engine.rollback_weights()
    assert err.value.code == "no_previous_version"


def test_update_from_named_tensors(engine, v1_weights, reference):
    tensors = {k: v.clone() for k, v in v1_weights.items()}
    result = engine.update_weights(named_tensors=tensors)
    assert result["active"]["source"] == "tensor" and result["weight_version"].startswith("v")
    assert result["active"]["checksum"] == sampled_checksum(tensors)
    assert ids_of(engine) == reference


@pytest.mark.parametrize(
    "name, check",
    [("nan", "finite"), ("spiky", "canary"), ("wide", "shapes"), ("mistral", "architecture")],
)
def test_a_failed_check_is_named_and_the_active_version_serves_on(engine, checkpoints, name, check):
    before = ids_of(engine)
    with pytest.raises(WeightUpdateError) as err:
        engine.update_weights(model_path=str(checkpoints[name]))
    assert err.value.check == check and err.value.message.startswith(f"{check} check failed")
    assert engine.weight_version == "default" and ids_of(engine) == before


def test_refusals(engine, checkpoints, tmp_path, v1_weights):
    cases = [
        (dict(model_path=str(tmp_path / "missing")), "model_path_not_found"),
        (dict(model_path=str(tmp_path)), "model_path_not_found"),
        (dict(model_path=str(checkpoints["v1"]), version="default"), "version_exists"),
        (dict(model_path=str(checkpoints["v1"]), load_format="pickle"), "invalid_load_format"),
    ]
    for kwargs, code in cases:
        with pytest.raises(WeightUpdateError) as err:
            engine.update_weights(**kwargs)
        assert err.value.code == code and err.value.status == 400
    with pytest.raises(WeightUpdateError) as err:
        engine.release_standby_weights()
    assert err.value.code == "no_standby_version"
    tensors = {k: v for k, v in v1_weights.items() if k != "model.norm.weight"}
    with pytest.raises(WeightUpdateError) as err:
        engine.update_weights(named_tensors=tensors)
    assert err.value.check == "shapes"


def test_a_second_update_while_one_loads_is_409(engine, checkpoints):
    gate = engine.scheduler.gate
    gate.update("first", UpdateSource("a", str(checkpoints["v1"])))
    gate.update("second", UpdateSource("b", str(checkpoints["v1"])))
    answers = gate.take_answers()
    assert [(a.op_id, a.error.status, a.error.code) for a in answers] == [
        ("second", 409, "update_in_progress")
    ]
    while not gate.answers:
        engine.scheduler.step()
    assert gate.take_answers()[0].result["weight_version"] == "a"


def test_running_requests_finish_on_their_version(engine, checkpoints, reference):
    """A request running when the update lands finishes on the old weights; one arriving
    during the drain is held, then runs on the new ones."""
    old = engine.generate(PROMPTS[0], {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True})
    sched, gate = engine.scheduler, engine.scheduler.gate
    sched.handle(
        GenerateReq(
            "long",
            engine.tokenizer.encode(PROMPTS[0], add_special_tokens=False),
            SamplingParams(max_new_tokens=40, temperature=0, ignore_eos=True),
        )
    )
    outs = sched.step() + sched.step()
    gate.update("u", UpdateSource("v1", str(checkpoints["v1"])))
    while gate.loading:
        outs += sched.step()
    sched.handle(
        GenerateReq(
            "late",
            engine.tokenizer.encode(PROMPTS[0], add_special_tokens=False),
            SamplingParams(**GREEDY),
        )
    )
    while sched.has_work:
        outs += sched.step()
    by_rid = {
        rid: [t for o in outs if o.rid == rid for t in o.token_ids] for rid in ("long", "late")
    }
    assert by_rid["long"] == old["output_ids"]
    assert {o.weight_version for o in outs if o.rid == "long"} == {"default"}
    assert by_rid["late"] == reference[0]
    assert {o.weight_version for o in outs if o.rid == "late"} == {"v1"}
    assert gate.take_answers()[0].result["weight_version"] == "v1"


def test_sampled_checksum_is_stable_and_sees_a_changed_tensor(v1_weights):
    weights = v1_weights
    assert sampled_checksum(weights) == sampled_checksum({k: v.clone() for k, v in weights.items()})
    changed = dict(weights, **{"model.norm.weight": weights["model.norm.weight"] * 1.01})
    assert sampled_checksum(changed) != sampled_checksum(weights)
    assert sampled_checksum({**weights, "extra": torch.zeros(1)}) != sampled_checksum(weights)

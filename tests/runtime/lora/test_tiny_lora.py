"""LoRA on the tiny dummy model: no prefix is ever shared across adapters (a property test over
request orders), a pool smaller than the adapters in use defers and evicts without changing
what anyone gets, the decode graphs' static-buffer forward adds the same deltas, and bad
adapters are refused with their reason."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radixgen.runtime.lora.adapter import LoraError
from radixgen.runtime.model.arch import ModelArch
from tests.runtime.lora.peft_files import ATTN, tiny_lora_engine, write_adapter

GREEDY = {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}
SHARED = list(range(100, 116))  # a 16-token prefix every prompt starts with
PROMPTS = [SHARED + [7, 8, 9], SHARED + [7, 8, 10, 11], SHARED + [300]]
NAMES = [None, "a", "b", "c"]


@pytest.fixture(scope="module")
def adapters(tiny_model_path, tmp_path_factory):
    arch = ModelArch.from_folder(tiny_model_path)
    root = tmp_path_factory.mktemp("adapters")
    return {
        "a": write_adapter(root / "a", arch, rank=8, std=0.3, seed=1),
        "b": write_adapter(root / "b", arch, rank=4, std=0.3, seed=2, targets=ATTN),
        "c": write_adapter(root / "c", arch, rank=16, std=0.3, seed=3, rslora=True),
    }


@pytest.fixture(scope="module")
def engine(tiny_model_path, adapters):
    with tiny_lora_engine(tiny_model_path, adapters, max_loras_per_batch=2) as eng:
        yield eng


@pytest.fixture(scope="module")
def alone(engine):
    """Greedy ids of every (prompt, adapter), each computed on an empty cache."""
    out = {}
    for p, prompt in enumerate(PROMPTS):
        for name in NAMES:
            assert engine.scheduler.flush_cache()
            out[p, name] = engine.generate(
                input_ids=prompt, sampling_params=GREEDY, lora_path=name
            )["output_ids"]
    return out


def test_each_adapter_changes_the_output(alone):
    for p in range(len(PROMPTS)):
        assert len({tuple(alone[p, name]) for name in NAMES}) == len(NAMES)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(order=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(NAMES)), min_size=2, max_size=6))
def test_no_prefix_hit_crosses_adapters(engine, alone, order):
    assert engine.scheduler.flush_cache()
    seen: set = set()
    for p, name in order:
        out = engine.generate(input_ids=PROMPTS[p], sampling_params=GREEDY, lora_path=name)
        assert out["output_ids"] == alone[p, name]
        if name not in seen:  # nothing cached under this adapter yet: no hit at all
            assert out["meta_info"]["cached_tokens"] == 0
        else:
            assert out["meta_info"]["cached_tokens"] >= len(SHARED)
        seen.add(name)


def test_a_pool_smaller_than_the_batch_defers_and_evicts(engine, alone):
    """Three adapters and the base model in one batch with two slots: what each gets is what it
    gets alone, and adapters were loaded into the pool more than once (evicted in between)."""
    assert engine.scheduler.flush_cache()
    pool = engine.scheduler.runner.lora.pool
    for key in list(pool.resident):  # an empty pool: every adapter is loaded at least once
        pool.evict(key)
    loads = pool.num_loads
    names = ["a", "b", "c", None, "c", "a"]
    ids = [PROMPTS[i % 3] for i in range(len(names))]
    outs = engine.generate(input_ids=ids, sampling_params=GREEDY, lora_path=names)
    assert [o["output_ids"] for o in outs] == [alone[i % 3, n] for i, n in enumerate(names)]
    assert pool.num_loads - loads >= 3 and len(pool.resident) <= 2


def test_static_buffer_decode_adds_the_same_deltas(engine, alone):
    """The decode-graph forward (run eagerly here: capture=False) reads the rows' slots from its
    static buffer and gives the eager path's tokens."""
    from radixgen.runtime.cuda_graph import DecodeGraphs

    runner = engine.scheduler.runner
    runner.graphs = DecodeGraphs(
        runner.model, runner.pool, runner.attn, runner.table, runner.device, 8, False,
        lora_pool=runner.lora.pool,
    )  # fmt: skip
    try:
        assert engine.scheduler.flush_cache()
        names = ["a", None, "b"]
        outs = engine.generate(input_ids=PROMPTS, sampling_params=GREEDY, lora_path=names)
        assert {key[2] for key in runner.graphs.graphs} == {True}
    finally:
        runner.graphs = None
    assert [o["output_ids"] for o in outs] == [alone[i, n] for i, n in enumerate(names)]


def test_bad_adapters_are_refused_with_their_reason(engine, tiny_model_path, tmp_path):
    arch = ModelArch.from_folder(tiny_model_path)
    lora = engine.scheduler.runner.lora
    cases = {
        "lora_rank_too_large": write_adapter(tmp_path / "big", arch, rank=32),
        "lora_target_not_supported": write_adapter(
            tmp_path / "embed", arch, config_changes={"target_modules": ["q_proj"]}
        ),
        "lora_shape_mismatch": write_adapter(tmp_path / "other", arch, layers=[5]),
        "lora_path_not_found": tmp_path / "missing",
    }
    from safetensors.torch import load_file, save_file

    embed = cases["lora_target_not_supported"] / "adapter_model.safetensors"
    tensors = load_file(str(embed))
    tensors["base_model.model.lm_head.lora_A.weight"] = tensors[next(iter(tensors))].clone()
    save_file(tensors, str(embed))
    for code, path in cases.items():
        with pytest.raises(LoraError) as err:
            engine.load_lora_adapter("new", str(path))
        assert err.value.code == code and err.value.status == 400
    with pytest.raises(LoraError, match="already loaded"):
        engine.load_lora_adapter("a", str(cases["lora_shape_mismatch"]))
    with pytest.raises(ValueError, match="unknown LoRA adapter"):
        engine.generate(input_ids=PROMPTS[0], sampling_params=GREEDY, lora_path="nope")
    adapter = lora.resolve("b")  # a request in flight
    with pytest.raises(LoraError) as err:
        engine.unload_lora_adapter("b")
    assert err.value.status == 409 and "in flight" in err.value.message
    lora.finished(adapter)
    assert set(lora.adapters) == {"a", "b", "c"}


def test_a_pinned_adapter_keeps_its_slot_and_others_still_run(engine, adapters, alone):
    """Pinned: never evicted; pinning every slot is refused; a batch needing more adapters than
    the slots left still gets what each request gets alone (the copy of `a` gives `a`'s)."""
    lora = engine.scheduler.runner.lora
    engine.load_lora_adapter("pinned-a", str(adapters["a"]), pinned=True)
    try:
        with pytest.raises(LoraError) as err:
            engine.load_lora_adapter("pinned-b", str(adapters["b"]), pinned=True)
        assert err.value.code == "lora_pool_pinned"
        names = ["pinned-a", "b", "c", None, "b"]
        ids = [PROMPTS[i % 3] for i in range(len(names))]
        assert engine.scheduler.flush_cache()
        outs = engine.generate(input_ids=ids, sampling_params=GREEDY, lora_path=names)
        want = [alone[i % 3, "a" if n == "pinned-a" else n] for i, n in enumerate(names)]
        assert [o["output_ids"] for o in outs] == want
        assert lora.adapters["pinned-a"].cache_key in lora.pool.resident
    finally:
        engine.unload_lora_adapter("pinned-a")
    assert not lora.pool.pinned

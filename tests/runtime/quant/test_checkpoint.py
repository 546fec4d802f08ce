"""Pre-quantized checkpoints written by the converter (each format, from a tiny dense
checkpoint) load exactly: the model's dequantized weights equal the producer's, and where the
producer quantizes as quantize-on-load does, greedy outputs are identical."""

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

from radixgen.runtime.engine import Engine
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import dummy_state_dict
from radixgen.runtime.quant.checkpoint import checkpoint_quantization
from radixgen.runtime.quant.export import FORMATS, export_checkpoint
from radixgen.runtime.quant.weight import join_weights
from tests.runtime.conftest import TINY_CONFIG

ENGINE = {"dtype": "float32", "max_total_tokens": 512, "max_running_requests": 4}
PROMPTS = [[5, 17, 300, 41, 9], [1000, 2, 7, 7, 7, 120, 64]]
GREEDY = {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}
# formats whose producer quantizes exactly like `--quantization` on load
SAME_AS_ON_LOAD = {"modelopt-nvfp4": "nvfp4", "modelopt-fp8-channel": "fp8", "ct-fp8": "fp8"}


@pytest.fixture(scope="module")
def dense_folder(tmp_path_factory, tiny_model_path):
    folder = tmp_path_factory.mktemp("dense")
    for f in tiny_model_path.iterdir():
        shutil.copy(f, folder / f.name)
    arch = ModelArch.from_config(TINY_CONFIG)
    save_file(
        dummy_state_dict(arch, torch.float32, torch.device("cpu"), seed=3),
        str(folder / "model.safetensors"),
    )
    torch.set_num_threads(1)
    return folder


@pytest.mark.parametrize(
    "fmt", [f if f == "ct-nvfp4" else pytest.param(f, marks=pytest.mark.slow) for f in FORMATS]
)
def test_checkpoint_loads_as_its_producer_quantized_it(dense_folder, tmp_path, fmt):
    produced = export_checkpoint(dense_folder, tmp_path / fmt, fmt)
    method = "nvfp4" if fmt.endswith("nvfp4") else "fp8"
    assert checkpoint_quantization(tmp_path / fmt).method == method
    with Engine(str(tmp_path / fmt), **ENGINE) as eng:
        runner = eng.scheduler.runner
        assert runner.quantization == method
        for n, layer in enumerate(runner.model.layers):
            p = f"model.layers.{n}."
            parts = {
                "qkv": [f"{p}self_attn.{x}_proj.weight" for x in "qkv"],
                "o_proj": [f"{p}self_attn.o_proj.weight"],
                "gate_up": [f"{p}mlp.gate_proj.weight", f"{p}mlp.up_proj.weight"],
                "down": [f"{p}mlp.down_proj.weight"],
            }
            got = {
                "qkv": layer.qkv,
                "o_proj": layer.o_proj,
                "gate_up": layer.mlp.gate_up,
                "down": layer.mlp.down,
            }
            for key, names in parts.items():
                expected = join_weights([produced[name] for name in names]).dequantize()
                assert torch.equal(got[key].dequantize(), expected), (fmt, key)
        out = [r["output_ids"] for r in eng.generate(input_ids=PROMPTS, sampling_params=GREEDY)]
    if fmt in SAME_AS_ON_LOAD:
        with Engine(str(dense_folder), quantization=SAME_AS_ON_LOAD[fmt], **ENGINE) as eng:
            on_load = [
                r["output_ids"] for r in eng.generate(input_ids=PROMPTS, sampling_params=GREEDY)
            ]
        assert out == on_load


def test_a_conflicting_flag_and_an_unknown_scheme_are_refused(dense_folder, tmp_path):
    export_checkpoint(dense_folder, tmp_path / "fp8", "ct-fp8")
    with pytest.raises(ValueError, match="already compressed-tensors fp8"):
        Engine(str(tmp_path / "fp8"), quantization="nvfp4", **ENGINE)
    config = json.loads((tmp_path / "fp8" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4}
    (tmp_path / "fp8" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="unsupported checkpoint quantization 'gptq'"):
        checkpoint_quantization(tmp_path / "fp8")

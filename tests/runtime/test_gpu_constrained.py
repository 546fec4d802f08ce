"""Constrained decoding on CUDA (dummy weights, the embedded tokenizer): the bitmask applied by
the Triton kernel and jump-forward give the same greedy tokens as the CPU path, and every
finished output of every constraint kind is valid, on CUDA's default FP8 / NVFP4 KV too
(guarded uniqueItems arrays, keyed dictionaries, regex, choices, SQL)."""

import json
import re

import pytest

from radixgen.runtime.engine import Engine
from tests.grammar.schemas import SUPPORTED

pytestmark = pytest.mark.gpu
jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = [
    "unique_string_set",
    "unique_integer_set",
    "dict_enum_keys",
    "dict_pattern_keys",
    "min_properties_optional",
    "nested",
    "dict_tree",
]
REGEX = r"(Paris|London|Rome), [0-9]{1,3} km, (north|south)"


def _cases():
    cases = [{"json_schema": json.dumps(SUPPORTED[name])} for name in SCHEMAS]
    return cases + [{"regex": REGEX}, {"choices": ["yes", "no", "maybe not"]}, {"lark": "sql"}]


def _check(case: dict, out: dict) -> bool:
    """Whether the output finished (then it must be valid)."""
    if out["meta_info"]["finish_reason"]["type"] != "stop":
        return False
    text = out["text"]
    if "json_schema" in case:
        jsonschema.validate(json.loads(text), json.loads(case["json_schema"]))
    elif "regex" in case:
        assert re.fullmatch(REGEX, text), text
    elif "choices" in case:
        assert text in case["choices"]
    else:
        from radixgen.grammar.cfg.grammar import build_lark, shipped_grammar

        build_lark(shipped_grammar("sql")).parse(text)
    return True


def test_cuda_constrained_greedy_equals_cpu(tiny_model_path):
    prompts = [[5, 17 + i, 300, 4000 + i] for i in range(len(_cases()))]
    params = [{"temperature": 0, "max_new_tokens": 96, **c} for c in _cases()]
    outputs = []
    for device in ("cpu", "cuda"):
        engine = Engine(
            str(tiny_model_path),
            load_format="dummy",
            dtype="float32",
            device=device,
            max_total_tokens=8192,
            kv_cache_dtype="fp32",
        )
        outputs.append(engine.generate(input_ids=prompts, sampling_params=params))
        engine.shutdown()
    assert [o["output_ids"] for o in outputs[0]] == [o["output_ids"] for o in outputs[1]]
    finished = sum(_check(c, o) for c, o in zip(_cases(), outputs[1]))
    assert finished >= 3


def test_cuda_sampled_constrained_outputs_are_valid_on_mixed_kv(tiny_model_path):
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=16384,
    )
    assert engine.scheduler.runner.kv_dtypes == ("fp8_e4m3", "nvfp4")
    cases = _cases() * 4
    prompts = [[5, 17 + i % 50, 300, 4000 + i] for i in range(len(cases))]
    params = [
        {"temperature": 1.0, "seed": i, "max_new_tokens": 160, **c} for i, c in enumerate(cases)
    ]
    outs = engine.generate(input_ids=prompts, sampling_params=params)
    finished = sum(_check(c, o) for c, o in zip(cases, outs))
    assert finished >= len(cases) // 2, finished
    engine.shutdown()

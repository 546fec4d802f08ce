"""The embedded model generates coherently with quantized KV (`kv_cache_dtype` fp8_e4m3 and
nvfp4) on the CPU. Greedy agreement with a bf16 KV cache is reported (tiny models have many
near-tied logits, so exact agreement is not the bar); coherence is: the bf16-KV model finds the
quantized-KV outputs about as likely as its own greedy outputs."""

import pytest

from radixgen.runtime.engine import Engine
from tests.runtime.prompts import PROMPTS, chat_ids, mean_nll

pytestmark = pytest.mark.model
MAX_NEW = 16
GREEDY = {"max_new_tokens": MAX_NEW, "temperature": 0}


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [chat_ids(tokenizer, p) for p in PROMPTS[:3]]


@pytest.fixture(scope="module")
def reference(model_path):
    eng = Engine(str(model_path), dtype="float32", kv_cache_dtype="bf16")
    yield eng
    eng.shutdown()


@pytest.mark.parametrize("kind, max_extra_nll", [("fp8_e4m3", 0.25), ("nvfp4", 0.75)])
def test_quantized_kv_generates_coherently(model_path, reference, prompts, kind, max_extra_nll):
    ref_out = [
        r["output_ids"] for r in reference.generate(input_ids=prompts, sampling_params=GREEDY)
    ]
    eng = Engine(str(model_path), dtype="float32", kv_cache_dtype=kind)
    try:
        out = [r["output_ids"] for r in eng.generate(input_ids=prompts, sampling_params=GREEDY)]
    finally:
        eng.shutdown()
    agree = [
        next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), min(len(x), len(y)))
        for x, y in zip(out, ref_out)
    ]
    rate = sum(agree) / sum(len(r) for r in ref_out)
    ref_nll, nll = mean_nll(reference, prompts, ref_out), mean_nll(reference, prompts, out)
    print(
        f"\n{kind}: greedy agreement with bf16 KV {rate:.0%} (tokens before divergence {agree}); "
        f"NLL under bf16 KV {nll:.3f} vs its own greedy {ref_nll:.3f}"
    )
    assert all(len(o) > 0 for o in out)
    assert nll <= ref_nll + max_extra_nll, (kind, rate, nll, ref_nll)

"""Several prompts mid-prefill in one forward through the kernel attention backend (under the
Triton interpreter here): two long prompts' chunks over their cached prefixes, a short prompt's
whole prefill and decode rows in one mixed batch give the torch backend's greedy outputs."""

import pytest

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq
from tests.kernels.conftest import KERNEL_DEVICE
from tests.runtime.conftest import tiny_model_path  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(
    KERNEL_DEVICE != "cpu", reason="the GPU run uses the real kernels elsewhere"
)
PROMPTS = {
    "long-a": list(range(1000, 1130)),
    "long-b": list(range(2000, 2090)),
    "short": [300, 301, 302, 303],
}


def _run(tiny_model_path, backend: str, kv: dict) -> tuple[dict[str, list[int]], int]:
    eng = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="float32",
        max_total_tokens=512,
        attention_backend=backend,
        chunked_prefill_size=32,
        **kv,
    )
    sched, tokens, most_partial = eng.scheduler, {}, 0
    params = SamplingParams(max_new_tokens=4, temperature=0.0, ignore_eos=True)
    for rid in ("long-a", "long-b"):
        sched.handle(GenerateReq(rid=rid, input_ids=PROMPTS[rid], params=params))
    for step in range(200):
        if step == 2:
            sched.handle(GenerateReq(rid="short", input_ids=PROMPTS["short"], params=params))
        for out in sched.step():
            tokens.setdefault(out.rid, []).extend(out.token_ids)
        most_partial = max(most_partial, len(sched.chunked))
        if not sched.has_work:
            break
    eng.shutdown()
    return tokens, most_partial


@pytest.mark.parametrize(
    "kv", [{}, {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4"}], ids=["fp32", "mixed"]
)
def test_partial_prefills_through_kernels_match_torch(tiny_model_path, kv):
    (torch_out, _), (kernel_out, most_partial) = (
        _run(tiny_model_path, b, kv) for b in ("torch", "triton")
    )
    assert most_partial == 2  # both long prompts were mid-prefill together
    assert set(kernel_out) == set(PROMPTS) and all(len(t) == 4 for t in kernel_out.values())
    assert kernel_out == torch_out

"""Prompt-token logprobs (`logprob_start_len`) equal HF transformers' log-softmax, whether the
prompt was cached before, chunked, or batched; `max_new_tokens=0` prefills and caches a prompt."""

import pytest
import torch

from radixgen.runtime.engine import Engine
from tests.runtime.prompts import PROMPTS, chat_ids

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [chat_ids(tokenizer, p) for p in PROMPTS[:3]]


@pytest.fixture(scope="module")
def hf_logprobs(model_path, prompts):
    """Per prompt: logprob of token p under the logits at p - 1, for p >= 1."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    out = []
    with torch.no_grad():
        for ids in prompts:
            lp = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), dim=-1)
            out.append(lp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist())
    return out


def _params(start: int, max_new: int = 1) -> dict:
    return {
        "max_new_tokens": max_new,
        "temperature": 0,
        "return_logprob": True,
        "logprob_start_len": start,
    }


def _check(result, ids, ref, start):
    got = result["meta_info"]["input_token_logprobs"]
    assert len(got) == len(ids) - start
    if start == 0:
        assert got[0] is None  # the first prompt token has no logprob
        got = got[1:]
    assert got == pytest.approx(ref[max(start, 1) - 1 :], abs=2e-4)


@pytest.mark.parametrize("chunk", [None, 7])
def test_prompt_logprobs_match_hf_after_caching(model_path, prompts, hf_logprobs, chunk):
    eng = Engine(str(model_path), dtype="float32", chunked_prefill_size=chunk)
    try:
        for ids in prompts:  # cache every prompt fully first
            eng.generate(input_ids=ids, sampling_params={"max_new_tokens": 1, "temperature": 0})
        starts = [0, 5, len(prompts[2]) - 2]
        results = eng.generate(input_ids=prompts, sampling_params=[_params(s) for s in starts])
        for result, ids, ref, start in zip(results, prompts, hf_logprobs, starts):
            _check(result, ids, ref, start)
            # the cache served what precedes the first wanted logit, and no more
            assert result["meta_info"]["cached_tokens"] == max(start, 1) - 1
    finally:
        eng.shutdown()


def test_zero_new_tokens_prefills_and_caches_the_prompt(model_path, prompts, hf_logprobs):
    eng = Engine(str(model_path), dtype="float32")
    try:
        first = eng.generate(input_ids=prompts[0], sampling_params=_params(3, max_new=0))
        assert first["output_ids"] == [] and first["meta_info"]["finish_reason"]["type"] == "length"
        _check(first, prompts[0], hf_logprobs[0], 3)
        # a prompt-only request caches all but its last token; one that generates reads them all
        again = eng.generate(input_ids=prompts[0], sampling_params={"max_new_tokens": 1})
        assert again["meta_info"]["cached_tokens"] == len(prompts[0]) - 1
        assert "input_token_logprobs" not in again["meta_info"]
    finally:
        eng.shutdown()

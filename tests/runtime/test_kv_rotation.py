"""q/k Hadamard rotation for quantized KV pools (`kv_rotation`): the matrix is orthonormal, so
attention over full-precision KV is unchanged, and FP8 keys stored rotated keep the model
closer to its full-precision outputs than unrotated ones."""

import math

import pytest
import torch

from radixgen.runtime.engine import Engine
from radixgen.runtime.model.layers import hadamard_rotation
from tests.runtime.prompts import PROMPTS


@pytest.mark.parametrize("head_dim, block", [(64, 64), (128, 128), (96, 32), (80, 16)])
def test_hadamard_rotation_is_orthonormal_block_diagonal(head_dim, block):
    h = hadamard_rotation(head_dim, torch.float64, "cpu")
    assert torch.equal(h, h.T)
    torch.testing.assert_close(
        h @ h.T, torch.eye(head_dim, dtype=torch.float64), rtol=0, atol=1e-12
    )
    blocks = torch.block_diag(
        *[torch.ones(block, block, dtype=torch.float64)] * (head_dim // block)
    )
    assert torch.equal(h.abs() > 0, blocks > 0)
    assert torch.allclose(
        h.abs()[blocks > 0], torch.tensor(1 / math.sqrt(block), dtype=torch.float64)
    )


def _passage_ids(tokenizer, n: int) -> list[int]:
    """n tokens of English prose: the prompts, then docstrings of this package."""
    from radixgen.radix import quant_kv_pool
    from radixgen.runtime import model_runner, scheduler

    text = "\n\n".join(
        [" ".join(PROMPTS), quant_kv_pool.__doc__, model_runner.__doc__, scheduler.__doc__]
    )
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) >= n
    return ids[:n]


def _prompt_logprobs(model_path, ids: list[int], **kv) -> tuple[torch.Tensor, bool]:
    eng = Engine(str(model_path), dtype="float32", **kv)
    try:
        params = {"max_new_tokens": 0, "return_logprob": True, "logprob_start_len": 0}
        res = eng.generate(input_ids=[ids], sampling_params=params)[0]
        rotated = eng.scheduler.runner.kv_rotation
    finally:
        eng.shutdown()
    return torch.tensor(
        [lp for lp in res["meta_info"]["input_token_logprobs"] if lp is not None]
    ), rotated


@pytest.mark.model
def test_rotation_matches_unrotated_on_full_precision_kv(model_path, tokenizer):
    ids = _passage_ids(tokenizer, 160)
    plain, rotated_flag = _prompt_logprobs(model_path, ids, kv_cache_dtype="fp32")
    rotated, flag = _prompt_logprobs(model_path, ids, kv_cache_dtype="fp32", kv_rotation="on")
    assert (rotated_flag, flag) == (False, True)  # auto leaves full-precision pools alone
    assert plain.numel() == len(ids) - 1
    torch.testing.assert_close(rotated, plain, rtol=0, atol=2e-3)


@pytest.mark.model
def test_rotation_brings_fp8_kv_closer_to_full_precision(model_path, tokenizer):
    ids = _passage_ids(tokenizer, 400)
    ref, _ = _prompt_logprobs(model_path, ids, kv_cache_dtype="fp32")
    unrotated, flag_off = _prompt_logprobs(
        model_path, ids, kv_cache_dtype="fp8_e4m3", kv_rotation="off"
    )
    rotated, flag_auto = _prompt_logprobs(model_path, ids, kv_cache_dtype="fp8_e4m3")
    assert (flag_off, flag_auto) == (False, True)  # auto rotates for a quantized pool
    err_off, err_on = (unrotated - ref).abs().mean().item(), (rotated - ref).abs().mean().item()
    print(f"\nmean |logprob error| of fp8 KV: {err_off:.4f} unrotated, {err_on:.4f} rotated")
    assert err_on < 0.9 * err_off


def test_unknown_rotation_value_is_refused(model_path):
    with pytest.raises(ValueError, match="kv_rotation"):
        Engine(str(model_path), dtype="float32", kv_rotation="sometimes")

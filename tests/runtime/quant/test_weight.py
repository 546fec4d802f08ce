"""QuantizedWeight: quantize-on-load equals an independent torch reference quantizer, fused
weights concatenate exactly, and the CPU matmul is the dense matmul of the dequantized weight."""

import pytest
import torch
import torch.nn.functional as F

from radixgen.kernels.nvfp4 import (
    E2M1_VALUES,
    dequantize_nvfp4_ref,
    e2m1_codes_ref,
    quantize_nvfp4_ref,
)
from radixgen.runtime.quant.linear import quantized_linear
from radixgen.runtime.quant.scale_search import CANDIDATE_STEPS
from radixgen.runtime.quant.weight import (
    is_quantizable,
    join_weights,
    quantize_fp8_weight,
    quantize_nvfp4_weight,
    quantize_state_dict,
)


def _weight(rows=48, cols=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * 0.02
    w[3, 5] = 0.4  # an outlier, as real weights have
    w[7] = 0.0  # an all-zero row
    return w


def test_fp8_is_per_channel_e4m3():
    w = _weight()
    q = quantize_fp8_weight(w)
    amax = w.abs().amax(1, keepdim=True)
    scale = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
    expected = (w / scale).to(torch.float8_e4m3fn).float() * scale
    assert q.data.dtype == torch.float8_e4m3fn and q.scale.shape == (48, 1)
    assert torch.equal(q.dequantize(), expected)


def test_nvfp4_round_to_nearest_is_the_kv_pool_format():
    w = _weight()
    q = quantize_nvfp4_weight(w, scale_search=False)
    codes, scales, s_t = quantize_nvfp4_ref(w)  # the KV pools' quantizer, per-tensor scale
    assert torch.equal(q.data, codes) and torch.equal(
        q.block_scales.view(torch.uint8), scales.view(torch.uint8)
    )
    assert torch.equal(q.dequantize(), dequantize_nvfp4_ref(codes, scales, s_t, torch.float32))


def _search_reference(w: torch.Tensor, s_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block by block: the candidate E4M3 scales next to round-to-nearest's, each block's codes
    the kernels' E2M1 rounding, the least squared error kept (the first candidate on a tie)."""
    _, rtn_scales, _ = quantize_nvfp4_ref(w, s_t)
    rtn_bits = rtn_scales.view(torch.uint8).long()
    codes = torch.zeros(*w.shape, dtype=torch.uint8)
    bits = torch.zeros_like(rtn_bits)
    for r in range(w.shape[0]):
        for b in range(w.shape[1] // 16):
            block, best = w[r, 16 * b : 16 * b + 16], None
            for step in CANDIDATE_STEPS:
                cand = int(min(max(int(rtn_bits[r, b]) + step, 1), 126))
                scale = (
                    torch.tensor([cand], dtype=torch.uint8).view(torch.float8_e4m3fn).float() * s_t
                )
                c = e2m1_codes_ref(block / scale)
                err = float(((torch.tensor(E2M1_VALUES)[c.long()] * scale - block) ** 2).sum())
                if best is None or err < best[0]:
                    best = (err, cand, c)
            bits[r, b], codes[r, 16 * b : 16 * b + 16] = best[1], best[2]
    return codes[:, 0::2] | (codes[:, 1::2] << 4), bits.to(torch.uint8)


def test_nvfp4_scale_search_equals_its_reference_and_lowers_the_error():
    w = _weight()
    rtn, searched = (
        quantize_nvfp4_weight(w, scale_search=False),
        quantize_nvfp4_weight(w, scale_search=True),
    )
    codes, bits = _search_reference(w, searched.scale[0, 0])
    assert torch.equal(searched.data, codes)
    assert torch.equal(searched.block_scales.view(torch.uint8), bits)
    err = lambda q: ((q.dequantize() - w) ** 2).unflatten(-1, (-1, 16)).sum(-1)  # noqa: E731
    assert bool((err(searched) <= err(rtn) * (1 + 1e-5)).all())
    assert float(err(searched).sum()) < 0.97 * float(err(rtn).sum())


def test_fused_weights_concatenate_exactly():
    parts = [_weight(32, 64, s) * (s + 1) for s in range(3)]  # different tensor scales
    for quantize in (quantize_fp8_weight, quantize_nvfp4_weight):
        qs = [quantize(p) for p in parts]
        fused = join_weights(qs)
        assert fused.shape == (96, 64)
        assert torch.equal(fused.dequantize(), torch.cat([q.dequantize() for q in qs]))
        stacked = join_weights(qs, stack=True)
        assert torch.equal(stacked.dequantize(), torch.stack([q.dequantize() for q in qs]))
    with pytest.raises(ValueError, match="share one quantization"):
        join_weights([quantize_fp8_weight(parts[0]), quantize_nvfp4_weight(parts[1])])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_linear_is_the_dequantized_matmul(dtype):
    w, x = _weight(), torch.randn(5, 64).to(dtype)
    for q in (quantize_fp8_weight(w), quantize_nvfp4_weight(w)):
        bias = torch.randn(48).to(dtype)
        expected = F.linear(x, q.dequantize(dtype), bias)
        assert torch.allclose(
            quantized_linear(x, q, bias).float(), expected.float(), atol=1e-2, rtol=1e-2
        )
        assert q.nbytes < w.numel() * 2  # the stored form is smaller than bf16


def test_only_linear_projections_are_quantized():
    w = torch.zeros(32, 32)
    assert is_quantizable("model.layers.0.self_attn.q_proj.weight", w, False)
    assert is_quantizable("model.layers.1.mlp.experts.3.down_proj.weight", w, False)
    assert not is_quantizable("model.layers.0.mlp.gate.weight", w, False)  # MoE router
    assert not is_quantizable("model.layers.0.input_layernorm.weight", w[0], False)
    assert not is_quantizable("model.embed_tokens.weight", w, True)
    assert not is_quantizable("lm_head.weight", w, False) and is_quantizable(
        "lm_head.weight", w, True
    )


def test_tied_lm_head_is_quantized_only_when_asked():
    embed = _weight(64, 32)
    weights = quantize_state_dict(
        {"model.embed_tokens.weight": embed}, "fp8", quantize_lm_head=True
    )
    assert torch.equal(weights["model.embed_tokens.weight"], embed)
    assert weights["lm_head.weight"].format == "fp8"
    assert "lm_head.weight" not in quantize_state_dict({"model.embed_tokens.weight": embed}, "fp8")


def test_a_weight_kernel_that_disagrees_is_switched_off(monkeypatch):
    from radixgen.runtime.quant import linear

    monkeypatch.setitem(linear.WEIGHT_KERNEL_MAX_M, "fp8", 16)
    monkeypatch.setitem(linear.WEIGHT_KERNEL_MAX_M, "nvfp4", 64)
    g = torch.Generator().manual_seed(3)
    weights = {
        "a.weight": quantize_fp8_weight(torch.randn(32, 64, generator=g)),
        "b.weight": quantize_nvfp4_weight(torch.randn(32, 64, generator=g)),
        "norm.weight": torch.ones(64),
    }

    def exact(x, w):
        return F.linear(x.float(), w.dequantize(torch.float32))

    def broken_fp8(x, w):
        return exact(x, w) * (2.0 if w.format == "fp8" else 1.0)

    assert linear.check_weight_kernels(weights, torch.float32, kernel=exact) == set()
    assert linear.WEIGHT_KERNEL_MAX_M == {"fp8": 16, "nvfp4": 64}
    assert linear.check_weight_kernels(weights, torch.float32, kernel=broken_fp8) == {"fp8"}
    assert linear.WEIGHT_KERNEL_MAX_M == {"fp8": 0, "nvfp4": 64}

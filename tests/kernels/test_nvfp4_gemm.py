"""The weight-only GEMMs (NVFP4 W4A16, FP8 W8A16) against their torch references
(TRITON_INTERPRET=1 on the CPU), over the tilings the planner and the benchmark use."""

import pytest
import torch

from radixgen.kernels._common import interpreting
from radixgen.kernels.fp8_gemm import fp8_weight_linear, fp8_weight_linear_ref
from radixgen.kernels.nvfp4 import quantize_nvfp4_ref
from radixgen.kernels.nvfp4_gemm import nvfp4_linear, nvfp4_linear_ref
from radixgen.kernels.weight_gemm import plan_tiling

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() or interpreting()), reason="needs CUDA or TRITON_INTERPRET=1"
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# (m, n, k, tiling overrides): one K tile, several, split-K with a ragged last slice, masked
# rows and columns, and two M tiles
CASES = [
    (1, 48, 64, {"block_n": 32}),
    (5, 64, 256, {"block_n": 32, "split": 2}),
    (3, 40, 384, {"block_n": 32, "block_k": 128, "split": 2}),
    (17, 80, 128, {"block_m": 16, "block_n": 64, "block_k": 64, "split": 1}),
]


@pytest.mark.parametrize("m, n, k, tiling", CASES)
def test_nvfp4_gemm_matches_reference(m, n, k, tiling):
    g = torch.Generator().manual_seed(m * n + k)
    w = torch.randn(n, k, generator=g)
    rows = torch.rand(n, 1, generator=g) + 0.5
    codes, scales, s_t = quantize_nvfp4_ref(w, rows / 2688)
    codes[0, 0] = 0x8F  # -6 in the high nibble, -0 (code 8) in the low one
    x = torch.randn(m, k, generator=g)
    args = [t.to(DEVICE) for t in (x, codes, scales, s_t)]
    got = nvfp4_linear(*args, **tiling)
    expected = nvfp4_linear_ref(*args)
    assert got.shape == (m, n)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("m, n, k, tiling", CASES)
def test_fp8_weight_gemm_matches_reference(m, n, k, tiling):
    g = torch.Generator().manual_seed(m + n * k)
    w = torch.randn(n, k, generator=g)
    scale = w.abs().amax(1, keepdim=True) / 448
    q = (w / scale).to(torch.float8_e4m3fn)
    x, bias = torch.randn(m, k, generator=g), torch.randn(n, generator=g)
    args = [t.to(DEVICE) for t in (x, q, scale, bias)]
    got = fp8_weight_linear(*args, **tiling)
    assert torch.allclose(got, fp8_weight_linear_ref(*args), atol=1e-4, rtol=1e-4)


def test_planner_fills_the_device_and_respects_k():
    small = plan_tiling(1, 4096, 4096, torch.device("cpu"))
    assert small.block_m == 16 and 4096 % small.block_k == 0
    assert plan_tiling(64, 4096, 4096, torch.device("cpu")).block_m == 64
    with pytest.raises(ValueError, match="multiple of block_k"):
        plan_tiling(1, 64, 96, torch.device("cpu"), block_k=64)


def test_bad_shapes_are_refused():
    codes = torch.zeros(8, 32, dtype=torch.uint8)
    scales = torch.ones(8, 4).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="does not match"):
        nvfp4_linear(torch.zeros(2, 32), codes, scales, torch.ones(8))
    with pytest.raises(ValueError, match="does not match"):
        fp8_weight_linear(torch.zeros(2, 32), torch.zeros(8, 64).to(torch.float8_e4m3fn), scales)


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
    reason="torch._scaled_mm needs CUDA compute capability >= 8.9",
)
def test_fp8_scaled_mm_matches_reference():
    from radixgen.kernels.fp8_gemm import fp8_linear, fp8_linear_ref

    x = torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(128, 256, device="cuda")
    scale = w.abs().amax(1, keepdim=True) / 448
    q = (w / scale).to(torch.float8_e4m3fn)
    got, expected = fp8_linear(x, q, scale), fp8_linear_ref(x, q, scale)
    assert torch.allclose(got.float(), expected.float(), atol=0.05, rtol=0.02)


# Triton 3.9's interpreter computes bf16 tl.dot wrongly (a plain bf16 x bf16 dot is off by 1e10
# there), so bf16 runs on CUDA only; fp16 takes the same half-precision path everywhere.
HALF_DTYPES = [torch.float16] + ([torch.bfloat16] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_half_activations_stay_within_their_rounding(dtype):
    g = torch.Generator().manual_seed(7)
    w = torch.randn(64, 256, generator=g)
    codes, scales, s_t = quantize_nvfp4_ref(w, torch.full((64, 1), 1 / 2688))
    f8_scale = w.abs().amax(1, keepdim=True) / 448
    f8 = (w / f8_scale).to(torch.float8_e4m3fn)
    x = torch.randn(3, 256, generator=g).to(dtype)
    cases = (
        (nvfp4_linear, nvfp4_linear_ref, (codes, scales, s_t)),
        (fp8_weight_linear, fp8_weight_linear_ref, (f8, f8_scale)),
    )
    for kernel, ref, weight in cases:
        args = [t.to(DEVICE) for t in (x, *weight)]
        got, want = kernel(*args).float(), ref(*args).float()
        assert got.dtype == want.dtype and (got - want).norm() / want.norm() < 1e-2

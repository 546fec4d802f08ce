"""The NVFP4 W4A16 GEMM against its torch reference (TRITON_INTERPRET=1 on the CPU)."""

import pytest
import torch

from radixgen.kernels._common import interpreting
from radixgen.kernels.nvfp4 import quantize_nvfp4_ref
from radixgen.kernels.nvfp4_gemm import nvfp4_linear, nvfp4_linear_ref

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() or interpreting()), reason="needs CUDA or TRITON_INTERPRET=1"
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("m, n, k", [(1, 48, 64), (5, 64, 128), (17, 80, 64)])
def test_gemm_matches_reference(m, n, k):
    g = torch.Generator().manual_seed(m * n + k)
    w = torch.randn(n, k, generator=g)
    rows = torch.rand(n, 1, generator=g) + 0.5
    codes, scales, s_t = quantize_nvfp4_ref(w, rows / 2688)
    x = torch.randn(m, k, generator=g)
    args = [t.to(DEVICE) for t in (x, codes, scales, s_t)]
    got = nvfp4_linear(*args, block_n=32)
    expected = nvfp4_linear_ref(*args)
    assert got.shape == (m, n)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_bad_shapes_are_refused():
    codes = torch.zeros(8, 32, dtype=torch.uint8)
    scales = torch.ones(8, 4).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="does not match"):
        nvfp4_linear(torch.zeros(2, 32), codes, scales, torch.ones(8))


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

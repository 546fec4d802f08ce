"""NVFP4: the E2M1 grid and rounding, scales, packing, error bounds, Triton == reference.

Error bound used below (derived in test_round_trip_error_bound): with S = block_scale * s_T,
every element satisfies |x - x_hat| <= max(S, block_amax - 6 S); when the block scale is an
E4M3 normal (>= 2^-6), this gives |x - x_hat| <= (17 / 96) * block_amax.
"""

import math
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixgen import kernels
from radixgen.kernels import nvfp4
from tests.kernels.conftest import KERNEL_DEVICE

BACKENDS = ["torch", "triton"]
GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # E2M1 magnitude of codes 0..7


def _q(x, tensor_scale=None, backend="torch"):
    x = x.to(KERNEL_DEVICE) if backend == "triton" else x
    codes, scales, s_t = kernels.quantize_nvfp4(x, tensor_scale, backend=backend)
    return codes.cpu(), scales.cpu(), s_t.cpu()


def _round_trip(x, tensor_scale=None, backend="torch"):
    codes, scales, s_t = _q(x, tensor_scale, backend)
    return kernels.dequantize_nvfp4(codes, scales, s_t, torch.float32, backend="torch")


def _unpack(codes):
    return torch.stack([codes & 15, codes >> 4], dim=-1).flatten(-2)


def _oracle_code(v: float) -> int:
    """Nearest E2M1 grid value, ties to the even code, saturating; sign in bit 3 for v < 0."""
    a = min(abs(v), 6.0)
    best = min(range(8), key=lambda c: (abs(GRID[c] - a), c % 2))
    return best + (8 if v < 0 else 0)


# ---------------------------------------------------------------- the E2M1 grid


@pytest.mark.parametrize("backend", BACKENDS)
def test_code_table_round_trips_exactly(backend):
    # tensor_scale 1 and block amax 6 make block_scale 1, so codes see the raw values
    values = torch.tensor(nvfp4.E2M1_VALUES)  # code c has value E2M1_VALUES[c]; c = 8 is -0
    codes, scales, _ = _q(values[None], 1.0, backend)
    expected = torch.arange(16, dtype=torch.uint8)
    expected[8] = 0  # -0.0 is not < 0: it encodes as +0
    assert torch.equal(_unpack(codes)[0], expected)
    assert scales.float().tolist() == [[1.0]]
    assert torch.equal(_round_trip(values[None], 1.0, backend)[0], values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_round_half_to_even(backend):
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]  # 6.0 pins the block scale to 1
    expect = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0]
    x = torch.tensor([ties + [-t for t in ties]])
    out = _round_trip(x, 1.0, backend)[0]
    assert out.tolist() == expect + [-e for e in expect]


@pytest.mark.parametrize("backend", BACKENDS)
def test_saturation_above_six(backend):
    x = torch.tensor([[6.0, 6.5, 7.0, 100.0, 1e30, -9.0] + [0.0] * 10])
    assert nvfp4.e2m1_codes_ref(x)[0, :6].tolist() == [7, 7, 7, 7, 7, 15]
    # a given tensor scale so small that the block scale saturates at 448 too
    big = torch.tensor([[1e4, -1e4, 1.0] + [0.0] * 13])
    out = _round_trip(big, 1e-3, backend)[0]
    top = 6 * 448 * torch.tensor(1e-3)
    assert out[:2].tolist() == [top.item(), -top.item()]


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.floats(-8, 8, width=32), st.sampled_from([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75])
    )
)
def test_codes_match_nearest_even_oracle(v):
    assert nvfp4.e2m1_codes_ref(torch.tensor([v])).item() == _oracle_code(v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_packing_low_nibble_is_even_element(backend):
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1], x[0, 3] = 1.0, 6.0, -0.5  # codes 2, 7, 0, 9
    codes, _, _ = _q(x, 1.0, backend)
    assert codes[0, :2].tolist() == [2 | (7 << 4), 0 | (9 << 4)]
    assert codes.shape == (1, 8)


# ---------------------------------------------------------------- scales and special inputs


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_zero_tensor_and_block_get_scale_one(backend):
    codes, scales, s_t = _q(torch.zeros(2, 32), None, backend)
    assert s_t.item() == 1.0 and (scales.float() == 1.0).all() and (codes == 0).all()
    x = torch.randn(2, 32, generator=torch.Generator().manual_seed(0))
    x[1, 16:] = 0.0
    codes, scales, _ = _q(x, None, backend)
    assert scales[1, 1].float().item() == 1.0 and (codes[1, 8:] == 0).all()
    assert (scales[:, 0].float() != 1.0).all()


def test_data_tensor_scale_is_amax_over_6_times_448():
    x = torch.tensor([[0.5] * 15 + [-12.0]])
    _, scales, s_t = _q(x)
    assert s_t.dtype == torch.float32 and s_t.item() == torch.tensor(12.0 / 2688.0).item()
    assert scales.float().item() == 448.0  # the block holding amax gets the largest scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiny_inputs(backend):
    gen = torch.Generator().manual_seed(1)
    # blocks 1e-5 below the tensor amax: E4M3-subnormal block scales (< 2^-6)
    x = torch.randn(2, 48, generator=gen)
    x[:, 16:32] *= 1e-5
    x[:, 32:] *= 1e-30
    codes, scales, s_t = _q(x, None, backend)
    assert (scales[:, 1].float() < 2**-6).all() and (scales[:, 1].float() > 0).all()
    _check_bound(x, codes, scales, s_t)
    # fp32-subnormal inputs: a finite result with zero or tiny error, never NaN
    denormal = torch.randn(2, 32, generator=gen) * 1e-40
    out = _round_trip(denormal, None, backend)
    assert torch.isfinite(out).all() and (out - denormal).abs().max() <= 1e-39


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_inf_rejected(backend, bad):
    x = torch.ones(1, 16)
    x[0, 3] = bad
    with pytest.raises(ValueError, match="NaN or Inf"):
        _q(x, None, backend)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("where", [(0, 0), (8, 1, 63), (15, 1, 127)])
def test_nonfinite_found_in_any_program(dtype, where):
    """The Triton launcher checks finiteness inside its kernel (a flag, no second pass): a NaN in
    the first, a middle or the last program of a multi-program grid is found, with a calibrated
    or a given per-head scale, and the input is left as it was."""
    x = (
        torch.randn(16, 2, 128, generator=torch.Generator().manual_seed(5))
        .to(dtype)
        .to(KERNEL_DEVICE)
    )
    x[where] = math.nan if where[0] != 8 else -math.inf
    before = x.clone()
    for scale in (None, torch.full((1, 2, 1), 0.01, device=KERNEL_DEVICE)):
        with pytest.raises(ValueError, match="NaN or Inf"):
            kernels.quantize_nvfp4(x, scale, backend="triton")
    assert torch.equal(x.isnan(), before.isnan()) and torch.equal(
        x.nan_to_num(), before.nan_to_num()
    )


# ---------------------------------------------------------------- error bound


def _check_bound(x, codes, scales, s_t):
    out = nvfp4.dequantize_nvfp4_ref(codes, scales, s_t, torch.float32)
    err = (out - x).abs().unflatten(-1, (-1, 16))  # [..., n/16, 16]
    block_amax = x.abs().unflatten(-1, (-1, 16)).amax(-1, keepdim=True)
    step = (scales.float() * s_t).unsqueeze(-1)  # S, the value of E2M1 1.0
    bound = torch.maximum(step, block_amax - 6 * step)
    assert (err <= bound * (1 + 1e-6)).all()
    normal = (
        block_amax / (6 * s_t.unsqueeze(-1)) >= 2**-6
    )  # the exact block scale is an E4M3 normal
    assert (err <= torch.where(normal, 17 / 96 * block_amax * (1 + 1e-6), bound * (1 + 1e-6))).all()
    return err


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip_error_bound(seed):
    # In units of S = block_scale * s_T, values are rounded to the E2M1 grid, whose largest gap
    # (4 -> 6) is 2: |error| <= 1 S unless |x| / S > 6, where it saturates: |error| <= amax - 6 S.
    # A normal E4M3 block scale has relative error <= 2^-4, so S <= (17/16) amax / 6 and
    # amax / S <= 6 / (1 - 1/16) = 6.4: |error| <= max(1, 0.4) S <= (17/96) amax.
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 256, generator=gen) * torch.logspace(-3, 3, 8)[:, None]
    codes, scales, s_t = _q(x)
    err = _check_bound(x, codes, scales, s_t)
    assert err.max() > 0  # the bound is not vacuous: the data really is lossy
    assert (err.norm() / x.norm()).item() < 0.2


# ---------------------------------------------------------------- tensor-scale conventions


def test_global_scale_conversion():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(3)) * 7
    s_t = kernels.nvfp4_tensor_scale(x)
    g = kernels.nvfp4_global_scale(s_t)
    amax = x.abs().max()
    assert torch.allclose(g, 6 * 448 / amax, rtol=2**-22, atol=0)  # TRT-LLM / flashinfer convention
    assert torch.allclose(kernels.nvfp4_tensor_scale_from_global(g), s_t, rtol=2**-22, atol=0)
    # a TRT-LLM global scale converts into the same quantization up to a 1-ulp scale difference
    codes, scales, s_from_g = _q(x, kernels.nvfp4_tensor_scale_from_global(6 * 448 / amax))
    ref = _round_trip(x)
    out = nvfp4.dequantize_nvfp4_ref(codes, scales, s_from_g, torch.float32)
    assert torch.allclose(out, ref, rtol=1e-5, atol=0)
    # flashinfer reconstructs with a division by the global scale
    manual = nvfp4.dequantize_nvfp4_ref(codes, scales, 1.0, torch.float32) / (6 * 448 / amax)
    assert torch.allclose(manual, out, rtol=1e-5, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_head_tensor_scale(backend):
    x = (
        torch.randn(2, 3, 32, generator=torch.Generator().manual_seed(4))
        * torch.tensor([1.0, 100.0, 1e-3])[:, None]
    )
    s_t = kernels.nvfp4_tensor_scale(x, per_head_dim=1)
    assert s_t.shape == (1, 3, 1)
    assert torch.equal(s_t.flatten(), x.abs().amax(dim=(0, 2)) / 2688)
    codes, scales, s_out = _q(x, s_t, backend)
    assert torch.equal(s_out, s_t)
    assert torch.equal(
        scales.float().amax(dim=(0, 2)), torch.full((3,), 448.0)
    )  # each head uses the full range
    _check_bound(x, codes, scales, s_t)
    with pytest.raises(ValueError, match="last"):
        kernels.nvfp4_tensor_scale(x, per_head_dim=-1)


# ---------------------------------------------------------------- Triton == reference


def _assert_bit_exact(x, tensor_scale=None, out_dtype=torch.bfloat16):
    ref = nvfp4.quantize_nvfp4_ref(x, tensor_scale)
    got = nvfp4.quantize_nvfp4(x.to(KERNEL_DEVICE), tensor_scale)
    assert torch.equal(got[0].cpu(), ref[0])
    assert torch.equal(got[1].cpu().view(torch.uint8), ref[1].view(torch.uint8))
    assert torch.equal(got[2].cpu(), ref[2])
    out_ref = nvfp4.dequantize_nvfp4_ref(*ref, out_dtype)
    out = nvfp4.dequantize_nvfp4(*(t.to(KERNEL_DEVICE) for t in ref), out_dtype)
    assert torch.equal(out.cpu().view(torch.uint8), out_ref.view(torch.uint8))


@pytest.mark.parametrize("shape", [(4, 64), (2, 3, 128), (1, 16), (3, 272)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_triton_matches_ref_bit_exact(shape, dtype):
    gen = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(shape, generator=gen) * torch.rand(shape, generator=gen).pow(4) * 50).to(dtype)
    x.view(-1)[:16] = 0.0  # an all-zero block
    _assert_bit_exact(x, out_dtype=dtype)
    _assert_bit_exact(x.float(), tensor_scale=1e-3, out_dtype=torch.float32)  # saturating scales


def test_triton_matches_ref_per_head_scale():
    x = torch.randn(3, 4, 32, generator=torch.Generator().manual_seed(5))
    _assert_bit_exact(x, kernels.nvfp4_tensor_scale(x, per_head_dim=1))
    _assert_bit_exact(x, torch.rand(3, 4, 1, generator=torch.Generator().manual_seed(6)) + 1e-3)


@pytest.mark.gpu
def test_triton_matches_ref_on_gpu_large():
    x = torch.randn(64, 4096, generator=torch.Generator().manual_seed(7), dtype=torch.float32).to(
        torch.bfloat16
    )
    _assert_bit_exact(x)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_validation(backend):
    bad_inputs = [
        (torch.ones(2, 32, dtype=torch.float64), "float32"),
        (torch.ones(2, 32, dtype=torch.int32), "float32"),
        (torch.ones(2, 24), "multiple of 16"),
        (torch.ones(()), "multiple of 16"),
    ]
    for x, match in bad_inputs:
        with pytest.raises(ValueError, match=match):
            _q(x, None, backend)
    # scale tensors too: the Triton launcher checks their values inside its kernel
    tensor_scales = [
        torch.tensor(0.0),
        torch.tensor(-2.0),
        torch.tensor(math.inf),
        torch.tensor([[1.0], [math.nan]]),
        torch.tensor([[0.5], [-0.0]]),
    ]
    for scale, match in [
        (torch.ones(3, 1), "broadcast"),
        (0.0, "> 0"),
        (-1.0, "> 0"),
        (math.nan, "> 0"),
    ] + [(t, "tensor_scale must be finite and > 0") for t in tensor_scales]:
        with pytest.raises(ValueError, match=match):
            _q(torch.ones(2, 32), scale, backend)


def test_launcher_rejects_non_contiguous_and_wrong_device(monkeypatch):
    x = torch.randn(32, 16, device=KERNEL_DEVICE)
    with pytest.raises(ValueError, match="contiguous"):
        nvfp4.quantize_nvfp4(x.t())
    codes, scales, s_t = nvfp4.quantize_nvfp4_ref(torch.randn(4, 32))
    with pytest.raises(ValueError, match="contiguous"):
        nvfp4.dequantize_nvfp4(
            codes.to(KERNEL_DEVICE)[:, ::2], scales.to(KERNEL_DEVICE)[:, ::2], s_t
        )
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA"):
        nvfp4.quantize_nvfp4(torch.randn(4, 32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequantize_validation(backend):
    codes, scales, s_t = nvfp4.quantize_nvfp4_ref(torch.randn(4, 32))
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    codes, scales, s_t = codes.to(dev), scales.to(dev), s_t.to(dev)
    cases = [
        ((codes.to(torch.int8), scales, s_t, torch.float32), "uint8"),
        ((codes, scales.to(torch.float8_e4m3fnuz), s_t, torch.float32), "float8_e4m3fn"),
        ((codes, scales, s_t, torch.float64), "dtype"),
        ((codes[:, :8], scales, s_t, torch.float32), "do not match"),
        ((codes, scales, torch.ones(5, 1, device=dev), torch.float32), "broadcast"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            kernels.dequantize_nvfp4(*args, backend=backend)


def test_dispatch():
    x = torch.randn(2, 32)
    assert torch.equal(
        kernels.quantize_nvfp4(x)[0], nvfp4.quantize_nvfp4_ref(x)[0]
    )  # auto on CPU: ref
    with pytest.raises(ValueError, match="unknown kernel op"):
        kernels.dispatch("quantize_int3", x)
    with pytest.raises(ValueError, match="backend"):
        kernels.quantize_nvfp4(x, backend="cuda")


def test_import_needs_neither_triton_nor_torch():
    code = (
        "import sys, radixgen, radixgen.kernels; assert not {'triton', 'torch'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

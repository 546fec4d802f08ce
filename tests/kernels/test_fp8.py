"""FP8 E4M3: calibrated per-tensor / per-head scales, saturation at 448, error bound, Triton == ref.

Error bound (test_round_trip_error_bound): q = E4M3(x / s) rounds to nearest with 3 mantissa
bits, so for |x / s| >= 2^-6 (E4M3 normals) |x - q s| <= 2^-4 |x|; below, the step is 2^-9 and
|x - q s| <= 2^-10 s. Together: |x - q s| <= max(2^-4 |x|, 2^-10 s) (no saturation: amax / s = 448).
"""

import math

import pytest
import torch

from radixgen import kernels
from radixgen.kernels import fp8
from tests.kernels.conftest import KERNEL_DEVICE

BACKENDS = ["torch", "triton"]


def _q(x, scale=None, per_head_dim=None, backend="torch"):
    x = x.to(KERNEL_DEVICE) if backend == "triton" else x
    q, s = kernels.quantize_fp8(x, scale, per_head_dim, backend=backend)
    return q.cpu(), s.cpu()


def _bits(q):
    return q.view(torch.uint8)


# ---------------------------------------------------------------- scales


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_tensor_scale_from_data(backend):
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0)) * 3
    q, s = _q(x, backend=backend)
    amax = x.abs().max()
    assert s.shape == () and s.dtype == torch.float32 and s.item() == (amax / 448).item()
    assert q.dtype == torch.float8_e4m3fn
    assert q.float().abs().max().item() == 448.0  # the amax element uses the full range


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_head_scale_from_data(backend):
    gains = torch.tensor([1.0, 1e3, 1e-3])
    x = torch.randn(5, 3, 16, generator=torch.Generator().manual_seed(1)) * gains[:, None]
    q, s = _q(x, per_head_dim=1, backend=backend)
    assert s.shape == (1, 3, 1)
    assert torch.equal(s.flatten(), x.abs().amax(dim=(0, 2)) / 448)
    assert torch.equal(q.float().abs().amax(dim=(0, 2)), torch.full((3,), 448.0))
    q_neg, s_neg = _q(x, per_head_dim=-2, backend=backend)
    assert torch.equal(s_neg, s) and torch.equal(_bits(q_neg), _bits(q))


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_zero_input_gets_scale_one(backend):
    q, s = _q(torch.zeros(2, 16), backend=backend)
    assert s.item() == 1.0 and (_bits(q) == 0).all()
    x = torch.randn(2, 2, 8)
    x[:, 1] = 0.0
    _, s = _q(x, per_head_dim=1, backend=backend)
    assert s[0, 1, 0].item() == 1.0 and s[0, 0, 0].item() != 1.0


# ---------------------------------------------------------------- E4M3 range, rounding, saturation


@pytest.mark.parametrize("backend", BACKENDS)
def test_saturates_at_448_not_fnuz(backend):
    x = torch.tensor([448.0, 464.0, 465.0, 500.0, -1e6, 1e30, 240.0, 300.0])
    q, _ = _q(x, 1.0, backend=backend)
    assert q.dtype == torch.float8_e4m3fn and torch.finfo(q.dtype).max == 448.0
    assert q.float().tolist() == [448.0, 448.0, 448.0, 448.0, -448.0, 448.0, 240.0, 288.0]
    assert not torch.isnan(q.float()).any()


def _e4m3_sweep() -> torch.Tensor:
    """Every finite E4M3 value, the midpoints between neighbours (ties), and their fp32 neighbours."""
    values = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    values = values[torch.isfinite(values) & (values >= 0)].unique()  # 0 .. 448, sorted
    mids = (values[1:] + values[:-1]) / 2
    near = torch.cat([torch.nextafter(mids, mids * 2), torch.nextafter(mids, mids * 0)])
    pos = torch.cat([values, mids, near, torch.tensor([1e-6, 1e-30])])
    return torch.cat([pos, -pos])


def test_sweep_rounds_to_nearest_even_like_torch():
    x = _e4m3_sweep()
    q, _ = _q(x, 1.0, backend="triton")
    assert torch.equal(_bits(q), _bits(x.to(torch.float8_e4m3fn)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_code_dequantizes_exactly(backend):
    bits = torch.arange(256, dtype=torch.uint8)
    bits = bits[(bits & 0x7F) != 0x7F]  # drop the two NaN patterns
    q = bits.view(torch.float8_e4m3fn)
    q_dev = q.to(KERNEL_DEVICE) if backend == "triton" else q
    out = kernels.dequantize_fp8(q_dev, 2.0, torch.float32, backend=backend).cpu()
    assert torch.equal(out, q.float() * 2)


# ---------------------------------------------------------------- error bound


@pytest.mark.parametrize("per_head_dim", [None, 0])
def test_round_trip_error_bound(per_head_dim):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 128, generator=gen) * torch.logspace(-4, 4, 6)[:, None]
    q, s = _q(x, per_head_dim=per_head_dim)
    out = kernels.dequantize_fp8(q, s, torch.float32)
    err = (out - x).abs()
    bound = torch.maximum(2**-4 * x.abs(), 2**-10 * s.expand_as(x))
    assert (err <= bound * (1 + 1e-6)).all()
    assert err.max() > 0


# ---------------------------------------------------------------- Triton == reference


def _assert_bit_exact(x, scale=None, per_head_dim=None, out_dtype=torch.bfloat16):
    q_ref, s_ref = fp8.quantize_fp8_ref(x, scale, per_head_dim)
    q, s = fp8.quantize_fp8(x.to(KERNEL_DEVICE), scale, per_head_dim)
    assert torch.equal(_bits(q.cpu()), _bits(q_ref)) and torch.equal(s.cpu(), s_ref)
    out_ref = fp8.dequantize_fp8_ref(q_ref, s_ref, out_dtype)
    out = fp8.dequantize_fp8(q_ref.to(KERNEL_DEVICE), s_ref.to(KERNEL_DEVICE), out_dtype)
    assert torch.equal(out.cpu().view(torch.uint8), out_ref.view(torch.uint8))


@pytest.mark.parametrize("shape", [(4, 64), (2, 3, 128), (3, 5, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_triton_matches_ref_bit_exact(shape, dtype):
    gen = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(shape, generator=gen) * torch.rand(shape, generator=gen).pow(6) * 30).to(dtype)
    _assert_bit_exact(x, out_dtype=dtype)
    _assert_bit_exact(x, per_head_dim=1, out_dtype=dtype)
    _assert_bit_exact(x.float(), scale=0.01, out_dtype=torch.float32)  # saturating


def test_triton_matches_ref_explicit_scales():
    x = torch.randn(3, 4, 16, generator=torch.Generator().manual_seed(3))
    per_token_head = x.abs().amax(-1, keepdim=True) / 448  # [3, 4, 1]
    _assert_bit_exact(x, per_token_head)
    _assert_bit_exact(x, torch.tensor([0.5, 1.0, 2.0, 4.0])[:, None])  # [4, 1]: per head


@pytest.mark.gpu
def test_triton_matches_ref_on_gpu_large():
    x = torch.randn(64, 8, 128, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    _assert_bit_exact(x)
    _assert_bit_exact(x, per_head_dim=1)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_validation(backend):
    x = torch.randn(2, 4, 8)
    cases = [
        ((x.double(),), "float32"),
        ((x.int(),), "float32"),
        ((torch.tensor([1.0, math.nan]),), "NaN or Inf"),
        ((torch.tensor([math.inf]),), "NaN or Inf"),
        ((x, 1.0, 1), "not both"),
        ((x, 0.0), "> 0"),
        (
            (x, torch.tensor(0.0)),
            "> 0",
        ),  # scale tensors: the Triton launcher checks them in its kernel
        ((x, torch.full((1, 4, 1), math.inf)), "> 0"),
        ((x, torch.tensor([1.0, -1.0, 1.0, math.nan]).view(1, 4, 1)), "> 0"),
        ((x, torch.tensor([1.0, 2.0, 1.0, -0.0]).view(1, 4, 1)), "> 0"),
        ((x, torch.ones(3)), "broadcast"),
        ((x, None, 3), "out of range"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            _q(*args, backend=backend)


@pytest.mark.parametrize("where", [0, 1500, 4095])
def test_nonfinite_found_in_any_program(where):
    """The Triton launcher checks finiteness inside its kernel (a flag, no second pass): found in
    the first, a middle or the last of its programs, calibrated or given scale."""
    x = torch.randn(4, 8, 128, generator=torch.Generator().manual_seed(6)).to(KERNEL_DEVICE)
    x.view(-1)[where] = math.inf
    for scale, per_head in (
        (None, None),
        (None, 1),
        (0.5, None),
        (torch.full((1, 8, 1), 0.1), None),
    ):
        scale = scale.to(KERNEL_DEVICE) if isinstance(scale, torch.Tensor) else scale
        with pytest.raises(ValueError, match="NaN or Inf"):
            kernels.quantize_fp8(x, scale, per_head, backend="triton")
    assert x.view(-1)[where] == math.inf and torch.isfinite(x).sum() == x.numel() - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequantize_validation(backend):
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    q = torch.zeros(2, 8, dtype=torch.float8_e4m3fn, device=dev)
    cases = [
        ((q.view(torch.uint8), 1.0), "float8_e4m3fn"),
        ((torch.zeros(2, 8, dtype=torch.float8_e4m3fnuz, device=dev), 1.0), "not FNUZ"),
        ((q, torch.ones(3, device=dev)), "broadcast"),
        ((q, 1.0, torch.int8), "dtype"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            kernels.dequantize_fp8(*args, backend=backend)


def test_launcher_rejects_layouts_it_cannot_run():
    x = torch.randn(16, 8, device=KERNEL_DEVICE)
    with pytest.raises(ValueError, match="contiguous"):
        fp8.quantize_fp8(x.t())
    x3 = torch.randn(3, 4, 16, device=KERNEL_DEVICE)
    with pytest.raises(ValueError, match="one run"):
        fp8.quantize_fp8(x3, torch.ones(3, 1, 16, device=KERNEL_DEVICE))  # varies over dims 0 and 2

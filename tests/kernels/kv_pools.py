"""Random KV pools in the three formats and a float64 attention oracle for the KV kernel tests."""

import math

import torch

from radixgen.kernels.fp8 import quantize_fp8_ref
from radixgen.kernels.kv_layout import FMT_FP8, FMT_NVFP4, KVBuffers
from radixgen.kernels.nvfp4 import dequantize_nvfp4_ref, quantize_nvfp4_ref

FORMATS = ("bf16", "fp8", "nvfp4")


def make_pool(
    fmt: str,
    num_slots: int,
    hkv: int,
    d: int,
    gen: torch.Generator,
    device="cpu",
    float_dtype=torch.float32,
) -> KVBuffers:
    """A pool of random K/V (per-head magnitudes differ) quantized with per-head scales."""
    mag = torch.logspace(-1, 1, hkv, device=gen.device)[None, :, None]
    k = torch.randn(num_slots, hkv, d, generator=gen, device=gen.device) * mag
    v = torch.randn(num_slots, hkv, d, generator=gen, device=gen.device) * mag.flip(1)
    return pool_of(fmt, k, v, device, float_dtype)


def pool_of(
    fmt: str, k: torch.Tensor, v: torch.Tensor, device="cpu", float_dtype=torch.float32
) -> KVBuffers:
    """A pool holding K/V [slots, Hkv, D] (float32), quantized with per-head scales from their amax."""
    if fmt == "bf16":
        pool = KVBuffers(k.to(float_dtype), v.to(float_dtype))
    elif fmt == "fp8":
        ks, vs = k.abs().amax((0, 2)) / 448, v.abs().amax((0, 2)) / 448
        pool = KVBuffers(
            quantize_fp8_ref(k, ks.view(1, -1, 1))[0],
            quantize_fp8_ref(v, vs.view(1, -1, 1))[0],
            ks,
            vs,
        )
    else:
        ks, vs = k.abs().amax((0, 2)) / 2688, v.abs().amax((0, 2)) / 2688
        kc, kb, _ = quantize_nvfp4_ref(k, ks.view(1, -1, 1))
        vc, vb, _ = quantize_nvfp4_ref(v, vs.view(1, -1, 1))
        pool = KVBuffers(kc, vc, ks, vs, kb, vb)
    return to_device(pool, device)


def to_device(kv: KVBuffers, device) -> KVBuffers:
    move = {name: (None if t is None else t.to(device)) for name, t in vars(kv).items()}
    return KVBuffers(**move)


def dequant64(kv: KVBuffers, slots: torch.Tensor):
    """(k, v) float64 [n, Hkv, D] of the slots (on the pool's device), each value scaled exactly once."""
    slots = slots.to(kv.k.device).long()
    if kv.fmt == FMT_FP8:
        return tuple(
            t[slots].double() * s.double().view(1, -1, 1)
            for t, s in ((kv.k, kv.k_scale), (kv.v, kv.v_scale))
        )
    if kv.fmt == FMT_NVFP4:
        return tuple(
            dequantize_nvfp4_ref(c[slots], b[slots], 1.0, torch.float32).double()
            * s.double().view(1, -1, 1)
            for c, b, s in ((kv.k, kv.k_bscale, kv.k_scale), (kv.v, kv.v_bscale, kv.v_scale))
        )
    return kv.k[slots].double(), kv.v[slots].double()


def oracle(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor, sm_scale: float
):
    """float64 attention of q [n, Hq, D] over k, v [L, Hkv, D]: (o [n, Hq, D], lse [n, Hq])."""
    q = q.to(k.device).double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    o = torch.zeros(q.shape, dtype=torch.float64, device=k.device)
    lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float64, device=k.device)
    for i in range(q.shape[0]):
        keys = visible[i].nonzero().flatten()
        if keys.numel():
            s = torch.einsum("hd,lhd->hl", q[i], k[keys]) * sm_scale  # [Hq, n_keys]
            lse[i] = torch.logsumexp(s, -1)
            o[i] = torch.einsum("hl,lhd->hd", torch.exp(s - lse[i][:, None]), v[keys])
    return o, lse


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| over the finite entries of want; got must be finite there and
    -inf wherever want is -inf."""
    got, want = got.cpu().double(), want.cpu().double()
    neg_inf = want == -math.inf
    assert torch.equal(got == -math.inf, neg_inf), "-inf pattern differs"
    assert torch.isfinite(got[~neg_inf]).all(), "NaN/Inf in the result"
    diff = (got[~neg_inf] - want[~neg_inf]).norm()
    return (diff / want[~neg_inf].norm().clamp_min(1e-30)).item()


def csr(lengths: list[int], num_slots: int, gen: torch.Generator, device="cpu"):
    """(indptr int32 [B+1], indices int64 [sum]) with distinct slots in random order."""
    indptr = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    indices = torch.randperm(num_slots, generator=gen, device=gen.device)[: sum(lengths)]
    return indptr.to(device), indices.to(device)


def poisoned(shape, dtype, device):
    return torch.full(shape, math.nan, dtype=dtype, device=device)

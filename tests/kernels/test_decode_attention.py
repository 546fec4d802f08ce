"""decode_attention (Triton under TRITON_INTERPRET=1 here, and its torch reference) against float64
attention over the dequantized pool; split pools merged with merge_state; launcher validation."""

import math
from types import SimpleNamespace

import pytest
import torch

from radixgen import kernels
from radixgen.kernels import decode_attention as da
from radixgen.kernels._common import ctas_per_sm
from radixgen.kernels.kv_layout import KVBuffers
from tests.kernels.conftest import KERNEL_DEVICE
from tests.kernels.kv_pools import (
    FORMATS,
    csr,
    dequant64,
    make_pool,
    oracle,
    poisoned,
    pool_of,
    rel_err,
    to_device,
)

HKV, HQ, D, SLOTS = 2, 4, 32, 64
SM_SCALE = 1 / math.sqrt(D)


def _oracle(q, kv, indptr, indices):
    """float64 (o, lse) per request; an empty request gives o = 0, lse = -inf."""
    outs, lses = [], []
    bounds = indptr.tolist()
    for b in range(q.shape[0]):
        slots = indices[bounds[b] : bounds[b + 1]]
        k, v = dequant64(kv, slots)
        o, lse = oracle(
            q[b : b + 1], k, v, torch.ones(1, slots.numel(), dtype=torch.bool), SM_SCALE
        )
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def _run(q, kv, indptr, indices, out_dtype=torch.float32, **kwargs):
    """The Triton launcher on KERNEL_DEVICE, writing into NaN-poisoned outputs."""
    dev = KERNEL_DEVICE
    out = (poisoned(q.shape, out_dtype, dev), poisoned(q.shape[:2], torch.float32, dev))
    return da.decode_attention(
        q.to(dev),
        to_device(kv, dev),
        indptr.to(dev),
        indices.to(dev),
        SM_SCALE,
        out_dtype=out_dtype,
        out=out,
        **kwargs,
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("num_splits", [1, 4])
def test_decode_matches_float64(fmt, num_splits):
    gen = torch.Generator().manual_seed(num_splits * 10 + FORMATS.index(fmt))
    kv = make_pool(fmt, SLOTS, HKV, D, gen)
    indptr, indices = csr([23, 0, 37], SLOTS, gen)  # an empty request; slots in random order
    q = torch.randn(3, HQ, D, generator=gen) * 2
    want_o, want_lse = _oracle(q, kv, indptr, indices)
    for o, lse in (
        _run(q, kv, indptr, indices, num_splits=num_splits),
        da.decode_attention_ref(q, kv, indptr, indices, SM_SCALE),
    ):
        assert rel_err(o, want_o) < 1e-5 and rel_err(lse, want_lse) < 1e-6
        assert (o[1] == 0).all() and (lse[1] == -math.inf).all()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("num_splits", "q_dtype"), [(1, torch.float32), (3, torch.float32), (1, torch.bfloat16)]
)
def test_scores_growing_along_the_sequence(fmt, num_splits, q_dtype):
    """Scores that climb along each request's keys, by more than the kernel's lazy-rescale threshold
    (2^8) from tile to tile in requests 0 and 1 (by more within a 32-key tile in 0, by less in 1)
    and by less in request 2, whose last key is its maximum
    (a bf16 q makes the dots of quantized pools fp16, where an unrescaled p would overflow)."""
    gen = torch.Generator().manual_seed(21 + FORMATS.index(fmt))
    n = 400
    u = torch.randn(D, generator=gen)
    u = u / u.norm()
    t = torch.arange(n, dtype=torch.float32)
    ramps = (
        t * 0.3 + 3 * torch.sin(t / 4),
        t * 0.1,
        0.01 * t + 0.5 * (t == n - 1),
    )  # natural-log score units
    k = torch.randn(3 * n, HKV, D, generator=gen) * 0.1
    for r, ramp in enumerate(ramps):
        k[r * n : (r + 1) * n] += ramp.view(n, 1, 1) / (10 * SM_SCALE) * u
    kv = pool_of(fmt, k, torch.randn(3 * n, HKV, D, generator=gen), float_dtype=q_dtype)
    indptr, indices = torch.arange(0, 3 * n + 1, n, dtype=torch.int32), torch.arange(3 * n)
    q = (10 * u).expand(3, HQ, D).contiguous().to(q_dtype)
    want_o, want_lse = _oracle(q, kv, indptr, indices)
    assert want_lse[:2].min() > 35  # the climb is real: scores reach e^35 and more
    o, lse = _run(q, kv, indptr, indices, num_splits=num_splits)
    tol = 1e-5 if q_dtype == torch.float32 else 1e-2
    assert rel_err(o, want_o) < tol and rel_err(lse, want_lse) < tol / 10


def test_more_splits_than_tiles_and_int64_indptr():
    gen = torch.Generator().manual_seed(5)
    kv = make_pool("nvfp4", SLOTS, HKV, D, gen)
    indptr, indices = csr([3, 1, 40], SLOTS, gen)
    q = torch.randn(3, HQ, D, generator=gen)
    o, lse = _run(q, kv, indptr.long(), indices.int(), num_splits=7)  # most splits are empty
    want_o, want_lse = _oracle(q, kv, indptr, indices)
    assert rel_err(o, want_o) < 1e-5 and rel_err(lse, want_lse) < 1e-6


@pytest.mark.parametrize("fmt", FORMATS)
def test_bf16_queries(fmt):
    # quantized pools compute in fp16 with a power-of-two prescale of q: huge q must not overflow
    gen = torch.Generator().manual_seed(7)
    kv = make_pool(fmt, SLOTS, HKV, D, gen, float_dtype=torch.bfloat16)
    indptr, indices = csr([30, 9], SLOTS, gen)
    q = (torch.randn(2, HQ, D, generator=gen) * torch.tensor([1e-3, 3e3])[:, None, None]).bfloat16()
    want_o, want_lse = _oracle(q, kv, indptr, indices)
    o, lse = _run(q, kv, indptr, indices, out_dtype=torch.float32)
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
    o16, _ = _run(q, kv, indptr, indices, out_dtype=torch.bfloat16)
    assert o16.dtype == torch.bfloat16 and rel_err(o16, want_o) < 2e-2


def test_fp8_and_nvfp4_split_merged_equals_whole_sequence():
    # prefix tokens in an fp8 pool, generated tokens in an nvfp4 pool: two passes + merge_state
    gen = torch.Generator().manual_seed(11)
    fp8, nvfp4 = make_pool("fp8", SLOTS, HKV, D, gen), make_pool("nvfp4", SLOTS, HKV, D, gen)
    ptr8, idx8 = csr([20, 0, 13], SLOTS, gen)
    ptr4, idx4 = csr([9, 15, 0], SLOTS, gen)
    q = torch.randn(3, HQ, D, generator=gen)
    o8, l8 = _run(q, fp8, ptr8, idx8, num_splits=2)
    o4, l4 = _run(q, nvfp4, ptr4, idx4)
    o, lse = da.merge_state(o8, l8, o4, l4)
    for b, (n8, n4) in enumerate([(20, 9), (0, 15), (13, 0)]):
        k8, v8 = dequant64(fp8, idx8[ptr8[b] : ptr8[b] + n8])
        k4, v4 = dequant64(nvfp4, idx4[ptr4[b] : ptr4[b] + n4])
        visible = torch.ones(1, n8 + n4, dtype=torch.bool)
        want_o, want_lse = oracle(
            q[b : b + 1], torch.cat([k8, k4]), torch.cat([v8, v4]), visible, SM_SCALE
        )
        assert rel_err(o[b : b + 1], want_o) < 1e-5 and rel_err(lse[b : b + 1], want_lse) < 1e-6


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("num_splits", [None, 1, 3, [2, 5]])
def test_decode_attention_pools_equals_whole_sequence(backend, num_splits):
    # one launch per pool into a shared partials buffer, one reduce: a request may have keys in
    # either pool, both or neither (o = 0, lse = -inf, no NaN)
    gen = torch.Generator().manual_seed(12)
    fp8, nvfp4 = make_pool("fp8", SLOTS, HKV, D, gen), make_pool("nvfp4", SLOTS, HKV, D, gen)
    lens = [(20, 9), (0, 15), (13, 0), (0, 0)]
    ptr8, idx8 = csr([a for a, _ in lens], SLOTS, gen)
    ptr4, idx4 = csr([b for _, b in lens], SLOTS, gen)
    q = torch.randn(len(lens), HQ, D, generator=gen)
    dev = KERNEL_DEVICE if backend == "triton" else "cpu"
    parts = [
        (to_device(fp8, dev), ptr8.to(dev), idx8.to(dev)),
        (to_device(nvfp4, dev), ptr4.to(dev), idx4.to(dev)),
    ]
    out = (poisoned(q.shape, torch.bfloat16, dev), poisoned(q.shape[:2], torch.float32, dev))
    fn = da.decode_attention_pools if backend == "triton" else da.decode_attention_pools_ref
    o, lse = fn(
        q.to(dev), parts, SM_SCALE, out_dtype=torch.bfloat16, num_splits=num_splits, out=out
    )
    assert o is out[0] and lse is out[1] and o.dtype == torch.bfloat16
    o, lse = o.float().cpu(), lse.cpu()
    for b, (n8, n4) in enumerate(lens):
        if n8 + n4 == 0:
            assert torch.equal(o[b], torch.zeros_like(o[b])) and bool((lse[b] == -math.inf).all())
            continue
        k8, v8 = dequant64(fp8, idx8[ptr8[b] : ptr8[b] + n8])
        k4, v4 = dequant64(nvfp4, idx4[ptr4[b] : ptr4[b] + n4])
        visible = torch.ones(1, n8 + n4, dtype=torch.bool)
        want_o, want_lse = oracle(
            q[b : b + 1], torch.cat([k8, k4]), torch.cat([v8, v4]), visible, SM_SCALE
        )
        assert rel_err(o[b : b + 1], want_o) < 1e-2 and rel_err(lse[b : b + 1], want_lse) < 1e-5
    with pytest.raises(ValueError, match="at least one"):
        fn(q.to(dev), [], SM_SCALE)
    if backend == "triton":
        for bad in ([1], [1, 0], 0, 1.5):
            with pytest.raises(ValueError, match="num_splits"):
                fn(q.to(dev), parts, SM_SCALE, num_splits=bad)


def test_resident_programs_per_sm_from_kernel_resources():
    """Registers (allocated per warp in 256s), shared memory (+1 KiB reserved per program) and
    threads each cap the programs per SM; the H200 figures of the decode kernels."""
    props = SimpleNamespace(
        regs_per_multiprocessor=65536,
        shared_memory_per_multiprocessor=233472,
        max_threads_per_multi_processor=2048,
    )
    assert ctas_per_sm(250, 13568, 1, props) == 8  # nvfp4, one warp: 256 registers -> 8 warps
    assert ctas_per_sm(168, 73728, 4, props) == 3  # fp8: registers allow 3, shared memory 3
    assert ctas_per_sm(168, 120000, 4, props) == 1  # shared memory binds
    assert ctas_per_sm(16, 0, 1, props) == 32  # at most 32 programs per SM
    assert ctas_per_sm(32, 0, 8, props) == 8  # threads: 2048 / 256


@pytest.mark.parametrize(
    ("pairs", "resident", "keys_per_request", "want"),
    [
        (512, 264, 4096, 1),  # fp8 at 64 x 8 heads: 512 programs fill 2 waves of 264 to 97%
        (512, 396, 4096, 3),  # bf16: 1 split leaves the second wave 29% full, 2 splits 86%, 3 97%
        (512, 1056, 4096, 2),  # nvfp4: 1024 of 1056
        (64, 1056, 4096, 15),  # few requests: as many splits as fill one wave to >= 90%
        (
            64,
            1056,
            1024,
            4,
        ),  # ... but each split keeps >= MIN_SPLIT_TOKENS keys: the best fill up to 4
        (8, 1056, 100, 1),  # short requests: one split
    ],
)
def test_split_count_fills_the_waves_of_resident_programs(pairs, resident, keys_per_request, want):
    batch = 8
    call = SimpleNamespace(batch=batch, head_groups=pairs // batch, resident=lambda: resident)
    assert da._num_splits(call, batch * keys_per_request) == want


def test_dispatch_and_module_access():
    gen = torch.Generator().manual_seed(3)
    kv = make_pool("fp8", SLOTS, HKV, D, gen)
    indptr, indices = csr([5, 6], SLOTS, gen)
    q = torch.randn(2, HQ, D, generator=gen)
    o, lse = kernels.dispatch(
        "decode_attention", q, kv, indptr, indices, SM_SCALE
    )  # CPU: the reference
    assert torch.equal(o, da.decode_attention_ref(q, kv, indptr, indices, SM_SCALE)[0])
    assert kernels.decode_attention is da  # the module, as importing it sets


# ---------------------------------------------------------------- validation


def _valid_args():
    gen = torch.Generator().manual_seed(0)
    kv = to_device(make_pool("fp8", SLOTS, HKV, D, gen), KERNEL_DEVICE)
    indptr, indices = csr([4, 4], SLOTS, gen, KERNEL_DEVICE)
    return torch.randn(2, HQ, D, device=KERNEL_DEVICE), kv, indptr, indices


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_validation(backend):
    q, kv, indptr, indices = _valid_args()
    cases = [
        ((q[0], kv, indptr, indices), "q must be"),
        ((q.double(), kv, indptr, indices), "q must be"),
        ((q[:, :3], kv, indptr, indices), "does not fit"),
        ((q[..., :16], kv, indptr, indices), "does not fit"),
        ((q, kv, indptr[:2], indices), "kv_indptr must have 3"),
        ((q, kv, indptr, indices.float()), "kv_indices must be"),
        ((q, KVBuffers(kv.k, kv.v), indptr, indices), "k_scale"),
        ((q, KVBuffers(kv.k, kv.v, kv.k_scale.double(), kv.v_scale), indptr, indices), "k_scale"),
        ((q, KVBuffers(kv.k, kv.v[:, :1]), indptr, indices), "differ"),
        (
            (q, KVBuffers(kv.k.float().bfloat16(), kv.v.float().bfloat16()), indptr, indices),
            "same dtype",
        ),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            kernels.dispatch("decode_attention", *args, SM_SCALE, backend=backend)


def test_launcher_layout_device_and_out(monkeypatch):
    q, kv, indptr, indices = _valid_args()
    with pytest.raises(ValueError, match="contiguous"):
        da.decode_attention(
            q.transpose(0, 1).contiguous().transpose(0, 1), kv, indptr, indices, SM_SCALE
        )
    with pytest.raises(ValueError, match="out must be"):
        da.decode_attention(
            q, kv, indptr, indices, SM_SCALE, out=(torch.empty_like(q), torch.empty(2))
        )
    if KERNEL_DEVICE == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        with pytest.raises(ValueError, match="CUDA"):
            da.decode_attention(q, kv, indptr, indices, SM_SCALE)


# ---------------------------------------------------------------- real shapes on the GPU


def _dense_oracle(q, k, v, sm_scale):
    """float64 on the GPU: q [B, Hq, D], k, v [B, L, Hkv, D] (already dequantized, float64)."""
    group = q.shape[1] // k.shape[2]
    qg = q.double().view(q.shape[0], k.shape[2], group, q.shape[2])  # [B, Hkv, G, D]
    s = torch.einsum("bhgd,blhd->bhgl", qg, k) * sm_scale
    lse = torch.logsumexp(s, -1)
    o = torch.einsum("bhgl,blhd->bhgd", torch.exp(s - lse[..., None]), v)
    return o.reshape(q.shape), lse.reshape(q.shape[:2])


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_batch64_4096(fmt):
    b, n, hq, hkv, d = 64, 4096, 32, 8, 128
    gen = torch.Generator("cuda").manual_seed(1)
    kv = make_pool(fmt, b * n + 100, hkv, d, gen, device="cuda", float_dtype=torch.bfloat16)
    indptr, indices = csr([n] * b, b * n + 100, gen, "cuda")
    q = torch.randn(b, hq, d, generator=gen, device="cuda").bfloat16()
    o, lse = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(d), out_dtype=torch.float32)
    k, v = (t.view(b, n, hkv, d) for t in dequant64(kv, indices))
    want_o, want_lse = _dense_oracle(q, k, v, 1 / math.sqrt(d))
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_gpu_flashinfer_wrapper_matches(fmt):
    from radixgen.kernels import flashinfer_ops

    if not flashinfer_ops.available():
        pytest.skip("flashinfer is not installed")
    gen = torch.Generator("cuda").manual_seed(4)
    kv = make_pool(fmt, 1000, 8, 128, gen, device="cuda", float_dtype=torch.bfloat16)
    indptr, indices = csr([100, 37, 513, 1], 1000, gen, "cuda")
    q = torch.randn(4, 32, 128, generator=gen, device="cuda").bfloat16()
    o, lse = flashinfer_ops.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(128))
    want_o, want_lse = da.decode_attention_ref(
        q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32
    )
    assert rel_err(o, want_o) < 2e-2 and rel_err(lse, want_lse) < 1e-3


@pytest.mark.parametrize(
    "variant",
    [
        dict(rows=True, split_eo=False),
        dict(rows=False, split_eo=False),
        dict(rows=False, split_eo=True, fp8_eo=True),
    ],
)
@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_kernel_variants_match_float64(variant, fmt, monkeypatch):
    # the non-default code shapes a benchmark sweep may select: whole slot rows; nvfp4 interleaved
    monkeypatch.setattr(da, "DECODE_VARIANT", variant)
    gen = torch.Generator().manual_seed(21)
    kv = make_pool(fmt, SLOTS, HKV, D, gen)
    indptr, indices = csr([19, 0, 30], SLOTS, gen)
    q = torch.randn(3, HQ, D, generator=gen)
    o, lse = _run(q, kv, indptr, indices, num_splits=2)
    want_o, want_lse = _oracle(q, kv, indptr, indices)
    assert rel_err(o, want_o) < 1e-5 and rel_err(lse, want_lse) < 1e-6


@pytest.mark.parametrize(
    ("heads_per_program", "hq", "prefetch"),
    [(1, 16, True), (2, 8, False), (4, 16, True), (8, 8, False)],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_heads_per_program_match_float64(heads_per_program, hq, prefetch, fmt, monkeypatch):
    # several KV heads per program (block-diagonal q), GQA groups of 1 and 2, query heads of very
    # different magnitudes, an empty request, with and without prefetching the next tile's bits (and
    # fp8 read as even/odd halves with it); fp32 q (exact path) and bf16 q (quantized pools: fp16
    # dots with a per-row power-of-two prescale of q)
    hkv, d = 8, 32
    configs = {
        f: (16, 4, 2, heads_per_program, prefetch, 128 if prefetch else None)
        for f in da.DECODE_CONFIGS
    }
    monkeypatch.setattr(da, "DECODE_CONFIGS", configs)
    monkeypatch.setattr(da, "DECODE_VARIANT", dict(rows=False, split_eo=True, fp8_eo=prefetch))
    gen = torch.Generator().manual_seed(31 + heads_per_program)
    indptr, indices = csr([21, 0, 40], SLOTS, gen)
    q = torch.randn(3, hq, d, generator=gen) * torch.logspace(-3, 3, hq)[None, :, None]
    for q_dtype, tol_o, tol_lse in ((torch.float32, 1e-5, 1e-6), (torch.bfloat16, 1e-2, 1e-3)):
        kv = make_pool(fmt, SLOTS, hkv, d, gen, float_dtype=q_dtype)
        want_o, want_lse = _oracle(q.to(q_dtype), kv, indptr, indices)
        for splits in (1, 3):
            o, lse = _run(q.to(q_dtype), kv, indptr, indices, num_splits=splits)
            assert rel_err(o, want_o) < tol_o and rel_err(lse, want_lse) < tol_lse
            assert (o[1] == 0).all() and (lse[1] == -math.inf).all()


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_head_dim_16_uses_the_full_width_path(fmt, monkeypatch):
    """head_dim 16: the even/odd split would need 8-wide dots (tensor cores take K >= 16), so the
    launcher takes the full-width path, which matches the torch reference."""
    d = 16
    gen = torch.Generator().manual_seed(5)
    kv = make_pool(fmt, SLOTS, HKV, d, gen)
    indptr, indices = csr([19, 30], SLOTS, gen)
    q = torch.randn(2, HQ, d, generator=gen)
    seen = []
    real = da.decode_tile_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append(kwargs["SPLIT_EO"])
                return real[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(da, "decode_tile_kernel", Spy())
    scale = 1 / math.sqrt(d)
    out = (
        poisoned(q.shape, torch.float32, KERNEL_DEVICE),
        poisoned(q.shape[:2], torch.float32, KERNEL_DEVICE),
    )
    o, lse = da.decode_attention(
        q.to(KERNEL_DEVICE),
        to_device(kv, KERNEL_DEVICE),
        indptr.to(KERNEL_DEVICE),
        indices.to(KERNEL_DEVICE),
        scale,
        out_dtype=torch.float32,
        out=out,
    )
    want = da.decode_attention_ref(q, kv, indptr, indices, scale)
    assert seen == [False]
    assert rel_err(o.cpu(), want[0]) < 1e-5 and rel_err(lse.cpu(), want[1]) < 1e-6

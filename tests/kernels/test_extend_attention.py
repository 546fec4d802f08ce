"""extend_attention (Triton under TRITON_INTERPRET=1 here, and its torch reference) against float64
attention with causal and tree (custom) masks, prefix-only passes, split pools, validation."""

import math

import pytest
import torch

from radixgen import kernels
from radixgen.kernels import decode_attention as da
from radixgen.kernels import extend_attention as ea
from tests.kernels.conftest import KERNEL_DEVICE
from tests.kernels.kv_pools import (
    FORMATS,
    csr,
    dequant64,
    make_pool,
    oracle,
    poisoned,
    rel_err,
    to_device,
)

HKV, HQ, D, SLOTS = 2, 4, 32, 64
SM_SCALE = 1 / math.sqrt(D)


def _case(gen, masked: bool):
    """Three requests: 10 cached + 6 new; a prefix-only pass (num_new 0) of 3 queries over 8 keys;
    9 new tokens without prefix whose first query sees nothing under the custom mask."""
    n_q, n_kv, new = [6, 3, 9], [16, 8, 9], [6, 0, 9]
    qo_indptr = torch.tensor([0, 6, 9, 18], dtype=torch.int32)
    kv_indptr, kv_indices = csr(n_kv, SLOTS, gen)
    blocks = [torch.rand(n, n, generator=gen) > 0.5 for n in new]
    blocks[2][0] = False
    mask = torch.cat([b.flatten() for b in blocks]) if masked else None
    mask_indptr = torch.tensor([0, 36, 36, 117]) if masked else None
    visible = []
    for b in range(3):
        old = n_kv[b] - new[b]
        vis = torch.ones(n_q[b], n_kv[b], dtype=torch.bool)
        if new[b]:
            vis[:, old:] = (
                blocks[b] if masked else torch.ones(new[b], new[b], dtype=torch.bool).tril()
            )
        visible.append(vis)
    return qo_indptr, kv_indptr, kv_indices, torch.tensor(new), mask, mask_indptr, visible


def _oracle(q, kv, qo_indptr, kv_indptr, kv_indices, visible):
    outs, lses = [], []
    for b, vis in enumerate(visible):
        k, v = dequant64(kv, kv_indices[kv_indptr[b] : kv_indptr[b + 1]])
        o, lse = oracle(q[qo_indptr[b] : qo_indptr[b + 1]], k, v, vis, SM_SCALE)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def _run(q, kv, *index, out_dtype=torch.float32):
    """The Triton launcher on KERNEL_DEVICE, writing into NaN-poisoned outputs."""
    dev = KERNEL_DEVICE
    out = (poisoned(q.shape, out_dtype, dev), poisoned(q.shape[:2], torch.float32, dev))
    index = [None if t is None else t.to(dev) for t in index]
    return ea.extend_attention(
        q.to(dev),
        to_device(kv, dev),
        *index[:4],
        SM_SCALE,
        *index[4:],
        out_dtype=out_dtype,
        out=out,
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("masked", [False, True])
def test_extend_matches_float64(fmt, masked):
    gen = torch.Generator().manual_seed(FORMATS.index(fmt) + 10 * masked)
    kv = make_pool(fmt, SLOTS, HKV, D, gen)
    qo_indptr, kv_indptr, kv_indices, new, mask, mask_indptr, visible = _case(gen, masked)
    q = torch.randn(18, HQ, D, generator=gen)
    want_o, want_lse = _oracle(q, kv, qo_indptr, kv_indptr, kv_indices, visible)
    index = (qo_indptr, kv_indptr, kv_indices, new, mask, mask_indptr)
    for o, lse in (
        _run(q, kv, *index),
        ea.extend_attention_ref(q, kv, *index[:4], SM_SCALE, *index[4:]),
    ):
        assert rel_err(o, want_o) < 1e-5 and rel_err(lse, want_lse) < 1e-6
    if masked:  # the first query of request 2 sees no key
        assert (o[9] == 0).all() and (lse[9] == -math.inf).all()


def test_bf16_queries_fp8_pool():
    gen = torch.Generator().manual_seed(4)
    kv = make_pool("fp8", SLOTS, HKV, D, gen)
    qo_indptr, kv_indptr, kv_indices, new, _, _, visible = _case(gen, False)
    q = (torch.randn(18, HQ, D, generator=gen) * 1e3).bfloat16()
    want_o, want_lse = _oracle(q, kv, qo_indptr, kv_indptr, kv_indices, visible)
    o, lse = _run(
        q, kv, qo_indptr, kv_indptr, kv_indices, new, None, None, out_dtype=torch.bfloat16
    )
    assert o.dtype == torch.bfloat16 and rel_err(o, want_o) < 2e-2 and rel_err(lse, want_lse) < 1e-3


def test_prefix_in_fp8_new_tokens_in_nvfp4_merged():
    # the cached prefix lives in the fp8 pool (num_new 0 pass), the new tokens in the nvfp4 pool
    gen = torch.Generator().manual_seed(8)
    fp8, nvfp4 = make_pool("fp8", SLOTS, HKV, D, gen), make_pool("nvfp4", SLOTS, HKV, D, gen)
    qo_indptr = torch.tensor([0, 5, 12])
    ptr8, idx8 = csr([11, 0], SLOTS, gen)
    ptr4, idx4 = csr([5, 7], SLOTS, gen)
    q = torch.randn(12, HQ, D, generator=gen)
    o8, l8 = _run(q, fp8, qo_indptr, ptr8, idx8, torch.tensor([0, 0]), None, None)
    o4, l4 = _run(q, nvfp4, qo_indptr, ptr4, idx4, torch.tensor([5, 7]), None, None)
    o, lse = da.merge_state(o8, l8, o4, l4)
    for b, (n8, n4) in enumerate([(11, 5), (0, 7)]):
        k8, v8 = dequant64(fp8, idx8[ptr8[b] : ptr8[b] + n8])
        k4, v4 = dequant64(nvfp4, idx4[ptr4[b] : ptr4[b] + n4])
        vis = torch.cat(
            [torch.ones(n4, n8, dtype=torch.bool), torch.ones(n4, n4, dtype=torch.bool).tril()], 1
        )
        rows = slice(qo_indptr[b], qo_indptr[b + 1])
        want_o, want_lse = oracle(q[rows], torch.cat([k8, k4]), torch.cat([v8, v4]), vis, SM_SCALE)
        assert rel_err(o[rows], want_o) < 1e-5 and rel_err(lse[rows], want_lse) < 1e-6


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_validation(backend):
    gen = torch.Generator().manual_seed(0)
    kv = to_device(make_pool("nvfp4", SLOTS, HKV, D, gen), KERNEL_DEVICE)
    qo_indptr, kv_indptr, kv_indices, new, mask, mask_indptr, _ = (
        None if t is None else (t.to(KERNEL_DEVICE) if isinstance(t, torch.Tensor) else t)
        for t in _case(gen, True)
    )
    q = torch.randn(18, HQ, D, device=KERNEL_DEVICE)
    good = [q, kv, qo_indptr, kv_indptr, kv_indices, new, SM_SCALE, mask, mask_indptr]
    cases = [
        ({5: torch.tensor([6, 0, 8], device=KERNEL_DEVICE)}, "num_new"),
        ({5: torch.tensor([7, 0, 9], device=KERNEL_DEVICE)}, "num_new"),
        ({5: new[:2]}, "num_new must have 3"),
        ({2: qo_indptr.flip(0)}, "qo_indptr"),
        ({7: mask.int()}, "custom_mask"),
        ({8: None}, "mask_indptr"),
        ({8: mask_indptr + 1}, "mask_indptr"),
        ({0: q[:, :, :16]}, "does not fit"),
        ({3: kv_indptr.float()}, "kv_indptr"),
    ]
    for change, match in cases:
        args = [change.get(i, a) for i, a in enumerate(good)]
        with pytest.raises(ValueError, match=match):
            kernels.dispatch("extend_attention", *args, backend=backend)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_1024_new_over_1024_prefix(fmt):
    b, old, new_len, hq, hkv, d = 2, 1024, 1024, 32, 8, 128
    gen = torch.Generator("cuda").manual_seed(2)
    kv = make_pool(
        fmt, b * (old + new_len) + 7, hkv, d, gen, device="cuda", float_dtype=torch.bfloat16
    )
    kv_indptr, kv_indices = csr([old + new_len] * b, b * (old + new_len) + 7, gen, "cuda")
    qo_indptr = torch.arange(0, b + 1, device="cuda", dtype=torch.int32) * new_len
    q = torch.randn(b * new_len, hq, d, generator=gen, device="cuda").bfloat16()
    num_new = torch.full((b,), new_len, device="cuda", dtype=torch.int32)
    o, lse = ea.extend_attention(
        q, kv, qo_indptr, kv_indptr, kv_indices, num_new, 1 / math.sqrt(d), out_dtype=torch.float32
    )
    vis = torch.cat(
        [
            torch.ones(new_len, old, dtype=torch.bool, device="cuda"),
            torch.ones(new_len, new_len, dtype=torch.bool, device="cuda").tril(),
        ],
        1,
    )
    for r in range(b):
        k, v = dequant64(kv, kv_indices[r * (old + new_len) : (r + 1) * (old + new_len)])
        group = hq // hkv
        s = torch.einsum(
            "nhd,lhd->hnl",
            q[r * new_len : (r + 1) * new_len].double(),
            k.repeat_interleave(group, 1),
        ) / math.sqrt(d)
        s = s.masked_fill(~vis, -math.inf)
        want_lse = torch.logsumexp(s, -1)
        want_o = torch.einsum(
            "hnl,lhd->nhd", torch.exp(s - want_lse[..., None]), v.repeat_interleave(group, 1)
        )
        rows = slice(r * new_len, (r + 1) * new_len)
        assert rel_err(o[rows], want_o) < 1e-2 and rel_err(lse[rows], want_lse.T) < 1e-3

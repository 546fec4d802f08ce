"""The CUDA NVFP4 decode kernel (nvfp4_decode_cuda.py) against float64 attention over the
dequantized pool, on a GPU; here on the CPU: its dispatch rules and its bit arithmetic."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from radixgen.kernels import decode_attention as da
from radixgen.kernels import nvfp4_decode_cuda as cu
from radixgen.kernels.kv_layout import FMT_FP8
from radixgen.kernels.nvfp4 import E2M1_VALUES
from tests.kernels.kv_pools import csr, dequant64, make_pool, oracle, poisoned, rel_err


def test_nibbles_placed_as_e4m3_bytes_are_e2m1_times_2_pow_minus_6():
    # the kernel's nibbles_to_e4m3 on every byte of a word: high nibbles keep the sign at bit 7
    # and move e1.e0.m from bits 4..6 to 2..4; low nibbles move sign 3 -> 7 and e1.e0.m 0..2 -> 2..4
    w = np.arange(256, dtype=np.uint32) * 0x01010101
    hi = (w & 0x80808080) | ((w >> 2) & 0x1C1C1C1C)
    lo = ((w << 4) & 0x80808080) | ((w << 2) & 0x1C1C1C1C)
    as_e4m3 = lambda b: (
        torch.from_numpy((b & 0xFF).astype(np.uint8)).view(torch.float8_e4m3fn).double()
    )
    e2m1 = torch.tensor(
        E2M1_VALUES, dtype=torch.float64
    )  # by code: sign bit 3, magnitude bits 0..2
    codes = torch.arange(256)
    assert torch.equal(as_e4m3(hi), e2m1[codes >> 4] / 64)
    assert torch.equal(as_e4m3(lo), e2m1[codes & 15] / 64)
    for shift in (8, 16, 24):  # every byte of the word alike
        assert torch.equal(as_e4m3(hi >> shift), as_e4m3(hi)) and torch.equal(
            as_e4m3(lo >> shift), as_e4m3(lo)
        )


def test_dispatch_rules_without_a_gpu():
    gen = torch.Generator().manual_seed(0)
    kv = make_pool("nvfp4", 8, 2, 128, gen)
    q = torch.zeros(1, 8, 128, dtype=torch.bfloat16)
    assert cu.supports(q, kv)
    assert not cu.supports(q.float(), kv)  # fp32 q: the Triton kernel computes in fp32
    assert not cu.supports(
        torch.zeros(1, 18, 128, dtype=torch.bfloat16), kv
    )  # a group of 9 > 8 columns
    assert not cu.supports(q[..., :96].contiguous(), make_pool("nvfp4", 8, 2, 96, gen))
    assert not cu.supports(q, make_pool("fp8", 8, 2, 128, gen))
    assert not cu.available(torch.device("cpu"))
    assert cu._SOURCE.is_file()


def test_staged_pipeline_layout_and_its_alignment_rule():
    # CTAs of the KV heads sharing a (request, split): the largest power of two <= 8 dividing them
    assert [cu.heads_per_cta(h) for h in (1, 2, 3, 4, 6, 8, 12, 16, 32)] == [
        1,
        2,
        1,
        4,
        2,
        8,
        4,
        8,
        8,
    ]
    # a stage holds 32 tokens' key and value codes (hc * D/2 bytes each) and scale rows (hc * D/16
    # bytes, padded by 16 once they are 16 or more)
    assert cu.stage_bytes(128, 8) == 2 * 32 * 512 + 2 * 32 * (64 + 16)
    assert cu.stage_bytes(64, 1) == 2 * 32 * 32 + 2 * 32 * 4
    gen = torch.Generator().manual_seed(0)
    kv = make_pool("nvfp4", 9, 8, 128, gen)
    assert cu._stageable(kv)
    # a pool whose scales start off a 16-byte boundary is left to the register pipeline: cp.async
    # of 16-byte chunks needs them aligned
    buf = torch.zeros(kv.k_bscale.numel() + 8, dtype=torch.uint8)
    shifted = buf[8:].view(kv.k_bscale.dtype).view(kv.k_bscale.shape)
    assert shifted.data_ptr() % 16 == 8
    assert not cu._stageable(dataclasses.replace(kv, k_bscale=shifted))


needs_kernel = pytest.mark.skipif(
    not (torch.cuda.is_available() and cu.available(torch.device("cuda"))),
    reason="needs an sm_89+ GPU with NVRTC",
)
PIPELINES = [0, 2, 3]  # CONFIG["stages"]: registers; shared memory with 2 or 3 stages


@pytest.fixture(params=PIPELINES, ids=lambda n: f"stages{n}")
def pipeline(request, monkeypatch):
    monkeypatch.setitem(cu.CONFIG, "stages", request.param)
    return request.param


def _case(d, group, lengths, q_dtype, seed, hkv=2, indices_dtype=torch.int64):
    gen = torch.Generator("cuda").manual_seed(seed)
    slots = sum(lengths) + 50
    kv = make_pool("nvfp4", slots, hkv, d, gen, device="cuda")
    unused = torch.ones(slots, dtype=torch.bool, device="cuda")
    indptr, indices = csr(lengths, slots, gen, "cuda")
    unused[indices] = False
    for b in (kv.k_bscale, kv.v_bscale):  # slots no request reads hold NaN scales
        b.view(torch.uint8)[unused] = 0x7F
    q = (torch.randn(len(lengths), hkv * group, d, generator=gen, device="cuda") * 3).to(q_dtype)
    want = []
    for b in range(len(lengths)):
        k, v = dequant64(kv, indices[indptr[b] : indptr[b + 1]])
        want.append(
            oracle(
                q[b : b + 1], k, v, torch.ones(1, k.shape[0], dtype=torch.bool), 1 / math.sqrt(d)
            )
        )
    want_o, want_lse = torch.cat([w[0] for w in want]), torch.cat([w[1] for w in want])
    return kv, q, indptr, indices.to(indices_dtype), want_o, want_lse


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize("d", cu.HEAD_DIMS)
@pytest.mark.parametrize("group", [1, 3, 4, 8])
@pytest.mark.parametrize("num_splits", [None, 1, 3])
def test_matches_float64(d, group, num_splits, pipeline):
    # lengths below, at and past tile edges, an empty request, and a long one split many ways
    lengths = [0, 1, 31, 32, 33, 100, 700]
    kv, q, indptr, indices, want_o, want_lse = _case(d, group, lengths, torch.bfloat16, d + group)
    call = da._kernel_call(q, kv, indptr, indices, 1 / math.sqrt(d), torch.float32)
    assert (
        isinstance(call, cu.DecodeCall) and call.stages == pipeline
    )  # the CUDA kernel runs, as configured
    out = (poisoned(q.shape, torch.float32, "cuda"), poisoned(q.shape[:2], torch.float32, "cuda"))
    o, lse = da.decode_attention(
        q,
        kv,
        indptr,
        indices,
        1 / math.sqrt(d),
        out_dtype=torch.float32,
        num_splits=num_splits,
        out=out,
    )
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
    assert (o[0] == 0).all() and (lse[0] == -math.inf).all()


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize("hkv", [1, 3, 8, 12])
@pytest.mark.parametrize("d", cu.HEAD_DIMS)
def test_ctas_of_several_heads(hkv, d, pipeline):
    # the staged pipeline's CTAs hold 1, 1, 8 and 4 heads here; lengths cross tile and stage edges
    kv, q, indptr, indices, want_o, want_lse = _case(
        d, 4, [0, 3, 64, 95, 600], torch.bfloat16, hkv + d, hkv=hkv
    )
    for splits in (None, 2):
        o, lse = da.decode_attention(
            q, kv, indptr, indices, 1 / math.sqrt(d), out_dtype=torch.float32, num_splits=splits
        )
        assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
        assert (lse[0] == -math.inf).all()


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize(
    ("q_dtype", "out_dtype"),
    [
        (torch.float16, torch.float16),
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float32),
    ],
)
@pytest.mark.parametrize("indices_dtype", [torch.int32, torch.int64])
def test_dtypes_and_direct_output(q_dtype, out_dtype, indices_dtype, pipeline):
    # one split writes the final output in its dtype directly (no reduce); int32 and int64 indices
    kv, q, indptr, indices, want_o, want_lse = _case(
        128, 4, [5, 64, 300], q_dtype, 7, hkv=8, indices_dtype=indices_dtype
    )
    for splits in (1, 2):
        o, lse = da.decode_attention(
            q,
            kv,
            indptr.long() if splits == 2 else indptr,
            indices,
            1 / math.sqrt(128),
            out_dtype=out_dtype,
            num_splits=splits,
        )
        assert o.dtype == out_dtype and rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3


@pytest.mark.gpu
@needs_kernel
def test_agrees_with_the_triton_kernel(monkeypatch, pipeline):
    kv, q, indptr, indices, want_o, _ = _case(128, 4, [4096] * 4, torch.bfloat16, 11, hkv=8)
    o_cuda, lse_cuda = da.decode_attention(
        q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32
    )
    monkeypatch.setattr(da, "USE_CUDA_NVFP4", False)
    o_tri, lse_tri = da.decode_attention(
        q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32
    )
    assert rel_err(o_cuda, o_tri) < 5e-3 and rel_err(lse_cuda, lse_tri) < 1e-4
    assert rel_err(o_cuda, want_o) < 1e-2


@pytest.mark.gpu
@needs_kernel
def test_mixed_pools_share_one_reduce():
    # an fp8 prefix (Triton) and an nvfp4 branch (CUDA) per request, merged by the split reduce
    gen = torch.Generator("cuda").manual_seed(5)
    fp8, nv = (
        make_pool("fp8", 600, 8, 128, gen, device="cuda"),
        make_pool("nvfp4", 600, 8, 128, gen, device="cuda"),
    )
    ptr_a, ind_a = csr([200, 0, 57], 600, gen, "cuda")
    ptr_b, ind_b = csr([33, 90, 0], 600, gen, "cuda")
    q = torch.randn(3, 32, 128, generator=gen, device="cuda").bfloat16()
    sm = 1 / math.sqrt(128)
    o, lse = da.decode_attention_pools(
        q, [(fp8, ptr_a, ind_a), (nv, ptr_b, ind_b)], sm, out_dtype=torch.float32
    )
    want_o, want_lse = da.decode_attention_pools_ref(
        q, [(fp8, ptr_a, ind_a), (nv, ptr_b, ind_b)], sm, out_dtype=torch.float32
    )
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3


@pytest.mark.gpu
@needs_kernel
def test_a_failed_compile_falls_back_to_triton(monkeypatch):
    kv, q, indptr, indices, want_o, _ = _case(128, 4, [40], torch.bfloat16, 3, hkv=8)
    monkeypatch.setattr(cu, "_SOURCE", cu._SOURCE.with_name("missing.cu"))
    monkeypatch.setattr(cu, "_state", {})
    call = da._kernel_call(q, kv, indptr, indices, 0.1, torch.float32)
    assert not isinstance(call, cu.DecodeCall) and "error" in cu._state
    o, _ = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32)
    assert rel_err(o, want_o) < 1e-2


# ---------------------------------------------------------------- one launch for an fp8 and an nvfp4 part


def test_mixed_split_counts_fill_waves_and_share_the_work():
    # a fake launch of 64 requests x 1 CTA per split on 264 resident CTAs (an H100's 132 SMs x 2)
    call = type("Call", (), {"batch": 64, "head_groups": 1, "resident": lambda self: 264})()
    for fp8_len, nv_len in (
        (2048, 2048),
        (4096, 256),
        (256, 4096),
        (1000, 3000),
        (0, 4096),
        (100, 100),
    ):
        a, b = da._mixed_splits(call, 64 * fp8_len, 64 * nv_len)
        assert a >= 1 and b >= 1
        for n, length in ((a, fp8_len), (b, nv_len)):  # no split below MIN_SPLIT_TOKENS on average
            assert n == 1 or length / n >= da.MIN_SPLIT_TOKENS
        if min(fp8_len, nv_len) >= 1000:  # the parts' CTAs carry about the same work
            ratio = (fp8_len * da.FP8_TOKEN_COST / a) / (nv_len / b)
            assert 0.5 < ratio < 2, (fp8_len, nv_len, a, b)
    assert da._mixed_splits(call, 64 * 100, 64 * 100) == (1, 1)
    # 4 splits x 64 CTAs fill the 264 resident ones to 97% in one wave: the best pair measured
    # on an H100 (docs/benchmarks-history.md), where a work-balanced 7 + 5 over three waves was slower
    assert da._mixed_splits(call, 64 * 2048, 64 * 2048) == (2, 2)
    # requests too many for one wave at 2 splits: one split per part
    many = type("Call", (), {"batch": 256, "head_groups": 1, "resident": lambda self: 264})()
    assert da._mixed_splits(many, 256 * 2048, 256 * 2048) == (1, 1)


def test_paired_mixed_split_counts_are_one_pools_over_all_keys():
    # each CTA of the paired launch takes a split of both parts: the split rule of one pool over all
    # the keys. 64 x 4096 keys on 264 resident CTAs: 4 splits (256 CTAs, one wave); 256 x 1024:
    # one split, written straight to the output (no reduce)
    call = type("Call", (), {"batch": 64, "head_groups": 1, "resident": lambda self: 264})()
    assert da._num_splits(call, 64 * 4096) == 4
    assert (
        da._num_splits(type(call)(), 64 * 300) == 1
    )  # < 2 x MIN_SPLIT_TOKENS a request: one split
    many = type("Call", (), {"batch": 256, "head_groups": 1, "resident": lambda self: 264})()
    assert da._num_splits(many, 256 * 1024) == 1
    few = type("Call", (), {"batch": 16, "head_groups": 1, "resident": lambda self: 264})()
    assert da._num_splits(few, 16 * 16384) == 15  # the fewest filling >= 90%: 240 of 264 CTAs


def test_parts_are_paired_where_a_cta_per_part_takes_more_than_a_wave(monkeypatch):
    monkeypatch.setattr(da, "MIXED_PAIRED", "auto")
    fake = lambda batch: type(
        "Call", (), {"batch": batch, "head_groups": 1, "resident": lambda self: 264}
    )()
    assert not da._use_paired(fake(64), [None, None], [2, 2])  # 256 CTAs: one wave
    assert not da._use_paired(fake(16), [None, None], [9, 6])
    assert da._use_paired(fake(256), [None, None], [1, 1])  # 512 CTAs: two waves
    assert not da._use_paired(
        fake(256), [1, 1], [1, 1]
    )  # split counts given: as given, a part per CTA
    monkeypatch.setattr(da, "MIXED_PAIRED", True)  # paired wherever both parts split alike
    assert da._use_paired(fake(64), [None, None], [2, 2]) and da._use_paired(
        fake(64), [3, 3], [3, 3]
    )
    assert not da._use_paired(fake(64), [3, 2], [3, 2])
    monkeypatch.setattr(da, "MIXED_PAIRED", False)
    assert not da._use_paired(fake(256), [None, None], [1, 1])


def test_paired_launch_splits_both_parts_alike():
    gen = torch.Generator().manual_seed(0)
    fp8, nv = make_pool("fp8", 8, 8, 128, gen), make_pool("nvfp4", 8, 8, 128, gen)
    ptr, ind = csr([3], 8, gen)
    q = torch.zeros(1, 32, 128, dtype=torch.bfloat16)
    call = cu.MixedCall(q, (fp8, ptr, ind), (nv, ptr, ind), 0.1, paired=True)
    o = torch.empty(1, 32, 3, 128)
    with pytest.raises(ValueError, match="splits both parts alike"):
        call.launch(o, o[..., 0], 2, 0, 1, 2, 3)


def test_mixed_launch_needs_a_cuda_gpu():
    gen = torch.Generator().manual_seed(0)
    fp8, nv = make_pool("fp8", 8, 8, 128, gen), make_pool("nvfp4", 8, 8, 128, gen)
    ptr, ind = csr([3], 8, gen)
    q = torch.zeros(1, 32, 128, dtype=torch.bfloat16)
    assert da._mixed_call(q, [(fp8, ptr, ind), (nv, ptr, ind)], 0.1, torch.float32) is None
    assert not cu.mixed_supported(q, fp8, nv, (ptr, ind), (ptr, ind))
    # one FP8 stage: 16 tokens' key and value codes, one byte a value
    assert cu.fp8_stage_bytes(128, 8) == 2 * 16 * 8 * 128


def _mixed_case(
    d, hkv, group, fp8_lengths, nv_lengths, seed, q_dtype=torch.bfloat16, indices_dtype=torch.int64
):
    """An fp8 pool and an nvfp4 pool (slots no request reads hold NaN), each request's keys split
    between them, and the float64 attention over the union."""
    gen = torch.Generator("cuda").manual_seed(seed)
    slots = max(sum(fp8_lengths), sum(nv_lengths)) + 40
    fp8, nv = (
        make_pool("fp8", slots, hkv, d, gen, device="cuda"),
        make_pool("nvfp4", slots, hkv, d, gen, device="cuda"),
    )
    parts, keys = [], [[] for _ in fp8_lengths]
    for kv, lengths in ((fp8, fp8_lengths), (nv, nv_lengths)):
        indptr, indices = csr(lengths, slots, gen, "cuda")
        unused = torch.ones(slots, dtype=torch.bool, device="cuda")
        unused[indices] = False
        if kv.fmt == FMT_FP8:
            for t in (kv.k, kv.v):
                t.view(torch.uint8)[unused] = 0x7F  # NaN in E4M3
        else:
            for t in (kv.k_bscale, kv.v_bscale):
                t.view(torch.uint8)[unused] = 0x7F
        for b in range(len(lengths)):
            keys[b].append(dequant64(kv, indices[indptr[b] : indptr[b + 1]]))
        parts.append(
            (
                kv,
                indptr.to(indices_dtype) if indices_dtype == torch.int64 else indptr,
                indices.to(indices_dtype),
            )
        )
    q = (torch.randn(len(fp8_lengths), hkv * group, d, generator=gen, device="cuda") * 3).to(
        q_dtype
    )
    want = []
    for b, per_part in enumerate(keys):
        k = torch.cat([kk for kk, _ in per_part])
        v = torch.cat([vv for _, vv in per_part])
        want.append(
            oracle(
                q[b : b + 1], k, v, torch.ones(1, k.shape[0], dtype=torch.bool), 1 / math.sqrt(d)
            )
        )
    return parts, q, torch.cat([w[0] for w in want]), torch.cat([w[1] for w in want])


FP8_LENGTHS = [0, 1, 15, 16, 17, 100, 700, 0, 2000]
NV_LENGTHS = [5, 0, 33, 32, 0, 64, 300, 0, 1500]


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize("d", cu.HEAD_DIMS)
@pytest.mark.parametrize(("hkv", "group"), [(1, 3), (2, 4), (8, 4), (8, 8), (12, 1)])
@pytest.mark.parametrize("num_splits", [None, 1, 3, [3, 2]])
@pytest.mark.parametrize("paired", [True, False], ids=["paired", "parts"])
def test_mixed_launch_matches_float64(d, hkv, group, num_splits, paired, pipeline, monkeypatch):
    # lengths below, at and past the fp8 part's 16-token and the nvfp4 part's 32-token tiles, a
    # request with keys in one pool only, one with none (o = 0, lse = -inf), long ones split many
    # ways; paired: each CTA both parts of a split (unequal counts [3, 2]: one part per CTA)
    monkeypatch.setattr(da, "USE_CUDA_MIXED", True)
    monkeypatch.setattr(da, "MIXED_PAIRED", paired)
    parts, q, want_o, want_lse = _mixed_case(
        d, hkv, group, FP8_LENGTHS, NV_LENGTHS, d + hkv + group
    )
    sm = 1 / math.sqrt(d)
    mixed = da._mixed_call(q, parts, sm, torch.float32, paired)
    assert (mixed is not None) == (pipeline != 0)  # one launch wherever the staged pipeline runs
    for order in (parts, parts[::-1]):
        splits = (
            num_splits[::-1] if isinstance(num_splits, list) and order is not parts else num_splits
        )
        out = (
            poisoned(q.shape, torch.float32, "cuda"),
            poisoned(q.shape[:2], torch.float32, "cuda"),
        )
        o, lse = da.decode_attention_pools(
            q, order, sm, out_dtype=torch.float32, num_splits=splits, out=out
        )
        assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
        assert (o[7] == 0).all() and (lse[7] == -math.inf).all()


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize(
    ("q_dtype", "out_dtype"), [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16)]
)
@pytest.mark.parametrize("indices_dtype", [torch.int32, torch.int64])
def test_mixed_launch_dtypes_and_the_two_launch_path(
    monkeypatch, q_dtype, out_dtype, indices_dtype
):
    monkeypatch.setattr(da, "USE_CUDA_MIXED", True)
    parts, q, want_o, want_lse = _mixed_case(
        128, 8, 4, [300, 4096, 17], [4096, 64, 900], 21, q_dtype, indices_dtype
    )
    sm = 1 / math.sqrt(128)
    assert da._mixed_call(q, parts, sm, out_dtype) is not None
    o, lse = da.decode_attention_pools(q, parts, sm, out_dtype=out_dtype)
    assert o.dtype == out_dtype and rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
    for paired in (True, False):  # both one-launch kernels
        monkeypatch.setattr(da, "MIXED_PAIRED", paired)
        o1, lse1 = da.decode_attention_pools(q, parts, sm, out_dtype=out_dtype)
        assert rel_err(o1, want_o) < 1e-2 and rel_err(lse1, want_lse) < 1e-3
    monkeypatch.setattr(da, "USE_CUDA_MIXED", False)  # one launch per pool: the same attention
    o2, lse2 = da.decode_attention_pools(q, parts, sm, out_dtype=out_dtype)
    assert rel_err(o2, want_o) < 1e-2 and rel_err(o, o2) < 1e-2 and rel_err(lse, lse2) < 1e-3
    # index tensors of different dtypes in the two parts: one launch per pool, still right
    (kv, ptr, ind), second = parts
    mixed_dtypes = [
        (kv, ptr, ind.to(torch.int32 if ind.dtype == torch.int64 else torch.int64)),
        second,
    ]
    monkeypatch.setattr(da, "USE_CUDA_MIXED", True)
    assert da._mixed_call(q, mixed_dtypes, sm, out_dtype) is None
    o3, _ = da.decode_attention_pools(q, mixed_dtypes, sm, out_dtype=out_dtype)
    assert rel_err(o3, want_o) < 1e-2

"""The CUDA NVFP4 decode kernel (nvfp4_decode_cuda.py) against float64 attention over the
dequantized pool, on a GPU; here on the CPU: its dispatch rules and its bit arithmetic."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from radixgen.kernels import decode_attention as da
from radixgen.kernels import nvfp4_decode_cuda as cu
from radixgen.kernels.nvfp4 import E2M1_VALUES
from tests.kernels.kv_pools import csr, dequant64, make_pool, oracle, poisoned, rel_err


def test_nibbles_placed_as_e4m3_bytes_are_e2m1_times_2_pow_minus_6():
    # the kernel's nibbles_to_e4m3 on every byte of a word: high nibbles keep the sign at bit 7
    # and move e1.e0.m from bits 4..6 to 2..4; low nibbles move sign 3 -> 7 and e1.e0.m 0..2 -> 2..4
    w = np.arange(256, dtype=np.uint32) * 0x01010101
    hi = (w & 0x80808080) | ((w >> 2) & 0x1C1C1C1C)
    lo = ((w << 4) & 0x80808080) | ((w << 2) & 0x1C1C1C1C)
    as_e4m3 = lambda b: torch.from_numpy((b & 0xFF).astype(np.uint8)).view(torch.float8_e4m3fn).double()
    e2m1 = torch.tensor(E2M1_VALUES, dtype=torch.float64)  # by code: sign bit 3, magnitude bits 0..2
    codes = torch.arange(256)
    assert torch.equal(as_e4m3(hi), e2m1[codes >> 4] / 64)
    assert torch.equal(as_e4m3(lo), e2m1[codes & 15] / 64)
    for shift in (8, 16, 24):  # every byte of the word alike
        assert torch.equal(as_e4m3(hi >> shift), as_e4m3(hi)) and torch.equal(as_e4m3(lo >> shift), as_e4m3(lo))


def test_dispatch_rules_without_a_gpu():
    gen = torch.Generator().manual_seed(0)
    kv = make_pool("nvfp4", 8, 2, 128, gen)
    q = torch.zeros(1, 8, 128, dtype=torch.bfloat16)
    assert cu.supports(q, kv)
    assert not cu.supports(q.float(), kv)  # fp32 q: the Triton kernel computes in fp32
    assert not cu.supports(torch.zeros(1, 18, 128, dtype=torch.bfloat16), kv)  # a group of 9 > 8 columns
    assert not cu.supports(q[..., :96].contiguous(), make_pool("nvfp4", 8, 2, 96, gen))
    assert not cu.supports(q, make_pool("fp8", 8, 2, 128, gen))
    assert not cu.available(torch.device("cpu"))
    assert cu._SOURCE.is_file()


def test_staged_pipeline_layout_and_its_alignment_rule():
    # CTAs of the KV heads sharing a (request, split): the largest power of two <= 8 dividing them
    assert [cu.heads_per_cta(h) for h in (1, 2, 3, 4, 6, 8, 12, 16, 32)] == [1, 2, 1, 4, 2, 8, 4, 8, 8]
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


needs_kernel = pytest.mark.skipif(not (torch.cuda.is_available() and cu.available(torch.device("cuda"))),
                                  reason="needs an sm_89+ GPU with NVRTC")
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
        k, v = dequant64(kv, indices[indptr[b]:indptr[b + 1]])
        want.append(oracle(q[b:b + 1], k, v, torch.ones(1, k.shape[0], dtype=torch.bool), 1 / math.sqrt(d)))
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
    assert isinstance(call, cu.DecodeCall) and call.stages == pipeline  # the CUDA kernel runs, as configured
    out = (poisoned(q.shape, torch.float32, "cuda"), poisoned(q.shape[:2], torch.float32, "cuda"))
    o, lse = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(d), out_dtype=torch.float32,
                                 num_splits=num_splits, out=out)
    assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
    assert (o[0] == 0).all() and (lse[0] == -math.inf).all()


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize("hkv", [1, 3, 8, 12])
@pytest.mark.parametrize("d", cu.HEAD_DIMS)
def test_ctas_of_several_heads(hkv, d, pipeline):
    # the staged pipeline's CTAs hold 1, 1, 8 and 4 heads here; lengths cross tile and stage edges
    kv, q, indptr, indices, want_o, want_lse = _case(d, 4, [0, 3, 64, 95, 600], torch.bfloat16, hkv + d, hkv=hkv)
    for splits in (None, 2):
        o, lse = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(d), out_dtype=torch.float32,
                                     num_splits=splits)
        assert rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3
        assert (lse[0] == -math.inf).all()


@pytest.mark.gpu
@needs_kernel
@pytest.mark.parametrize(("q_dtype", "out_dtype"), [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                                    (torch.float16, torch.float32)])
@pytest.mark.parametrize("indices_dtype", [torch.int32, torch.int64])
def test_dtypes_and_direct_output(q_dtype, out_dtype, indices_dtype, pipeline):
    # one split writes the final output in its dtype directly (no reduce); int32 and int64 indices
    kv, q, indptr, indices, want_o, want_lse = _case(128, 4, [5, 64, 300], q_dtype, 7, hkv=8,
                                                     indices_dtype=indices_dtype)
    for splits in (1, 2):
        o, lse = da.decode_attention(q, kv, indptr.long() if splits == 2 else indptr, indices, 1 / math.sqrt(128),
                                     out_dtype=out_dtype, num_splits=splits)
        assert o.dtype == out_dtype and rel_err(o, want_o) < 1e-2 and rel_err(lse, want_lse) < 1e-3


@pytest.mark.gpu
@needs_kernel
def test_agrees_with_the_triton_kernel(monkeypatch, pipeline):
    kv, q, indptr, indices, want_o, _ = _case(128, 4, [4096] * 4, torch.bfloat16, 11, hkv=8)
    o_cuda, lse_cuda = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32)
    monkeypatch.setattr(da, "USE_CUDA_NVFP4", False)
    o_tri, lse_tri = da.decode_attention(q, kv, indptr, indices, 1 / math.sqrt(128), out_dtype=torch.float32)
    assert rel_err(o_cuda, o_tri) < 5e-3 and rel_err(lse_cuda, lse_tri) < 1e-4
    assert rel_err(o_cuda, want_o) < 1e-2


@pytest.mark.gpu
@needs_kernel
def test_mixed_pools_share_one_reduce():
    # an fp8 prefix (Triton) and an nvfp4 branch (CUDA) per request, merged by the split reduce
    gen = torch.Generator("cuda").manual_seed(5)
    fp8, nv = make_pool("fp8", 600, 8, 128, gen, device="cuda"), make_pool("nvfp4", 600, 8, 128, gen, device="cuda")
    ptr_a, ind_a = csr([200, 0, 57], 600, gen, "cuda")
    ptr_b, ind_b = csr([33, 90, 0], 600, gen, "cuda")
    q = torch.randn(3, 32, 128, generator=gen, device="cuda").bfloat16()
    sm = 1 / math.sqrt(128)
    o, lse = da.decode_attention_pools(q, [(fp8, ptr_a, ind_a), (nv, ptr_b, ind_b)], sm, out_dtype=torch.float32)
    want_o, want_lse = da.decode_attention_pools_ref(q, [(fp8, ptr_a, ind_a), (nv, ptr_b, ind_b)], sm,
                                                     out_dtype=torch.float32)
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


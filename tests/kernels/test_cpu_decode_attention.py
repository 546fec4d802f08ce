"""The C++ CPU paged decode kernel (with and without shared segments) against its float64 torch
reference, its input checks, and the runtime's decode through it against the gather + SDPA
path."""

from __future__ import annotations

import pytest
import torch

from radixgen.kernels import cpu_decode_attention as cpu
from radixgen.radix.kv_pool import KVPool
from radixgen.runtime import attention as attention_mod
from radixgen.runtime.attention import TorchAttention
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode


def test_kernel_compiles_here():
    # the machines this project targets have g++: a silent fallback would hide a broken build
    assert cpu.available(), cpu._state.get("error")


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-6), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("hq, hkv, d", [(9, 3, 64), (4, 4, 32), (16, 2, 128)])
def test_matches_reference(dtype, tol, hq, hkv, d):
    gen = torch.Generator().manual_seed(hq * 100 + d)
    b, slots_n, width = 6, 500, 77
    q = torch.randn(b, hq, d, generator=gen).to(dtype)
    k_pool = torch.randn(slots_n, hkv, d, generator=gen).to(dtype)
    v_pool = torch.randn(slots_n, hkv, d, generator=gen).to(dtype)
    slots = torch.randint(0, slots_n, (b, width), generator=gen)
    lens = torch.tensor([width, 1, 33, 32, 64, 5])  # block edges of the kernel (32) included
    out, lse = cpu.cpu_decode_attention(q, k_pool, v_pool, slots, lens)
    ref_out, ref_lse = cpu.cpu_decode_attention_ref(q, k_pool, v_pool, slots, lens)
    assert out.dtype == dtype and out.shape == (b, hq, d) and lse.dtype == torch.float32
    err = ((out.double() - ref_out.double()).abs().max() / ref_out.double().abs().max()).item()
    assert err < tol, err
    assert torch.allclose(lse.double(), ref_lse.double(), rtol=1e-6, atol=1e-5)


def test_strided_query_and_empty_rows():
    gen = torch.Generator().manual_seed(7)
    qk = torch.randn(3, 12, 64, generator=gen)  # q heads then k heads, as the model splits them
    q = qk[:, :9]
    k_pool, v_pool = torch.randn(2, 40, 3, 64, generator=gen).unbind(0)
    slots = torch.randint(0, 40, (3, 10), generator=gen)
    lens = torch.tensor([10, 0, 4])
    out, lse = cpu.cpu_decode_attention(q, k_pool, v_pool, slots, lens)
    ref_out, ref_lse = cpu.cpu_decode_attention_ref(q.contiguous(), k_pool, v_pool, slots, lens)
    assert torch.allclose(out, ref_out, atol=1e-5)
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.isneginf(lse[1]).all()
    assert torch.allclose(lse[[0, 2]], ref_lse[[0, 2]], atol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: {**a, "q": a["q"].double()}, "dtype"),
        (lambda a: {**a, "k_pool": a["k_pool"].to(torch.bfloat16)}, "dtype"),
        (lambda a: {**a, "slots": a["slots"].int()}, "slots"),
        (lambda a: {**a, "slots": a["slots"] + 1000}, "slots must lie"),
        (lambda a: {**a, "lens": torch.tensor([9, 2])}, "lens must lie"),
        (lambda a: {**a, "q": a["q"][:, :5]}, "heads"),
        (lambda a: {**a, "v_pool": a["v_pool"][:10]}, "k_pool and v_pool"),
    ],
)
def test_bad_inputs_raise(change, message):
    args = {
        "q": torch.randn(2, 6, 16),
        "k_pool": torch.randn(50, 2, 16),
        "v_pool": torch.randn(50, 2, 16),
        "slots": torch.zeros(2, 8, dtype=torch.int64),
        "lens": torch.tensor([8, 2]),
    }
    with pytest.raises(ValueError, match=message):
        cpu.cpu_decode_attention(**change(args))


@pytest.mark.parametrize("shared", [0, 40])
def test_runtime_decode_same_as_gather_path(monkeypatch, shared):
    """TorchAttention's decode (with and without a cascade group) gives the same output through
    the kernel as through gather + SDPA."""
    gen = torch.Generator().manual_seed(shared)
    hq, hkv, d, layers = 6, 2, 32, 1
    pool = KVPool(400, layers, hkv, d, torch.float32)
    pool.k[0][:400].copy_(torch.randn(400, hkv, d, generator=gen))
    pool.v[0][:400].copy_(torch.randn(400, hkv, d, generator=gen))
    lens = [50, 45, 60, 41, 47, 52, 43, 58]
    b = len(lens)
    rows = [
        list(range(shared)) + torch.randperm(300, generator=gen)[: n - shared].add(100).tolist()
        for n in lens
    ]
    kv_slots = torch.tensor([r + [0] * (max(lens) - len(r)) for r in rows])
    batch = ForwardBatch(
        ForwardMode.DECODE,
        torch.zeros(b, dtype=torch.int64),
        torch.tensor(lens) - 1,
        kv_slots[torch.arange(b), torch.tensor(lens) - 1],
        kv_slots,
        lens,
        [1] * b,
        torch.arange(b),
    )
    q = torch.randn(b, hq, d, generator=gen)
    for direct, attn in _attend_both_ways(monkeypatch, batch, q, pool, hq, hkv, d):
        assert bool(attn.plan.groups) == bool(shared)


def _attend_both_ways(monkeypatch, batch, q, pool, hq, hkv, d):
    """Attend `batch` (layer 0) with and without the kernel, yield (direct, backend) after each,
    and assert the two outputs agree."""
    k_new, v_new = pool.k[0][batch.out_slots].clone(), pool.v[0][batch.out_slots].clone()
    outs = []
    for direct in (True, False):
        monkeypatch.setattr(
            attention_mod, "_reads_pool_directly", lambda pool, q, direct=direct: direct
        )
        attn = TorchAttention(hq, hkv, d)
        attn.begin(batch)
        outs.append(attn.attend(0, q, k_new, v_new, pool))
        yield direct, attn
    assert torch.allclose(outs[0], outs[1], atol=1e-5), (outs[0] - outs[1]).abs().max()


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-6), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize(
    "hq, hkv, d", [(9, 3, 64), (16, 2, 128), (4, 4, 32), (8, 1, 64), (6, 2, 40), (6, 3, 20)]
)
def test_shared_segments_match_reference(dtype, tol, hq, hkv, d):
    """Groups of 1 to 9 members (the GEMM-like path from 8 query rows, dot products below), a
    segment longer than the kernel's 256-key chunk, nested and empty segments, requests with
    no own keys, and one with no keys at all."""
    gen = torch.Generator().manual_seed(hq * 1000 + d)
    b, slots_n, width = 12, 2000, 70
    q = torch.randn(b, hq, d, generator=gen).to(dtype)
    k_pool, v_pool = torch.randn(2, slots_n, hkv, d, generator=gen).to(dtype).unbind(0)
    slots = torch.randint(0, slots_n, (b, width), generator=gen)
    lens = torch.tensor([70, 0, 5, 33, 64, 1, 2, 3, 70, 16, 17, 0])  # row 11: in no group either
    segments = [
        (torch.arange(100, 400), torch.tensor([0, 2, 3, 4, 5, 6, 7, 8, 9])),
        (torch.randint(0, slots_n, (45,), generator=gen), torch.tensor([1, 3, 10])),
        (
            torch.randint(0, slots_n, (7,), generator=gen),
            torch.tensor([0, 2]),
        ),  # nested in the first
        (torch.empty(0, dtype=torch.int64), torch.tensor([5])),
    ]
    shared = cpu.SharedSegments.build(segments)
    out, lse = cpu.cpu_decode_attention(q, k_pool, v_pool, slots, lens, shared=shared)
    ref_out, ref_lse = cpu.cpu_decode_attention_ref(q, k_pool, v_pool, slots, lens, shared=shared)
    err = ((out.double() - ref_out.double()).abs().max() / ref_out.double().abs().max()).item()
    assert err < tol, err
    assert (
        torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse)) and torch.isneginf(lse[11]).all()
    )
    assert torch.equal(out[11], torch.zeros_like(out[11]))
    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite].double(), ref_lse[finite].double(), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s._replace(members=s.members + 5), "members must lie"),
        (lambda s: s._replace(slots=s.slots + 1000), "slots must lie"),
        (lambda s: s._replace(member_offsets=s.member_offsets[:-1]), "offsets"),
        (lambda s: s._replace(slot_offsets=torch.tensor([0, 4, 3])), "offsets"),
        (lambda s: s._replace(slots=s.slots.int()), "int64"),
    ],
)
def test_bad_shared_segments_raise(change, message):
    shared = cpu.SharedSegments.build(
        [(torch.arange(3), torch.tensor([0, 1])), (torch.arange(4), torch.tensor([1]))]
    )
    args = {
        "q": torch.randn(2, 6, 16),
        "k_pool": torch.randn(50, 2, 16),
        "v_pool": torch.randn(50, 2, 16),
        "slots": torch.zeros(2, 8, dtype=torch.int64),
        "lens": torch.tensor([8, 2]),
    }
    with pytest.raises(ValueError, match=message):
        cpu.cpu_decode_attention(**args, shared=change(shared))


def test_runtime_extend_same_as_sdpa_path(monkeypatch):
    """TorchAttention's extend through the kernel (blocked causal segments) equals the SDPA
    path: extends longer than a block, with and without a cached prefix, one token, and a
    token tree in the same batch (which stays on the SDPA path)."""
    gen = torch.Generator().manual_seed(3)
    hq, hkv, d = 6, 2, 32
    pool = KVPool(1200, 1, hkv, d, torch.float32)
    pool.k[0][:1200].copy_(torch.randn(1200, hkv, d, generator=gen))
    pool.v[0][:1200].copy_(torch.randn(1200, hkv, d, generator=gen))
    prefix, ext = [0, 40, 100, 20, 7], [150, 70, 5, 1, 64]
    seq = [p + e for p, e in zip(prefix, ext)]
    perm = torch.randperm(1200, generator=gen)
    rows, at = [], 0
    for n in seq:
        rows.append(perm[at : at + n].tolist())
        at += n
    kv_slots = torch.tensor([r + [0] * (max(seq) - len(r)) for r in rows])
    tree = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 0, 1, 0, 0], [1, 1, 0, 1, 0], [1, 0, 1, 0, 1]],
        dtype=torch.bool,
    )
    out_slots = torch.cat([kv_slots[i, p : p + e] for i, (p, e) in enumerate(zip(prefix, ext))])
    positions = torch.cat([torch.arange(p, p + e) for p, e in zip(prefix, ext)])
    batch = ForwardBatch(
        ForwardMode.EXTEND,
        torch.zeros(len(positions), dtype=torch.int64),
        positions,
        out_slots,
        kv_slots,
        seq,
        ext,
        torch.arange(len(ext)),
        tree_masks=[None, None, tree, None, None],
    )
    q = torch.randn(len(positions), hq, d, generator=gen)
    for direct, attn in _attend_both_ways(monkeypatch, batch, q, pool, hq, hkv, d):
        assert (attn.ext_plan.kernel is not None) == direct

"""The SGMV and BGMV LoRA kernels (Triton, under the interpreter on the CPU) equal their torch
references: slot-0 rows untouched, column offsets honoured, accumulate adds."""

import pytest
import torch

from tests.kernels.conftest import KERNEL_DEVICE

TOL = 1e-4 if KERNEL_DEVICE == "cpu" else 2e-2  # TF32 dots on a GPU


def stacked(num_slots, n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(num_slots, n, k, generator=gen)
    w[0] = 0  # the base model's slot
    return w


def segments_of(lens, slots):
    starts = [0, *torch.tensor(lens).cumsum(0).tolist()[:-1]]
    return tuple(torch.tensor(v, dtype=torch.int32) for v in (starts, lens, slots))


@pytest.mark.parametrize(
    "lens,slots,n,k,accumulate",
    [
        ([5], [1], 24, 40, False),  # one segment; N and K not multiples of the tiles
        ([3, 17, 2, 9], [2, 0, 3, 1], 16, 48, True),  # a base-model segment, a 2-tile segment
        ([1, 1, 1], [3, 3, 2], 40, 8, True),  # rank-sized K (the expand)
    ],
)
def test_sgmv_matches_reference(lens, slots, n, k, accumulate):
    from radixgen.kernels.lora import sgmv, sgmv_ref

    total, in_off, out_off = sum(lens), 3, 5
    gen = torch.Generator().manual_seed(sum(lens))
    x = torch.randn(total, in_off + k + 2, generator=gen)
    w = stacked(4, n, k, seed=n)
    out0 = torch.randn(total, out_off + n + 1, generator=gen)
    segs = segments_of(lens, slots)
    want = out0.clone()
    sgmv_ref(x, w, want, segs, in_off, out_off, accumulate)
    dev = lambda t: t.to(KERNEL_DEVICE)  # noqa: E731
    got = dev(out0.clone())
    sgmv(dev(x), dev(w), got, tuple(map(dev, segs)), max(lens), in_off, out_off, accumulate)
    torch.testing.assert_close(got.cpu(), want, atol=TOL, rtol=TOL)
    for start, length, slot in zip(*(s.tolist() for s in segs)):
        if slot == 0:  # the base model's rows are left as they were
            rows = slice(start, start + length)
            assert torch.equal(got.cpu()[rows], out0[rows])


@pytest.mark.parametrize(
    "row_slots,n,k", [([1, 0, 2, 1, 3], 24, 40), ([0, 0], 16, 16), ([2], 64, 8)]
)
@pytest.mark.parametrize("accumulate", [False, True])
def test_bgmv_matches_reference(row_slots, n, k, accumulate):
    from radixgen.kernels.lora import bgmv, bgmv_ref

    gen = torch.Generator().manual_seed(n + k)
    x = torch.randn(len(row_slots), k + 4, generator=gen)
    w = stacked(4, n, k, seed=k)
    out0 = torch.randn(len(row_slots), n + 7, generator=gen)
    slots = torch.tensor(row_slots, dtype=torch.int32)
    want = out0.clone()
    bgmv_ref(x, w, want, slots, 4, 7, accumulate)
    got = out0.clone().to(KERNEL_DEVICE)
    bgmv(x.to(KERNEL_DEVICE), w.to(KERNEL_DEVICE), got, slots.to(KERNEL_DEVICE), 4, 7, accumulate)
    torch.testing.assert_close(got.cpu(), want, atol=TOL, rtol=TOL)
    assert torch.equal(got.cpu()[:, :7], out0[:, :7])  # columns before the offset untouched


def test_launchers_refuse_bad_shapes():
    from radixgen.kernels.lora import bgmv, sgmv

    x, w, out = torch.zeros(3, 8), torch.zeros(2, 4, 8), torch.zeros(3, 4)
    with pytest.raises(ValueError, match="columns out of range"):
        bgmv(x, w, out, torch.zeros(3, dtype=torch.int32), out_offset=1)
    with pytest.raises(ValueError, match="int32"):
        bgmv(x, w, out, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="int32"):
        sgmv(x, w, out, segments_of([3], [1])[:2] + (torch.ones(1),), 3)

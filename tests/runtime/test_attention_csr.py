"""The per-pool CSR of a batch's KV slots that the paged kernels read (slot_csr.py):
the same as selecting each request's slots one by one, for one pool (a gather from the lengths,
no device sync) and for a mixed pool's two parts (one batch-wide selection)."""

import pytest
import torch

from radixgen.runtime.slot_csr import slot_csr, slot_csr_padded


def _reference(rows, lens, lo, hi):
    picked = [r[:n][(r[:n] >= lo) & (r[:n] < hi)] - lo for r, n in zip(rows, lens)]
    indptr = torch.tensor([0] + [len(p) for p in picked]).cumsum(0)
    return indptr, torch.cat(picked)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_csr_matches_per_request_selection(seed):
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(0, 40, (7,), generator=gen).tolist()
    lens[3] = 0  # a request with no KV in this batch part
    rows = torch.zeros(7, max(lens) + 5, dtype=torch.int64)  # padded with slot 0, as ForwardBatch
    num_slots, boundary = 500, 180
    for b, n in enumerate(lens):
        rows[b, :n] = torch.randperm(num_slots, generator=gen)[:n]
    indptr, indices = slot_csr(rows, lens, 0, num_slots, whole=True)
    ref_indptr, ref_indices = _reference(rows, lens, 0, num_slots)
    assert torch.equal(indptr, ref_indptr) and torch.equal(indices, ref_indices)
    for lo, hi in ((0, boundary), (boundary, num_slots)):
        indptr, indices = slot_csr(rows, lens, lo, hi, whole=False)
        ref_indptr, ref_indices = _reference(rows, lens, lo, hi)
        assert torch.equal(indptr, ref_indptr) and torch.equal(indices, ref_indices)
        assert indices.numel() < sum(lens)  # both parts hold some of the slots: a real split


def test_new_tokens_home_part_per_extend_request():
    """Each extend request's new tokens lie in one pool part (their count goes there), or the
    batch falls back (None) when a request's new tokens span both parts."""
    from radixgen.runtime.attention_kernels import KernelAttention
    from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode

    boundary, parts = 100, [(None, 0, 100), (None, 100, 300)]
    # request 0: prefix in the prefix part, 3 new tokens in the branch part; request 1: all in
    # the prefix part; request 2: 2 new tokens in the branch part (its prefix spans both)
    rows = torch.tensor([[5, 6, 150, 151, 152, 0], [7, 8, 9, 10, 0, 0], [11, 160, 12, 170, 171, 0]])
    seq_lens, extend_lens = [5, 4, 5], [3, 2, 2]

    def num_new(rows):
        n = sum(extend_lens)
        batch = ForwardBatch(
            ForwardMode.EXTEND,
            torch.zeros(n, dtype=torch.int64),
            torch.zeros(n, dtype=torch.int64),
            torch.zeros(n, dtype=torch.int64),
            rows,
            seq_lens,
            extend_lens,
            torch.zeros(0),
        )
        attn = KernelAttention(4, 2, 16, backend="torch")
        attn.begin(batch)
        return attn._num_new_per_part(parts, torch.device("cpu"))

    got = num_new(rows)
    assert [t.tolist() for t in got] == [[0, 2, 0], [3, 0, 2]]
    rows[1, 3] = boundary + 50  # request 1's new tokens now span both parts
    assert num_new(rows) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_padded_csr_matches_csr(seed):
    """The fixed-shape CSR that CUDA graphs capture (lengths on the device, padding rows of
    length 0) holds slot_csr's entries first, for one pool and for each part of a mixed pool."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, 40, (6,), generator=gen).tolist() + [0, 0]  # two padding rows
    rows = torch.zeros(8, 64, dtype=torch.int64)
    for b, n in enumerate(lens):
        rows[b, :n] = torch.randperm(500, generator=gen)[:n]
    for lo, hi in ((0, 500), (0, 180), (180, 500)):
        ref_indptr, ref_indices = slot_csr(rows, lens, lo, hi, whole=(lo, hi) == (0, 500))
        indptr, indices = slot_csr_padded(rows, torch.tensor(lens), lo, hi)
        assert torch.equal(indptr, ref_indptr)
        assert indices.numel() == rows.numel() + 1
        assert torch.equal(indices[: int(indptr[-1])], ref_indices)

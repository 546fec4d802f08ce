"""ReqToTokenTable: row writes, and one batched write of a position per request."""

import torch

from radixgen.radix.kv_pool import ReqToTokenTable


def test_write_positions_sets_one_slot_per_row_and_nothing_else():
    table = ReqToTokenTable(max_requests=4, max_context_len=8)
    table.write(2, 0, torch.tensor([5, 6, 7]))
    before = table.table.clone()
    table.write_positions([2, 0, 3], [3, 0, 7], torch.tensor([11, 12, 13]))
    assert table.read(2, 4).tolist() == [5, 6, 7, 11]
    assert table.table[0, 0] == 12 and table.table[3, 7] == 13
    changed = (table.table != before).nonzero().tolist()
    assert changed == [[0, 0], [2, 3], [3, 7]]

import pytest
import torch

from radixgen.speculative import TokenTree

#        root
#       /    \
#     0:5    3:8
#    /   \      \
#  1:6   2:7    4:9
#   |
#  5:1
TREE = TokenTree.build([5, 6, 7, 8, 9, 1], [-1, 0, 0, -1, 3, 1])


def _brute_mask(tree: TokenTree) -> torch.Tensor:
    n = tree.num_nodes
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in tree.path_to(i):
            mask[i, j] = True
    return mask


def test_depth_positions_children_paths():
    assert TREE.depth.tolist() == [1, 2, 2, 1, 2, 3]
    assert TREE.max_depth == 3
    assert TREE.positions(10).tolist() == [11, 12, 12, 11, 12, 13]
    assert TREE.verify_positions(10).tolist() == [10, 11, 12, 12, 11, 12, 13]
    assert TREE.verify_input_ids(42).tolist() == [42, 5, 6, 7, 8, 9, 1]
    assert TREE.children(-1) == [0, 3] and TREE.children(0) == [1, 2]
    assert TREE.paths() == [[0, 2], [3, 4], [0, 1, 5]]


def test_ancestor_mask_matches_paths():
    mask = TREE.ancestor_mask()
    assert torch.equal(mask, _brute_mask(TREE))
    assert mask[5].tolist() == [True, True, False, False, False, True]
    full = TREE.verify_mask()
    assert full.shape == (7, 7)
    assert full[:, 0].all() and not full[0, 1:].any()
    assert torch.equal(full[1:, 1:], mask)


def test_parents_must_come_first():
    with pytest.raises(AssertionError):
        TokenTree.build([1, 2], [1, -1])


def test_prune_drops_whole_subtrees():
    pruned = TREE.prune([True, False, True, True, True, True])  # node 1 goes, so does 5
    assert pruned.id_list == [5, 7, 8, 9]
    assert pruned.parent_list == [-1, 0, -1, 2]
    assert torch.equal(pruned.ancestor_mask(), _brute_mask(pruned))
    assert TREE.prune([False, True, True, True, True, True]).id_list == [8, 9]
    assert len(TREE.prune([False] * 6)) == 0


def test_prune_keeps_draft_rows():
    rows = torch.eye(10)[[5, 6, 7, 8, 9, 1]]
    tree = TokenTree(TREE.token_ids, TREE.parents, rows, torch.arange(6.0))
    pruned = tree.prune([True, True, False, False, True, True])
    assert pruned.id_list == [5, 6, 1]
    assert pruned.draft_probs.argmax(-1).tolist() == [5, 6, 1]
    assert pruned.token_probs.tolist() == [0.0, 1.0, 5.0]


def test_add_chain_follows_existing_children():
    tree = TREE.add_chain([5, 6, 2, 3])  # 5 -> 6 exist; 2 -> 3 are new below node 1
    assert tree.num_nodes == 8
    assert tree.path_to(7) == [0, 1, 6, 7]
    assert [tree.id_list[i] for i in tree.path_to(7)] == [5, 6, 2, 3]
    below = TREE.add_chain([4], parent=4)
    assert below.parent_list[-1] == 4 and below.depth.tolist()[-1] == 3


def test_merge_dedupes_identical_children():
    other = TokenTree.build([5, 7, 4, 8], [-1, 0, 1, -1])
    merged = TREE.merge(other)
    assert merged.num_nodes == 7  # only 5 -> 7 -> 4 is new
    assert sorted(tuple(merged.id_list[i] for i in p) for p in merged.paths()) == [
        (5, 6, 1),
        (5, 7, 4),
        (8, 9),
    ]
    assert TREE.merge(TREE).num_nodes == TREE.num_nodes


def test_merge_fills_missing_draft_rows_one_hot():
    rows = torch.full((1, 10), 0.1)
    sampled = TokenTree.chain([3], draft_probs=rows)
    merged = TokenTree.chain([5, 6]).merge(sampled)
    assert merged.draft_probs.shape == (3, 10)
    assert merged.draft_probs[:2].argmax(-1).tolist() == [5, 6]
    assert merged.draft_probs[:2].sum(-1).tolist() == [1.0, 1.0]
    assert torch.equal(merged.draft_probs[2], rows[0])


def test_empty_tree():
    tree = TokenTree.empty()
    assert len(tree) == 0 and tree.max_depth == 0 and tree.paths() == []
    assert tree.verify_mask().tolist() == [[True]]
    assert tree.verify_positions(3).tolist() == [3]

import torch

from radixgen.speculative import (
    AcceptStats,
    TokenTree,
    verify_greedy,
    verify_greedy_batch,
    verify_sampling,
)

# root -> 0:3 -> 1:4 -> 2:5
#      -> 3:6 -> 4:7
TREE = TokenTree.build([3, 4, 5, 6, 7], [-1, 0, 1, -1, 3])
VOCAB = 10


def _logits(argmax_per_row: list[int]) -> torch.Tensor:
    logits = torch.zeros(len(argmax_per_row), VOCAB)
    logits[torch.arange(len(argmax_per_row)), torch.tensor(argmax_per_row)] = 5.0
    return logits


def test_greedy_accepts_the_longest_matching_path_and_a_bonus():
    # rows: root, 3, 4, 5, 6, 7. Root prefers 6, node 6 prefers 7, node 7 prefers 1.
    result = verify_greedy(TREE, _logits([6, 4, 9, 0, 7, 1]))
    assert result.node_path == [3, 4]
    assert result.token_ids == [6, 7, 1]
    assert result.accept_len == 2
    assert result.accepted_at_depth == [True, True, False]
    assert result.keep_rows() == [0, 4, 5]
    assert result.drop_rows(TREE.num_nodes) == [1, 2, 3]


def test_greedy_full_path_and_no_match():
    full = verify_greedy(TREE, _logits([3, 4, 5, 8, 0, 0]))
    assert full.token_ids == [3, 4, 5, 8] and full.node_path == [0, 1, 2]
    miss = verify_greedy(TREE, _logits([9, 4, 5, 8, 0, 0]))
    assert miss.token_ids == [9] and miss.node_path == [] and miss.keep_rows() == [0]
    assert miss.accepted_at_depth == [False, False, False]


def test_greedy_on_empty_tree_is_a_decode_step():
    result = verify_greedy(TokenTree.empty(), _logits([2]))
    assert result.token_ids == [2] and result.accepted_at_depth == []


def test_sampling_with_certain_target_agrees_with_greedy():
    probs = torch.softmax(_logits([6, 4, 9, 0, 7, 1]) * 10, -1)
    gen = torch.Generator().manual_seed(0)
    for rows in (None, torch.full((5, VOCAB), 1 / VOCAB)):
        result = verify_sampling(TREE, probs, rows, generator=gen)
        assert result.token_ids == [6, 7, 1] and result.node_path == [3, 4]


def test_sampling_never_emits_a_zero_probability_token():
    probs = torch.full((6, VOCAB), 1 / 8)
    probs[:, [3, 6]] = 0  # e.g. grammar-masked: both root children are impossible
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        result = verify_sampling(TREE, probs, generator=gen)
        assert result.node_path == [] and result.token_ids[0] not in (3, 6)


def test_greedy_batch_matches_one_by_one():
    other = TokenTree.chain([1, 2])
    logits_a, logits_b = _logits([6, 4, 9, 0, 7, 1]), _logits([1, 5, 0])
    batch = verify_greedy_batch(
        [TREE, other, TokenTree.empty()], torch.cat([logits_a, logits_b, _logits([4])])
    )
    assert [r.token_ids for r in batch] == [[6, 7, 1], [1, 5], [4]]
    assert batch[0] == verify_greedy(TREE, logits_a)


def test_sampling_survives_a_row_without_mass():
    # node 0 (token 3) terminated the grammar: its row allows nothing
    tree = TokenTree.chain([3])
    probs = torch.zeros(2, VOCAB)
    probs[0, 3] = 1.0
    result = verify_sampling(tree, probs, generator=torch.Generator().manual_seed(0))
    assert result.node_path == [0] and len(result.token_ids) == 2


def test_accept_stats():
    stats = AcceptStats()
    stats.update(verify_greedy(TREE, _logits([6, 4, 9, 0, 7, 1])), TREE.num_nodes)
    stats.update(verify_greedy(TREE, _logits([9, 4, 5, 8, 0, 0])), TREE.num_nodes)
    assert stats.mean_accept_len == 2.0  # (2 + 0) / 2 accepted, plus one target token each
    assert stats.position_rates() == [0.5, 0.5, 0.0]
    assert AcceptStats().mean_accept_len == 0.0

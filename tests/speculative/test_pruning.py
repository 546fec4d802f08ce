import torch

from radixgen.speculative import TokenTree, fill_tree_bitmask, prune_tree
from tests.speculative.toy_matcher import DfaMatcher, example_grammar

# Grammar: 1 2 (3 | 4 5 6) 7 EOS.   Draft tree:
#   root -> 1 -> 2 -> 4 -> 5        (valid; grammar then forces 6 7)
#                  -> 3             (valid; forces 7)
#                  -> 6 -> 7        (6 invalid: cut with its child)
#        -> 5 -> 1                  (5 invalid at the start: cut with its child)
TREE = TokenTree.build([1, 2, 4, 5, 3, 6, 7, 5, 1], [-1, 0, 1, 2, 1, 1, 5, -1, 7])


def _chains(tree: TokenTree) -> set[tuple[int, ...]]:
    return {tuple(tree.id_list[i] for i in p) for p in tree.paths()}


def test_cuts_rejected_subtrees_and_appends_forced_tokens():
    matcher = example_grammar()
    result = prune_tree(TREE, matcher)
    assert result.num_pruned == 4
    assert result.num_forced == 3
    assert _chains(result.tree) == {(1, 2, 4, 5, 6, 7), (1, 2, 3, 7)}
    assert matcher.stack == [0] and not matcher.is_terminated()  # the original is untouched


def test_walk_starts_from_the_matchers_state():
    matcher = example_grammar()
    assert matcher.accept_token(1) and matcher.accept_token(2)
    tree = TokenTree.build([4, 3, 9], [-1, -1, -1])
    result = prune_tree(tree, matcher, max_forced=1)
    assert result.num_pruned == 1
    assert _chains(result.tree) == {(4, 5), (3, 7)}
    assert matcher.stack == [0, 1, 2]


def test_empty_tree_gets_the_forced_chain():
    result = prune_tree(TokenTree.empty(), example_grammar())
    assert result.tree.id_list == [1, 2] and result.tree.parent_list == [-1, 0]
    assert (result.num_pruned, result.num_forced) == (0, 2)
    none = prune_tree(TokenTree.empty(), example_grammar(), max_forced=0)
    assert none.tree.num_nodes == 0


def test_nothing_survives_after_termination():
    matcher = example_grammar()
    for token in [1, 2, 3, 7, 0]:
        assert matcher.accept_token(token)
    result = prune_tree(TokenTree.chain([0, 1]), matcher)
    assert result.tree.num_nodes == 0 and result.num_pruned == 2


def test_eos_accepted_inside_the_tree_ends_its_branch():
    matcher = example_grammar()
    for token in [1, 2, 3]:
        matcher.accept_token(token)
    result = prune_tree(TokenTree.chain([7, 0, 7]), matcher)
    assert result.tree.id_list == [7, 0] and result.num_pruned == 1


def test_sampled_rows_are_restricted_to_the_grammar():
    matcher = example_grammar()
    matcher.accept_token(1)
    matcher.accept_token(2)  # allowed next: 3 or 4
    q = torch.full((8,), 1 / 8)
    tree = TokenTree.build([4, 6, 3], [-1, -1, -1], draft_probs=q.repeat(3, 1))
    result = prune_tree(tree, matcher, max_forced=0)
    assert result.tree.id_list == [4, 3]
    expected = torch.zeros(8)
    expected[[3, 4]] = 0.5
    assert torch.allclose(result.tree.draft_probs, expected.repeat(2, 1))


def test_without_bitmask_sampled_rows_become_deterministic():
    class NoBitmask(DfaMatcher):
        def __getattribute__(self, name):
            if name == "fill_bitmask":
                raise AttributeError(name)
            return super().__getattribute__(name)

        def fork(self):
            twin = NoBitmask(self.transitions, self.accepting)
            twin.stack = list(self.stack)
            return twin

    g = example_grammar()
    matcher = NoBitmask(g.transitions, g.accepting)
    tree = TokenTree.chain([1, 9], draft_probs=torch.full((2, 10), 0.1))
    result = prune_tree(tree, matcher, max_forced=0)
    assert result.tree.id_list == [1] and result.tree.draft_probs is None


def _allowed_rows(bitmask: torch.Tensor) -> list[list[int]]:
    return [[t for t in range(32) if (int(w) >> t) & 1] for w in bitmask[:, 0]]


def test_fill_tree_bitmask_gives_each_verify_row_its_state():
    matcher = example_grammar()
    tree = TokenTree.build([1, 2, 4, 3, 9], [-1, 0, 1, 1, -1])  # 9 is invalid
    bitmask = torch.full((1 + tree.num_nodes + 1, 1), -1, dtype=torch.int32)
    fill_tree_bitmask(tree, matcher, bitmask, first_row=1)
    assert int(bitmask[0, 0]) == -1  # rows outside the tree untouched
    assert _allowed_rows(bitmask[1:]) == [[1], [2], [3, 4], [5], [7], []]
    assert matcher.stack == [0]


def test_fill_tree_bitmask_after_termination_is_empty():
    matcher = example_grammar()
    for token in [1, 2, 3, 7]:
        matcher.accept_token(token)
    tree = TokenTree.chain([0])
    bitmask = torch.zeros(2, 1, dtype=torch.int32)
    fill_tree_bitmask(tree, matcher, bitmask)
    assert _allowed_rows(bitmask) == [[0], []]

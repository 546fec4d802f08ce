import torch

from radixgen.speculative import Drafter, DraftModelDrafter

VOCAB = 8


class CountingModel:
    """Prefers last + 1, then last + 2, then the rest (mod VOCAB). Counts calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, contexts: list[list[int]]) -> torch.Tensor:
        self.calls.append(len(contexts))
        logits = torch.zeros(len(contexts), VOCAB)
        for row, ctx in enumerate(contexts):
            logits[row, (ctx[-1] + 1) % VOCAB] = 4.0
            logits[row, (ctx[-1] + 2) % VOCAB] = 2.0
        return logits


def test_greedy_chain():
    model = CountingModel()
    drafter = DraftModelDrafter(model)
    assert isinstance(drafter, Drafter)
    tree = drafter.propose([3], max_tokens=4, max_depth=10)
    assert tree.id_list == [4, 5, 6, 7] and tree.parent_list == [-1, 0, 1, 2]
    assert tree.draft_probs is None
    assert model.calls == [1, 1, 1, 1]


def test_greedy_top_k_tree_within_budget():
    model = CountingModel()
    drafter = DraftModelDrafter(model, branch=2, width=2)
    tree = drafter.propose([0], max_tokens=5, max_depth=3)
    assert tree.num_nodes == 5 and tree.max_depth <= 3
    assert [tree.id_list[i] for i in tree.children(-1)] == [1, 2]
    assert tree.id_list[tree.children(tree.children(-1)[0])[0]] == 2  # best path 1 -> 2
    probs = tree.token_probs.tolist()
    assert probs[0] > probs[1]


def test_batch_makes_one_call_per_level():
    model = CountingModel()
    trees = DraftModelDrafter(model).propose_batch([[1], [5, 6]], max_tokens=3, max_depth=3)
    assert model.calls == [2, 2, 2]
    assert trees[0].id_list == [2, 3, 4] and trees[1].id_list == [7, 0, 1]


def test_sampling_records_the_distribution_each_draft_came_from():
    model = CountingModel()
    gen = torch.Generator().manual_seed(0)
    drafter = DraftModelDrafter(model, branch=3, width=1, temperature=1.0, generator=gen)
    tree = drafter.propose([0], max_tokens=6, max_depth=2)
    assert tree.num_nodes == 6 and tree.draft_probs.shape == (6, VOCAB)
    assert torch.allclose(tree.draft_probs.sum(-1), torch.ones(6))
    first, second, third = tree.children(-1)
    q1, q2, q3 = tree.draft_probs[[first, second, third]]
    assert torch.allclose(q1, torch.softmax(model([[0]])[0], -1))
    x1, x2 = tree.id_list[first], tree.id_list[second]
    assert q2[x1] == 0 and q3[x1] == 0 and q3[x2] == 0  # drawn without replacement
    assert len({x1, x2, tree.id_list[third]}) == 3
    assert tree.children(first) and not tree.children(second)  # shape: first child expands

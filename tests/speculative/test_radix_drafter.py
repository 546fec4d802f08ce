import random

from radixgen.speculative import Drafter, RadixDrafter, TokenTree
from radixgen.speculative.ngram_index import NgramIndex, unpack

PATTERN = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]


def _path_tokens(tree: TokenTree, path: list[int]) -> list[int]:
    return [tree.id_list[i] for i in path]


def _best_chain(tree: TokenTree) -> list[int]:
    """Follow the first (most confident) child from the root."""
    out, node = [], -1
    while tree.children(node):
        node = tree.children(node)[0]
        out.append(tree.id_list[node])
    return out


def test_is_a_drafter():
    assert isinstance(RadixDrafter(), Drafter)


def test_repeated_text_in_own_context():
    drafter = RadixDrafter()
    context = PATTERN * 3 + PATTERN[:4]
    tree = drafter.propose(context, max_tokens=6, max_depth=6, request_id="r")
    assert _best_chain(tree) == PATTERN[4:10]
    assert tree.num_nodes == 6 and tree.max_depth == 6


def test_respects_max_tokens_and_depth():
    drafter = RadixDrafter(min_prob=0.0)
    rng = random.Random(0)
    for _ in range(20):
        drafter.observe([rng.randrange(8) for _ in range(200)])
    context = [rng.randrange(8) for _ in range(300)]
    for max_tokens, max_depth in [(1, 1), (5, 2), (16, 4), (64, 8)]:
        tree = drafter.propose(context, max_tokens, max_depth)
        assert 0 < tree.num_nodes <= max_tokens
        assert tree.max_depth <= max_depth
    assert drafter.propose(context, 0, 4).num_nodes == 0
    assert drafter.propose([], 8, 4).num_nodes == 0


def test_observed_sequences_branch_by_frequency():
    drafter = RadixDrafter()
    for _ in range(3):
        drafter.observe([1, 2, 3, 4, 5, 6, 7])
    drafter.observe([1, 2, 3, 4, 9, 9, 9])
    tree = drafter.propose([50, 2, 3, 4], max_tokens=10, max_depth=3)
    first = tree.children(-1)
    assert [tree.id_list[i] for i in first] == [5, 9]  # more frequent continuation first
    assert tree.token_probs[first[0]] > tree.token_probs[first[1]]
    assert _best_chain(tree) == [5, 6, 7]
    assert max(len(p) for p in tree.paths()) == 3


def test_dominant_continuation_grows_deeper_than_split_one():
    sure, split = RadixDrafter(), RadixDrafter()
    for i in range(8):
        sure.observe([1, 2, 3] + [40, 41, 42, 43, 44, 45])
        split.observe([1, 2, 3] + [40 + i, 41, 42, 43, 44, 45])
    deep = sure.propose([1, 2, 3], max_tokens=6, max_depth=6)
    wide = split.propose([1, 2, 3], max_tokens=6, max_depth=6)
    assert deep.max_depth == 6 and len(deep.children(-1)) == 1
    assert len(wide.children(-1)) > 1 and wide.max_depth < 6


def test_longer_match_wins():
    drafter = RadixDrafter()
    drafter.observe([7, 8, 9, 100])  # matches 3 tokens of the suffix
    for _ in range(3):
        drafter.observe([5, 9, 200])  # matches 1 token, more often
    tree = drafter.propose([7, 8, 9], max_tokens=4, max_depth=1)
    assert tree.id_list[tree.children(-1)[0]] == 100


def test_observe_with_cached_prefix_indexes_only_new_tokens():
    drafter = RadixDrafter(max_ngram=4, key_lens=(1, 2))
    prompt = list(range(100, 140))
    drafter.observe(prompt)
    drafter.observe(prompt + [1, 2, 3], num_cached=len(prompt))
    assert drafter.stored_tokens == len(prompt) + 4 + 3  # 4 = max_ngram of match context
    tree = drafter.propose([138, 139], max_tokens=3, max_depth=3)
    assert _best_chain(tree) == [1, 2, 3]
    drafter.observe(prompt, num_cached=len(prompt))  # nothing new
    assert drafter.stored_tokens == len(prompt) + 7


def test_memory_is_bounded():
    drafter = RadixDrafter(max_stored_tokens=1000, max_occurrences=8)
    rng = random.Random(1)
    for _ in range(200):
        drafter.observe([rng.randrange(50) for _ in range(100)])
    assert drafter.stored_tokens <= 1000
    assert len(drafter._index) <= 3 * 1000  # every key keeps a live occurrence
    newest = [rng.randrange(50) for _ in range(100)]
    drafter.observe(newest)
    tree = drafter.propose(newest[:60], max_tokens=8, max_depth=8)
    assert tree.num_nodes > 0


def test_incremental_state_matches_fresh_index():
    rng = random.Random(2)
    text = [rng.randrange(6) for _ in range(400)]
    kept, fresh = RadixDrafter(), RadixDrafter()
    for end in range(20, 400, 37):
        a = kept.propose(text[:end], 8, 4, request_id="req")
        b = fresh.propose(text[:end], 8, 4, request_id=f"new{end}")
        assert (a.id_list, a.parent_list) == (b.id_list, b.parent_list)


def test_state_is_rebuilt_when_context_is_not_an_extension():
    drafter = RadixDrafter()
    drafter.propose(PATTERN * 2, 4, 4, request_id="r")
    other = [1, 2, 3, 4] * 3 + [1, 2]
    assert _best_chain(drafter.propose(other, 2, 2, request_id="r")) == [3, 4]
    drafter.release("r")
    drafter.release("unknown")
    assert _best_chain(drafter.propose(other, 2, 2)) == [3, 4]


def test_index_keys_agree_between_bulk_and_incremental_adds():
    rng = random.Random(3)
    seq = [rng.randrange(1 << 20) for _ in range(300)]
    bulk, step = NgramIndex(), NgramIndex()
    bulk.add(1, seq, 0, len(seq))  # vectorised hashing
    for stop in range(1, len(seq) + 1):
        step.add(1, seq, stop - 1, stop)  # one end at a time, plain Python hashing
    for end in range(4, len(seq)):
        for n in (1, 2, 4):
            found = [unpack(c)[1] for c in bulk.lookup(seq[end - n : end])]
            assert end in found
            assert list(step.lookup(seq[end - n : end])) == list(bulk.lookup(seq[end - n : end]))


def test_tuple_and_tensor_contexts():
    import torch

    drafter = RadixDrafter()
    context = PATTERN * 2 + PATTERN[:3]
    for ctx in (tuple(context), torch.tensor(context), context):
        assert _best_chain(drafter.propose(ctx, 3, 3, request_id="r")) == PATTERN[3:6]

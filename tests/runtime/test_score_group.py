"""Scoring prompts that share a prefix run as one token tree (runtime/score_group.py): one
forward for the whole batch, the same prompt logprobs as one request at a time, and every
member's computed tokens cached afterwards."""

import pytest
import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.messages import GenerateReq
from radixgen.runtime.request import Request
from radixgen.runtime.score_group import build_group, scoreable

PREFIX = list(range(1000, 1012))
TAILS = [[5], [6], [7, 8, 9], [7, 8, 10, 11], [7, 12]]  # one-token, and a shared [7, 8] branch


def _scoring(rid: str, ids: list[int], start: int) -> Request:
    params = SamplingParams(max_new_tokens=0, return_logprob=True, logprob_start_len=start)
    return Request(rid, ids, params)


def test_trie_shares_trunk_and_branches():
    reqs = [_scoring(str(i), PREFIX + tail, len(PREFIX)) for i, tail in enumerate(TAILS)]
    assert all(scoreable(r) for r in reqs)
    group = build_group(reqs, cached_len=4)
    # each computes its prompt but the last token: the trunk is PREFIX[4:], then a trie of
    # [7, 8] (tail 3), [7, 8, 10] (tail 4) and [7] (tail 5): nodes 7, 8 under it, 10 under that
    assert group.trunk_len == len(PREFIX) - 4
    assert group.token_ids[group.trunk_len :] == [7, 8, 10]
    tree = group.tree_input(torch.arange(group.num_rows))
    mask = tree.mask
    for row, parent in enumerate(group.parents):  # a row sees exactly its ancestors and itself
        seen = {row}
        while parent >= 0:
            seen.add(parent)
            parent = group.parents[parent]
        assert set(mask[row].nonzero().flatten().tolist()) == seen
    assert tree.positions.tolist() == [4 + d for d in group.depths]
    # the rows whose logits score each member's tokens after PREFIX: the trunk's last row first
    wanted = {r.rid: rows for r, rows, _ in group.wanted_rows()}
    assert all(rows[0] == group.trunk_len - 1 for rows in wanted.values())
    assert [len(wanted[str(i)]) for i in range(len(TAILS))] == [len(t) for t in TAILS]


def test_trie_rows_merge_equal_paths_only():
    a, b = _scoring("a", PREFIX + [7, 8, 1], 12), _scoring("b", PREFIX + [7, 9, 1], 12)
    group = build_group([a, b], cached_len=0)
    assert group.trunk_len == len(PREFIX) + 1  # PREFIX and 7; then 8 and 9 part
    assert group.num_rows == group.trunk_len + 2


@pytest.mark.parametrize(
    "kv",
    [{}, {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4"}],
    ids=["one-pool", "mixed"],
)
def test_scoring_batch_is_one_forward_equal_to_one_at_a_time(tiny_model_path, kv):
    engine = Engine(str(tiny_model_path), load_format="dummy", **kv)
    sched = engine.scheduler
    engine.generate(input_ids=PREFIX[:4], sampling_params={"max_new_tokens": 1})  # caches 4 tokens
    prompts = [PREFIX + tail for tail in TAILS]
    params = SamplingParams(max_new_tokens=0, return_logprob=True, logprob_start_len=len(PREFIX))
    for i, ids in enumerate(prompts):
        sched.handle(GenerateReq(rid=str(i), input_ids=ids, params=params))
    outs = {o.rid: o for o in sched.step()}
    assert set(outs) == {str(i) for i in range(len(prompts))} and not sched.has_work  # one forward
    assert all(o.finish["type"] == "length" for o in outs.values())
    # the leader's tokens came from the cache (4); the others reused the rows computed before them
    reused = [len(PREFIX) - 4, len(PREFIX) - 4, len(PREFIX) - 4 + 2, len(PREFIX) - 4 + 1]
    assert [outs[str(i)].cached_tokens for i in range(len(prompts))] == [4] + [
        4 + r for r in reused
    ]
    for ids in prompts:  # every member's tokens but its last are cached, the trunk once
        assert sched.cache.match_prefix(ids, None).length == len(ids) - 1
    assert sched.cache.total_size() == len(PREFIX) + 3  # trunk + trie nodes 7, 8, 10
    assert sched.runner.allocator.num_free() + sched.cache.total_size() == sched.runner.num_slots
    grouped = [outs[str(i)].input_logprobs for i in range(len(prompts))]
    for i, ids in enumerate(prompts):
        sched.cache.reset()
        alone = engine.generate(
            input_ids=ids,
            sampling_params={
                "max_new_tokens": 0,
                "return_logprob": True,
                "logprob_start_len": len(PREFIX),
            },
        )
        expected = alone["meta_info"]["input_token_logprobs"]
        assert len(grouped[i]) == len(expected) == len(TAILS[i])
        assert torch.allclose(torch.tensor(grouped[i]), torch.tensor(expected), atol=1e-4), (
            i,
            grouped[i],
            expected,
        )
    engine.shutdown()

"""One verify forward over a bushy token tree gives, at every row, the logits a plain prefill of
the context plus that node's path gives (tree attention mask, tree positions), through the torch
attention path and the kernel path (Triton interpreter on the CPU)."""

import pytest
import torch

from radixgen.core import SamplingParams
from radixgen.runtime.engine import Engine
from radixgen.runtime.model_runner import TreeInput
from radixgen.runtime.request import Request
from radixgen.speculative import TokenTree
from tests.runtime.conftest import tiny_model_path  # noqa: F401 (fixture)

CONTEXT = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
#   root -> 31 -> 33 -> 36
#        |     -> 34
#        -> 32 -> 35
TREE = TokenTree.build([31, 32, 33, 34, 35, 36], [-1, -1, 0, 0, 1, 2])


def _prefill(runner, ids: list[int], upto: int) -> tuple[Request, torch.Tensor]:
    """A request whose first `upto` tokens are prefilled; returns it and the last row's logits."""
    req = Request("r", list(ids), SamplingParams())
    req.row = runner.table.alloc_row()
    slots = runner.allocator.alloc(upto)
    logits = runner.forward_mixed([req], [upto], [slots], [], None)
    req.kv_len = upto
    return req, logits[-1]


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_tree_rows_equal_prefills_of_their_paths(tiny_model_path, backend):
    eng = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="float32",
        max_total_tokens=512,
        attention_backend=backend,
    )
    runner = eng.scheduler.runner
    req, _ = _prefill(
        runner, CONTEXT, len(CONTEXT) - 1
    )  # the root's KV is computed by the tree pass
    slots = runner.allocator.alloc(TREE.num_nodes + 1)
    tree_input = TreeInput(
        req,
        TREE.verify_input_ids(CONTEXT[-1]),
        TREE.verify_positions(req.kv_len),
        TREE.verify_mask(),
        slots,
    )
    rows = runner.forward_mixed([], [], [], [], None, trees=[tree_input])
    assert rows.shape[0] == TREE.num_nodes + 1
    for node in range(-1, TREE.num_nodes):
        path = [TREE.id_list[i] for i in TREE.path_to(node)] if node >= 0 else []
        ids = CONTEXT + path
        _, want = _prefill(runner, ids, len(ids))
        torch.testing.assert_close(rows[node + 1], want, atol=1e-4, rtol=1e-4)
    eng.shutdown()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_trees_of_several_requests_verified_together(tiny_model_path, backend):
    """Two requests' trees (a bushy tree, a chain) in one forward: short extends attended
    together (TorchAttention pads them into one call) give each row its path's logits."""
    eng = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="float32",
        max_total_tokens=512,
        attention_backend=backend,
    )
    runner = eng.scheduler.runner
    contexts = [CONTEXT, [40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53]]
    trees = [TREE, TokenTree.chain([61, 62, 63])]
    inputs = []
    for ctx, tree in zip(contexts, trees):
        req, _ = _prefill(runner, ctx, len(ctx) - 1)
        slots = runner.allocator.alloc(tree.num_nodes + 1)
        inputs.append(
            TreeInput(
                req,
                tree.verify_input_ids(ctx[-1]),
                tree.verify_positions(req.kv_len),
                tree.verify_mask(),
                slots,
            )
        )
    rows = runner.forward_mixed([], [], [], [], None, trees=inputs)
    start = 0
    for ctx, tree in zip(contexts, trees):
        for node in range(-1, tree.num_nodes):
            path = [tree.id_list[i] for i in tree.path_to(node)] if node >= 0 else []
            _, want = _prefill(runner, ctx + path, len(ctx) + len(path))
            torch.testing.assert_close(rows[start + node + 1], want, atol=1e-4, rtol=1e-4)
        start += tree.num_nodes + 1
    eng.shutdown()

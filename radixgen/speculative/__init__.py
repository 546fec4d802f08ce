"""Drafters, token trees, grammar pruning and verification (the speculative-decoding issue).

One step for a request: `tree = drafter.propose(context_ids, max_tokens, max_depth, request_id)`;
`tree, num_pruned, num_forced = prune_tree(tree, matcher)` if it has a grammar; one target forward
over `tree.verify_input_ids(root)` at `tree.verify_positions(root_pos)` with `tree.verify_mask()`;
grammar masks for its N + 1 rows from `fill_tree_bitmask`; `verify_greedy` (or
`verify_greedy_batch`) or `verify_sampling` on the [N + 1, vocab] output; keep the KV of
`result.keep_rows()`, free the rest; emit `result.token_ids`. `drafter.observe` on cache insert.
"""

from radixgen.speculative.draft_model import DraftModelDrafter, NextLogits
from radixgen.speculative.drafter import Drafter, NamespacedDrafter, UnionDrafter
from radixgen.speculative.pruning import PruneResult, fill_tree_bitmask, prune_tree
from radixgen.speculative.radix_drafter import RadixDrafter
from radixgen.speculative.token_tree import TokenTree
from radixgen.speculative.verify import (
    AcceptStats,
    VerifyResult,
    verify_greedy,
    verify_greedy_batch,
    verify_sampling,
)

__all__ = [
    "AcceptStats",
    "DraftModelDrafter",
    "Drafter",
    "NamespacedDrafter",
    "NextLogits",
    "PruneResult",
    "RadixDrafter",
    "TokenTree",
    "VerifyResult",
    "fill_tree_bitmask",
    "prune_tree",
    "UnionDrafter",
    "verify_greedy",
    "verify_greedy_batch",
    "verify_sampling",
]

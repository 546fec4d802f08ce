"""The contract every drafter meets: propose a token tree after a context, learn from sequences."""

from __future__ import annotations

from typing import Hashable, Protocol, Sequence, runtime_checkable

from radixgen.speculative.token_tree import TokenTree


@runtime_checkable
class Drafter(Protocol):
    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
    ) -> TokenTree:
        """Draft tokens that may follow `context_ids` (prompt + output so far, ending with the
        root token) as a tree of at most `max_tokens` nodes and `max_depth` levels; may be empty.
        `request_id` lets the drafter keep per-request state between steps (the context must
        then only grow, or the state is rebuilt). Does not mutate `context_ids`."""

    def observe(self, token_ids: Sequence[int], num_cached: int = 0) -> None:
        """Learn a finished or cached sequence (called on radix-cache insert). The first
        `num_cached` tokens were observed before (InsertResult.prefix_len): only what follows
        them is new. Mutates the drafter's index; copies `token_ids`."""

    def release(self, request_id: Hashable) -> None:
        """Forget per-request state (request finished or aborted). Unknown ids are a no-op."""


class UnionDrafter:
    """Several drafters as one: their trees merged (identical children shared), the first
    drafter's nodes first, cut to `max_tokens`. Deterministic drafts only (the merge makes rows
    one-hot; see TokenTree.merge)."""

    def __init__(self, drafters: Sequence[Drafter]):
        self.drafters = list(drafters)

    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
    ) -> TokenTree:
        tree = TokenTree.empty()
        for drafter in self.drafters:
            room = max_tokens - tree.num_nodes
            if room <= 0:
                break
            tree = tree.merge(drafter.propose(context_ids, room, max_depth, request_id))
        if tree.num_nodes > max_tokens:
            tree = tree.select(range(max_tokens))
        return TokenTree(tree.token_ids, tree.parents, None, tree.token_probs)

    def observe(self, token_ids: Sequence[int], num_cached: int = 0) -> None:
        for drafter in self.drafters:
            drafter.observe(token_ids, num_cached)

    def release(self, request_id: Hashable) -> None:
        for drafter in self.drafters:
            drafter.release(request_id)


__all__ = ["Drafter", "UnionDrafter"]

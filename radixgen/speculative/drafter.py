"""The contract every drafter meets: propose a token tree after a context, learn from sequences."""

from __future__ import annotations

from typing import Hashable, Protocol, Sequence, runtime_checkable

from radixgen.speculative.token_tree import TokenTree


@runtime_checkable
class Drafter(Protocol):
    def propose(self, context_ids: Sequence[int], max_tokens: int, max_depth: int,
                request_id: Hashable = None) -> TokenTree:
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


__all__ = ["Drafter"]

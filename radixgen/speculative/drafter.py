"""The contract every drafter meets: propose a token tree after a context, learn from sequences."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Protocol, Sequence, runtime_checkable

from radixgen.speculative.token_tree import TokenTree


@runtime_checkable
class Drafter(Protocol):
    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
        namespace: Hashable = None,
    ) -> TokenTree:
        """Draft tokens that may follow `context_ids` (prompt + output so far, ending with the
        root token) as a tree of at most `max_tokens` nodes and `max_depth` levels; may be empty.
        `request_id` lets the drafter keep per-request state between steps (the context must
        then only grow, or the state is rebuilt). `namespace`: the model variant the request
        runs on (a LoRA adapter; None: the base model), for drafters that keep evidence per
        variant (`NamespacedDrafter`). Does not mutate `context_ids`."""

    def observe(
        self, token_ids: Sequence[int], num_cached: int = 0, namespace: Hashable = None
    ) -> None:
        """Learn a finished or cached sequence (called on radix-cache insert) of `namespace`.
        The first `num_cached` tokens were observed before (InsertResult.prefix_len): only what
        follows them is new. Mutates the drafter's index; copies `token_ids`."""

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
        namespace: Hashable = None,
    ) -> TokenTree:
        tree = TokenTree.empty()
        for drafter in self.drafters:
            room = max_tokens - tree.num_nodes
            if room <= 0:
                break
            tree = tree.merge(drafter.propose(context_ids, room, max_depth, request_id, namespace))
        if tree.num_nodes > max_tokens:
            tree = tree.select(range(max_tokens))
        return TokenTree(tree.token_ids, tree.parents, None, tree.token_probs)

    def observe(
        self, token_ids: Sequence[int], num_cached: int = 0, namespace: Hashable = None
    ) -> None:
        for drafter in self.drafters:
            drafter.observe(token_ids, num_cached, namespace)

    def release(self, request_id: Hashable) -> None:
        for drafter in self.drafters:
            drafter.release(request_id)


class NamespacedDrafter:
    """One drafter per namespace (`make()` builds each on first use): a request drafts only
    from sequences of its own namespace, so one LoRA adapter's text never drafts for another,
    nor the base model's for an adapter. The least recently used namespaces beyond
    `max_namespaces` are forgotten."""

    def __init__(self, make: Callable[[], Drafter], max_namespaces: int = 64):
        self.make, self.max_namespaces = make, max_namespaces
        self.drafters: OrderedDict[Hashable, Drafter] = OrderedDict()

    def _drafter(self, namespace: Hashable) -> Drafter:
        drafter = self.drafters.get(namespace)
        if drafter is None:
            drafter = self.drafters[namespace] = self.make()
            while len(self.drafters) > self.max_namespaces:
                self.drafters.popitem(last=False)
        self.drafters.move_to_end(namespace)
        return drafter

    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
        namespace: Hashable = None,
    ) -> TokenTree:
        return self._drafter(namespace).propose(context_ids, max_tokens, max_depth, request_id)

    def observe(
        self, token_ids: Sequence[int], num_cached: int = 0, namespace: Hashable = None
    ) -> None:
        self._drafter(namespace).observe(token_ids, num_cached)

    def release(self, request_id: Hashable) -> None:
        for drafter in self.drafters.values():
            drafter.release(request_id)


__all__ = ["Drafter", "NamespacedDrafter", "UnionDrafter"]

"""Grammar pruning of a draft tree before verification.

Every branch is walked depth-first through one fork of the request's matcher (accept on the way
down, rollback on the way up): a token the grammar rejects is cut with its whole subtree. Where
the grammar forces a continuation after a surviving leaf (or after the root, if nothing
survived), the forced tokens are appended as a chain: jump-forward inside speculation, drafts
that need no guessing. The request's own matcher is never mutated.

Losslessness with sampled drafts (tree.draft_probs set): cutting a drafted token changes which
candidates verification sees, which biases the q-ratio test unless q puts no mass on rejected
tokens. So each surviving row is restricted to the tokens its parent's grammar state allows
(from `fill_bitmask`) and renormalised; a matcher without `fill_bitmask` makes the tree
deterministic instead (draft_probs dropped: one-hot verification is lossless for any choice of
candidates). Deterministic drafts (n-gram, greedy) need neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch

from radixgen.speculative.token_tree import TokenTree

if TYPE_CHECKING:  # the contract lives in radixgen.grammar.matcher (protocol only)
    from radixgen.grammar.matcher import Matcher


class PruneResult(NamedTuple):
    tree: TokenTree  # surviving drafts, then forced chains
    num_pruned: int  # draft nodes cut (rejected tokens and their subtrees)
    num_forced: int  # tokens appended by jump-forward


class _Walk:
    """State of one depth-first walk (the matcher fork sits at `node`'s state)."""

    def __init__(self, tree: TokenTree, matcher: "Matcher", max_forced: int, vocab: int):
        self.tree, self.matcher, self.max_forced, self.vocab = tree, matcher, max_forced, vocab
        self.keep = [False] * tree.num_nodes
        self.forced: list[tuple[int, list[int]]] = []  # (old node or -1, forced token ids)
        self.allowed: dict[int, torch.Tensor] = {}  # old node or -1 -> bool [vocab]

    def visit(self, node: int) -> None:
        """Walk the subtree below `node`, whose token the matcher has just accepted."""
        m, ids, survived = self.matcher, self.tree.id_list, False
        children = self.tree.children(node)
        if children and self.vocab and not m.is_terminated():
            self.allowed[node] = _allowed(m, self.vocab)
        for child in children:
            if m.is_terminated() or not m.accept_token(ids[child]):
                continue
            self.keep[child] = survived = True
            self.visit(child)
            m.rollback(1)
        if not survived and not m.is_terminated() and self.max_forced > 0:
            forced = list(m.jump_forward_token_ids())[: self.max_forced]
            if forced:
                self.forced.append((node, forced))


def prune_tree(tree: TokenTree, matcher: "Matcher", max_forced: int = 8) -> PruneResult:
    """Cut grammar-rejected drafts (and subtrees) and append up to `max_forced` forced tokens
    after each surviving leaf. Works on `matcher.fork()`; `matcher` itself is left as it was.
    The matcher must allow rolling back max_depth tokens."""
    vocab = tree.draft_probs.shape[1] if tree.draft_probs is not None else 0
    if vocab and not hasattr(matcher, "fill_bitmask"):
        tree, vocab = TokenTree(tree.token_ids, tree.parents, None, tree.token_probs), 0
    walk = _Walk(tree, matcher.fork(), max_forced, vocab)
    walk.visit(-1)
    kept = [i for i, k in enumerate(walk.keep) if k]
    pruned = tree.select(kept)
    if vocab:
        pruned = _restrict_rows(pruned, tree, kept, walk.allowed)
    new_of = {old: new for new, old in enumerate(kept)}
    new_of[-1] = -1
    num_forced = 0
    for node, forced in walk.forced:
        pruned = pruned.add_chain(forced, parent=new_of[node])
        num_forced += len(forced)
    return PruneResult(pruned, tree.num_nodes - len(kept), num_forced)


def fill_tree_bitmask(
    tree: TokenTree, matcher: "Matcher", bitmask: torch.Tensor, first_row: int = 0
) -> None:
    """Grammar masks for the verify rows of `tree`: row `first_row` gets what the matcher
    allows after the root, row `first_row + i + 1` what it allows after node i (bitmask: int32
    [rows, ceil(vocab / 32)], CPU). Rows of nodes the grammar rejects (prune first) and of
    nodes after a terminating token stay empty. Mutates only those N + 1 rows; walks a fork."""
    bitmask[first_row : first_row + tree.num_nodes + 1] = 0
    fork, ids = matcher.fork(), tree.id_list

    def visit(node: int) -> None:
        if not fork.is_terminated():
            fork.fill_bitmask(bitmask, first_row + node + 1)
        for child in tree.children(node):
            if not fork.is_terminated() and fork.accept_token(ids[child]):
                visit(child)
                fork.rollback(1)

    visit(-1)


def _restrict_rows(
    pruned: TokenTree, tree: TokenTree, kept: list[int], allowed: dict[int, torch.Tensor]
) -> TokenTree:
    """Each kept row of draft_probs restricted to what its parent's state allows, renormalised
    (q(x | x allowed): the distribution a surviving candidate was in effect drawn from)."""
    if not kept:
        return pruned
    rows = pruned.draft_probs  # [K, vocab]
    masks = torch.stack([allowed[tree.parent_list[i]] for i in kept]).to(rows.device)
    rows = rows * masks
    rows = rows / rows.sum(-1, keepdim=True).clamp(min=1e-30)
    return TokenTree(pruned.token_ids, pruned.parents, rows, pruned.token_probs)


def _allowed(matcher: "Matcher", vocab: int) -> torch.Tensor:
    """bool [vocab]: the tokens the matcher allows next (bit t % 32 of word t // 32)."""
    bitmask = torch.zeros(1, (vocab + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 0)
    bits = (bitmask[0].unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1  # [W, 32]
    return bits.reshape(-1)[:vocab].bool()


__all__ = ["PruneResult", "fill_tree_bitmask", "prune_tree"]

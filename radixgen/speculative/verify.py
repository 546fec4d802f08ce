"""Verification of a draft tree against one target forward: pure functions (gpt-fast style).

The verify forward feeds the root (last accepted token) as row 0 and node i as row i + 1, so
row 0 of the target's output is p(. | context) and row i + 1 is p(. | context, path to node i).
Both functions walk down from the root, accepting at most one child per level, and always end
with one token drawn from the target itself (a correction or, after a leaf, a bonus token): a
step emits accept_len + 1 tokens, never fewer than one.

KV: the forward wrote KV for every verify row. Keep rows `result.keep_rows()` (the root, then the
accepted path, in order: they become the sequence's next positions), free the others. The last
emitted token has no KV yet: it is the next step's root.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from radixgen.speculative.token_tree import TokenTree


@dataclass(frozen=True)
class VerifyResult:
    token_ids: list[int]  # accepted drafts, then one target token: accept_len + 1 ids
    node_path: list[int]  # tree indices of the accepted drafts, root side first
    accepted_at_depth: list[bool]  # [tree.max_depth]: entry d is True iff depth d + 1 accepted

    @property
    def accept_len(self) -> int:
        return len(self.node_path)

    def keep_rows(self) -> list[int]:
        """Verify rows whose KV stays (root, then accepted nodes), in sequence order."""
        return [0] + [i + 1 for i in self.node_path]

    def drop_rows(self, num_nodes: int) -> list[int]:
        """Verify rows whose KV slots to free: every node row not on the accepted path."""
        kept = set(self.keep_rows())
        return [r for r in range(1, num_nodes + 1) if r not in kept]


@dataclass
class AcceptStats:
    """Running acceptance metrics over verify steps (spec_accept_length, per-position rate)."""

    num_steps: int = 0
    num_accepted: int = 0
    num_drafted: int = 0
    accepted_at_depth: list[int] = field(default_factory=list)  # [max depth seen]
    drafted_at_depth: list[int] = field(default_factory=list)  # steps that drafted that deep

    def update(self, result: VerifyResult, num_drafted: int) -> None:
        """Count one verify step of a tree with `num_drafted` nodes. Mutates the counters."""
        self.num_steps += 1
        self.num_accepted += result.accept_len
        self.num_drafted += num_drafted
        depth = len(result.accepted_at_depth)
        for counts in (self.accepted_at_depth, self.drafted_at_depth):
            counts.extend([0] * (depth - len(counts)))
        for d, ok in enumerate(result.accepted_at_depth):
            self.drafted_at_depth[d] += 1
            self.accepted_at_depth[d] += int(ok)

    @property
    def mean_accept_len(self) -> float:
        """Mean tokens emitted per step (accepted drafts + the target's token)."""
        return 1.0 + self.num_accepted / self.num_steps if self.num_steps else 0.0

    def position_rates(self) -> list[float]:
        """Entry d: fraction of steps drafting depth d + 1 that accepted a token there."""
        return [a / n if n else 0.0 for a, n in zip(self.accepted_at_depth, self.drafted_at_depth)]


def _result(tree: TokenTree, path: list[int], last_token: int) -> VerifyResult:
    ids = tree.id_list
    return VerifyResult(
        [ids[i] for i in path] + [last_token], path, [d < len(path) for d in range(tree.max_depth)]
    )


def verify_greedy(tree: TokenTree, target_logits: torch.Tensor) -> VerifyResult:
    """target_logits: float [N + 1, vocab] (grammar-masked by the caller). Exact for
    temperature 0: the target would emit argmax(row) at every position, so node c is right
    iff its token is the argmax of its parent's row, and accepted iff it and all its
    ancestors are right. The accepted nodes form one path (siblings are distinct: the first
    right child wins otherwise). Then the argmax after the last accepted node is emitted."""
    assert target_logits.shape[0] == tree.num_nodes + 1
    return _greedy_walk(tree, target_logits.argmax(dim=-1).tolist())


def verify_greedy_batch(trees: list[TokenTree], target_logits: torch.Tensor) -> list[VerifyResult]:
    """`verify_greedy` for a batch whose verify rows are concatenated request by request:
    target_logits float [sum(N_i + 1), vocab]; one argmax and one device-to-host copy."""
    assert target_logits.shape[0] == sum(t.num_nodes + 1 for t in trees)
    argmax = target_logits.argmax(dim=-1).tolist()
    out, start = [], 0
    for tree in trees:
        out.append(_greedy_walk(tree, argmax[start : start + tree.num_nodes + 1]))
        start += tree.num_nodes + 1
    return out


def _greedy_walk(tree: TokenTree, argmax: list[int]) -> VerifyResult:
    """argmax: [N + 1] target argmax per verify row."""
    ids, node, path = tree.id_list, -1, []
    while True:
        right = [c for c in tree.children(node) if ids[c] == argmax[node + 1]]
        if not right:
            return _result(tree, path, argmax[node + 1])
        node = right[0]
        path.append(node)


def verify_sampling(
    tree: TokenTree,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> VerifyResult:
    """Lossless multi-candidate rejection sampling over the tree (SpecInfer / Medusa style).

    target_probs: float [N + 1, vocab], rows summing to 1, already grammar-masked and
    temperature/top-p filtered (renormalised).
    draft_probs: float [N, vocab], row i = the distribution q_i node i was drawn from (given
    its parent's context and earlier siblings); defaults to tree.draft_probs; None means
    deterministic drafts (q_i one-hot at the node's token). The emitted tokens follow the target
    distribution exactly, whatever the drafts. The generator must live on target_probs' device.
    """
    assert target_probs.shape[0] == tree.num_nodes + 1
    draft_probs = tree.draft_probs if draft_probs is None else draft_probs
    device = target_probs.device
    coins = torch.rand(tree.num_nodes, generator=generator, device=device).tolist()  # [N]
    if draft_probs is None:
        return _verify_one_hot(tree, target_probs, coins, generator)
    return _verify_rows(tree, target_probs, draft_probs.to(device), coins, generator)


# The maths, one level at a time. r is the residual target at the current node, first
# r = p(. | node). Candidate x (child c) was drawn from q_c. Accept it with probability
# min(1, r(x) / q_c(x)), i.e. iff coin_c * q_c(x) < r(x). Then P(emit y at this try) =
# q_c(y) min(1, r(y)/q_c(y)) = min(q_c(y), r(y)), and on rejection (probability
# 1 - sum_y min(q_c, r) = sum_y max(r - q_c, 0)) the next try targets
# r' = max(r - q_c, 0) / sum max(r - q_c, 0). Summing: min(q_c, r) + max(r - q_c, 0) = r, so
# by induction over siblings (each drawn from its q given everything before it), the token the
# level emits follows r = p(. | node): an accepted child, or, once every child is rejected, one
# sample from the last residual. After an acceptance the walk restarts at the child with
# r = p(. | child). With one-hot q_c at x: accept iff coin < r(x), and r' = r with x zeroed,
# renormalised, i.e. r(y) = p(y) / (1 - sum of p over the rejected siblings).


def _verify_one_hot(
    tree: TokenTree, probs: torch.Tensor, coins: list[float], generator: torch.Generator | None
) -> VerifyResult:
    """Deterministic drafts: needs only p(x_c | parent) per node (one gather, one sync)."""
    rows = (tree.parents + 1).to(probs.device)
    p_tok = probs[rows, tree.token_ids.to(probs.device)].tolist()  # [N]
    ids, node, path = tree.id_list, -1, []
    while True:
        removed, rejected, accepted = 0.0, [], None
        for c in tree.children(node):
            if ids[c] in rejected:
                continue  # r(x) = 0 already: rejected again, r unchanged
            if coins[c] * (1.0 - removed) < p_tok[c]:  # coin < r(x) = p(x) / (1 - removed)
                accepted = c
                break
            removed += p_tok[c]
            rejected.append(ids[c])
        if accepted is None:
            residual = probs[node + 1].clone()  # [vocab]
            if rejected:
                residual[torch.tensor(rejected, device=probs.device)] = 0
            return _result(tree, path, _sample(residual, probs[node + 1], generator))
        node = accepted
        path.append(node)


def _verify_rows(
    tree: TokenTree,
    probs: torch.Tensor,
    q: torch.Tensor,
    coins: list[float],
    generator: torch.Generator | None,
) -> VerifyResult:
    """Sampled drafts: the residual is a full vector (one sync per candidate tried)."""
    ids, node, path = tree.id_list, -1, []
    while True:
        r, accepted = probs[node + 1].float(), None  # [vocab]
        for c in tree.children(node):
            x = ids[c]
            if float(r[x]) > coins[c] * float(q[c, x]):  # coin < r(x) / q_c(x)
                accepted = c
                break
            left = (r - q[c].float()).clamp(min=0)
            total = float(left.sum())
            if total > 0:  # total == 0 only if r == q_c, where rejection has probability 0
                r = left / total
        if accepted is None:
            return _result(tree, path, _sample(r, probs[node + 1], generator))
        node = accepted
        path.append(node)


def _sample(
    residual: torch.Tensor, fallback: torch.Tensor, generator: torch.Generator | None
) -> int:
    """One draw from `residual` (unnormalised, [vocab]); from `fallback` if it has no mass. A
    row with no mass at all (e.g. after a token that terminated the grammar, whose emitted
    token the caller drops as it stops there) gives its argmax instead of failing."""
    for row in (residual, fallback):
        if float(row.sum()) > 0:  # False for NaN too
            return int(torch.multinomial(row.float(), 1, generator=generator))
    return int(torch.nan_to_num(fallback, nan=0.0).argmax())


__all__ = ["AcceptStats", "VerifyResult", "verify_greedy", "verify_greedy_batch", "verify_sampling"]

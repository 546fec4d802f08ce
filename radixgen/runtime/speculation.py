"""Speculative decoding inside the scheduler: draft, prune, verify.

Each step, every running request that may speculate (`Speculator.eligible`) gets a token tree
from the drafter (radix n-grams, a draft model, or both merged), cut by its grammar
(`prune_tree`: rejected drafts go, forced tokens are appended). The scheduler feeds the tree's
rows (the root, i.e. the last accepted token whose KV is not computed yet, then the nodes) to
the step's forward as an extend with the tree mask. `verify` masks the [N + 1, vocab] logits by
the grammar per row (`fill_tree_bitmask`), then accepts greedily or by lossless rejection
sampling at the request's temperature / top-k / top-p / min-p (radixgen.speculative.verify);
the scheduler keeps the KV of the root and the accepted nodes and frees the rest.

Requests that want logprobs or use repetition / frequency / presence penalties decode one token
a step instead (a penalty depends on the tokens before each tree row; logprobs of drafted
tokens are not computed): their outputs are the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from radixgen.config import SpeculativeConfig
from radixgen.runtime.grammar_backend import GrammarBackend
from radixgen.runtime.model_runner import TreeInput
from radixgen.runtime.request import Request
from radixgen.runtime.sampling import filter_probs
from radixgen.speculative import (
    AcceptStats,
    Drafter,
    TokenTree,
    VerifyResult,
    prune_tree,
    verify_greedy,
    verify_sampling,
)


@dataclass
class Draft:
    req: Request
    tree: TokenTree

    @property
    def num_rows(self) -> int:
        return self.tree.num_nodes + 1

    def tree_input(self, slots: torch.Tensor) -> TreeInput:
        """The verify rows: the root (newest token, at position kv_len) then the nodes."""
        tree = self.tree
        return TreeInput(
            self.req,
            tree.verify_input_ids(self.req.all_ids[-1]),
            tree.verify_positions(self.req.kv_len),
            tree.verify_mask(),
            slots,
        )


class Speculator:
    def __init__(
        self,
        cfg: SpeculativeConfig,
        drafter: Drafter,
        max_context_len: int,
        grammar: GrammarBackend | None,
    ):
        self.cfg, self.drafter = cfg, drafter
        self.max_context_len = max_context_len
        self.grammar = grammar  # masks constrained requests' tree rows
        self.stats = AcceptStats()
        self.num_pruned = self.num_forced = 0

    @staticmethod
    def eligible(req: Request) -> bool:
        p = req.params
        # short of min_new_tokens, verification could accept a draft EOS the sampler would mask
        return (
            req.remaining_new_tokens >= 2
            and len(req.output_ids) >= p.min_new_tokens
            and not p.return_logprob
            and not p.top_logprobs_num
            and p.repetition_penalty == 1.0
            and not p.frequency_penalty
            and not p.presence_penalty
        )

    def draft(self, reqs: list[Request]) -> list[Draft]:
        """A pruned, non-empty tree for each eligible request that has drafts."""
        drafts = []
        for req in reqs:
            if not self.eligible(req):
                continue
            room = self.max_context_len - req.seq_len  # positions left for the tree's nodes
            depth = min(self.cfg.speculative_depth, req.remaining_new_tokens - 1, room)
            budget = min(self.cfg.speculative_num_draft_tokens, room, _adaptive_budget(req))
            if depth < 1 or budget < 1:
                continue
            tree = self.drafter.propose(req.all_ids, budget, depth, req.rid, req.adapter_key)
            if req.matcher is not None:
                tree, pruned, forced = prune_tree(tree, req.matcher, max_forced=depth)
                tree = _cap(tree, budget, depth)
                self.num_pruned += pruned
                self.num_forced += forced
                req.spec_pruned += pruned
            if tree.num_nodes:
                drafts.append(Draft(req, tree))
        return drafts

    @torch.inference_mode()
    def verify(self, draft: Draft, logits: torch.Tensor) -> VerifyResult:
        """The accepted drafts and the target's next token from the tree's rows' logits
        [N + 1, vocab] (masked in place by the request's grammar)."""
        req, tree = draft.req, draft.tree
        if req.matcher is not None:
            self.grammar.mask_tree_logits(logits, tree, req.matcher)
        p = req.params
        if p.is_greedy:
            result = verify_greedy(tree, logits)
        else:
            probs = torch.softmax(
                logits.float().cpu() / p.temperature, dim=-1
            )  # the generator is a CPU one
            if p.top_k > 0 or p.top_p < 1.0 or p.min_p > 0.0:
                probs = filter_probs(probs, p.top_k, p.top_p, p.min_p)
            result = verify_sampling(tree, probs, generator=req.generator)
        self.stats.update(result, tree.num_nodes)
        req.spec_verify_ct += 1
        req.spec_accepted += result.accept_len
        req.spec_recent_accept = 0.5 * req.spec_recent_accept + 0.5 * result.accept_len
        return result

    def release(self, req: Request) -> None:
        self.drafter.release(req.rid)

    def summary(self) -> dict:
        s = self.stats
        return {
            "spec_algorithm": self.cfg.speculative_algorithm,
            "spec_verify_steps": s.num_steps,
            "spec_accept_length": round(s.mean_accept_len, 4),
            "spec_accept_rate": round(s.num_accepted / s.num_drafted, 4) if s.num_drafted else 0.0,
            "spec_draft_tokens": s.num_drafted,
            "spec_accepted_tokens": s.num_accepted,
            "spec_draft_tokens_pruned": self.num_pruned,
            "spec_forced_tokens": self.num_forced,
            "spec_position_accept_rate": [round(r, 4) for r in s.position_rates()],
        }


def _adaptive_budget(req: Request) -> int:
    """Draft nodes worth verifying for req: a tree row costs compute even when rejected, so a
    request whose recent drafts were rejected gets small trees (2 nodes) and one whose drafts are
    accepted gets about twice its recent accept length (the configured maximum caps it)."""
    return max(2, int(2 * req.spec_recent_accept) + 2)


def _cap(tree: TokenTree, max_nodes: int, max_depth: int) -> TokenTree:
    """The nodes within max_depth among the first max_nodes (closed under parents: parents come
    first and are shallower)."""
    if tree.num_nodes <= max_nodes and tree.max_depth <= max_depth:
        return tree
    depth = tree.depth.tolist()
    return tree.select([i for i in range(min(tree.num_nodes, max_nodes)) if depth[i] <= max_depth])

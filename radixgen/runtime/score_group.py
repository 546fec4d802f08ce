"""Scoring prompts that share a prefix, computed as one token tree.

A select sends `[prefix, prefix + c_1, ..., prefix + c_n]` as prompt-only requests whose
prompt logprobs start where the prompts part. Computed one by one they repeat the shared uncached tokens (or wait a step for
each other, see schedule_policy.py). Grouped, the first request (the leader) runs one extend:
the trunk (the tokens every member computes, causal), then a trie of the members' remaining
tokens, each row seeing the cached prefix, the trunk and its trie ancestors (the tree mask of
speculative verification). Each member reads its prompt logprobs from the rows on its path; a
prompt-only request skips its last token (Request.prefill_len), so one-token choices cost no
rows at all. Afterwards every member's computed tokens go to the radix cache (the trunk
once), so the text a select chose is cached for the program's next call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from radixgen.runtime.model_runner import TreeInput
from radixgen.runtime.prompt_logprobs import record_input_top_logprobs
from radixgen.runtime.request import Request


def scoreable(req: Request) -> bool:
    """A fresh prompt-only, unconstrained request (it may want prompt logprobs or none: a
    select's bare prefix, a pin)."""
    return (
        req.is_prompt_only
        and req.row is None
        and not req.output_ids
        and req.params.constraint is None
    )


@dataclass
class ScoreGroup:
    members: list[Request]  # the leader first
    cached_len: int  # the cached prefix every member starts from
    token_ids: list[int]  # per row: the trunk, then the trie nodes
    parents: list[int]  # per row: the row before it on its path (-1: the cached prefix)
    depths: list[int]  # per row: its position minus cached_len
    trunk_len: int
    paths: list[
        list[int]
    ]  # per member: the row of each of its positions cached_len.. prefill_len - 1

    @property
    def leader(self) -> Request:
        return self.members[0]

    @property
    def num_rows(self) -> int:
        return len(self.token_ids)

    def wanted_rows(self) -> list[tuple[Request, list[int], list[int]]]:
        """Per member: the rows whose logits give its missing prompt logprobs, and the prompt
        tokens they score."""
        out = []
        for req, path in zip(self.members, self.paths):
            pos = req.next_input_logprob_pos
            rows = [] if pos is None else path[pos - self.cached_len :]
            out.append(
                (req, rows, [] if pos is None else req.input_ids[pos + 1 : pos + 1 + len(rows)])
            )
        return out

    def reused_lens(self) -> list[int]:
        """Per member: how many leading rows of its path an earlier member's path computed (it
        reports them as cached tokens, as it would after waiting a step for them)."""
        seen: set[int] = set()
        out = []
        for path in self.paths:
            k = 0
            while k < len(path) and path[k] in seen:
                k += 1
            out.append(k)
            seen.update(path)
        return out

    def logit_rows(self) -> list[int]:
        return sorted({r for _, rows, _ in self.wanted_rows() for r in rows})

    def tree_input(self, slots: torch.Tensor) -> TreeInput:
        n = self.num_rows
        mask = torch.zeros(n, n, dtype=torch.bool)
        for i, parent in enumerate(self.parents):  # parents come before their children
            if parent >= 0:
                mask[i] = mask[parent]
            mask[i, i] = True
        positions = torch.tensor(self.depths, dtype=torch.int64) + self.cached_len
        return TreeInput(
            self.leader,
            torch.tensor(self.token_ids, dtype=torch.int64),
            positions,
            mask,
            slots,
            torch.tensor(self.logit_rows(), dtype=torch.int64),
        )

    @torch.inference_mode()
    def record_logprobs(self, logits: torch.Tensor) -> None:
        """logits: one row per `logit_rows()` entry, in that order."""
        index = {r: i for i, r in enumerate(self.logit_rows())}
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        for req, rows, targets in self.wanted_rows():
            picked = logprobs[[index[r] for r in rows], targets] if rows else logprobs[:0, 0]
            req.input_logprobs.extend(picked.tolist())
            record_input_top_logprobs(req, logprobs[[index[r] for r in rows]])


def build_group(members: list[Request], cached_len: int) -> ScoreGroup:
    """The rows of members (scoreable, every one cached exactly `cached_len` tokens, sharing
    the token after them) as a trunk and a trie."""
    seqs = [req.input_ids[cached_len : req.prefill_len] for req in members]
    trunk_len = len(os.path.commonprefix(seqs))
    token_ids, parents = list(seqs[0][:trunk_len]), list(range(-1, trunk_len - 1))
    depths = list(range(trunk_len))
    children: dict[tuple[int, int], int] = {}
    paths = []
    for seq in seqs:
        path, parent = list(range(trunk_len)), trunk_len - 1
        for depth in range(trunk_len, len(seq)):
            key = (parent, seq[depth])
            if key not in children:
                children[key] = len(token_ids)
                token_ids.append(seq[depth])
                parents.append(parent)
                depths.append(depth)
            parent = children[key]
            path.append(parent)
        paths.append(path)
    return ScoreGroup(list(members), cached_len, token_ids, parents, depths, trunk_len, paths)


def group_for(
    req: Request,
    waiting: list[Request],
    cached: dict[int, int],
    taken: set[int],
    max_rows: int,
    max_len: int,
) -> ScoreGroup | None:
    """req (scoreable) with the other waiting scoreable requests, not in `taken`, that share its
    cached length (cached: id -> cached prefix length), namespace and the token after the cached
    prefix, as one tree; None if req has no such partner or the tree has more than max_rows rows
    or would end past max_len (each then prefills on its own)."""
    c = cached[id(req)]
    head = req.input_ids[: c + 1]
    members = [req] + [
        o
        for o in waiting
        if o is not req
        and id(o) not in taken
        and scoreable(o)
        and cached[id(o)] == c
        and o.namespace == req.namespace
        and o.input_ids[: c + 1] == head
    ]
    if len(members) < 2:
        return None
    group = build_group(members, c)
    return group if group.num_rows <= max_rows and c + group.num_rows <= max_len else None

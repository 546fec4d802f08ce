"""The draft-model drafter: a small model (injected as a callable) proposes a chain or a tree.

`next_logits(contexts)` takes B token-id lists (each a request's context plus one draft path) and
returns float [B, vocab] logits for the token after each. The runtime plugs a small model in
(or the target's first layers) and may cache KV by prefix: every list extends a request context.

Greedy mode (temperature 0): each expanded node gets its `branch` most likely tokens; per level
the most probable paths are kept (`width` of them expanded further). Choices are deterministic,
so the tree has no draft_probs and verification treats drafts as one-hot (lossless).
Sampling mode (temperature > 0): each expanded node gets `branch` tokens drawn without
replacement from q = softmax(logits / temperature); node i's row of draft_probs is the
distribution it was drawn from (q renormalised without its earlier siblings). The tree's shape
(which nodes are expanded, where the budget cuts) depends on positions only, never on the drawn
values: that keeps multi-candidate rejection sampling lossless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

import torch

from radixgen.speculative.token_tree import TokenTree

NextLogits = Callable[[list[list[int]]], torch.Tensor]  # B contexts -> float [B, vocab]
_Frontier = list[tuple[int, int]]  # (request index, node index or -1 for the root)


@dataclass
class _Draft:
    context: list[int]
    ids: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    conf: list[float] = field(default_factory=list)  # q(token | parent)
    path_prob: list[float] = field(default_factory=list)
    rows: list[torch.Tensor] = field(default_factory=list)  # float [vocab] each (sampling mode)

    def add(self, parent: int, token: int, cond: float, row: torch.Tensor | None = None) -> int:
        self.ids.append(token)
        self.parents.append(parent)
        self.conf.append(cond)
        self.path_prob.append(cond * (self.path_prob[parent] if parent >= 0 else 1.0))
        if row is not None:
            self.rows.append(row)
        return len(self.ids) - 1

    def path_ids(self, node: int) -> list[int]:
        out = []
        while node >= 0:
            out.append(self.ids[node])
            node = self.parents[node]
        return out[::-1]

    def tree(self) -> TokenTree:
        rows = torch.stack(self.rows) if self.rows else None
        return TokenTree.build(self.ids, self.parents, draft_probs=rows, token_probs=self.conf)


class DraftModelDrafter:
    """See the module docstring; methods follow `Drafter` (observe/release are no-ops)."""

    def __init__(
        self,
        next_logits: NextLogits,
        branch: int = 1,
        width: int = 1,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ):
        if branch < 1 or width < 1 or temperature < 0:
            raise ValueError("branch and width must be >= 1 and temperature >= 0")
        self.next_logits, self.branch, self.width = next_logits, branch, width
        self.temperature, self.generator = temperature, generator

    def propose(
        self,
        context_ids: Sequence[int],
        max_tokens: int,
        max_depth: int,
        request_id: Hashable = None,
        namespace: Hashable = None,
    ) -> TokenTree:
        """See `Drafter.propose`: one request, `propose_batch` of one (the draft model serves no
        adapters: every namespace drafts from the same model, and verification by the target
        on the request's adapter keeps the output exact)."""
        return self.propose_batch([context_ids], max_tokens, max_depth)[0]

    def propose_batch(
        self, contexts: Sequence[Sequence[int]], max_tokens: int, max_depth: int
    ) -> list[TokenTree]:
        """One tree per context; one `next_logits` call per level for the whole batch."""
        drafts = [_Draft(_as_list(c)) for c in contexts]
        frontier: _Frontier = [(b, -1) for b in range(len(drafts))]
        for _ in range(max_depth):
            frontier = [(b, n) for b, n in frontier if len(drafts[b].ids) < max_tokens]
            if not frontier:
                break
            logits = self.next_logits(
                [drafts[b].context + drafts[b].path_ids(n) for b, n in frontier]
            )  # [F, vocab]
            probs = torch.softmax(logits.float() / (self.temperature or 1.0), dim=-1)
            expand = self._expand_sampled if self.temperature > 0 else self._expand_greedy
            frontier = expand(drafts, frontier, probs, max_tokens)
        return [d.tree() for d in drafts]

    def _expand_greedy(
        self, drafts: list[_Draft], frontier: _Frontier, probs: torch.Tensor, max_tokens: int
    ) -> _Frontier:
        """Top-`branch` children of every frontier node; per request keep the most probable
        paths that fit the budget, expand the best `width` of them next."""
        k = min(self.branch, probs.shape[-1])
        top_p, top_i = (t.tolist() for t in probs.topk(k, dim=-1))  # [F, k] each
        options: dict[int, list[tuple[float, int, int, float]]] = {}
        for f, (b, n) in enumerate(frontier):
            base = drafts[b].path_prob[n] if n >= 0 else 1.0
            options.setdefault(b, []).extend(
                (base * p, n, t, p) for p, t in zip(top_p[f], top_i[f])
            )
        nxt: _Frontier = []
        for b, opts in options.items():
            opts.sort(key=lambda o: -o[0])
            room = max_tokens - len(drafts[b].ids)
            added = [drafts[b].add(n, t, p) for _, n, t, p in opts[:room]]
            nxt += [(b, i) for i in added[: self.width]]
        return nxt

    def _expand_sampled(
        self, drafts: list[_Draft], frontier: _Frontier, probs: torch.Tensor, max_tokens: int
    ) -> _Frontier:
        """`branch` draws without replacement per frontier node, in frontier order until the
        budget runs out; the first `width` new nodes of each request are expanded next."""
        k = min(self.branch, int((probs > 0).sum(-1).min()))
        tokens, rows = _draw_without_replacement(probs, k, self.generator)  # [F, k], [F, k, V]
        conds = rows.gather(-1, tokens.unsqueeze(-1)).squeeze(-1).tolist()  # [F, k]
        nxt: _Frontier = []
        taken: dict[int, int] = {}
        for f, ((b, n), row_tokens) in enumerate(zip(frontier, tokens.tolist())):
            draft = drafts[b]
            for j in range(min(k, max_tokens - len(draft.ids))):
                node = draft.add(n, row_tokens[j], conds[f][j], row=rows[f, j])
                if taken.get(b, 0) < self.width:
                    taken[b] = taken.get(b, 0) + 1
                    nxt.append((b, node))
        return nxt

    def observe(
        self, token_ids: Sequence[int], num_cached: int = 0, namespace: Hashable = None
    ) -> None:
        """See `Drafter.observe`: a draft model learns nothing at run time."""

    def release(self, request_id: Hashable) -> None:
        """See `Drafter.release`: no per-request state."""


def _draw_without_replacement(
    q: torch.Tensor, count: int, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` sequential draws without replacement from each row of q (float [F, vocab]).
    Returns tokens int64 [F, count] in draw order and rows float [F, count, vocab]: row k is
    q without the first k tokens drawn, renormalised (the distribution draw k came from)."""
    if count <= 0:
        return torch.empty(q.shape[0], 0, dtype=torch.int64), q.new_empty(q.shape[0], 0, q.shape[1])
    tokens = torch.multinomial(q, count, replacement=False, generator=generator)  # [F, k]
    drawn = torch.zeros(*tokens.shape, q.shape[1], device=q.device)  # [F, k, V]
    drawn.scatter_(-1, tokens.unsqueeze(-1), 1.0)
    earlier = drawn.cumsum(1) - drawn  # [F, k, V]: 1 where an earlier draw took the token
    rows = q.unsqueeze(1) * (earlier == 0)
    return tokens, rows / rows.sum(-1, keepdim=True).clamp(min=1e-30)


def _as_list(token_ids: Sequence[int]) -> list[int]:
    return token_ids.tolist() if isinstance(token_ids, torch.Tensor) else list(token_ids)


__all__ = ["DraftModelDrafter", "NextLogits"]

"""Token trees: the draft tokens one verify step checks, rooted at the last accepted token.

Node i holds `token_ids[i]`; `parents[i]` is its parent's index, or -1 for a child of the root.
The root (the request's last accepted token, whose KV is not computed yet) is not a node: the
verify forward feeds it as row 0 and node i as row i + 1 (`verify_input_ids`, `verify_positions`,
`verify_mask`). Invariant: `parents[i] < i`, so one pass in index order meets every node after
its ancestors. Trees are values: every edit returns a new tree.

`draft_probs[i]` is the distribution node i was drawn from (given its parent's context and its
earlier siblings); None means every node was chosen deterministically (n-gram, greedy top-k),
which verification treats as a one-hot draft distribution. `token_probs[i]` is the drafter's
confidence in node i given its parent, informational only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import torch


@dataclass(frozen=True, eq=False)
class TokenTree:
    token_ids: torch.Tensor  # int64 [N]
    parents: torch.Tensor  # int64 [N]; -1 = child of the root; parents[i] < i
    draft_probs: torch.Tensor | None = None  # float [N, vocab]: what node i was drawn from
    token_probs: torch.Tensor | None = None  # float [N]: drafter confidence, given the parent
    depth: torch.Tensor = field(init=False)  # int64 [N]; 1 for children of the root

    def __post_init__(self) -> None:
        ids, parents = self.token_ids, self.parents
        assert ids.dim() == 1 and parents.shape == ids.shape, (ids.shape, parents.shape)
        n = ids.numel()
        if self.draft_probs is not None:
            assert self.draft_probs.dim() == 2 and self.draft_probs.shape[0] == n
        if self.token_probs is not None:
            assert self.token_probs.shape == (n,)
        depth = [0] * n
        for i, p in enumerate(parents.tolist()):
            assert -1 <= p < i, f"node {i} has parent {p}: parents must come first"
            depth[i] = 1 if p < 0 else depth[p] + 1
        object.__setattr__(self, "depth", torch.tensor(depth, dtype=torch.int64))

    @classmethod
    def build(
        cls,
        token_ids: Sequence[int],
        parents: Sequence[int],
        draft_probs: torch.Tensor | None = None,
        token_probs: Sequence[float] | torch.Tensor | None = None,
    ) -> "TokenTree":
        """A tree from plain lists (parents before children)."""
        if token_probs is not None and not isinstance(token_probs, torch.Tensor):
            token_probs = torch.tensor(token_probs, dtype=torch.float32)
        return cls(
            torch.tensor(token_ids, dtype=torch.int64).reshape(-1),
            torch.tensor(parents, dtype=torch.int64).reshape(-1),
            draft_probs,
            token_probs,
        )

    @classmethod
    def empty(cls) -> "TokenTree":
        return cls.build([], [])

    @classmethod
    def chain(cls, token_ids: Sequence[int], **kwargs) -> "TokenTree":
        """A single path root -> token_ids[0] -> token_ids[1] -> ..."""
        return cls.build(token_ids, list(range(-1, len(token_ids) - 1)), **kwargs)

    # ---- reading ----

    def __len__(self) -> int:
        return self.token_ids.numel()

    @property
    def num_nodes(self) -> int:
        return self.token_ids.numel()

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.num_nodes else 0

    @cached_property
    def id_list(self) -> list[int]:
        return self.token_ids.tolist()

    @cached_property
    def parent_list(self) -> list[int]:
        return self.parents.tolist()

    @cached_property
    def child_lists(self) -> list[list[int]]:
        """child_lists[0]: children of the root; child_lists[i + 1]: children of node i,
        in index order (the order verification tries them)."""
        out: list[list[int]] = [[] for _ in range(self.num_nodes + 1)]
        for i, p in enumerate(self.parent_list):
            out[p + 1].append(i)
        return out

    def children(self, node: int) -> list[int]:
        """Children of `node` (-1: the root)."""
        return self.child_lists[node + 1]

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root's child down to `node` (empty for the root, -1)."""
        path, parents = [], self.parent_list
        while node >= 0:
            path.append(node)
            node = parents[node]
        return path[::-1]

    def paths(self) -> list[list[int]]:
        """Every root-to-leaf path as node indices, leaves in index order."""
        kids = self.child_lists
        return [self.path_to(i) for i in range(self.num_nodes) if not kids[i + 1]]

    def ancestor_mask(self) -> torch.Tensor:
        """bool [N, N]: entry (i, j) is True iff node j is node i or one of its ancestors:
        the tree-attention mask among the draft tokens (the prefix and root are visible to all)."""
        n = self.num_nodes
        mask = torch.eye(n, dtype=torch.bool)
        rows = torch.arange(n)
        anc = self.parents.clone()
        for _ in range(self.max_depth):
            live = anc >= 0
            mask[rows[live], anc[live]] = True
            anc = torch.where(live, self.parents[anc.clamp(min=0)], anc)
        return mask

    def verify_mask(self) -> torch.Tensor:
        """bool [N + 1, N + 1] over the verify rows (root, then nodes): the root sees itself,
        node i sees the root and `ancestor_mask()[i]`. Every row also sees the whole prefix."""
        n = self.num_nodes
        mask = torch.zeros(n + 1, n + 1, dtype=torch.bool)
        mask[:, 0] = True
        mask[1:, 1:] = self.ancestor_mask()
        return mask

    def positions(self, start: int) -> torch.Tensor:
        """int64 [N]: position of each node when the root sits at position `start`."""
        return self.depth + start

    def verify_positions(self, start: int) -> torch.Tensor:
        """int64 [N + 1]: positions of the verify rows (root at `start`)."""
        return torch.cat([torch.tensor([start], dtype=torch.int64), self.positions(start)])

    def verify_input_ids(self, root_token_id: int) -> torch.Tensor:
        """int64 [N + 1]: the verify rows' tokens (root, then nodes)."""
        return torch.cat([torch.tensor([root_token_id], dtype=torch.int64), self.token_ids])

    # ---- editing (each returns a new tree) ----

    def prune(self, keep: torch.Tensor | Sequence[bool]) -> "TokenTree":
        """Drop every node with keep[i] False together with its whole subtree."""
        keep = [bool(k) for k in (keep.tolist() if isinstance(keep, torch.Tensor) else keep)]
        assert len(keep) == self.num_nodes
        parents = self.parent_list
        for i, p in enumerate(parents):  # parents come first: one pass settles every subtree
            keep[i] = keep[i] and (p < 0 or keep[p])
        return self.select([i for i, k in enumerate(keep) if k])

    def select(self, index: Sequence[int]) -> "TokenTree":
        """The nodes `index` (ascending, closed under parents), renumbered in that order."""
        new_of = {old: new for new, old in enumerate(index)}
        parents = [-1 if p < 0 else new_of[p] for p in (self.parent_list[i] for i in index)]
        rows = torch.tensor(list(index), dtype=torch.int64)
        draft = self.draft_probs
        return TokenTree(
            self.token_ids[rows],
            torch.tensor(parents, dtype=torch.int64),
            None if draft is None else draft[rows.to(draft.device)],
            None if self.token_probs is None else self.token_probs[rows],
        )

    def add_chain(
        self,
        token_ids: Sequence[int],
        parent: int = -1,
        token_probs: Sequence[float] | None = None,
        draft_probs: torch.Tensor | None = None,
    ) -> "TokenTree":
        """Append the path parent -> token_ids[0] -> ..., following existing children with the
        same tokens (no duplicate siblings). draft_probs: float [len(token_ids), vocab]."""
        extra = TokenTree.chain(token_ids, token_probs=token_probs, draft_probs=draft_probs)
        return self.merge(extra, at=parent)

    def merge(self, other: "TokenTree", at: int = -1) -> "TokenTree":
        """The union of both trees, `other`'s root placed at node `at` of this one; identical
        children of one parent are merged (this tree's row wins). Rows missing draft_probs on
        one side become one-hot (deterministic). Merging sampled trees breaks the "drawn from
        its row" premise of sampled verification: verify such a union with one-hot rows."""
        ids, parents = list(self.id_list), list(self.parent_list)
        lookup = {(p, t): i for i, (p, t) in enumerate(zip(parents, ids))}
        new_of, added = {-1: at}, []
        for j, (t, p) in enumerate(zip(other.id_list, other.parent_list)):
            key = (new_of[p], t)
            if key not in lookup:
                lookup[key] = len(ids)
                ids.append(t)
                parents.append(key[0])
                added.append(j)
            new_of[j] = lookup[key]
        rows = torch.tensor(added, dtype=torch.int64)
        return TokenTree.build(
            ids, parents, _cat_draft_probs(self, other, rows), _cat_token_probs(self, other, rows)
        )


def one_hot_rows(token_ids: torch.Tensor, vocab_size: int, like: torch.Tensor) -> torch.Tensor:
    """float [len(token_ids), vocab_size] one-hot rows, dtype/device of `like`."""
    rows = torch.zeros(token_ids.numel(), vocab_size, dtype=like.dtype, device=like.device)
    rows[torch.arange(token_ids.numel(), device=like.device), token_ids.to(like.device)] = 1
    return rows


def _cat_draft_probs(a: TokenTree, b: TokenTree, rows: torch.Tensor) -> torch.Tensor | None:
    if a.draft_probs is None and b.draft_probs is None:
        return None
    like = a.draft_probs if a.draft_probs is not None else b.draft_probs
    vocab = like.shape[1]
    left = a.draft_probs if a.draft_probs is not None else one_hot_rows(a.token_ids, vocab, like)
    if b.draft_probs is not None:
        right = b.draft_probs[rows.to(like.device)]
    else:
        right = one_hot_rows(b.token_ids[rows], vocab, like)
    return torch.cat([left, right.to(like.dtype)])


def _cat_token_probs(a: TokenTree, b: TokenTree, rows: torch.Tensor) -> torch.Tensor | None:
    if a.token_probs is None and b.token_probs is None:
        return None
    left = a.token_probs if a.token_probs is not None else torch.ones(a.num_nodes)
    right = b.token_probs[rows] if b.token_probs is not None else torch.ones(rows.numel())
    return torch.cat([left.float(), right.float()])


__all__ = ["TokenTree", "one_hot_rows"]

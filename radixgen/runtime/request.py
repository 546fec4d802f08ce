"""A request's state inside the scheduler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Hashable

import torch

from radixgen.core import FinishReason, SamplingParams


@dataclass(eq=False)
class Request:
    rid: str
    input_ids: list[int]
    params: SamplingParams
    namespace: Hashable = None  # radix-cache namespace (model version, LoRA id)
    adapter: Any = None  # the LoRA adapter (runtime/lora/adapter.py LoraAdapter); None: base
    arrival: float = field(default_factory=time.monotonic)
    output_ids: list[int] = field(default_factory=list)
    # KV bookkeeping: positions [0, tree_len) use radix-tree slots (locked through `node`);
    # positions [tree_len, kv_len) use slots this request owns; all live in table row `row`.
    row: int | None = None
    kv_len: int = 0
    tree_len: int = 0
    node: Any = None
    demoted_upto: int = 0  # positions before this were checked for the branch window's demotion
    # reuse only the prefix-pool part of the cached prefix (set once the request could not get
    # KV on its own because its cached branch-pool tokens filled that pool: they are recomputed)
    prefix_pool_only: bool = False
    cached_tokens: int = 0  # prompt tokens served from the cache (reported in meta_info)
    started: bool = False  # prefill has begun once (retraction does not reset it)
    num_retractions: int = 0
    finish: FinishReason | None = None
    generator: torch.Generator | None = None
    matcher: Any = None  # the grammar cursor of a constrained request (radixgen.grammar.Matcher)
    output_logprobs: list[float] = field(default_factory=list)
    output_top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    input_logprobs: list[float] = field(default_factory=list)  # of prompt tokens, see below
    input_top_logprobs: list[list[tuple[int, float]]] = field(
        default_factory=list
    )  # with top_logprobs_num
    input_logprobs_sent: bool = False
    first_token_time: float | None = None
    # wall-clock stamps (time.time()) reported once, as messages.ReqTimes, after the prefill
    received_time: float = field(default_factory=time.time)
    admitted_time: float | None = None  # first planned into a batch
    prefilled_time: float | None = None  # the forward that finished its prompt's prefill returned
    times_sent: bool = False
    spec_verify_ct: int = 0  # speculative verify steps, drafts accepted, drafts cut by the grammar
    spec_accepted: int = 0
    spec_pruned: int = 0
    spec_recent_accept: float = (
        8.0  # moving average of drafts accepted per verify step (starts high)
    )

    @property
    def adapter_key(self) -> str | None:
        """Its LoRA adapter's cache key (unique per load), None on the base model."""
        return self.adapter.cache_key if self.adapter is not None else None

    @property
    def seq_len(self) -> int:
        return len(self.input_ids) + len(self.output_ids)

    @property
    def prefill_len(self) -> int:
        """Positions whose KV a prefill computes: all of them, except that a scoring prompt
        (prompt-only, with prompt logprobs) skips its newest token: nothing reads that
        position's logits (its own logprob comes from the row before), so a select's one-token
        choices cost no rows. A pin (prompt-only, no logprobs) is there to be cached: all of it."""
        if self.is_prompt_only and self.params.logprob_start_len >= 0 and not self.output_ids:
            return max(self.seq_len - 1, 1)
        return self.seq_len

    @property
    def is_prompt_only(self) -> bool:
        return self.params.max_new_tokens == 0

    @property
    def all_ids(self) -> list[int]:
        return self.input_ids + self.output_ids

    @property
    def remaining_new_tokens(self) -> int:
        return max(self.params.max_new_tokens - len(self.output_ids), 0)

    @property
    def input_logprob_start(self) -> int:
        """First prompt position whose token logprob is returned (position 0 has none)."""
        return max(self.params.logprob_start_len, 1)

    @property
    def next_input_logprob_pos(self) -> int | None:
        """The position whose logits give the next missing prompt-token logprob, or None when
        no (more) prompt logprobs are wanted. The KV before it must not come from the cache."""
        if self.params.logprob_start_len < 0:
            return None
        pos = self.input_logprob_start - 1 + len(self.input_logprobs)
        return pos if pos < len(self.input_ids) - 1 else None

    @property
    def max_cached_len(self) -> int:
        """The longest prefix the radix cache may serve: one token is always computed, and
        positions whose logits are wanted are computed too."""
        limit = self.prefill_len - 1
        pos = self.next_input_logprob_pos
        return limit if pos is None else min(limit, pos)

    def reset_kv_state(self) -> None:
        """Forget KV placement (after retraction): the request will be prefilled again."""
        self.row, self.kv_len, self.tree_len, self.node, self.demoted_upto = None, 0, 0, None, 0

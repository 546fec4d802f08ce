"""What one model forward sees: a flattened ragged batch of tokens from many requests."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import torch


class ForwardMode(enum.Enum):
    EXTEND = "extend"  # prefill chunks: several new tokens per request over a cached prefix
    DECODE = "decode"  # one new token per request
    MIXED = "mixed"  # prefill chunks of some requests, then one decode token of others


@dataclass
class ForwardBatch:
    mode: ForwardMode
    input_ids: torch.Tensor  # [num_tokens] int64
    positions: torch.Tensor  # [num_tokens] int64
    out_slots: torch.Tensor  # [num_tokens] int64, the KV slot each new token is written to
    kv_slots: torch.Tensor  # [batch, max_seq_len] int64, each request's KV slots (padded with 0)
    seq_lens: list[int]  # per request: KV length after this forward (prefix + new tokens)
    extend_lens: list[int]  # per request: new tokens in this forward
    logits_indices: torch.Tensor  # [num_logits] rows of the hidden states that need logits
    num_decode: int = 0  # MIXED: the last num_decode requests decode (one token each)
    # per extend request: bool [ext, ext] mask among its new tokens (a speculative token tree:
    # row i sees new token j iff mask[i, j]; the cached prefix is always visible), None = causal
    tree_masks: list[torch.Tensor | None] | None = None
    # a decode batch replayed from a CUDA graph (runtime/cuda_graph.py): the lengths on the
    # device, int64 [batch]; seq_lens then holds only upper bounds (the context bucket)
    device_seq_lens: torch.Tensor | None = None
    # the rows' LoRA adapters (runtime/lora/batch.py LoraBatch); None: every row on the base model
    lora: Any = None

    @property
    def batch_size(self) -> int:
        return len(self.seq_lens)

    @property
    def prefix_lens(self) -> list[int]:
        return [s - e for s, e in zip(self.seq_lens, self.extend_lens)]

    @property
    def extend_starts(self) -> list[int]:
        """Per request, the row of its first new token in the flattened batch (and the total)."""
        return [0, *torch.tensor(self.extend_lens).cumsum(0).tolist()]

    def parts(self) -> tuple["ForwardBatch | None", "ForwardBatch | None"]:
        """(extend part, decode part), None where the batch has no such part."""
        if self.mode is ForwardMode.MIXED:
            return self.split()
        return (
            self if self.mode is ForwardMode.EXTEND else None,
            self if self.mode is ForwardMode.DECODE else None,
        )

    def tree_mask(self, i: int) -> torch.Tensor | None:
        """Extend request i's mask among its new tokens (None: causal)."""
        return self.tree_masks[i] if self.tree_masks is not None else None

    def split(self) -> tuple["ForwardBatch", "ForwardBatch"]:
        """A MIXED batch as its extend part and its decode part (attention metadata only:
        input ids and logits indices are left out)."""
        n_ext = self.batch_size - self.num_decode
        t_ext = sum(self.extend_lens[:n_ext])
        empty = self.input_ids[:0]
        ext = ForwardBatch(
            ForwardMode.EXTEND,
            empty,
            self.positions[:t_ext],
            self.out_slots[:t_ext],
            self.kv_slots[:n_ext],
            self.seq_lens[:n_ext],
            self.extend_lens[:n_ext],
            empty,
            tree_masks=self.tree_masks,
        )
        dec = ForwardBatch(
            ForwardMode.DECODE,
            empty,
            self.positions[t_ext:],
            self.out_slots[t_ext:],
            self.kv_slots[n_ext:],
            self.seq_lens[n_ext:],
            self.extend_lens[n_ext:],
            empty,
        )
        return ext, dec

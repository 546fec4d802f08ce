"""What one model forward sees: a flattened ragged batch of tokens from many requests."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch


class ForwardMode(enum.Enum):
    EXTEND = "extend"  # prefill chunks: several new tokens per request over a cached prefix
    DECODE = "decode"  # one new token per request


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

    @property
    def batch_size(self) -> int:
        return len(self.seq_lens)

    @property
    def prefix_lens(self) -> list[int]:
        return [s - e for s, e in zip(self.seq_lens, self.extend_lens)]

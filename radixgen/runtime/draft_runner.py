"""The draft model of speculative decoding: its own weights, KV pool and radix cache.

`DraftModelDrafter` asks for the next-token logits after B contexts per tree level; every
context extends a request's sequence by a draft path, so the draft model's radix cache holds
what earlier levels and steps computed and each call prefills only the new tokens. Draft paths
that verification rejects stay in the cache as leaves until LRU eviction needs their slots.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from radixgen.config import CacheConfig, ModelConfig
from radixgen.core import SamplingParams
from radixgen.radix import RadixCache
from radixgen.runtime.kv_manager import KVManager
from radixgen.runtime.model_runner import ModelRunner, resolve_device
from radixgen.runtime.request import Request

_PARAMS = SamplingParams(max_new_tokens=1, temperature=0.0)


class DraftModelRunner:
    def __init__(
        self,
        model_path: Path,
        target_cfg: ModelConfig,
        max_total_tokens: int,
        max_batch: int,
        target_vocab_size: int,
    ):
        cfg = dataclasses.replace(target_cfg, model_path=str(model_path), attention_backend="auto")
        # one KV pool: FP8 on a GPU (where 'auto' would mix precisions), the model dtype on the CPU
        kv_dtype = "fp8_e4m3" if resolve_device(cfg.device).type == "cuda" else "auto"
        cache_cfg = CacheConfig(max_total_tokens=max_total_tokens, kv_cache_dtype=kv_dtype)
        self.runner = ModelRunner(model_path, cfg, cache_cfg, max_batch)
        if self.runner.arch.vocab_size != target_vocab_size:
            raise ValueError(
                f"the draft model's vocabulary ({self.runner.arch.vocab_size} tokens) differs "
                f"from the target's ({target_vocab_size}): they must share the tokenizer"
            )
        self.cache = RadixCache(1, self.runner.allocator.free)
        self.kv = KVManager(self.cache, self.runner.allocator, self.runner.table)
        self.max_batch = max_batch

    @torch.inference_mode()
    def next_logits(self, contexts: list[list[int]]) -> torch.Tensor:
        """float [B, vocab]: the draft model's logits for the token after each context."""
        out = []
        for start in range(0, len(contexts), self.max_batch):
            out.append(self._forward(contexts[start : start + self.max_batch]))
        return torch.cat(out)

    def _forward(self, contexts: list[list[int]]) -> torch.Tensor:
        limit = self.runner.max_context_len
        reqs = [
            Request(f"draft-{i}", list(c[-limit + 1 :]), _PARAMS) for i, c in enumerate(contexts)
        ]
        admitted, slots = [], []
        for req in reqs:
            self.kv.admit(req)
            got = self.kv.alloc_positions(req, req.kv_len, req.seq_len - req.kv_len)
            if got is None:  # the pool cannot take every context at once: run them in halves
                for r in [req, *admitted]:
                    self.kv.release(r)
                if len(reqs) == 1:
                    raise RuntimeError(
                        "the draft model's KV pool is too small for this context "
                        "(raise --speculative-draft-max-total-tokens)"
                    )
                half = len(reqs) // 2
                return torch.cat([self._forward(contexts[:half]), self._forward(contexts[half:])])
            admitted.append(req)
            slots.append(got)
        lens = [r.seq_len - r.kv_len for r in reqs]
        logits = self.runner.forward_mixed(reqs, lens, slots, [], None)
        for req in reqs:
            req.kv_len = req.seq_len
            self.kv.release(req)  # its tokens join the draft cache for the next level
        return logits.float()

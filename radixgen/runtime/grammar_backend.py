"""The scheduler's side of grammar-constrained decoding.

Requests with a constraint wait here while it compiles on the compiler's worker thread (the
scheduler loop only polls, so a first compile never stalls decoding of other requests); once
compiled, each request owns a `Matcher`. Every sampling step fills one bitmask row per
constrained request, masks the logits, and advances the matchers with the sampled tokens.

Finishing in time: a regex or JSON Schema matcher knows the request's max_new_tokens, and in its
last tokens allows only those from which a complete match is still within reach, so an output
that would have been cut off mid-JSON (invalid) closes its strings, arrays and objects instead.
Until then the mask is unchanged. A CFG matcher does not do this.

Jump-forward: after a sampled token, the tokens the grammar then forces (states that allow
exactly one token) are appended without sampling; the request computes their KV in its next
forward as a short extend instead of one decode step per token. Sampling would have had to pick
them (the mask allows nothing else), so outputs are identical with jump-forward on or off.

A compiled grammar lives as long as the compile cache holds it: when new ones arrive, `gc.freeze()`
moves it (with everything else alive) out of the cyclic GC's reach, as the scheduler process does
for the model after loading. Otherwise every full GC pass walks its tens of thousands of trie
nodes and tables, and the mask step it lands in takes a millisecond more. freeze is O(1); the
price is that cyclic garbage alive at that moment, and the reference cycles of a grammar the
cache evicts later, are never collected (refcounting still frees everything else).
"""

from __future__ import annotations

import gc
from concurrent.futures import Future
from typing import Any

import torch

from radixgen.core import Constraint, FinishReason
from radixgen.grammar.bitmask import (
    RowMasker,
    allocate_bitmask,
    apply_bitmask,
    fill_all,
    numpy_rows,
)
from radixgen.grammar.compiler import GrammarCompiler
from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.runtime.request import Request
from radixgen.speculative import TokenTree, fill_tree_bitmask

CONSTRAINT_ERROR = "invalid constraint:"  # how a failed compile's abort message starts


class GrammarBackend:
    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_ids: set[int],
        whitespace: str = "compact",
        jump_forward: bool = True,
        max_context_len: int | None = None,
    ):
        self.info = TokenizerInfo.from_hf(
            tokenizer, vocab_size=vocab_size, eos_ids=tuple(sorted(eos_ids))
        )
        self.compiler = GrammarCompiler(self.info, whitespace)
        self.jump_forward = jump_forward
        self.max_context_len = max_context_len  # a request also ends there (StopChecker)
        self.pending: list[tuple[Request, Future]] = []
        self._bitmask = allocate_bitmask(1, vocab_size)
        self._row_masker = RowMasker()
        self.num_forced_tokens = 0
        self._frozen_compiles = 0  # compiler.num_compiled at the last gc.freeze()

    def submit(self, req: Request) -> None:
        """Start compiling req's constraint (instant on a cache hit); req waits here."""
        self.pending.append((req, self.compiler.submit(req.params.constraint)))

    def prefetch(self, constraint: Constraint) -> None:
        """Start compiling a constraint a request will need (server mode: sent while the HTTP
        edge still checks it, so the two overlap); nothing waits on it."""
        self.compiler.submit(constraint)

    def poll(self) -> tuple[list[Request], list[tuple[Request, str]]]:
        """Requests whose constraint compiled (now holding a matcher), and those that failed."""
        ready, failed, still = [], [], []
        for req, future in self.pending:
            if not future.done():
                still.append((req, future))
            elif future.exception() is not None:
                failed.append((req, str(future.exception())))
            else:
                req.matcher = future.result().matcher()
                room = (
                    self.max_context_len - req.seq_len
                    if self.max_context_len
                    else req.remaining_new_tokens
                )
                req.matcher.limit_tokens(min(req.remaining_new_tokens, room))
                ready.append(req)
        self.pending = still
        if ready and self.compiler.num_compiled != self._frozen_compiles:  # a new grammar arrived
            self._frozen_compiles = self.compiler.num_compiled
            gc.freeze()
        return ready, failed

    def drop(self, rid: str) -> Request | None:
        """Remove a waiting request (abort); returns it if it was here."""
        for i, (req, _) in enumerate(self.pending):
            if req.rid == rid:
                return self.pending.pop(i)[0]
        return None

    @torch.inference_mode()  # logits come from the inference-mode forward
    def mask_logits(self, logits: torch.Tensor, reqs: list[Request]) -> None:
        """Disallow, in place, every token the grammar of each constrained request forbids.
        logits [len(reqs), vocab]."""
        if not any(r.matcher is not None for r in reqs):
            return
        bitmask = self._rows(len(reqs))
        if logits.device.type == "cpu":  # row by row from cached id lists (see RowMasker)
            words = numpy_rows(bitmask)
            for row, req in enumerate(reqs):
                if req.matcher is not None:
                    req.matcher.fill_bitmask(bitmask, row)
                    self._row_masker.apply_row(logits[row], words[row])
            return
        for row, req in enumerate(reqs):
            if req.matcher is None:
                fill_all(bitmask, row)
            else:
                req.matcher.fill_bitmask(bitmask, row)
        apply_bitmask(logits, bitmask)

    @torch.inference_mode()
    def mask_tree_logits(self, logits: torch.Tensor, tree: TokenTree, matcher: Any) -> None:
        """Mask, in place, the logits [N + 1, vocab] of a speculative token tree's verify rows:
        row i by what `matcher` allows after the root's path to that row (fill_tree_bitmask)."""
        bitmask = self._rows(tree.num_nodes + 1)
        fill_tree_bitmask(tree, matcher, bitmask)
        if logits.device.type == "cpu":
            for row, words in enumerate(numpy_rows(bitmask)):
                self._row_masker.apply_row(logits[row], words)
        else:
            apply_bitmask(logits, bitmask)

    def _rows(self, n: int) -> torch.Tensor:
        """The first n rows of the reusable bitmask buffer (grown by doubling)."""
        if self._bitmask.shape[0] < n:
            self._bitmask = allocate_bitmask(
                max(n, 2 * self._bitmask.shape[0]), self.info.vocab_size
            )
        return self._bitmask[:n]

    def accept(self, req: Request, token: int) -> FinishReason | None:
        """Advance req's matcher by its sampled token: a finish reason when the grammar ended
        (EOS accepted) or, never expected, rejected the token."""
        if req.matcher is None:
            return None
        if not req.matcher.accept_token(token):
            return FinishReason(
                "abort", message=f"internal error: the grammar rejected sampled token {token}"
            )
        return FinishReason("stop", matched=token) if req.matcher.is_terminated() else None

    def forced_tokens(self, req: Request) -> list[int]:
        """Tokens to append without sampling (jump-forward), at most what max_new_tokens allows;
        none for requests that want logprobs (forced tokens have none)."""
        if (
            req.matcher is None
            or not self.jump_forward
            or req.params.no_jump_forward
            or req.params.return_logprob
            or req.params.top_logprobs_num
        ):
            return []
        forced = req.matcher.jump_forward_token_ids()[: max(req.remaining_new_tokens, 0)]
        return forced

    def shutdown(self) -> None:
        self.compiler.shutdown()

"""When a request is done: EOS, stop token ids, stop strings, max_new_tokens, context length."""

from __future__ import annotations

from typing import Callable

from radixgen.core import FinishReason
from radixgen.runtime.request import Request


class StopChecker:
    def __init__(self, eos_token_ids: set[int], decode: Callable[[list[int]], str]):
        self.eos_token_ids = eos_token_ids
        self.decode = decode  # token ids -> text, used only for requests with stop strings

    def check(self, req: Request, max_context_len: int) -> FinishReason | None:
        """Finish reason after req's newest token, or None to keep going."""
        p, token = req.params, req.output_ids[-1]
        if token in p.stop_token_ids:
            return FinishReason("stop", matched=token)
        if not p.ignore_eos and token in self.eos_token_ids:
            return FinishReason("stop", matched=token)
        if p.stop:
            matched = self._stop_string(req)
            if matched is not None:
                return FinishReason("stop", matched=matched)
        if len(req.output_ids) >= p.max_new_tokens or req.seq_len >= max_context_len:
            return FinishReason("length")
        return None

    def _stop_string(self, req: Request) -> str | None:
        """A stop string that ends in the text of the newest token (earlier text was checked
        on earlier tokens)."""
        longest = max(len(s) for s in req.params.stop)
        tail_ids = req.output_ids[-(longest + 8):]
        text = self.decode(tail_ids)
        newest = len(self.decode(tail_ids[:-1])) if len(tail_ids) > 1 else 0
        for stop in req.params.stop:
            at = text.find(stop, max(0, newest - len(stop) + 1))
            if at >= 0:
                return stop
        return None

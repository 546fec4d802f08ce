"""When a request is done: EOS, stop token ids, stop strings, stop regexes, max_new_tokens,
context length. Nothing but the length limits stops a request before `min_new_tokens` (the
sampler also keeps EOS and stop tokens out until then, see sampling.py)."""

from __future__ import annotations

from typing import Callable

import regex

from radixgen.core import FinishReason
from radixgen.runtime.request import Request

# stop_regex is searched in the text of the newest tokens only: a match must fit in it
STOP_REGEX_WINDOW_TOKENS = 64
STOP_REGEX_TIMEOUT_S = 0.05  # per search: a pattern that backtracks for longer ends the request


class StopChecker:
    def __init__(self, eos_token_ids: set[int], decode: Callable[[list[int]], str]):
        self.eos_token_ids = eos_token_ids
        self.decode = decode  # token ids -> text, used only for requests with stop strings

    def check(self, req: Request, max_context_len: int) -> FinishReason | None:
        """Finish reason after req's newest token, or None to keep going."""
        if len(req.output_ids) >= req.params.max_new_tokens or req.seq_len >= max_context_len:
            return self._stop(req) or FinishReason("length")
        return self._stop(req)

    def _stop(self, req: Request) -> FinishReason | None:
        p, token = req.params, req.output_ids[-1]
        if len(req.output_ids) < p.min_new_tokens:
            return None
        if token in p.stop_token_ids:
            return FinishReason("stop", matched=token)
        if not p.ignore_eos and token in self.eos_token_ids:
            return FinishReason("stop", matched=token)
        if p.stop:
            matched = self._stop_string(req)
            if matched is not None:
                return FinishReason("stop", matched=matched)
        if p.stop_regex:
            return self._stop_regex(req)
        return None

    def _stop_string(self, req: Request) -> str | None:
        """A stop string that ends in the text of the newest token (earlier text was checked
        on earlier tokens)."""
        longest = max(len(s) for s in req.params.stop)
        text, newest = self._tail(req, longest + 8)
        for stop in req.params.stop:
            at = text.find(stop, max(0, newest - len(stop) + 1))
            if at >= 0:
                return stop
        return None

    def _stop_regex(self, req: Request) -> FinishReason | None:
        """A stop regex with a match that ends in the newest token's text (earlier matches
        were seen on earlier tokens, or fell before min_new_tokens)."""
        text, newest = self._tail(req, STOP_REGEX_WINDOW_TOKENS)
        for pattern in req.params.stop_regex:
            try:
                if (
                    new_match(regex.compile(pattern), text, newest, STOP_REGEX_TIMEOUT_S)
                    is not None
                ):
                    return FinishReason("stop", matched=pattern)
            except TimeoutError:
                return FinishReason(
                    "abort",
                    message=f"stop_regex {pattern!r} took over "
                    f"{STOP_REGEX_TIMEOUT_S * 1000:.0f} ms to search the output",
                )
        return None

    def _tail(self, req: Request, num_tokens: int) -> tuple[str, int]:
        """The text of req's newest num_tokens output tokens, and where the newest token's begins."""
        tail_ids = req.output_ids[-num_tokens:]
        text = self.decode(tail_ids)
        return text, len(self.decode(tail_ids[:-1])) if len(tail_ids) > 1 else 0


def new_match(
    pattern: regex.Pattern, text: str, floor: int, timeout: float | None = None
) -> regex.Match | None:
    """The first match of pattern in text that ends after character `floor` (an empty match
    counts only past it)."""
    pos = 0
    while pos <= len(text):
        match = pattern.search(text, pos, timeout=timeout)
        if match is None:
            return None
        if match.end() > floor:
            return match
        pos = match.start() + 1
    return None

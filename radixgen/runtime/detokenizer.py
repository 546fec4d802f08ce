"""Incremental detokenization: text deltas that never end in a partial UTF-8 character, with
stop strings and stop-regex matches trimmed (and text that may begin one held back until it
resolves). Stops in the text of the first `min_new_tokens - 1` tokens do not count: the stop
checker ignored them too."""

from __future__ import annotations

from typing import Any

import regex

from radixgen.core import SamplingParams
from radixgen.runtime.stop_checker import STOP_REGEX_TIMEOUT_S, new_match


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Any, params: SamplingParams):
        self.tokenizer, self.params = tokenizer, params
        self.ids: list[int] = []
        self.prefix_offset = self.read_offset = 0
        self.text = ""  # decoded so far (stable characters only)
        self.sent = 0  # characters of `text` already returned
        self.stop_floor = 0  # a stop counts only if it ends after this character
        self.trims = not params.no_stop_trim and bool(params.stop or params.stop_regex)

    def push(self, token_ids: list[int], finish: dict[str, Any] | None) -> str:
        """Add new tokens; return the text that is now safe to show."""
        for token in token_ids:
            self.ids.append(token)
            self.text += self._decode_step(final=False)
            if len(self.ids) < self.params.min_new_tokens:
                self.stop_floor = len(self.text)
        if finish is not None:
            self.text += self._decode_step(final=True)
            if self.trims:
                self._trim_at_finish(finish)
            out, self.sent = self.text[self.sent :], len(self.text)
            return out
        safe = len(self.text) - (self._held_back() if self.trims else 0)
        out = self.text[self.sent : safe] if safe > self.sent else ""
        self.sent = max(self.sent, safe)
        return out

    def _decode_step(self, final: bool) -> str:
        p = self.params
        decode = lambda ids: self.tokenizer.decode(  # noqa: E731
            ids,
            skip_special_tokens=p.skip_special_tokens,
            spaces_between_special_tokens=p.spaces_between_special_tokens,
        )
        prefix = decode(self.ids[self.prefix_offset : self.read_offset])
        full = decode(self.ids[self.prefix_offset :])
        if len(full) > len(prefix) and (final or not full.endswith("\ufffd")):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            return full[len(prefix) :]
        return ""

    def _search_from(self, stop: str) -> int:
        """Where an occurrence of stop may start: not yet sent and ending past the floor."""
        return max(0, self.sent - len(stop) + 1, self.stop_floor - len(stop) + 1)

    def _held_back(self) -> int:
        """Characters at the end of text not yet safe to show: from a complete stop on (the
        request is about to finish there), or a suffix that may begin one."""
        best = 0
        for stop in self.params.stop:
            at = self.text.find(stop, self._search_from(stop))
            if at >= 0:
                best = max(best, len(self.text) - at)
                continue
            for n in range(min(len(stop) - 1, len(self.text)), best, -1):
                if self.text.endswith(stop[:n]):
                    best = n
                    break
        for pattern in self.params.stop_regex:
            start = self._regex_hold(regex.compile(pattern))
            if start is not None:
                best = max(best, len(self.text) - start)
        return best

    def _regex_hold(self, pattern: regex.Pattern) -> int | None:
        """The start of unsent text a match (complete, or partial at the end) may cover."""
        floor = max(self.sent, self.stop_floor)
        try:
            match = new_match(pattern, self.text, floor, STOP_REGEX_TIMEOUT_S)
            if match is None:
                match = pattern.search(self.text, floor, partial=True, timeout=STOP_REGEX_TIMEOUT_S)
        except TimeoutError:
            return None  # the stop checker ends the request on the same search
        return None if match is None else max(match.start(), self.sent)

    def _trim_at_finish(self, finish: dict[str, Any]) -> None:
        matched = finish.get("matched")
        if not isinstance(matched, str):
            return
        if matched in self.params.stop:
            at = self.text.find(matched, self._search_from(matched))
            if at < 0:
                at = self.text.find(matched)
        else:  # a stop regex
            try:
                match = new_match(
                    regex.compile(matched), self.text, self.stop_floor, STOP_REGEX_TIMEOUT_S
                )
            except TimeoutError:
                match = None
            at = -1 if match is None else match.start()
        if at >= 0:
            self.text = self.text[: max(at, self.sent)]

"""Incremental detokenization: text deltas that never end in a partial UTF-8 character, with
stop strings trimmed (and text that may begin a stop string held back until it resolves)."""

from __future__ import annotations

from typing import Any

from radixgen.core import SamplingParams


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Any, params: SamplingParams):
        self.tokenizer, self.params = tokenizer, params
        self.ids: list[int] = []
        self.prefix_offset = self.read_offset = 0
        self.text = ""  # decoded so far (stable characters only)
        self.sent = 0  # characters of `text` already returned

    def push(self, token_ids: list[int], finish: dict[str, Any] | None) -> str:
        """Add new tokens; return the text that is now safe to show."""
        for token in token_ids:
            self.ids.append(token)
            self.text += self._decode_step(final=False)
        if finish is not None:
            self.text += self._decode_step(final=True)
            self._trim_at_finish(finish)
            out, self.sent = self.text[self.sent:], len(self.text)
            return out
        safe = len(self.text) - self._held_back()
        out = self.text[self.sent:safe] if safe > self.sent else ""
        self.sent = max(self.sent, safe)
        return out

    def _decode_step(self, final: bool) -> str:
        skip = self.params.skip_special_tokens
        decode = lambda ids: self.tokenizer.decode(ids, skip_special_tokens=skip)  # noqa: E731
        prefix = decode(self.ids[self.prefix_offset:self.read_offset])
        full = decode(self.ids[self.prefix_offset:])
        if len(full) > len(prefix) and (final or not full.endswith("\ufffd")):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            return full[len(prefix):]
        return ""

    def _held_back(self) -> int:
        """Characters at the end of text not yet safe to show: from a complete stop string
        on (the request is about to finish there), or a suffix that may begin one."""
        best = 0
        for stop in self.params.stop:
            at = self.text.find(stop, max(0, self.sent - len(stop) + 1))
            if at >= 0:
                best = max(best, len(self.text) - at)
                continue
            for n in range(min(len(stop) - 1, len(self.text)), best, -1):
                if self.text.endswith(stop[:n]):
                    best = n
                    break
        return best

    def _trim_at_finish(self, finish: dict[str, Any]) -> None:
        matched = finish.get("matched")
        if isinstance(matched, str):
            at = self.text.find(matched, max(0, self.sent - len(matched) + 1))
            if at < 0:
                at = self.text.find(matched)
            if at >= 0:
                self.text = self.text[:max(at, self.sent)]

"""A scripted Backend for the interpreter's unit tests (no server)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from radixgen.frontend_lang import BackendError
from radixgen.frontend_lang.backend import Backend, SelectResult
from radixgen.frontend_lang.chat_template import REGISTRY, ChatTemplate


class FakeBackend(Backend):
    """generate answers `reply(text, params)` (default: "<n>" with a running count); every
    call is recorded as (kind, text, params). `fail_on`: prompts containing it get a 400."""

    def __init__(
        self,
        reply: Callable[[str, dict], str] | None = None,
        delay: float = 0.0,
        template: ChatTemplate = REGISTRY["chatml"],
        fail_on: str | None = None,
    ):
        self.reply = reply or (lambda text, params: f"<{len(self.calls)}>")
        self.delay, self.template, self.fail_on = delay, template, fail_on
        self.calls: list[tuple[str, Any, dict]] = []
        self.logprobs: dict[str, list[float]] = {}  # select: per-token logprobs of a choice
        self.unconditional: dict[str, list[float]] = {}  # the same, scored without the text
        self.lock = threading.Lock()
        self.active = self.max_active = 0

    def chat_template(self) -> ChatTemplate:
        return self.template

    def _enter(self, kind: str, text: Any, params: dict) -> None:
        with self.lock:
            self.calls.append((kind, text, dict(params)))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            texts = [text] if isinstance(text, str) else text
            if self.fail_on and any(self.fail_on in t for t in texts):
                raise BackendError(f"refused: {self.fail_on}", 400)
        finally:
            with self.lock:
                self.active -= 1

    def _result(self, text: str, params: dict) -> dict[str, Any]:
        out = self.reply(text, params)
        return {
            "text": out,
            "output_ids": [],
            "meta_info": {
                "prompt_tokens": len(text),
                "completion_tokens": len(out),
                "cached_tokens": 0,
                "finish_reason": {"type": "stop"},
            },
        }

    def generate(self, text, sampling_params, request=None):
        self._enter("generate", text, {**sampling_params, **(request or {})})
        if isinstance(text, str):
            return self._result(text, sampling_params)
        return [self._result(t, sampling_params) for t in text]

    def generate_stream(self, text, sampling_params, request=None):
        self._enter("stream", text, {**sampling_params, **(request or {})})
        result = self._result(text, sampling_params)
        full = result["text"]
        for i in range(1, len(full) + 1):
            meta = (
                {**result["meta_info"], "output_token_logprobs": [[-0.5, i]]}
                if request
                else result["meta_info"]
            )
            yield full[i - 1], {**result, "text": full[:i], "meta_info": meta}

    def cache_prefix(self, text):
        self._enter("cache_prefix", text, {"max_new_tokens": 0})
        return {"prompt_tokens": len(text), "cached_tokens": 0}

    def select(self, text, choices, unconditional=False):
        """A choice is one token of logprob -len(choice), so the shortest wins (or its
        tokens' logprobs are `self.logprobs[choice]`)."""
        self._enter("select", text, {"choices": choices, "unconditional": unconditional})
        entries = [
            [[lp, i] for i, lp in enumerate(self.logprobs.get(c, [-float(len(c))]))]
            for c in choices
        ]
        sums = [sum(e[0] for e in es) for es in entries]
        normalized = [s / len(es) for s, es in zip(sums, entries)]
        uncond = (
            [
                [[lp, i] for i, lp in enumerate(self.unconditional.get(c, [-1.0] * len(es)))]
                for c, es in zip(choices, entries)
            ]
            if unconditional
            else None
        )
        best = max(range(len(choices)), key=lambda i: (normalized[i], -i))
        return SelectResult(
            choices[best],
            normalized,
            normalized,
            sums,
            [len(e) for e in entries],
            {"prompt_tokens": 0, "cached_tokens": 0},
            entries,
            uncond,
        )

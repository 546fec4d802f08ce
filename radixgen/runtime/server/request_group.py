"""A group of requests one HTTP call makes (a batch of prompts, n samples of one prompt),
read through one queue. Copies of the same prompt wait until the first copy's prefill is done,
so they read its KV from the radix tree instead of computing it again."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from radixgen.core import SamplingParams
from radixgen.runtime.messages import SpecCounts, TextOut
from radixgen.runtime.server.errors import unavailable
from radixgen.runtime.server.tokenizer_manager import Failure, TokenizerManager


@dataclass
class ReqState:
    """What one request has produced so far."""

    rid: str
    index: int
    input_ids: list[int]
    params: SamplingParams
    start: float = field(default_factory=time.perf_counter)
    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    input_logprobs: list[float | None] | None = None
    input_top_logprobs: list[list[tuple[int, float]] | None] | None = None
    finish: dict[str, Any] | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    e2e_latency: float = 0.0
    submitted: bool = False
    spec: SpecCounts | None = None
    weight_version: str | None = None

    def apply(self, out: TextOut) -> None:
        self.text += out.text
        self.output_ids.extend(out.token_ids)
        self.logprobs.extend(out.logprobs or [])
        self.top_logprobs.extend(out.top_logprobs or [])
        if out.input_logprobs is not None:
            self.input_logprobs = out.input_logprobs
            self.input_top_logprobs = out.input_top_logprobs
        self.prompt_tokens, self.cached_tokens = out.prompt_tokens, out.cached_tokens
        self.completion_tokens = out.completion_tokens
        self.weight_version = out.weight_version or self.weight_version
        if out.spec is not None:
            self.spec = out.spec
        if out.finish is not None:
            self.finish = out.finish
            self.e2e_latency = time.perf_counter() - self.start


class RequestGroup:
    """Submit with `start()`; iterate to get `(state, out)` per message (state already
    updated) until every request finished; `abort()` stops the unfinished ones."""

    def __init__(
        self,
        tm: TokenizerManager,
        specs: list[tuple[list[int], SamplingParams]],
        rids: list[str] | None = None,
        adapters: str | list[str | None] | None = None,
    ):
        """`adapters`: the LoRA adapter of every request (one name) or of each (a list)."""
        self.tm = tm
        if not isinstance(adapters, list):
            adapters = [adapters] * len(specs)
        self.queue: asyncio.Queue = asyncio.Queue()
        rids = rids or [uuid.uuid4().hex for _ in specs]
        self.states = [
            ReqState(rid, i, ids, p) for i, (rid, (ids, p)) in enumerate(zip(rids, specs))
        ]
        self.by_rid = {s.rid: s for s in self.states}
        self.adapters = {s.rid: a for s, a in zip(self.states, adapters)}
        self.followers: dict[str, list[ReqState]] = {}  # leader rid -> copies of its prompt
        self.arrival = time.perf_counter()  # where every request's latency metrics start

    def start(self) -> None:
        """Submit the first request of each distinct prompt; hold back its copies."""
        leaders: dict[tuple, ReqState] = {}
        for state in self.states:
            key = (tuple(state.input_ids), self.adapters[state.rid])
            leader = leaders.setdefault(key, state)
            if leader is state:
                self._submit(state)
            else:
                self.followers.setdefault(leader.rid, []).append(state)

    def _submit(self, state: ReqState) -> None:
        state.start, state.submitted = time.perf_counter(), True
        self.tm.submit(
            state.rid,
            state.input_ids,
            state.params,
            self.queue,
            self.arrival,
            self.adapters[state.rid],
        )

    @property
    def done(self) -> bool:
        return all(s.finish is not None for s in self.states)

    async def __aiter__(self) -> AsyncIterator[tuple[ReqState, TextOut]]:
        while not self.done:
            out = await self.queue.get()
            if isinstance(out, Failure):
                raise unavailable(out.message)
            state = self.by_rid[out.rid]
            state.apply(out)
            for follower in self.followers.pop(out.rid, []):  # the leader's prefill is done
                self._submit(follower)
            yield state, out

    async def wait(self) -> list[ReqState]:
        """Consume every message; the finished states (503 APIError if the runtime died)."""
        async for _ in self:
            pass
        return self.states

    def abort(self) -> None:
        """Abort what is still running; copies not yet submitted are dropped."""
        for state in self.states:
            if state.finish is None and state.submitted:
                self.tm.abort(state.rid)
            if state.finish is None:
                state.finish = {"type": "abort", "message": "aborted by the client"}
        self.followers.clear()

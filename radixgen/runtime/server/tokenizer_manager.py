"""The main process's side of the runtime: tokenizes, validates prompts against the model's
limits, sends GenerateReq / AbortReq to the scheduler process and fans the detokenizer's text
deltas out to the HTTP handlers waiting for them (one asyncio queue per request group)."""

from __future__ import annotations

import asyncio
import collections
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import zmq
import zmq.asyncio

from radixgen.core import SamplingParams
from radixgen.runtime.messages import (
    AbortReq,
    CompileReq,
    FlushCacheReq,
    FlushCacheResp,
    GenerateReq,
    GetInfoReq,
    InfoResp,
    SchedulerFailed,
    SchedulerReady,
    TextBatch,
    ToFrontend,
    ToSchedulerProcess,
    WeightsReq,
    WeightsResp,
)
from radixgen.runtime.server.errors import invalid, unavailable
from radixgen.runtime.server.ipc import Codec, Endpoints
from radixgen.runtime.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

CONTROL_TIMEOUT_S = 30.0  # flush / info answers (the scheduler answers between steps)
WEIGHTS_TIMEOUT_S = 900.0  # a weight update: load, checks, and the drain of running requests


class StartupError(RuntimeError):
    """The scheduler process did not come up (model load failed, or a child died)."""


class Failure:
    """Put into a request's queue when the runtime died under it."""

    def __init__(self, message: str):
        self.message = message


class TokenizerManager:
    """One per server, on the event loop: the only owner of the scheduler's input socket and
    of the main process's inbox. `submit`/`abort` requests; `_recv_loop` routes every TextOut
    to its request's queue and every control answer to its waiting future; `metrics` sees
    every request's submission, text deltas and end."""

    def __init__(
        self,
        tokenizer: Any,
        endpoints: Endpoints,
        metrics: ServerMetrics | None = None,
        grammar_whitespace: str = "compact",
    ):
        self.tokenizer = tokenizer
        self.grammar_whitespace = (
            grammar_whitespace  # the scheduler's, so the 400-check sizes the same regex
        )
        self.metrics = metrics or ServerMetrics("radixgen")
        self.ctx = zmq.asyncio.Context()
        self.to_scheduler = self.ctx.socket(zmq.PUSH)
        self.to_scheduler.setsockopt(zmq.LINGER, 0)
        self.to_scheduler.connect(endpoints.scheduler)
        self.inbox = self.ctx.socket(zmq.PULL)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.bind(endpoints.frontend)
        self.out_codec, self.in_codec = Codec(ToSchedulerProcess), Codec(ToFrontend)
        self.queues: dict[str, asyncio.Queue] = {}
        self.limits: SchedulerReady | None = None
        self.dead_reason: str | None = None
        self.draining: str | None = None  # set on SIGTERM: new requests are refused with it
        self._grammar_checker = None  # a GrammarCompiler used only to validate, built on first use
        self._waiters: dict[type, collections.deque[asyncio.Future]] = {
            FlushCacheResp: collections.deque(),
            InfoResp: collections.deque(),
        }
        self._loop_task: asyncio.Task | None = None
        self._weight_ops: dict[str, asyncio.Future] = {}  # op_id -> its WeightsResp
        self.weight_version = "default"  # the serving version, as the last answer told
        # LoRA adapters by name, as the scheduler's last answer listed them (None: not enabled)
        self.lora_adapters: dict[str, dict[str, Any]] | None = None
        # Tokenization and chat templates run here, off the event loop, so a huge prompt holds
        # up neither /health nor the small prompts beside it. Several threads are safe: they
        # only read the Rust tokenizer (`encode_batch`), never set its padding or truncation.
        self._tokenize_pool = ThreadPoolExecutor(4, thread_name_prefix="tokenize")

    # ---- lifecycle ----------------------------------------------------------------------
    async def wait_ready(self, alive: Callable[[], str | None], timeout: float) -> SchedulerReady:
        """Wait for SchedulerReady; StartupError on SchedulerFailed, a dead child or timeout.
        `alive()` returns None while every child runs, else what died."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if await self.inbox.poll(200):
                msg = self.in_codec.decode(await self.inbox.recv())
                if isinstance(msg, SchedulerFailed):
                    raise StartupError(f"the model failed to load: {msg.error}")
                if isinstance(msg, SchedulerReady):
                    self.limits, self.weight_version = msg, msg.weight_version
                    self._set_adapters(msg.lora_adapters)
                    return msg
            dead = alive()
            if dead:
                raise StartupError(f"{dead} exited during startup")
        raise StartupError(f"the scheduler was not ready after {timeout:.0f}s")

    def start(self) -> None:
        """Start routing messages (after wait_ready, on the running loop)."""
        self._loop_task = asyncio.get_running_loop().create_task(self._recv_loop())

    async def close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        self._tokenize_pool.shutdown(wait=False, cancel_futures=True)
        self.ctx.destroy(linger=0)

    @property
    def healthy(self) -> bool:
        return self.limits is not None and self.dead_reason is None and self.draining is None

    @property
    def num_inflight(self) -> int:
        """Requests submitted and not yet finished or aborted."""
        return len(self.queues)

    def start_drain(self, reason: str) -> None:
        """From now on /health and new requests get 503 with `reason`; running ones go on."""
        self.draining = reason

    def fail_all(self, reason: str) -> None:
        """The runtime is gone: every waiting handler gets a Failure (then a 503)."""
        self.dead_reason = reason
        for queue in self.queues.values():
            queue.put_nowait(Failure(reason))
        self.queues.clear()
        self.metrics.forget_all()
        for fut in self._weight_ops.values():
            if not fut.done():
                fut.set_exception(unavailable(reason))
        self._weight_ops.clear()
        for waiters in self._waiters.values():
            while waiters:
                fut = waiters.popleft()
                if not fut.done():
                    fut.set_exception(unavailable(reason))

    # ---- requests -----------------------------------------------------------------------
    def submit(
        self,
        rid: str,
        input_ids: list[int],
        params: SamplingParams,
        queue: asyncio.Queue,
        arrival: float | None = None,
        adapter: str | None = None,
    ) -> None:
        """Send one request; its TextOut messages (then nothing) arrive on `queue`.
        `arrival` (perf_counter, default now) is where its latency metrics start; `adapter`
        is its LoRA adapter's name (None: the base model)."""
        if self.dead_reason is not None or self.draining is not None:
            raise unavailable(self.dead_reason or self.draining)
        self.queues[rid] = queue
        self.metrics.on_submit(rid, len(input_ids), arrival, self.weight_version, adapter)
        self._send(GenerateReq(rid=rid, input_ids=input_ids, params=params, adapter=adapter))

    def abort(self, rid: str, notify: bool = False) -> bool:
        """Stop a request (its KV is freed). notify=False (its client left): its queue gets
        no more messages; notify=True: its queue still gets the final `abort` message.
        False if no such request is running."""
        known = (self.queues.get(rid) if notify else self.queues.pop(rid, None)) is not None
        if known and self.dead_reason is None:
            self._send(AbortReq(rid=rid))
        if known and not notify:
            self.metrics.on_drop(rid)
        return known

    async def flush_cache(self) -> bool:
        return (await self._ask(FlushCacheReq(), FlushCacheResp)).ok

    async def get_stats(self) -> dict[str, Any]:
        return (await self._ask(GetInfoReq(), InfoResp)).stats

    async def _ask(self, msg: Any, reply_type: type) -> Any:
        """Send a control message; the scheduler answers them in order."""
        if self.dead_reason is not None:
            raise unavailable(self.dead_reason)
        fut = asyncio.get_running_loop().create_future()
        self._waiters[reply_type].append(fut)
        self._send(msg)
        try:
            return await asyncio.wait_for(fut, timeout=CONTROL_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise unavailable(
                f"the scheduler did not answer within {CONTROL_TIMEOUT_S:.0f}s"
            ) from None

    async def weights_op(self, msg: WeightsReq) -> WeightsResp:
        """Send a weight operation; its answer comes when it completed (an update: once the new
        version serves, after the running requests of the old one finished)."""
        if self.dead_reason is not None:
            raise unavailable(self.dead_reason)
        fut = asyncio.get_running_loop().create_future()
        self._weight_ops[msg.op_id] = fut
        self._send(msg)
        try:
            return await asyncio.wait_for(fut, timeout=WEIGHTS_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise unavailable(
                f"the weight operation did not complete within {WEIGHTS_TIMEOUT_S:.0f}s"
            ) from None
        finally:
            self._weight_ops.pop(msg.op_id, None)

    def _weights_answered(self, resp: WeightsResp) -> None:
        fut = self._weight_ops.get(resp.op_id)
        version = (resp.result or {}).get("active", {}).get("name")
        if version is not None:
            self.weight_version = version
        if resp.result is not None and "lora_adapters" in resp.result:
            self._set_adapters(resp.result["lora_adapters"])
        if resp.result is not None and ("rollback_s" in resp.result or "activate_s" in resp.result):
            self.metrics.on_weight_switch(resp.result)
        if fut is not None and not fut.done():
            fut.set_result(resp)

    def _set_adapters(self, adapters: list[dict[str, Any]] | None) -> None:
        self.lora_adapters = None if adapters is None else {a["lora_name"]: a for a in adapters}

    def check_adapter(self, name: str | None, param: str) -> None:
        """400 for an adapter name that is not loaded (or LoRA not enabled)."""
        if name is None:
            return
        if self.lora_adapters is None:
            raise invalid(
                f"{param}: LoRA adapters are not enabled (--enable-lora)", param, "lora_not_enabled"
            )
        if name not in self.lora_adapters:
            loaded = ", ".join(self.lora_adapters) or "none"
            raise invalid(
                f"{param}: unknown LoRA adapter {name!r} (loaded: {loaded})",
                param,
                "lora_not_found",
            )

    def _send(self, msg: Any) -> None:
        self.to_scheduler.send(self.out_codec.encode(msg), copy=False)

    async def _recv_loop(self) -> None:
        while True:
            frame = await self.inbox.recv()
            try:
                msg = self.in_codec.decode(frame)
            except Exception as exc:  # noqa: BLE001 - a bad frame must not stop the loop
                logger.error("dropped a malformed message: %s", exc)
                continue
            if isinstance(msg, TextBatch):
                self._dispatch(msg)
            elif isinstance(msg, WeightsResp):
                self._weights_answered(msg)
            elif type(msg) in self._waiters and self._waiters[type(msg)]:
                fut = self._waiters[type(msg)].popleft()
                if not fut.done():
                    fut.set_result(msg)

    def _dispatch(self, batch: TextBatch) -> None:
        for out in batch.outs:
            queue = self.queues.get(out.rid)
            if queue is None:
                continue  # aborted by its client
            self.metrics.on_output(out)
            queue.put_nowait(out)
            if out.finish is not None:
                del self.queues[out.rid]

    # ---- tokenization and validation ------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    async def off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the tokenizer's thread (anything that tokenizes or renders a template)."""
        return await asyncio.get_running_loop().run_in_executor(self._tokenize_pool, fn, *args)

    async def encode_async(self, texts: list[str], param: str) -> list[list[int]]:
        """Token ids of each text, computed off the event loop; 400 for a text longer than the
        context (found before its ids become a Python list)."""
        return await self.off_loop(self.encode_checked, texts, param)

    def encode_checked(self, texts: list[str], param: str) -> list[list[int]]:
        """Blocking: token ids of each text, 400 for one longer than the context. A fast
        tokenizer's batch encode releases the GIL, so the event loop runs meanwhile."""
        backend = getattr(self.tokenizer, "_tokenizer", None)
        if backend is None or not hasattr(backend, "encode_batch"):
            encoded = [self.encode(t) for t in texts]
        else:
            encoded = backend.encode_batch(texts, add_special_tokens=False)
        max_len = self.limits.max_context_len
        for enc in encoded:
            if len(enc) >= max_len:
                raise invalid(
                    f"the prompt has {len(enc)} tokens; this model's context is {max_len} tokens",
                    param,
                    "context_length_exceeded",
                )
        return [list(e) if isinstance(e, list) else list(e.ids) for e in encoded]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    async def check_constraints(
        self, params: list, param: str, worded: Callable[[str], str] | None = None
    ) -> None:
        """400 naming the problem unless every constraint in `params` (SamplingParams) would
        compile: the cheap checks (schema features, regex and grammar syntax) run here, off
        the event loop; the vocabulary index is built by the scheduler process. `worded`
        rewrites the message (tool calls name the request's places)."""
        constraints = {p.constraint for p in params if p.constraint is not None}
        if not constraints:
            return
        if self._grammar_checker is None:
            from radixgen.grammar.compiler import GrammarCompiler
            from radixgen.grammar.tokenizer_info import TokenizerInfo

            self._grammar_checker = GrammarCompiler(
                TokenizerInfo.from_hf(self.tokenizer), self.grammar_whitespace
            )
        from radixgen.grammar.matcher import GrammarError

        for constraint in constraints:  # the scheduler compiles each new one meanwhile
            if not self._grammar_checker.checked(constraint) and self.dead_reason is None:
                self._send(CompileReq(constraint))
        for constraint in constraints:
            try:
                await asyncio.to_thread(self._grammar_checker.validate, constraint)
            except GrammarError as exc:
                raise invalid(
                    worded(str(exc)) if worded else str(exc), param, "invalid_constraint"
                ) from None

    def check_prompt(self, ids: list[int], max_new_tokens: int, param: str) -> None:
        """400 unless the prompt is non-empty, in the vocabulary, and fits the context."""
        limits = self.limits
        if not ids:
            raise invalid("the prompt is empty", param)
        if len(ids) < limits.max_context_len and any(
            not isinstance(t, int) or t < 0 or t >= limits.vocab_size for t in ids
        ):
            raise invalid(f"token ids must be integers in [0, {limits.vocab_size})", param)
        if len(ids) >= limits.max_context_len:
            raise invalid(
                f"the prompt has {len(ids)} tokens; this model's context is "
                f"{limits.max_context_len} tokens",
                param,
                "context_length_exceeded",
            )
        if len(ids) + max_new_tokens > limits.max_context_len:
            raise invalid(
                f"{len(ids)} prompt tokens + {max_new_tokens} new tokens exceed this model's "
                f"context of {limits.max_context_len} tokens",
                param,
                "context_length_exceeded",
            )
        if len(ids) + 1 > limits.num_slots:
            raise invalid(
                f"the prompt has {len(ids)} tokens; the KV pool holds {limits.num_slots}",
                param,
                "context_length_exceeded",
            )

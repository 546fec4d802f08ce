"""The scheduler process: owns the model, KV pool and radix cache; runs `Scheduler.step()`.

Loop: drain the input socket without blocking, step while there is work (TokenOut batches go
to the detokenizer), else block on the socket with a timeout (checking the parent is alive).
"""

from __future__ import annotations

import gc
import logging
import traceback
from pathlib import Path
from typing import Any

import msgspec
import zmq

from radixgen.config import EngineConfig
from radixgen.radix.kv_events import BlockEventRecorder
from radixgen.runtime.engine import build_scheduler, load_tokenizer
from radixgen.runtime.messages import (
    AbortReq,
    CompileReq,
    DetokRegister,
    FlushCacheReq,
    FlushCacheResp,
    GenerateReq,
    GetInfoReq,
    InfoResp,
    SchedulerFailed,
    SchedulerReady,
    ToDetokenizer,
    ToFrontend,
    TokenBatch,
    ToSchedulerProcess,
    WeightsReq,
)
from radixgen.runtime.scheduler import Scheduler
from radixgen.runtime.server.heap_trim import HeapTrimmer
from radixgen.runtime.server.ipc import (
    Codec,
    Endpoints,
    ParentWatch,
    pull_socket,
    push_socket,
    setup_child,
)
from radixgen.runtime.server.kv_events_publisher import NullKVEventPublisher, ZmqKVEventPublisher
from radixgen.runtime.weights import ops

logger = logging.getLogger(__name__)

IDLE_POLL_MS = 500
LOADING_POLL_MS = 5  # nothing to run but a weight load in flight: wait this long between checks


class SchedulerProcess:
    """The Scheduler behind ZMQ: GenerateReq/AbortReq go to `Scheduler.handle` (each new
    request is registered with the detokenizer first); flush and info are answered directly."""

    def __init__(
        self,
        scheduler: Scheduler,
        ctx: zmq.Context,
        endpoints: Endpoints,
        kv_events: ZmqKVEventPublisher | NullKVEventPublisher,
    ):
        self.scheduler = scheduler
        self.kv_events = kv_events
        self.inbox = pull_socket(ctx, endpoints.scheduler)
        self.to_detok = push_socket(ctx, endpoints.detokenizer)
        self.to_frontend = push_socket(ctx, endpoints.frontend)
        self.in_codec = Codec(ToSchedulerProcess)
        self.detok_codec, self.frontend_codec = Codec(ToDetokenizer), Codec(ToFrontend)
        self.parent = ParentWatch()
        self.num_abort_requests = 0
        self.heap = HeapTrimmer()

    def run(self) -> None:
        """Serve until the parent goes away (or SIGTERM raises SystemExit)."""
        while self.parent.parent_alive():
            self._drain()
            s = self.scheduler
            if s.has_work or s.outputs:
                outs = s.step()
                if outs:
                    self.to_detok.send(self.detok_codec.encode(TokenBatch(outs)))
                if not (outs or s.running or s.chunked or s.waiting):
                    self.inbox.poll(LOADING_POLL_MS)  # leave the GIL to the loader thread
            else:
                self.inbox.poll(IDLE_POLL_MS)  # wakes at once when a message arrives
            for resp in ops.answers(s):  # weight operations complete between steps
                self._reply(resp)
            self.kv_events.publish_step()  # what this step (or a flush) did to the radix cache
            self.heap.after_step(idle=not (s.has_work or s.outputs))

    def _drain(self) -> None:
        while True:
            try:
                frame = self.inbox.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                msg = self.in_codec.decode(frame)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
                logger.error("dropped a malformed message: %s", exc)
                continue
            self._handle(msg)

    def _handle(self, msg: Any) -> None:
        if isinstance(msg, GenerateReq):
            self.to_detok.send(self.detok_codec.encode(DetokRegister(msg.rid, msg.params)))
            self.scheduler.handle(msg)
        elif isinstance(msg, FlushCacheReq):
            self._reply(FlushCacheResp(ok=self.scheduler.flush_cache()))
        elif isinstance(msg, GetInfoReq):
            stats = {
                **scheduler_stats(self.scheduler),
                "num_abort_requests": self.num_abort_requests,
            }
            self._reply(InfoResp(stats=stats))
        elif isinstance(msg, WeightsReq):
            ops.submit(self.scheduler, msg)
        elif isinstance(msg, CompileReq):
            if self.scheduler.grammar is not None:  # (else constrained requests are refused)
                self.scheduler.grammar.prefetch(msg.constraint)
        else:
            self.num_abort_requests += isinstance(msg, AbortReq)
            self.scheduler.handle(msg)

    def _reply(self, msg: Any) -> None:
        self.to_frontend.send(self.frontend_codec.encode(msg))


def scheduler_stats(s: Scheduler) -> dict[str, Any]:
    """Queue, KV and cache statistics from the scheduler's public surface."""
    num_slots = s.runner.num_slots
    free = s.runner.allocator.num_free()
    prompt = s.num_prompt_tokens
    return {
        "num_waiting_reqs": len(s.waiting) + len(s.gate.held),
        "num_running_reqs": len(s.running),
        "num_grammar_queue_reqs": len(s.grammar.pending) if s.grammar is not None else 0,
        "num_slots": num_slots,
        "num_free_slots": free,
        "cache_size": s.cache.total_size(),
        "token_usage": round(1 - free / num_slots, 4) if num_slots else 0.0,
        "num_prompt_tokens": prompt,
        "num_cached_tokens": s.num_cached_tokens,
        "cache_hit_rate": round(s.num_cached_tokens / prompt, 4) if prompt else 0.0,
        "num_retractions": s.num_retractions,
        "chunk_size": s.chunk_size,
        "kv_rotation": s.runner.kv_rotation,
        "cuda_graph": s.runner.graphs is not None,
        **(s.runner.graphs.summary() if s.runner.graphs is not None else {}),
        **pool_stats(s),
        **(s.spec.summary() if s.spec is not None else {}),
        "num_held_reqs": len(s.gate.held),
        "paused": s.paused,
        "weights": s.gate.weights.info(),
        **(lora_stats(s.runner.lora) if s.runner.lora is not None else {}),
    }


def lora_stats(lora) -> dict[str, Any]:
    """The adapters loaded, those resident in the pool, and pool loads so far."""
    return {
        "num_lora_adapters": len(lora.adapters),
        "num_lora_resident": len(lora.pool.resident),
        "lora_pool_slots": lora.pool.num_slots,
        "lora_pool_loads": lora.pool.num_loads,
    }


def pool_stats(s: Scheduler) -> dict[str, Any]:
    """Per KV pool (tier): precision, capacity, usage, cached tokens, cache hits."""
    out: dict[str, Any] = {}
    prompt = s.num_prompt_tokens
    for tier, name in enumerate(("prefix", "branch")):
        capacity = s.runner.capacity[tier] if tier < len(s.runner.capacity) else 0
        free = s.runner.allocator.num_free(tier) if capacity else 0
        hits = s.num_cached_by_tier[tier]
        out.update(
            {
                f"{name}_pool_dtype": s.runner.kv_dtypes[tier],
                f"{name}_pool_capacity_tokens": capacity,
                f"{name}_pool_token_usage": round(1 - free / capacity, 4) if capacity else 0.0,
                f"{name}_pool_cached_tokens": s.cache.total_size(tier) if capacity else 0,
                f"{name}_pool_cache_hit_tokens": hits,
                f"{name}_pool_cache_hit_rate": round(hits / prompt, 4) if prompt else 0.0,
            }
        )
    return out


def run_scheduler_process(
    model_path: str, tokenizer_path: str, cfg: EngineConfig, endpoints: Endpoints, log_level: str
) -> None:
    """Child entry point (multiprocessing spawn). A load failure is reported to the main
    process as SchedulerFailed and ends the process with exit code 1."""
    setup_child("scheduler", log_level)
    ctx = zmq.Context()
    events_cfg = cfg.cache.kv_events
    recorder = BlockEventRecorder(events_cfg.block_size, None) if events_cfg else None
    try:
        tokenizer = load_tokenizer(Path(tokenizer_path))
        scheduler = build_scheduler(Path(model_path), cfg, tokenizer, recorder)
        kv_events = NullKVEventPublisher()
        if recorder is not None:
            recorder.medium = "GPU" if scheduler.runner.device.type == "cuda" else "CPU"
            kv_events = ZmqKVEventPublisher(events_cfg, recorder, ctx)
    except Exception as exc:  # noqa: BLE001 - every load error must reach the user
        logger.error("model failed to load:\n%s", traceback.format_exc())
        _report_failure(ctx, endpoints, f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from None
    proc = SchedulerProcess(scheduler, ctx, endpoints, kv_events)
    runner = scheduler.runner
    # the loaded model, tokenizer and tables never die: keep them out of the cyclic GC's full
    # passes (~0.2 s each over this heap), which otherwise stall decode steps and grammar masks
    gc.freeze()
    proc._reply(
        SchedulerReady(
            max_context_len=runner.max_context_len,
            num_slots=runner.capacity[0],
            vocab_size=runner.arch.vocab_size,
            weight_version=scheduler.gate.weights.active.version.name,
            lora_adapters=runner.lora.info() if runner.lora is not None else None,
        )
    )
    logger.info(
        "scheduler ready: %d KV slots, context %d", runner.num_slots, runner.max_context_len
    )
    try:
        proc.run()
    finally:
        kv_events.close()
        ctx.destroy(linger=0)


def _report_failure(ctx: zmq.Context, endpoints: Endpoints, error: str) -> None:
    sock = push_socket(ctx, endpoints.frontend)
    sock.setsockopt(zmq.LINGER, 2000)  # let the message leave before the process exits
    sock.send(Codec(ToFrontend).encode(SchedulerFailed(error=error)))
    sock.close()
    ctx.term()

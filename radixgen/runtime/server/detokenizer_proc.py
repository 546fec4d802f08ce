"""The detokenizer process: one IncrementalDetokenizer per request turns the scheduler's
TokenOut batches into text deltas (stop strings trimmed, no partial UTF-8) for the main process."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import msgspec
import zmq

from radixgen.runtime.detokenizer import IncrementalDetokenizer
from radixgen.runtime.engine import load_tokenizer
from radixgen.runtime.messages import (
    DetokRegister,
    TextBatch,
    TextOut,
    ToDetokenizer,
    ToFrontend,
    TokenOut,
)
from radixgen.runtime.server.ipc import (
    Codec,
    Endpoints,
    ParentWatch,
    pull_socket,
    push_socket,
    setup_child,
)

logger = logging.getLogger(__name__)

IDLE_POLL_MS = 500


class DetokenizerProcess:
    """Owns the per-request IncrementalDetokenizers; one TextBatch out per TokenBatch in."""

    def __init__(self, tokenizer: Any, ctx: zmq.Context, endpoints: Endpoints):
        self.tokenizer = tokenizer
        self.inbox = pull_socket(ctx, endpoints.detokenizer)
        self.to_frontend = push_socket(ctx, endpoints.frontend)
        self.in_codec, self.out_codec = Codec(ToDetokenizer), Codec(ToFrontend)
        self.detoks: dict[str, IncrementalDetokenizer] = {}
        self.parent = ParentWatch()

    def run(self) -> None:
        """Serve until the parent goes away (or SIGTERM raises SystemExit)."""
        while self.parent.parent_alive():
            if not self.inbox.poll(IDLE_POLL_MS):
                continue
            try:
                msg = self.in_codec.decode(self.inbox.recv())
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
                logger.error("dropped a malformed message: %s", exc)
                continue
            if isinstance(msg, DetokRegister):
                self.detoks[msg.rid] = IncrementalDetokenizer(self.tokenizer, msg.params)
            else:
                texts = [self.detokenize(out) for out in msg.outs]
                self.to_frontend.send(self.out_codec.encode(TextBatch(texts)))

    def detokenize(self, out: TokenOut) -> TextOut:
        """The text delta for one TokenOut; the request's state is dropped at its finish."""
        detok = self.detoks.get(out.rid)
        text = detok.push(out.token_ids, out.finish) if detok is not None else ""
        if out.finish is not None:
            self.detoks.pop(out.rid, None)
        return TextOut(
            rid=out.rid,
            text=text,
            token_ids=out.token_ids,
            prompt_tokens=out.prompt_tokens,
            cached_tokens=out.cached_tokens,
            completion_tokens=out.completion_tokens,
            finish=out.finish,
            logprobs=out.logprobs,
            top_logprobs=out.top_logprobs,
            input_logprobs=out.input_logprobs,
            input_top_logprobs=out.input_top_logprobs,
            spec=out.spec,
            times=out.times,
        )


def run_detokenizer_process(tokenizer_path: str, endpoints: Endpoints, log_level: str) -> None:
    """Child entry point (multiprocessing spawn)."""
    setup_child("detokenizer", log_level)
    ctx = zmq.Context()
    try:
        proc = DetokenizerProcess(load_tokenizer(Path(tokenizer_path)), ctx, endpoints)
        gc.freeze()  # the tokenizer lives as long as the process: no full GC passes over it, nor one at exit
        proc.run()
    finally:
        ctx.destroy(linger=0)

"""`run_batch`: many runs of one program, concurrently, after one request has put the prefix
they all share into the radix cache.

The shared prefix is found by tracing: each program runs against a backend that records the
text of its first request and stops it there (text-building code before the first
`gen`/`select`/`fork` therefore runs twice). The longest common prefix of those texts, cut
back to a whitespace or tag boundary, is sent once with max_new_tokens=0."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

from radixgen.frontend_lang.backend import Backend, BackendError
from radixgen.frontend_lang.state import ProgramState

# `program(state, kwargs)`: runs one program on a state (the caller's Program, which imports
# this module; so this one never imports it back)
RunOne = Callable[[ProgramState, dict[str, Any]], None]

MIN_SHARED_PREFIX_CHARS = 32  # shorter shared prefixes are not worth a request
MAX_THREADS = 64


class _TraceStop(Exception):
    """Raised at a traced program's first backend request."""


class TraceBackend(Backend):
    """Records the text of the first request, then stops the program."""

    def __init__(self, real: Backend):
        self.real = real
        self.first_text: str | None = None
        self.state: ProgramState | None = None  # the traced state (a chat request's text)

    def chat_template(self):
        return self.real.chat_template()

    def _stop(self, text: str) -> Any:
        if self.first_text is None:
            self.first_text = text if isinstance(text, str) else text[0]
        raise _TraceStop

    def generate(self, text, sampling_params, request=None):
        return self._stop(text)

    def generate_stream(self, text, sampling_params, request=None):
        return self._stop(text)

    def cache_prefix(self, text):
        return self._stop(text)

    def select(self, text, choices, unconditional=False):
        return self._stop(text)

    def generate_chat(self, messages, sampling_params, request, n=1):
        return self._stop(self.state.text_ if self.state is not None else "")

    @property
    def is_chat_model(self):
        return self.real.is_chat_model


def first_request_text(call: RunOne, kwargs: dict[str, Any], backend: Backend) -> str | None:
    """The text of the program's first request, or None (no request, or it failed earlier)."""
    tracer = TraceBackend(backend)
    state = ProgramState(tracer, synchronous=True)
    tracer.state = state
    try:
        call(state, kwargs)
    except _TraceStop:
        pass
    except Exception:  # noqa: BLE001 - the real run reports it
        return None
    return tracer.first_text


def shared_prefix(texts: list[str]) -> str:
    """Longest common prefix, cut back after its last whitespace or `>` (so it ends where a
    tokenizer is likely to end a token too); "" if too short to matter."""
    if len(texts) < 2:
        return ""
    prefix = os.path.commonprefix(texts)
    cut = max(prefix.rfind(c) for c in (" ", "\n", ">"))
    prefix = prefix[: cut + 1] if cut >= 0 else ""
    return prefix if len(prefix) >= MIN_SHARED_PREFIX_CHARS else ""


def precache(call: RunOne, batch_kwargs: list[dict[str, Any]], backend: Backend) -> str:
    """Send the batch's shared prefix once; returns it ("" when none was sent)."""
    texts = [first_request_text(call, kw, backend) for kw in batch_kwargs]
    prefix = shared_prefix([t for t in texts if t])
    if prefix:
        try:
            backend.cache_prefix(prefix)
        except BackendError:
            return ""  # only an optimisation: the programs report real errors themselves
    return prefix


def run_batch(
    trace: RunOne,
    execute: RunOne,
    batch_kwargs: list[dict[str, Any]],
    make_state: Callable[[], ProgramState],
    backend: Backend,
    num_threads: int | str,
    progress_bar: bool,
    use_precache: bool,
    generator_style: bool = False,
) -> Any:
    """States in the order of `batch_kwargs` (a list, or with `generator_style` an iterator
    yielding each as soon as it and every earlier one is done); errors are on each state's
    `.error()`. `trace` runs the bare program function (for the shared prefix), `execute` the
    whole run."""
    batch_kwargs = list(batch_kwargs)
    if use_precache and batch_kwargs:
        precache(trace, batch_kwargs, backend)
    states = [make_state() for _ in batch_kwargs]
    workers = (
        min(max(len(batch_kwargs), 1), MAX_THREADS)
        if num_threads == "auto"
        else max(int(num_threads), 1)
    )
    results = _run_all(execute, states, batch_kwargs, workers, progress_bar)
    return results if generator_style else list(results)


def _run_all(
    execute: RunOne,
    states: list[ProgramState],
    batch_kwargs: list[dict[str, Any]],
    workers: int,
    progress_bar: bool,
) -> Iterator[ProgramState]:
    bar = _progress(len(states)) if progress_bar else None
    with ThreadPoolExecutor(workers, thread_name_prefix="radixgen-batch") as pool:
        futures = [pool.submit(execute, st, kw) for st, kw in zip(states, batch_kwargs)]
        if bar is not None:
            for future in futures:
                future.add_done_callback(lambda _: bar.update(1))
        for state, future in zip(states, futures):
            future.result()
            yield state
    if bar is not None:
        bar.close()


def _progress(total: int) -> Any:
    from tqdm.auto import tqdm  # a dependency of the package; loaded only when asked for

    return tqdm(total=total, desc="run_batch")

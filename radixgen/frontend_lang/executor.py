"""Ordered, asynchronous execution of one state's operations, and the stream of its text.

`s += gen(...)` only queues the operation; a worker thread (started when work arrives, gone
when the queue is empty) runs the state's operations in order. Reading a result (`s["x"]`,
`s.text()`) waits for the queue. So the branches of `s.fork(n)` run in parallel while every
single state stays sequential."""

from __future__ import annotations

import queue
import threading
from collections import deque
from typing import Any, Callable, Iterator

Op = Callable[[], None]


class OpQueue:
    """A state's pending operations. After an operation raises, the rest are skipped and the
    exception is kept in `error` (re-raised by `sync`). `synchronous=True` runs each
    operation inline in `submit` (tracing, tests)."""

    def __init__(self, synchronous: bool = False):
        self.synchronous = synchronous
        self.error: BaseException | None = None
        self._ops: deque[Op] = deque()
        self._busy = False
        self._cond = threading.Condition()

    def submit(self, op: Op) -> None:
        if self.synchronous:
            self._run(op)
            return
        with self._cond:
            self._ops.append(op)
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._drain, name="radixgen-program-state", daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._ops:
                    self._busy = False
                    self._cond.notify_all()
                    return
                op = self._ops.popleft()
            self._run(op)

    def _run(self, op: Op) -> None:
        if self.error is not None:
            return
        try:
            op()
        except BaseException as exc:  # noqa: BLE001 - kept and re-raised in the program's thread
            self.error = exc

    def wait(self) -> None:
        """Block until every submitted operation ran (or was skipped after an error)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)

    def sync(self) -> None:
        """wait(), then raise the first error of the queue, if any."""
        self.wait()
        if self.error is not None:
            raise self.error


_END = object()


class TextStream:
    """Text chunks as a streaming program produces them: `(var_name or None, text, meta)`;
    `meta` is the chunk's own meta_info (its logprobs only) for generated text, else None."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self.error: BaseException | None = None

    def push(
        self, text: str, var_name: str | None = None, meta: dict[str, Any] | None = None
    ) -> None:
        if text:
            self._queue.put((var_name, text, meta))

    def close(self, error: BaseException | None = None) -> None:
        self.error = error
        self._queue.put(_END)

    def chunks(self, var_name: str | None = None, with_meta: bool = False) -> Iterator[Any]:
        """Every chunk (var_name None) or only those generated into `var_name`, as text or
        (with_meta) `(text, meta)`; raises the program's error, if any, after the last chunk."""
        while True:
            item: Any = self._queue.get()
            if item is _END:
                self._queue.put(_END)  # a second iterator also ends
                break
            name, text, meta = item
            if var_name is None or name == var_name:
                yield (text, meta) if with_meta else text
        if self.error is not None:
            raise self.error

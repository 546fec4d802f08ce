"""`@function`: a generation program `def prog(s, **args)` with `run`, `run_batch` and `bind`."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from radixgen.frontend_lang.backend import Backend, as_backend, get_default_backend
from radixgen.frontend_lang.state import ProgramState

# run()'s sampling defaults (SGLang's names); each gen's own arguments override them
DEFAULT_KEYS = ("max_new_tokens", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
                "presence_penalty", "stop", "stop_token_ids", "ignore_eos", "seed")


class Program:
    """A decorated program. `prog.run(**args)` runs it once; calling it with a state first
    (`prog(s, ...)`) runs it inside another program, on that state."""

    def __init__(self, func: Callable[..., Any], bound: dict[str, Any] | None = None):
        self.func = func
        self.bound = dict(bound or {})
        functools.update_wrapper(self, func)

    def bind(self, **kwargs: Any) -> "Program":
        """A copy with some arguments fixed."""
        return Program(self.func, {**self.bound, **kwargs})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], ProgramState):
            return self.func(args[0], *args[1:], **{**self.bound, **kwargs})
        return self.run(*args, **kwargs)

    def run(self, *args: Any, stream: bool = False, backend: Any = None, max_new_tokens: int | None = None,
            temperature: float | None = None, top_p: float | None = None, top_k: int | None = None,
            min_p: float | None = None, frequency_penalty: float | None = None,
            presence_penalty: float | None = None, stop: Any = None, stop_token_ids: Any = None,
            ignore_eos: bool | None = None, seed: int | None = None, **kwargs: Any) -> ProgramState:
        """Run once and return the finished state; an error (a server refusal included) is
        raised. With stream=True the program runs in a thread and the state returns at once:
        read it with `state.text_iter()`."""
        defaults = _defaults(locals())
        state = ProgramState(_backend(backend), defaults, stream=stream)
        call = functools.partial(self.execute, state, args, {**self.bound, **kwargs})
        if stream:
            threading.Thread(target=call, name=f"radixgen-{self.__name__}", daemon=True).start()
            return state
        call(raise_error=True)
        return state

    def execute(self, state: ProgramState, args: tuple, kwargs: dict[str, Any], raise_error: bool = False) -> None:
        """Run the function on `state`, wait for its queued operations, record any error."""
        error: BaseException | None = None
        try:
            state.ret_value = self.func(state, *args, **kwargs)
            state.sync()
        except Exception as exc:  # noqa: BLE001 - kept on the state; raised if asked
            error = exc
        state.finish(error)
        if error is not None and raise_error:
            raise error

    def run_batch(self, batch_kwargs: list[dict[str, Any]], *, num_threads: int | str = "auto",
                  progress_bar: bool = False, backend: Any = None, precache: bool = True,
                  **defaults: Any) -> list[ProgramState]:
        """Run once per kwargs dict, concurrently; returns the states in order. A failing
        program never stops the others: its state's `.error` holds the exception."""
        from radixgen.frontend_lang.batch import run_batch

        unknown = sorted(set(defaults) - set(DEFAULT_KEYS))
        if unknown:
            raise TypeError(f"run_batch got unknown keyword(s): {', '.join(unknown)}")
        return run_batch(self, batch_kwargs, _backend(backend), _defaults(defaults), num_threads,
                         progress_bar, precache)

    def __repr__(self) -> str:
        return f"<radixgen program {self.__name__}>"


def _defaults(values: dict[str, Any]) -> dict[str, Any]:
    out = {k: values[k] for k in DEFAULT_KEYS if values.get(k) is not None}
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    return out


def _backend(backend: Any) -> Backend:
    return as_backend(backend) if backend is not None else get_default_backend()


def function(func: Callable[..., Any] | None = None) -> Any:
    """Decorator: `@function` (or `@function()`) over `def prog(s, ...)`."""
    if func is None:
        return Program
    return Program(func)

"""`@function`: a generation program `def prog(s, **args)` with SGLang's `run`, `run_batch`,
`bind`, `trace` and `cache`."""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable

from radixgen.frontend_lang import batch
from radixgen.frontend_lang.backend import Backend, as_backend, get_default_backend
from radixgen.frontend_lang.state import ProgramState
from radixgen.frontend_lang.tracing import trace_program

# run()'s sampling defaults (SGLang's names); each gen's own arguments override them
DEFAULT_KEYS = (
    "max_new_tokens",
    "min_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "ignore_eos",
    "seed",
)
REQUEST_KEYS = (
    "return_logprob",
    "logprob_start_len",
    "top_logprobs_num",
    "return_text_in_logprobs",
)
RUN_KEYS = (*DEFAULT_KEYS, *REQUEST_KEYS, "n")


class Program:
    """A decorated program. `prog.run(**args)` runs it once; calling it with a state first
    (`prog(s, ...)`) runs it inside another program, on that state."""

    def __init__(
        self,
        func: Callable[..., Any],
        bound: dict[str, Any] | None = None,
        num_api_spec_tokens: int | None = None,
    ):
        if num_api_spec_tokens is not None and (
            not isinstance(num_api_spec_tokens, int) or num_api_spec_tokens < 1
        ):
            raise ValueError("num_api_spec_tokens must be an integer >= 1")
        self.func = func
        self.bound = dict(bound or {})
        self.num_api_spec_tokens = num_api_spec_tokens
        params = list(inspect.signature(func).parameters.values())[1:]
        self.arg_names = [
            p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        self.arg_defaults = [p.default for p in params if p.default is not p.empty]
        functools.update_wrapper(self, func)

    def bind(self, **kwargs: Any) -> "Program":
        """A copy with some arguments fixed."""
        return Program(self.func, {**self.bound, **kwargs}, self.num_api_spec_tokens)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], ProgramState):
            return self.func(args[0], *args[1:], **{**self.bound, **kwargs})
        return self.run(*args, **kwargs)

    def _state(self, backend: Any, options: dict[str, Any], stream: bool = False) -> ProgramState:
        unknown = sorted(set(options) - set(RUN_KEYS))
        if unknown:
            raise TypeError(f"unknown run option(s): {', '.join(unknown)}")
        state = ProgramState(
            _backend(backend),
            _defaults(options),
            stream=stream,
            num_api_spec_tokens=self.num_api_spec_tokens,
        )
        state.request_defaults = {k: options[k] for k in REQUEST_KEYS if options.get(k) is not None}
        state.default_n = options.get("n") or 1
        return state

    def run(
        self,
        *args: Any,
        stream: bool = False,
        backend: Any = None,
        max_new_tokens: int | None = None,
        n: int | None = None,
        stop: Any = None,
        stop_token_ids: Any = None,
        stop_regex: Any = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        ignore_eos: bool | None = None,
        return_logprob: bool | None = None,
        logprob_start_len: int | None = None,
        top_logprobs_num: int | None = None,
        return_text_in_logprobs: bool | None = None,
        min_new_tokens: int | None = None,
        seed: int | None = None,
        use_thread: bool = True,
        **kwargs: Any,
    ) -> ProgramState:
        """Run once and return the finished state; an error (a server refusal included) is
        raised. With stream=True the program runs in a thread and the state returns at once:
        read it with `state.text_iter()`. Options left None take the server's defaults."""
        options = {k: v for k, v in locals().items() if k in RUN_KEYS and v is not None}
        state = self._state(backend, options, stream)
        call = functools.partial(self.execute, state, args, {**self.bound, **kwargs})
        if stream:
            threading.Thread(target=call, name=f"radixgen-{self.__name__}", daemon=True).start()
            return state
        call(raise_error=True)
        return state

    def execute(
        self, state: ProgramState, args: tuple, kwargs: dict[str, Any], raise_error: bool = False
    ) -> None:
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

    def run_batch(
        self,
        batch_kwargs: list[Any],
        *,
        num_threads: int | str = "auto",
        progress_bar: bool = False,
        generator_style: bool = False,
        backend: Any = None,
        precache: bool = True,
        **options: Any,
    ) -> Any:
        """Run once per item, concurrently: a dict of arguments, or a tuple/list of them in
        the function's order. Returns the states in order (with `generator_style`, an
        iterator). A failing program never stops the others: see its state's `.error()`."""
        items = [self._as_kwargs(item) for item in batch_kwargs]
        backend_ = _backend(backend)
        self._state(backend_, options)  # checks the options once, before any request
        return batch.run_batch(
            lambda st, kw: self.func(st, **{**self.bound, **kw}),
            lambda st, kw: self.execute(st, (), {**self.bound, **kw}),
            items,
            lambda: self._state(backend_, options),
            backend_,
            num_threads,
            progress_bar,
            precache,
            generator_style,
        )

    def _as_kwargs(self, item: Any) -> dict[str, Any]:
        if isinstance(item, dict):
            return item
        if not isinstance(item, (list, tuple)):
            raise TypeError(
                f"run_batch items are dicts or tuples of arguments, not {type(item).__name__}"
            )
        free = [name for name in self.arg_names if name not in self.bound]
        required = len(free) - len([n for n in free if n in self._defaults_by_name()])
        if not required <= len(item) <= len(free):
            raise TypeError(
                f"{self.__name__} takes {required} to {len(free)} arguments ({', '.join(free)}); "
                f"a run_batch item has {len(item)}"
            )
        return dict(zip(free, item))

    def _defaults_by_name(self) -> set[str]:
        params = list(inspect.signature(self.func).parameters.values())[1:]
        return {p.name for p in params if p.default is not p.empty}

    def trace(self, *, backend: Any = None, **kwargs: Any) -> ProgramState:
        """Run the program without a server: each gen fills its variable with a placeholder
        `{name}`, each select with its first choice. Shows the text the program builds and
        the variables it sets (a branch that depends on generated values follows the
        placeholder)."""
        return trace_program(self, kwargs, backend)

    def cache(self, backend: Any = None) -> str:
        """Prefill the text the program sends before its first gen (its arguments left out:
        only a program whose prefix does not depend on them gains), so later runs hit the
        radix cache; returns that prefix ("" when there is none)."""
        backend_ = _backend(backend)
        prefix = batch.first_request_text(
            lambda st, kw: self.func(st, **{**self.bound, **kw}), {}, backend_
        )
        if prefix:
            backend_.cache_prefix(prefix)
        return prefix or ""

    def __repr__(self) -> str:
        return f"<radixgen program {self.__name__}>"


def _defaults(values: dict[str, Any]) -> dict[str, Any]:
    out = {k: values[k] for k in DEFAULT_KEYS if values.get(k) is not None}
    for key in ("stop", "stop_regex"):
        if isinstance(out.get(key), str):
            out[key] = [out[key]]
    return out


def _backend(backend: Any) -> Backend:
    return as_backend(backend) if backend is not None else get_default_backend()


def function(func: Callable[..., Any] | None = None, num_api_spec_tokens: int | None = None) -> Any:
    """Decorator: `@function`, `@function()` or `@function(num_api_spec_tokens=N)` over
    `def prog(s, ...)` (see api_speculation.py)."""
    if func is None:
        return lambda f: Program(f, num_api_spec_tokens=num_api_spec_tokens)
    return Program(func, num_api_spec_tokens=num_api_spec_tokens)

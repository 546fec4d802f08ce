"""`ProgramState`: the `s` of `def prog(s, ...)`, with SGLang's methods. Adding to it
(`s += ...`) queues an operation; reading from it waits for the queue."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable, Iterator

from radixgen.frontend_lang import interpreter
from radixgen.frontend_lang.api import role_message
from radixgen.frontend_lang.primitives import (
    Expr,
    RoleBegin,
    RoleEnd,
    VarScopeBegin,
    VarScopeEnd,
    to_expr,
)
from radixgen.frontend_lang.state_data import StateData

JOIN_MODES = ("gather_variable", "concate_and_append", "concat_and_append")


class ProgramState(StateData):
    """One program's state; `ret_value` is what the program function returned."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ret_value: Any = None
        self._error: BaseException | None = None

    # ---- building -----------------------------------------------------------------------------
    def __iadd__(self, other: Any) -> "ProgramState":
        expr = to_expr(other)
        self.ops.submit(lambda: interpreter.execute(self, expr))
        return self

    def _role_common(self, role: str, expr: Any = None) -> Any:
        """With `expr`: add the whole message (and return it). Without: a `with` block."""
        if expr is not None:
            message = role_message(role, expr)
            self.__iadd__(message)
            return message

        @contextlib.contextmanager
        def block() -> Iterator[None]:
            self.__iadd__(RoleBegin(role))
            yield
            self.__iadd__(RoleEnd(role))

        return block()

    def system(self, expr: Any = None) -> Any:
        """`s.system("...")` or `with s.system(): s += "..."`: one system message."""
        return self._role_common("system", expr)

    def user(self, expr: Any = None) -> Any:
        """`s.user("...")` or `with s.user(): s += "..."`: one user message."""
        return self._role_common("user", expr)

    def assistant(self, expr: Any = None) -> Any:
        """`s.assistant(gen("a"))` or `with s.assistant(): s += gen("a")`: one assistant message."""
        return self._role_common("assistant", expr)

    @contextlib.contextmanager
    def var_scope(self, name: str) -> Iterator[None]:
        """`with s.var_scope("x"): s += ...`: variable `x` becomes the text added inside."""
        self.__iadd__(VarScopeBegin(name))
        yield
        self.__iadd__(VarScopeEnd(name))

    def fork(self, size: int = 1, position_ids_offset: Any = None) -> "ForkGroup":
        """`size` copies of this state that continue independently (in parallel). The shared
        text is prefilled once first (a max_new_tokens=0 request), so every branch hits the
        cache. `position_ids_offset` (SGLang's) is accepted and has no effect here."""
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError("fork needs size >= 1")
        self.sync()
        prefix_meta = self.backend.cache_prefix(self.text_) if self.text_ else {}
        return ForkGroup(self, [self._child() for _ in range(size)], prefix_meta)

    @contextlib.contextmanager
    def copy(self, position_ids_offset: Any = None) -> Iterator["ProgramState"]:
        """`with s.copy() as c:` one fork, joined (gather_variable) when the block ends."""
        group = self.fork(1, position_ids_offset)
        try:
            yield group[0]
        finally:
            group.join()

    def _child(self) -> "ProgramState":
        child = ProgramState(
            self.backend, self.defaults, num_api_spec_tokens=self.num_api_spec_tokens
        )
        self.copy_into(child)
        return child

    # ---- reading (each waits for the queued operations) ----------------------------------------
    def sync(self) -> None:
        """Wait for every queued operation; raise the first one's error, if any."""
        self.ops.sync()

    def __getitem__(self, name: str) -> Any:
        self.sync()
        if name not in self.vars:
            raise KeyError(f"no variable {name!r} (have: {', '.join(self.vars) or 'none'})")
        return self.vars[name]

    def get_var(self, name: str) -> Any:
        return self[name]

    def __setitem__(self, name: str, value: Any) -> None:
        """`s["x"] = v`: set a variable (after the queued operations)."""
        self.sync()
        self.set_var(name, value)

    def __contains__(self, name: str) -> bool:
        self.sync()
        return name in self.vars

    def get_meta_info(self, name: str) -> dict[str, Any] | None:
        """The server's meta_info of the request that filled `name` (select: its scores), or
        None for a variable no request filled."""
        self.sync()
        return self.meta.get(name)

    def text(self) -> str:
        self.sync()
        return self.text_

    def messages(self) -> list[dict[str, str]]:
        """The finished chat messages, `[{"role", "content"}]`."""
        self.sync()
        return [dict(m) for m in self.messages_]

    def variables(self) -> dict[str, Any]:
        self.sync()
        return dict(self.vars)

    def error(self) -> BaseException | None:
        """The exception that stopped this program (after `run_batch` or a stream), or None."""
        self.ops.wait()
        return self._error or self.ops.error

    def text_iter(self, var_name: str | None = None) -> Iterator[str]:
        """Text as it is produced (only `var_name`'s, if given). Without `stream=True`: the
        whole text (or variable) once, when the program is done."""
        if self.stream is None:
            return iter([self.text() if var_name is None else self[var_name]])
        return self.stream.chunks(var_name)

    async def text_async_iter(
        self, var_name: str | None = None, return_meta_data: bool = False
    ) -> AsyncIterator[Any]:
        """`text_iter` for asyncio; with `return_meta_data`, `(chunk, meta_info)` pairs whose
        meta_info carries that chunk's own logprobs (streamed gens of `var_name`)."""
        if self.stream is None:
            value = await asyncio.to_thread(
                self.text if var_name is None else self.get_var,
                *(() if var_name is None else (var_name,)),
            )
            yield (
                (value, self.get_meta_info(var_name) if var_name else None)
                if return_meta_data
                else value
            )
            return
        chunks = self.stream.chunks(var_name, with_meta=return_meta_data)
        done = object()
        while (item := await asyncio.to_thread(next, chunks, done)) is not done:
            yield item

    # ---- used by the program runner -----------------------------------------------------------
    def finish(self, error: BaseException | None) -> None:
        """The program returned (or raised `error`): record it and end the text stream."""
        self._error = error
        if self.stream is not None:
            self.stream.close(error)

    def __repr__(self) -> str:
        return f"ProgramState(text={self.text_[-60:]!r}, vars={list(self.vars)})"


class ForkGroup(list):
    """The states `fork` returned; `join` waits for all of them and brings results back."""

    def __init__(
        self, parent: ProgramState, children: list[ProgramState], prefix_meta: dict[str, Any]
    ):
        super().__init__(children)
        self.parent = parent
        self.prefix_meta = prefix_meta  # meta_info of the prefix-pinning request
        self.base_len = len(parent.text_)  # the text every branch started with

    def __iadd__(self, other: Any) -> "ForkGroup":
        """`forks += lambda i: ...` (per branch index), an expression or string (every
        branch), or a list/tuple with one item per branch."""
        items: Callable[[int], Any]
        if isinstance(other, (list, tuple)):
            if len(other) != len(self):
                raise ValueError(f"{len(other)} items for {len(self)} forks")
            items = other.__getitem__
        elif isinstance(other, (Expr, str)):
            items = lambda i: other  # noqa: E731
        elif callable(other):
            items = other
        else:
            raise TypeError(f"cannot add a {type(other).__name__} to forks")
        for i, child in enumerate(self):
            child += items(i)
        return self

    def join(self, mode: str = "gather_variable") -> None:
        """`gather_variable`: each variable a branch set becomes, in the parent, the list of
        every branch's value. `concate_and_append` (SGLang's spelling; `concat_and_append`
        too): the branches' new text is appended to the parent in order. Raises the first
        branch error."""
        if mode not in JOIN_MODES:
            raise ValueError(f"join mode must be one of {', '.join(JOIN_MODES)}")
        for child in self:
            child.sync()
        self.parent.sync()
        if mode != "gather_variable":
            self.parent += "".join(child.text_[self.base_len :] for child in self)
            return
        names = dict.fromkeys(name for child in self for name in child.written)
        for name in names:
            self.parent.set_var(name, [child.vars.get(name) for child in self])

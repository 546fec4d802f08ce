"""`ProgramState`: the `s` of `def prog(s, ...)`. It holds the text so far, the variables that
`gen`/`select` filled, the chat messages, and the queue of operations not yet run."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from radixgen.frontend_lang import interpreter
from radixgen.frontend_lang.backend import Backend
from radixgen.frontend_lang.chat_template import ChatTemplate
from radixgen.frontend_lang.executor import OpQueue, TextStream
from radixgen.frontend_lang.primitives import RoleBegin, RoleEnd, to_expr


class ProgramState:
    """Mutated only by its own operation queue; read through methods that wait for it."""

    def __init__(self, backend: Backend, defaults: dict[str, Any] | None = None, stream: bool = False,
                 synchronous: bool = False):
        self.backend = backend
        self.defaults = dict(defaults or {})  # sampling params every gen starts from
        self.stream = TextStream() if stream else None
        self.ops = OpQueue(synchronous)
        self.text_ = ""
        self.vars: dict[str, Any] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.messages_: list[dict[str, str]] = []
        self.role: str | None = None  # the open chat message, if any
        self.role_start = 0  # where its content starts in text_
        self.written: list[str] = []  # variables set since this state was forked
        self.ret_value: Any = None  # what the program function returned
        self._template: ChatTemplate | None = None
        self._error: BaseException | None = None

    # ---- building -----------------------------------------------------------------------------
    def __iadd__(self, other: Any) -> "ProgramState":
        expr = to_expr(other)
        self.ops.submit(lambda: interpreter.execute(self, expr))
        return self

    def _role_block(self, role: str) -> contextlib.AbstractContextManager:
        @contextlib.contextmanager
        def block() -> Iterator[None]:
            self.__iadd__(RoleBegin(role))
            yield
            self.__iadd__(RoleEnd(role))

        return block()

    def system(self) -> contextlib.AbstractContextManager:
        """`with s.system(): s += "..."`: one system message."""
        return self._role_block("system")

    def user(self) -> contextlib.AbstractContextManager:
        """`with s.user(): s += "..."`: one user message."""
        return self._role_block("user")

    def assistant(self) -> contextlib.AbstractContextManager:
        """`with s.assistant(): s += gen("answer")`: one assistant message."""
        return self._role_block("assistant")

    def fork(self, n: int) -> "ForkGroup":
        """n copies of this state that continue independently (in parallel). The shared text
        is prefilled once first (a max_new_tokens=0 request), so every branch hits the cache."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("fork needs n >= 1")
        self.sync()
        prefix_meta = self.backend.cache_prefix(self.text_) if self.text_ else {}
        return ForkGroup(self, [self._copy() for _ in range(n)], prefix_meta)

    def _copy(self) -> "ProgramState":
        child = ProgramState(self.backend, self.defaults)
        child.text_, child.vars, child.meta = self.text_, dict(self.vars), dict(self.meta)
        child.messages_, child.role, child.role_start = list(self.messages_), self.role, self.role_start
        child._template = self._template
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

    def __contains__(self, name: str) -> bool:
        self.sync()
        return name in self.vars

    def get_meta_info(self, name: str) -> dict[str, Any]:
        """The server's meta_info of the request that filled `name` (select: its scores)."""
        self.sync()
        return self.meta[name]

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

    @property
    def error(self) -> BaseException | None:
        """The exception that stopped this program (after `run_batch`), or None."""
        self.ops.wait()
        return self._error or self.ops.error

    def text_iter(self, var_name: str | None = None) -> Iterator[str]:
        """With `run(stream=True)`: text as it is produced (only `var_name`'s, if given)."""
        if self.stream is None:
            raise RuntimeError("text_iter needs prog.run(..., stream=True)")
        return self.stream.chunks(var_name)

    # ---- used by the interpreter and the program runner ---------------------------------------
    def template(self) -> ChatTemplate:
        if self._template is None:
            self._template = self.backend.chat_template()
        return self._template

    def append(self, text: str, var_name: str | None = None, push: bool = True) -> None:
        self.text_ += text
        if push and self.stream is not None:
            self.stream.push(text, var_name)

    def set_var(self, name: str | None, value: Any, meta: dict[str, Any] | None = None) -> None:
        if name is None:
            return
        self.vars[name] = value
        self.written.append(name)
        if meta is not None:
            self.meta[name] = meta

    def finish(self, error: BaseException | None) -> None:
        """The program returned (or raised `error`): record it and end the text stream."""
        self._error = error
        if self.stream is not None:
            self.stream.close(error)

    def __repr__(self) -> str:
        return f"ProgramState(text={self.text_[-60:]!r}, vars={list(self.vars)})"


class ForkGroup(list):
    """The states `fork` returned; `join` waits for all of them and brings results back."""

    def __init__(self, parent: ProgramState, children: list[ProgramState], prefix_meta: dict[str, Any]):
        super().__init__(children)
        self.parent = parent
        self.prefix_meta = prefix_meta  # meta_info of the prefix-pinning request
        self.base_len = len(parent.text_)  # the text every branch started with

    def join(self, mode: str = "gather_variable") -> None:
        """`gather_variable`: each variable a branch set becomes, in the parent, the list of
        every branch's value. `concat_and_append`: the branches' new text is appended to the
        parent in order. Raises the first branch error."""
        if mode not in ("gather_variable", "concat_and_append"):
            raise ValueError("join mode must be gather_variable or concat_and_append")
        for child in self:
            child.sync()
        self.parent.sync()
        if mode == "concat_and_append":
            self.parent += "".join(child.text_[self.base_len:] for child in self)
            return
        names = dict.fromkeys(name for child in self for name in child.written)
        for name in names:
            self.parent.set_var(name, [child.vars.get(name) for child in self])

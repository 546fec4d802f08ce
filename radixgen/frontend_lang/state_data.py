"""What a program state holds and how the interpreter changes it: the text so far, the
variables `gen`/`select` filled with their meta info, the chat messages, open variable
scopes and the speculative-execution buffers. `state.ProgramState` adds the user-facing
methods on top; the interpreter sees only this class, so neither imports the other."""

from __future__ import annotations

from typing import Any

from radixgen.frontend_lang.backend import Backend
from radixgen.frontend_lang.chat_template import ChatTemplate
from radixgen.frontend_lang.executor import OpQueue, TextStream


class StateData:
    """Mutated only by the state's own operation queue (one thread at a time)."""

    def __init__(
        self,
        backend: Backend,
        defaults: dict[str, Any] | None = None,
        stream: bool = False,
        synchronous: bool = False,
        num_api_spec_tokens: int | None = None,
    ):
        self.backend = backend
        self.defaults = dict(defaults or {})  # sampling params every gen starts from
        self.default_n = 1  # run(n=...): samples of a gen that gives no n
        self.request_defaults: dict[str, Any] = {}  # run()'s logprob fields, under each gen's own
        self.stream = TextStream() if stream else None
        self.ops = OpQueue(synchronous)
        self.num_api_spec_tokens = num_api_spec_tokens
        self.text_ = ""
        self.vars: dict[str, Any] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.messages_: list[dict[str, str]] = []
        self.role: str | None = None  # the open chat message, if any
        self.role_start = 0  # where its content starts in text_
        self.scopes: dict[str, int] = {}  # open var_scope name -> where it starts in text_
        self.written: list[str] = []  # variables set since this state was forked
        self.spec_text = ""  # completion mode: speculated text not yet consumed
        self.spec_format: list[dict[str, Any]] | None = (
            None  # chat mode: the deferred assistant message
        )
        self._template: ChatTemplate | None = None

    def template(self) -> ChatTemplate:
        if self._template is None:
            self._template = self.backend.chat_template()
        return self._template

    def append(
        self,
        text: str,
        var_name: str | None = None,
        push: bool = True,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.text_ += text
        if push and self.stream is not None:
            self.stream.push(text, var_name, meta)

    def set_var(self, name: str | None, value: Any, meta: dict[str, Any] | None = None) -> None:
        if name is None:
            return
        self.vars[name] = value
        self.written.append(name)
        if meta is not None:
            self.meta[name] = meta

    def copy_into(self, child: "StateData") -> None:
        """Give a fresh state this one's text, variables and chat position (fork)."""
        child.text_, child.vars, child.meta = self.text_, dict(self.vars), dict(self.meta)
        child.messages_, child.role, child.role_start = (
            list(self.messages_),
            self.role,
            self.role_start,
        )
        child.scopes, child._template = dict(self.scopes), self._template
        child.request_defaults, child.default_n = dict(self.request_defaults), self.default_n

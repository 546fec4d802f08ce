"""`Program.trace`: a program run against a backend that answers without a model, so its
text and variables show the program's shape (SGLang's tracing, as a plain state)."""

from __future__ import annotations

from typing import Any

from radixgen.frontend_lang.backend import Backend, SelectResult, as_backend, global_config
from radixgen.frontend_lang.chat_template import REGISTRY, ChatTemplate
from radixgen.frontend_lang.state import ProgramState


class PlaceholderBackend(Backend):
    """Every gen answers `{name}` (`{gen}` unnamed), every select its first choice."""

    def __init__(self, template: ChatTemplate):
        self.template = template
        self.names: list[str | None] = []

    def chat_template(self) -> ChatTemplate:
        return self.template

    def _answer(self, text: Any, n: int = 1) -> Any:
        one = {
            "text": "{gen}",
            "output_ids": [],
            "meta_info": {
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cached_tokens": 0,
                "traced": True,
            },
        }
        return one if isinstance(text, str) else [dict(one) for _ in text]

    def generate(self, text, sampling_params, request=None):
        return self._answer(text)

    def generate_stream(self, text, sampling_params, request=None):
        yield "{gen}", self._answer(text)

    def cache_prefix(self, text):
        return {"prompt_tokens": 0, "cached_tokens": 0}

    def select(self, text, choices, unconditional=False):
        entries = [[[0.0, 0]] for _ in choices]
        return SelectResult(
            choices[0],
            [0.0] * len(choices),
            [0.0] * len(choices),
            [0.0] * len(choices),
            [1] * len(choices),
            {"traced": True},
            entries,
            entries if unconditional else None,
        )


class _NamingState(ProgramState):
    """Puts each gen's own name in its placeholder."""

    def set_var(self, name, value, meta=None):
        if isinstance(meta, dict) and meta.get("traced") and value == "{gen}" and name:
            self.text_ = self.text_[: len(self.text_) - len(value)] + "{" + name + "}"
            value = "{" + name + "}"
        super().set_var(name, value, meta)


def trace_program(program: Any, kwargs: dict[str, Any], backend: Any = None) -> ProgramState:
    """Run `program` (a Program) with placeholder answers; returns its state."""
    real = as_backend(backend) if backend is not None else global_config.default_backend
    template = real.chat_template() if real is not None else REGISTRY["plain"]
    state = _NamingState(PlaceholderBackend(template), num_api_spec_tokens=None, synchronous=True)
    program.execute(state, (), {**program.bound, **kwargs}, raise_error=True)
    return state

"""The `@function` DSL, with SGLang's frontend language surface (`import radixgen.frontend_lang
as sgl` runs SGLang programs); see docs/frontend.md.

    import radixgen as rg

    @rg.function
    def qa(s, question):
        s += rg.system("You are terse.")
        s += rg.user(question)
        s += rg.assistant(rg.gen("answer", max_tokens=32))

    rg.set_default_backend(rg.RuntimeEndpoint("http://localhost:30000"))
    print(qa.run(question="Capital of France?")["answer"])

Only `radixgen.core` is imported from the package; the runtime is reached over HTTP."""

from radixgen.frontend_lang.api import (
    REGEX_BOOL,
    REGEX_FLOAT,
    REGEX_INT,
    REGEX_STR,
    assistant,
    assistant_begin,
    assistant_end,
    gen,
    gen_int,
    gen_string,
    image,
    select,
    separate_reasoning,
    system,
    system_begin,
    system_end,
    user,
    user_begin,
    user_end,
    video,
)
from radixgen.frontend_lang.backend import (
    Backend,
    BackendError,
    flush_cache,
    get_default_backend,
    get_server_info,
    global_config,
    set_default_backend,
)
from radixgen.frontend_lang.chat_template import ChatTemplate
from radixgen.frontend_lang.choices import (
    ChoicesDecision,
    ChoicesSamplingMethod,
    greedy_token_selection,
    token_length_normalized,
    unconditional_likelihood_normalized,
)
from radixgen.frontend_lang.endpoint import RuntimeEndpoint
from radixgen.frontend_lang.openai_backend import OpenAI
from radixgen.frontend_lang.program import Program, function
from radixgen.frontend_lang.runtime import Runtime
from radixgen.frontend_lang.state import ForkGroup, ProgramState

ProgramStateGroup = ForkGroup  # SGLang's name for what fork() returns
SglFunction = Program  # SGLang's name for a decorated program

__all__ = [
    "Backend",
    "BackendError",
    "ChatTemplate",
    "ChoicesDecision",
    "ChoicesSamplingMethod",
    "ForkGroup",
    "OpenAI",
    "Program",
    "ProgramState",
    "ProgramStateGroup",
    "REGEX_BOOL",
    "REGEX_FLOAT",
    "REGEX_INT",
    "REGEX_STR",
    "Runtime",
    "RuntimeEndpoint",
    "SglFunction",
    "assistant",
    "assistant_begin",
    "assistant_end",
    "flush_cache",
    "function",
    "gen",
    "gen_int",
    "gen_string",
    "get_default_backend",
    "get_server_info",
    "global_config",
    "greedy_token_selection",
    "image",
    "select",
    "separate_reasoning",
    "set_default_backend",
    "system",
    "system_begin",
    "system_end",
    "token_length_normalized",
    "unconditional_likelihood_normalized",
    "user",
    "user_begin",
    "user_end",
    "video",
]

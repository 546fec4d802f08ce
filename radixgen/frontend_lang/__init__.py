"""The `@function` DSL: generation programs compiled to radix-cache-friendly requests.

    import radixgen as rg

    @rg.function
    def qa(s, question):
        s += rg.system("You are terse.")
        s += rg.user(question)
        s += rg.assistant(rg.gen("answer", max_tokens=32))

    rg.set_default_backend(rg.RuntimeEndpoint("http://localhost:30000"))
    print(qa.run(question="Capital of France?")["answer"])

Only `radixgen.core` is imported from the package; the runtime is reached over HTTP."""

from radixgen.frontend_lang.backend import Backend, BackendError, get_default_backend, set_default_backend
from radixgen.frontend_lang.chat_template import ChatTemplate
from radixgen.frontend_lang.endpoint import RuntimeEndpoint
from radixgen.frontend_lang.primitives import (assistant, assistant_begin, assistant_end, gen, select, system,
                                               system_begin, system_end, user, user_begin, user_end)
from radixgen.frontend_lang.program import Program, function
from radixgen.frontend_lang.runtime import Runtime
from radixgen.frontend_lang.state import ForkGroup, ProgramState

__all__ = ["Backend", "BackendError", "ChatTemplate", "ForkGroup", "Program", "ProgramState", "Runtime",
           "RuntimeEndpoint", "assistant", "assistant_begin", "assistant_end", "function", "gen",
           "get_default_backend", "select", "set_default_backend", "system", "system_begin", "system_end",
           "user", "user_begin", "user_end"]

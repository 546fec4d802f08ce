"""Chat roles as text: each role is a prefix and a suffix around the message content, so a
program's text grows one message at a time and the radix cache sees every earlier turn as a
shared prefix.

Where the markers come from (first that works):
1. the model's own Jinja template: `chat_template` in `/get_model_info` if the server reports
   it, else `tokenizer_config.json` in the reported `model_path` when that folder is readable
   here (a local server, or `Runtime`). The template is rendered with sentinel messages and
   split at the sentinels; templates that do not render one message after another (Llama 2
   folds the system prompt into the first user turn) fall through to 3;
2. `RuntimeEndpoint(chat_template=...)`: a name of the registry below or a ChatTemplate;
3. the registry, by name matching on the model path (`chatml` for SmolLM2/Qwen/Hermes,
   `llama-3`), else `plain`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SENTINEL = {"system": "\x01SYS\x01", "user": "\x01USR\x01", "assistant": "\x01AST\x01"}


@dataclass(frozen=True)
class ChatTemplate:
    """Role markers. `default_system` is text put before a first message that is not a
    system message (the model's default system turn, markers included)."""

    name: str
    role_prefix: dict[str, str]
    role_suffix: dict[str, str]
    default_system: str = ""
    bos: str = ""
    stop: tuple[str, ...] = field(default_factory=tuple)

    def begin(self, role: str, is_first: bool) -> str:
        """The text that opens a `role` message (`is_first`: nothing was written yet)."""
        head = self.bos if is_first else ""
        if is_first and role != "system":
            head += self.default_system
        return head + self.role_prefix[role]

    def end(self, role: str) -> str:
        return self.role_suffix[role]


def _uniform(name: str, prefix: str, suffix: str, stop: tuple[str, ...] = ()) -> ChatTemplate:
    roles = ("system", "user", "assistant")
    return ChatTemplate(
        name, {r: prefix.format(role=r) for r in roles}, {r: suffix for r in roles}, stop=stop
    )


REGISTRY: dict[str, ChatTemplate] = {
    "chatml": _uniform("chatml", "<|im_start|>{role}\n", "<|im_end|>\n", ("<|im_end|>",)),
    "llama-3": ChatTemplate(
        "llama-3",
        {
            r: f"<|start_header_id|>{r}<|end_header_id|>\n\n"
            for r in ("system", "user", "assistant")
        },
        {r: "<|eot_id|>" for r in ("system", "user", "assistant")},
        bos="<|begin_of_text|>",
        stop=("<|eot_id|>",),
    ),
    "plain": ChatTemplate(
        "plain",
        {"system": "", "user": "User: ", "assistant": "Assistant: "},
        {"system": "\n\n", "user": "\n", "assistant": "\n"},
    ),
}

_NAME_HINTS = (
    ("llama-3", "llama-3"),
    ("llama3", "llama-3"),
    ("smollm", "chatml"),
    ("qwen", "chatml"),
    ("hermes", "chatml"),
    ("chatml", "chatml"),
)


def template_for_name(model_name: str) -> ChatTemplate:
    """Registry template by substring of a model path or name; `plain` if none matches."""
    lowered = model_name.lower()
    for hint, name in _NAME_HINTS:
        if hint in lowered:
            return REGISTRY[name]
    return REGISTRY["plain"]


def resolve_template(
    model_info: dict[str, Any], override: "str | ChatTemplate | None" = None
) -> ChatTemplate:
    """The template for a server, from its /get_model_info answer (see the module docstring)."""
    if isinstance(override, ChatTemplate):
        return override
    if isinstance(override, str):
        if override not in REGISTRY:
            raise ValueError(f"unknown chat template {override!r}; known: {', '.join(REGISTRY)}")
        return REGISTRY[override]
    jinja, bos = model_info.get("chat_template"), model_info.get("bos_token") or ""
    if not jinja:
        jinja, bos = _local_template(model_info.get("model_path") or "")
    derived = from_jinja(jinja, bos) if jinja else None
    names = f"{model_info.get('model_path', '')} {model_info.get('served_model_name', '')}"
    return derived or template_for_name(names)


def _local_template(model_path: str) -> tuple[str | None, str]:
    path = Path(model_path) / "tokenizer_config.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, ""
    bos = cfg.get("bos_token") or ""
    if isinstance(bos, dict):
        bos = bos.get("content", "")
    template = cfg.get("chat_template")
    return (template if isinstance(template, str) else None), bos


def from_jinja(template: str, bos_token: str = "") -> ChatTemplate | None:
    """Role markers of an HF Jinja chat template, or None when it cannot be split per message."""
    try:
        render = _renderer(template, bos_token)
        order = ("system", "user", "assistant")
        msgs = [{"role": r, "content": _SENTINEL[r]} for r in order]
        pieces, done = {}, ""
        for i, role in enumerate(order):
            full = render(msgs[: i + 1], False)
            if not full.startswith(done):
                return None
            pieces[role] = full[len(done) :]
            done = full
        gen_prompt = render(msgs[:2], True)[len(render(msgs[:2], False)) :]
        alone = render([msgs[1]], False)
    except Exception:  # noqa: BLE001 - any template error means: use the registry
        return None
    return _split(pieces, gen_prompt, alone, bos_token if "bos_token" in template else "")


def _split(pieces: dict[str, str], gen_prompt: str, alone: str, bos: str) -> ChatTemplate | None:
    prefix, suffix = {}, {}
    for role, text in pieces.items():
        before, sep, after = text.partition(_SENTINEL[role])
        if not sep:
            return None
        prefix[role], suffix[role] = before, after
    lead = bos if bos and prefix["system"].startswith(bos) else ""
    prefix["system"] = prefix["system"][len(lead) :]
    if gen_prompt:
        prefix["assistant"] = gen_prompt
    head = alone.partition(_SENTINEL["user"])[0][len(lead) :]
    if not head.endswith(prefix["user"]):
        return None
    default_system = head[: len(head) - len(prefix["user"])]
    stop = tuple(s for s in {suffix["assistant"].strip()} if s)
    return ChatTemplate("model", prefix, suffix, default_system, lead, stop)


def _renderer(template: str, bos_token: str):
    import jinja2.sandbox  # transformers' dependency; loaded only when a template is derived

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    compiled = env.from_string(template)

    def render(messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return compiled.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token="",
        )

    return render

"""Structured outputs for /v1/chat/completions: `response_format` and `tools` / `tool_choice`
become grammar constraints, and tool-call outputs are parsed back into `tool_calls`.

Tool calls are written as JSON: `[{"name": ..., "arguments": {...}}, ...]`, the arguments
constrained by each tool's `parameters` schema.
- tool_choice "required": the whole output is such a list (one item if parallel_tool_calls is
  false); a named function: one call object `{"name": <that function>, "arguments": {...}}`.
- "auto": the output is either non-empty plain text (not starting with "<") or
  `<tool_call>` + the list + `</tool_call>`; only the call part is constrained.
- "none" (or no tools): plain text.
Tool descriptions go to the chat template's `tools` argument when the template uses it, else
into a system message that explains the call format.
"""

from __future__ import annotations

import json
import re
from typing import Any

from radixgen.core import Constraint
from radixgen.grammar.schema.refs import map_refs
from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.protocol import ChatCompletionRequest, ToolCall
from radixgen.runtime.server.tool_calls import TOOL_CLOSE, TOOL_OPEN, ToolCallReader


def response_constraint(body: ChatCompletionRequest) -> Constraint | None:
    """The constraint `response_format` asks for (json_object / json_schema), or None."""
    fmt = body.response_format
    if fmt is None or fmt.get("type") == "text":
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return Constraint("json_schema", {"type": "object"})
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name", ""), str):
            raise invalid(
                "response_format.json_schema must be an object with a name and a schema",
                "response_format.json_schema",
            )
        schema = spec.get("schema", {"type": "object"})
        if not isinstance(schema, dict):
            raise invalid(
                "response_format.json_schema.schema must be a JSON object",
                "response_format.json_schema",
            )
        return Constraint("json_schema", schema)
    raise invalid(
        f"response_format type must be text, json_object or json_schema, got {kind!r}",
        "response_format.type",
    )


def checked_tools(body: ChatCompletionRequest) -> dict[str, dict[str, Any]]:
    """name -> parameters schema of the request's tools (400 on malformed ones)."""
    tools: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(body.tools or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise invalid('each tool must be {"type": "function", "function": {...}}', f"tools.{i}")
        name, params = fn.get("name"), fn.get("parameters", {"type": "object"})
        if not isinstance(name, str) or not name or name in tools:
            raise invalid("each function needs a unique non-empty name", f"tools.{i}.function.name")
        if not isinstance(params, dict):
            raise invalid(
                "function parameters must be a JSON schema object", f"tools.{i}.function.parameters"
            )
        tools[name] = params
    return tools


def tool_mode(body: ChatCompletionRequest, tools: dict[str, dict]) -> str | None:
    """None (no tools in play), "auto", "required", or the name of the forced function."""
    choice = body.tool_choice
    if not tools or choice == "none":
        if isinstance(choice, dict) or choice not in (None, "none"):
            raise invalid("tool_choice needs tools", "tool_choice")
        return None
    if choice in (None, "auto", "required"):
        return choice or "auto"
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if name not in tools:
            raise invalid(f"tool_choice names {name!r}, which is not in tools", "tool_choice")
        return name
    raise invalid(
        'tool_choice must be "none", "auto", "required" or {"type": "function", ...}', "tool_choice"
    )


def tool_constraint(mode: str | None, tools: dict[str, dict], parallel: bool) -> Constraint | None:
    """The constraint of a tool mode: the named function's call, a list of calls ("required"),
    or free text or calls ("auto"). The chat handler checks it like any constraint
    (`TokenizerManager.check_constraints`), its errors worded by `tool_schema_error`."""
    if mode is None:
        return None
    defs, arguments = _hoisted(tools)
    if mode not in ("auto", "required"):
        return Constraint(
            "json_schema", {**_draft(tools), **_call_schema(mode, arguments[mode]), "$defs": defs}
        )
    calls = {
        **_draft(tools),
        "type": "array",
        "items": {"anyOf": [_call_schema(n, a) for n, a in arguments.items()]},
        "minItems": 1,
        **({} if parallel else {"maxItems": 1}),
        "$defs": defs,
    }
    if len(tools) == 1:
        calls["items"] = calls["items"]["anyOf"][0]
    if mode == "required":
        return Constraint("json_schema", calls)
    return Constraint(
        "tool_calls",
        json.dumps(
            {"schema": calls, "open": TOOL_OPEN, "close": TOOL_CLOSE}, separators=(",", ":")
        ),
    )


def tool_schema_error(message: str) -> str:
    """A grammar error about the call schema, with the hoisted places named as the request does:
    "$.$defs.tool3.properties.x" -> "tools[3].function.parameters.properties.x"."""
    return re.sub(
        r"\$\.\$defs\.tool(\d+)(?:-(\$defs|definitions)-)?",
        lambda m: f"tools[{m[1]}].function.parameters" + (f".{m[2]}." if m[2] else ""),
        message,
    )


def _call_schema(name: str, arguments: dict) -> dict:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": arguments},
        "required": ["name", "arguments"],
    }


def _hoisted(tools: dict[str, dict]) -> tuple[dict, dict]:
    """(root $defs, name -> arguments schema) for one schema over all tools. Each parameters
    schema becomes the definition `tool<i>` and its own $defs / definitions (pydantic's nested
    models) `tool<i>-<group>-<name>`, with its local references rewritten to match ("#" is the
    parameters schema itself), so references resolve wherever the call schema puts them."""
    defs, arguments = {}, {}
    for i, (name, params) in enumerate(tools.items()):
        key = f"tool{i}"
        groups = {g: params[g] for g in ("$defs", "definitions") if isinstance(params.get(g), dict)}
        defs[key] = _relocated({k: v for k, v in params.items() if k not in groups}, key, groups)
        for group, members in groups.items():
            for member, schema in members.items():
                defs[f"{key}-{group}-{member}"] = _relocated(schema, key, groups)
        arguments[name] = {"$ref": f"#/$defs/{key}"}
    return defs, arguments


def _draft(tools: dict[str, dict]) -> dict:
    """{"$schema": ...} when every parameters schema declares the same draft (its rules, e.g.
    draft 7's tuple items, then apply to the whole call schema), else {}."""
    drafts = {params.get("$schema") for params in tools.values()}
    return {"$schema": drafts.pop()} if len(drafts) == 1 and None not in drafts else {}


def _relocated(node: Any, key: str, groups: dict) -> Any:
    """A schema of tool `key` with its local references rewritten for `_hoisted`."""
    return map_refs(node, lambda ref: _moved_ref(ref, key, groups))


def _moved_ref(ref: str, key: str, groups: dict) -> str:
    if ref != "#" and not ref.startswith("#/"):
        return ref  # an anchor: the grammar refuses it by name
    parts = ref[1:].split("/")
    if len(parts) >= 3 and parts[0] == "" and parts[1] in groups:
        return "/".join(["#", "$defs", f"{key}-{parts[1]}-{parts[2]}", *parts[3:]])
    return f"#/$defs/{key}{ref[1:]}"


def tools_system_prompt(body: ChatCompletionRequest) -> str:
    """Tool descriptions and the call format, for templates without tool support."""
    specs = json.dumps([t["function"] for t in body.tools], indent=None)
    return (
        "You can call these functions:\n" + specs + "\nTo call functions, answer with "
        f'{TOOL_OPEN}[{{"name": <function name>, "arguments": <arguments object>}}]{TOOL_CLOSE}.'
    )


def parse_tool_calls(text: str, mode: str | None) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(content, tool_calls) of a finished output; tool_calls None when it holds no call."""
    if mode is None:
        return text, None
    reader = ToolCallReader(mode)
    reader.feed(text)
    return reader.result()  # the text, if cut short (max_tokens or a stop string)


def render_tool_history(content: str | None, tool_calls: list[ToolCall], param: str) -> str:
    """An assistant message's earlier tool calls, written in the call format."""
    calls = []
    for i, call in enumerate(tool_calls):
        try:
            args = json.loads(call.function.arguments)
        except json.JSONDecodeError:
            raise invalid(
                "tool_calls arguments must be a JSON object written as a string",
                f"{param}.{i}.function.arguments",
            ) from None
        calls.append({"name": call.function.name, "arguments": args})
    return (content or "") + TOOL_OPEN + json.dumps(calls) + TOOL_CLOSE

"""POST /v1/chat/completions: messages through the tokenizer's chat template (off the event
loop); n samples share the prompt's KV through the radix tree; SSE `chat.completion.chunk`
streaming, tool calls as deltas (the name, then argument fragments as they are generated)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request

from radixgen.core import Constraint
from radixgen.runtime.native_output import finite
from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import (
    ServerState,
    body_schema,
    checked_rids,
    client_gone,
    collect,
    json_body,
    n_params,
    request_rids,
    server_state,
    sse,
)
from radixgen.runtime.server.openai_common import (
    check_common,
    field_constraint,
    finish_reason,
    response_metadata,
    sampling_dict,
    usage,
)
from radixgen.runtime.server.openai_tools import (
    checked_tools,
    parse_tool_calls,
    render_tool_history,
    response_constraint,
    tool_constraint,
    tool_mode,
    tool_schema_error,
    tools_system_prompt,
)
from radixgen.runtime.server.protocol import ChatCompletionRequest, ChatMessage, MediaPart
from radixgen.runtime.server.request_group import ReqState, RequestGroup
from radixgen.runtime.server.tool_calls import ToolCallReader

router = APIRouter()


@router.post("/v1/chat/completions", openapi_extra=body_schema(ChatCompletionRequest))
async def chat_completions(
    request: Request, body: ChatCompletionRequest = Depends(json_body(ChatCompletionRequest))
) -> Any:
    """OpenAI chat completions; n samples share the prompt's KV."""
    st = server_state(request)
    adapter = _check_chat(st, body)
    tools = checked_tools(body)
    mode = tool_mode(body, tools)
    constraint, constraint_param = await asyncio.to_thread(
        _constraint, body, tools, mode
    )  # may dump a large schema
    tools_prompt = tools_system_prompt(body) if mode else None
    ids = await st.tm.off_loop(
        prompt_ids, st, body.messages, tools_prompt, body.continue_final_message
    )
    max_new = (
        body.max_completion_tokens or body.max_tokens or st.tm.limits.max_context_len - len(ids)
    )
    st.tm.check_prompt(ids, max_new, "messages")
    fields = sampling_dict(body, max_new)
    fields.update(return_logprob=body.logprobs, top_logprobs_num=body.top_logprobs or 0)
    if constraint is not None:
        fields[constraint.kind] = constraint.spec
    params = await asyncio.to_thread(n_params, fields, body.n)  # a large schema parses off the loop
    await st.tm.check_constraints(params, constraint_param, tool_schema_error if mode else None)
    rids = checked_rids(st, request_rids(body.rid, body.n), body.n)
    group = RequestGroup(st.tm, [(ids, p) for p in params], rids, adapter)
    group.start()
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "created": int(time.time()),
        "model": body.model,
        "system_fingerprint": st.system_fingerprint,
    }
    if body.stream:
        chunks = _chunks(st, body, group, head) if mode is None else _tool_chunks(group, head, mode)
        return sse(chunks, group)
    states = await collect(request, group)
    if states is None:
        return client_gone()
    choices = []
    for s in states:
        message, reason = _message(s, mode)
        choices.append(
            {
                "index": s.index,
                "message": message,
                "logprobs": _logprobs(st, s, 0, body.logprobs),
                "finish_reason": reason,
            }
        )
    return {
        **head,
        "object": "chat.completion",
        "choices": choices,
        "usage": usage(states, body.n),
        "metadata": response_metadata(states),
    }


def _constraint(
    body: ChatCompletionRequest, tools: dict, mode: str | None
) -> tuple[Constraint | None, str]:
    """The output's constraint and the field it came from; 400 when two fields ask for one."""
    response, (field, field_name) = response_constraint(body), field_constraint(body)
    if response is not None and mode is not None:
        raise invalid(
            'response_format cannot be combined with tools; use tool_choice "none"',
            "response_format",
            "unsupported_parameter",
        )
    if field is not None and (response is not None or mode is not None):
        raise invalid(
            f"{field_name} cannot be combined with {'tools' if mode else 'response_format'}",
            "tools" if mode else "response_format",
            "unsupported_parameter",
        )
    if field is not None:
        return field, field_name
    if mode is not None:
        return tool_constraint(mode, tools, body.parallel_tool_calls is not False), "tools"
    return response, "response_format"


def _message(s: ReqState, mode: str | None) -> tuple[dict[str, Any], str | None]:
    """The assistant message of a finished output and its finish reason."""
    reason = finish_reason(s)
    content, calls = parse_tool_calls(s.text, mode)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
        return message, "tool_calls"
    return message, reason


async def _tool_chunks(
    group: RequestGroup, head: dict[str, Any], mode: str
) -> AsyncIterator[dict[str, Any]]:
    """With tools: a role chunk per choice, then content deltas, or per call a delta with its
    id and name and then argument fragments, as the tokens arrive; finish_reason "tool_calls"
    on a choice's last chunk when it called."""
    head = {**head, "object": "chat.completion.chunk"}
    readers = {s.rid: ToolCallReader(mode) for s in group.states}
    for s in group.states:
        yield _chunk(head, s.index, {"role": "assistant", "content": None})
    async for s, out in group:
        reader = readers[s.rid]
        for delta in reader.feed(out.text):
            yield _chunk(head, s.index, delta)
        if out.finish is None:
            continue
        reason = finish_reason(s)
        if reader.calls and reader.complete:
            reason = "tool_calls"
        elif reader.kind == "calls" and not reader.calls:  # cut short before a call began
            yield _chunk(head, s.index, {"content": reader.text})
        yield _chunk(head, s.index, {}, reason)


def _chunk(
    head: dict[str, Any], index: int, delta: dict[str, Any], reason: str | None = None
) -> dict[str, Any]:
    return {
        **head,
        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}],
    }


def _check_chat(st: ServerState, body: ChatCompletionRequest) -> str | None:
    """The LoRA adapter `model` names; 400/404 for what cannot be served."""
    adapter = check_common(st, body)
    if body.top_logprobs and not body.logprobs:
        raise invalid("top_logprobs needs logprobs to be true", "top_logprobs")
    if body.continue_final_message and body.messages[-1].role != "assistant":
        raise invalid(
            "continue_final_message needs the last message to be the assistant's",
            "continue_final_message",
        )
    for i, msg in enumerate(body.messages):
        param = f"messages.{i}"
        if msg.tool_calls and msg.role != "assistant":
            raise invalid("only assistant messages carry tool_calls", f"{param}.tool_calls")
        if msg.content is None and msg.role != "assistant":
            raise invalid(f"a {msg.role} message needs content", f"{param}.content")
        if msg.role == "tool" and not msg.tool_call_id:
            raise invalid(
                "a tool message needs the tool_call_id of the call it answers",
                f"{param}.tool_call_id",
            )
        for j, part in enumerate(msg.content if isinstance(msg.content, list) else ()):
            if isinstance(part, MediaPart):
                raise invalid(
                    f"{part.type} content parts are not supported: this model reads text only",
                    f"{param}.content.{j}",
                    "unsupported_content",
                )
    return adapter


def prompt_ids(
    st: ServerState,
    messages: list[ChatMessage],
    tools_prompt: str | None = None,
    continue_final: bool = False,
) -> list[int]:
    """Blocking (run it off the event loop): prompt token ids of the conversation, ending with
    the assistant's turn opened (or, with `continue_final`, inside the last assistant message,
    left open for the model to continue); `tools_prompt` joins the system message."""
    tokenizer = st.tm.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise invalid("this model has no chat template; use /v1/completions", "messages")
    convo = [_template_entry(msg, f"messages.{i}.tool_calls") for i, msg in enumerate(messages)]
    if tools_prompt:
        if convo and convo[0]["role"] == "system":
            convo[0]["content"] = convo[0]["content"] + "\n\n" + tools_prompt
        else:
            convo.insert(0, {"role": "system", "content": tools_prompt})
    try:
        text = tokenizer.apply_chat_template(
            convo,
            add_generation_prompt=not continue_final,
            continue_final_message=continue_final,
            tokenize=False,
        )
    except Exception as exc:  # noqa: BLE001 - the template raises on conversations it rejects
        raise invalid(f"the chat template rejected these messages: {exc}", "messages") from None
    return st.tm.encode_checked([text], "messages")[
        0
    ]  # as tokenize=True does: no special tokens added


def _template_entry(msg: ChatMessage, param: str) -> dict[str, Any]:
    content = (
        msg.content
        if isinstance(msg.content, str) or msg.content is None
        else "".join(part.text for part in msg.content)
    )
    if msg.tool_calls:
        content = render_tool_history(content, msg.tool_calls, param)
    entry = {"role": "system" if msg.role == "developer" else msg.role, "content": content or ""}
    entry.update({k: v for k, v in (("name", msg.name), ("tool_call_id", msg.tool_call_id)) if v})
    return entry


def _logprobs(st: ServerState, s: ReqState, start: int, wanted: bool) -> dict[str, Any] | None:
    """OpenAI chat logprobs of the output tokens from `start` on."""
    if not wanted:
        return None
    content = []
    for i in range(start, len(s.logprobs)):
        entry = _token_entry(st, s.output_ids[i], s.logprobs[i])
        tops = s.top_logprobs[i] if i < len(s.top_logprobs) else []
        entry["top_logprobs"] = [_token_entry(st, t, lp) for t, lp in tops]
        content.append(entry)
    return {"content": content}


def _token_entry(st: ServerState, token_id: int, logprob: float) -> dict[str, Any]:
    text = st.token_text(token_id)
    return {"token": text, "logprob": finite(logprob), "bytes": list(text.encode("utf-8"))}


async def _chunks(
    st: ServerState, body: ChatCompletionRequest, group: RequestGroup, head: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """Role chunk per choice, then content deltas (finish_reason on each choice's last),
    then the usage chunk if asked for."""
    head = {**head, "object": "chat.completion.chunk"}
    with_usage = body.stream_options is not None and body.stream_options.include_usage
    extra = {"usage": None} if with_usage else {}
    for s in group.states:
        yield {
            **head,
            "choices": [
                {
                    "index": s.index,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            **extra,
        }
    seen = {s.rid: 0 for s in group.states}
    async for s, out in group:
        start, seen[s.rid] = seen[s.rid], len(s.logprobs)
        if not (out.text or out.finish or (body.logprobs and seen[s.rid] > start)):
            continue
        choice = {
            "index": s.index,
            "delta": {"content": out.text} if out.text else {},
            "logprobs": _logprobs(st, s, start, body.logprobs),
            "finish_reason": finish_reason(s),
        }
        yield {**head, "choices": [choice], **extra}
    if with_usage:
        yield {**head, "choices": [], "usage": usage(group.states, body.n)}

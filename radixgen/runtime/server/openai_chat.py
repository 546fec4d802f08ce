"""POST /v1/chat/completions: messages through the tokenizer's chat template; n samples share
the prompt's KV through the radix tree; SSE `chat.completion.chunk` streaming."""

from __future__ import annotations

import time
import uuid
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request

from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import (ServerState, client_gone, collect, finite, json_body,
                                                 server_state, sse)
from radixgen.runtime.server.openai_common import check_common, finish_reason, n_params, sampling_dict, usage
from radixgen.runtime.server.openai_tools import (checked_tools, parse_tool_calls, render_tool_history,
                                                  response_constraint, tool_constraint, tool_mode,
                                                  tool_schema_error, tools_system_prompt)
from radixgen.runtime.server.protocol import ChatCompletionRequest, ChatMessage
from radixgen.runtime.server.request_group import ReqState, RequestGroup

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(request: Request,
                           body: ChatCompletionRequest = Depends(json_body(ChatCompletionRequest))) -> Any:
    """OpenAI chat completions; n samples share the prompt's KV."""
    st = server_state(request)
    _check_chat(st, body)
    tools = checked_tools(body)
    mode = tool_mode(body, tools)
    constraint = _constraint(body, tools, mode)
    ids = apply_chat_template(st, body.messages, tools_system_prompt(body) if mode else None)
    max_new = body.max_completion_tokens or body.max_tokens or st.tm.limits.max_context_len - len(ids)
    st.tm.check_prompt(ids, max_new, "messages")
    fields = sampling_dict(body, max_new)
    fields.update(return_logprob=body.logprobs, top_logprobs_num=body.top_logprobs or 0)
    if constraint is not None:
        fields[constraint.kind] = constraint.spec
    params = n_params(fields, body.n)
    await st.tm.check_constraints(params, "tools" if mode else "response_format", tool_schema_error if mode else None)
    group = RequestGroup(st.tm, [(ids, p) for p in params])
    group.start()
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": body.model}
    if body.stream:
        chunks = _chunks(st, body, group, head) if mode is None else _tool_chunks(group, head, mode)
        return sse(chunks, group)
    states = await collect(request, group)
    if states is None:
        return client_gone()
    choices = []
    for s in states:
        message, reason = _message(s, mode)
        choices.append({"index": s.index, "message": message, "logprobs": _logprobs(st, s, 0, body.logprobs),
                        "finish_reason": reason})
    return {**head, "object": "chat.completion", "choices": choices, "usage": usage(states, body.n)}


def _constraint(body: ChatCompletionRequest, tools: dict, mode: str | None):
    response = response_constraint(body)
    if response is not None and mode is not None:
        raise invalid("response_format cannot be combined with tools; use tool_choice \"none\"",
                      "response_format", "unsupported_parameter")
    return response or tool_constraint(mode, tools, body.parallel_tool_calls is not False)


def _message(s: ReqState, mode: str | None) -> tuple[dict[str, Any], str | None]:
    """The assistant message of a finished output and its finish reason."""
    content, calls = parse_tool_calls(s.text, mode)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
        return message, "tool_calls"
    return message, finish_reason(s)


async def _tool_chunks(group: RequestGroup, head: dict[str, Any], mode: str) -> AsyncIterator[dict[str, Any]]:
    """With tools, each choice's output is sent once it is complete: as content, or as
    tool-call deltas (one per call, arguments whole)."""
    head = {**head, "object": "chat.completion.chunk"}
    async for s, out in group:
        if out.finish is None:
            continue
        message, reason = _message(s, mode)
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        else:
            delta["content"] = message["content"]
        yield {**head, "choices": [{"index": s.index, "delta": delta, "logprobs": None, "finish_reason": reason}]}


def _check_chat(st: ServerState, body: ChatCompletionRequest) -> None:
    check_common(st, body)
    if body.top_logprobs and not body.logprobs:
        raise invalid("top_logprobs needs logprobs to be true", "top_logprobs")
    for i, msg in enumerate(body.messages):
        if msg.tool_calls and msg.role != "assistant":
            raise invalid("only assistant messages carry tool_calls", f"messages.{i}.tool_calls")
        if msg.content is None and msg.role != "assistant":
            raise invalid(f"a {msg.role} message needs content", f"messages.{i}.content")


def apply_chat_template(st: ServerState, messages: list[ChatMessage], tools_prompt: str | None = None) -> list[int]:
    """Prompt token ids of the conversation, ending with the assistant's turn opened;
    `tools_prompt` joins the system message."""
    tokenizer = st.tm.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise invalid("this model has no chat template; use /v1/completions", "messages")
    convo = []
    for msg in messages:
        content = msg.content if isinstance(msg.content, str) or msg.content is None else \
            "".join(part.text for part in msg.content)
        if msg.tool_calls:
            content = render_tool_history({"content": content}, msg.tool_calls)
        entry = {"role": "system" if msg.role == "developer" else msg.role, "content": content or ""}
        entry.update({k: v for k, v in (("name", msg.name), ("tool_call_id", msg.tool_call_id)) if v})
        convo.append(entry)
    if tools_prompt:
        if convo and convo[0]["role"] == "system":
            convo[0]["content"] = convo[0]["content"] + "\n\n" + tools_prompt
        else:
            convo.insert(0, {"role": "system", "content": tools_prompt})
    try:
        out = tokenizer.apply_chat_template(convo, add_generation_prompt=True, tokenize=True)
    except Exception as exc:  # noqa: BLE001 - the template raises on conversations it rejects
        raise invalid(f"the chat template rejected these messages: {exc}", "messages") from None
    ids = out["input_ids"] if hasattr(out, "keys") else out
    return [int(t) for t in ids]


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


async def _chunks(st: ServerState, body: ChatCompletionRequest, group: RequestGroup,
                  head: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """Role chunk per choice, then content deltas (finish_reason on each choice's last),
    then the usage chunk if asked for."""
    head = {**head, "object": "chat.completion.chunk"}
    with_usage = body.stream_options is not None and body.stream_options.include_usage
    extra = {"usage": None} if with_usage else {}
    for s in group.states:
        yield {**head, "choices": [{"index": s.index, "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None, "finish_reason": None}], **extra}
    seen = {s.rid: 0 for s in group.states}
    async for s, out in group:
        start, seen[s.rid] = seen[s.rid], len(s.logprobs)
        if not (out.text or out.finish or (body.logprobs and seen[s.rid] > start)):
            continue
        choice = {"index": s.index, "delta": {"content": out.text} if out.text else {},
                  "logprobs": _logprobs(st, s, start, body.logprobs), "finish_reason": finish_reason(s)}
        yield {**head, "choices": [choice], **extra}
    if with_usage:
        yield {**head, "choices": [], "usage": usage(group.states, body.n)}

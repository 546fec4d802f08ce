"""Tool calls read out of an output as it is generated, in the call format of openai_tools.py:
a JSON list of `{"name": ..., "arguments": {...}}` objects (one object for a named function),
after `<tool_call>` in "auto" mode, where text not starting with "<" is plain content.

`ToolCallReader.feed` takes text deltas and returns OpenAI stream deltas: content as it comes,
and per call first `{"index", "id", "type", "function": {"name", "arguments": ""}}` once its
name is complete, then argument fragments as their characters arrive. The arguments are the
model's own JSON text, so the fragments of a stream add up to what a non-stream response
holds. One pass over each character (the reader keeps its place between feeds).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"


class ToolCallReader:
    """Reads one choice's output; `mode` is "auto", "required" or the forced function's name."""

    def __init__(self, mode: str):
        self.call_depth = 1 if mode not in ("auto", "required") else 2  # nesting of a call object
        self.kind: str | None = None if mode == "auto" else "calls"  # "text" or "calls" once known
        self.skip = len(TOOL_OPEN) if mode == "auto" else 0  # characters before the JSON
        self.text = ""
        self.calls: list[dict[str, Any]] = []
        self.complete = False  # the JSON value closed
        self._pos = 0  # next character of `text` to read
        self._stack: list[str] = []
        self._in_string = self._escape = False
        self._key = self._key_start = (
            None  # the call object's key being read / where its string starts
        )
        self._value_start: int | None = None  # where the call object's current value starts
        self._sent_args = 0  # characters of the current call's arguments sent

    def feed(self, delta: str) -> list[dict[str, Any]]:
        """Stream deltas (`{"content": ...}` or `{"tool_calls": [...]}`) for `delta`."""
        self.text += delta
        if self.kind is None and self.text:
            self.kind = "calls" if self.text.startswith("<") else "text"
        if self.kind == "text":
            return [{"content": delta}] if delta else []
        out: list[dict[str, Any]] = []
        while self._pos < len(self.text) and not self.complete:
            if self._pos >= self.skip:
                self._read(self._pos, out)
            self._pos += 1
        self._send_arguments(out)
        return out

    def result(self) -> tuple[str | None, list[dict[str, Any]] | None]:
        """(content, tool_calls) of the whole output: the calls if the JSON closed, else the
        text (an output cut short)."""
        if self.kind != "calls" or not self.complete or any(c["name"] is None for c in self.calls):
            return self.text, None
        return None, [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in self.calls
        ]

    # ---- one character at a time --------------------------------------------------------
    def _read(self, pos: int, out: list) -> None:
        ch = self.text[pos]
        if self._in_string:
            if self._escape:
                self._escape = False
            elif ch == "\\":
                self._escape = True
            elif ch == '"':
                self._in_string = False
                self._string_closed(pos, out)
            return
        at_call = len(self._stack) == self.call_depth
        if ch == '"':
            self._in_string = True
            if at_call and self._value_start is None:
                self._key_start = pos
        elif ch in "{[":
            self._stack.append(ch)
            if len(self._stack) == self.call_depth and ch == "{":
                self.calls.append(
                    {
                        "id": f"call_{uuid.uuid4().hex[:24]}",
                        "name": None,
                        "arguments": "",
                        "sent": False,
                    }
                )
        elif ch in "}]":
            if at_call:
                self._value_closed(pos, out)
            self._stack.pop()
            self.complete = not self._stack
        elif at_call and ch == ",":
            self._value_closed(pos, out)
        elif at_call and ch == ":":
            self._value_start = pos + 1

    def _string_closed(self, pos: int, out: list) -> None:
        if len(self._stack) != self.call_depth:
            return
        if self._value_start is None:  # a key of the call object
            self._key = json.loads(self.text[self._key_start : pos + 1])
        elif self._key == "name":
            self.calls[-1]["name"] = json.loads(self.text[self._value_start : pos + 1].strip())
            self._announce(out)

    def _value_closed(self, pos: int, out: list) -> None:
        """The call object's current value ends at `pos` (a comma or the object's close)."""
        if self._value_start is not None and self._key == "arguments":
            self.calls[-1]["arguments"] = self.text[self._value_start : pos].strip()
            self._send_arguments(out, final=True)
        self._key = self._value_start = None

    # ---- stream deltas --------------------------------------------------------------------
    def _announce(self, out: list) -> None:
        call = self.calls[-1]
        call["sent"] = True
        out.append(
            {
                "tool_calls": [
                    {
                        "index": len(self.calls) - 1,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                ]
            }
        )
        self._sent_args = 0
        if call["arguments"]:  # written before the name
            self._send_arguments(out, final=True)

    def _send_arguments(self, out: list, final: bool = False) -> None:
        """The arguments' characters read so far and not yet sent (once the call's name is)."""
        if not self.calls or not self.calls[-1]["sent"]:
            return
        if final:
            text = self.calls[-1]["arguments"]
        elif self._key == "arguments" and self._value_start is not None:
            text = self.text[self._value_start : self._pos].strip()
        else:
            return
        if len(text) > self._sent_args:
            out.append(
                {
                    "tool_calls": [
                        {
                            "index": len(self.calls) - 1,
                            "function": {"arguments": text[self._sent_args :]},
                        }
                    ]
                }
            )
            self._sent_args = len(text)

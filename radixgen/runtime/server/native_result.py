"""/generate's streamed answers: each chunk carries the cumulative text and ids, and only its
own new output logprobs (what SGLang streams); prompt logprobs, complete once the prefill is
done, ride on every chunk, so a client reading the last chunk's meta_info has them. The
answer shape itself is `radixgen.runtime.native_output`'s, shared with the offline Engine."""

from __future__ import annotations

from typing import Any, AsyncIterator

from radixgen.runtime.native_output import LogprobFormat, native_result
from radixgen.runtime.server.request_group import RequestGroup


async def stream_chunks(
    group: RequestGroup, fmt: LogprobFormat, with_index: bool
) -> AsyncIterator[dict[str, Any]]:
    """One chunk per scheduler output of any request of the group."""
    sent: dict[str, int] = {}  # rid -> output logprobs already streamed
    async for state, _ in group:
        chunk = native_result(state, fmt, sent.get(state.rid, 0))
        sent[state.rid] = len(state.logprobs)
        if with_index:
            chunk["index"] = state.index
        yield chunk

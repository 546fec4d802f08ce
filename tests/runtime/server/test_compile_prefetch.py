"""The HTTP edge asks the scheduler to start compiling a constraint it has not checked before,
then checks it: the scheduler's compile overlaps the check instead of following it. Tested on
the TokenizerManager alone, with a socket standing in for the scheduler's inbox."""

from __future__ import annotations

import asyncio
import json

import pytest
import zmq

from radixgen.core import Constraint, SamplingParams
from radixgen.runtime.messages import CompileReq, ToSchedulerProcess
from radixgen.runtime.server.errors import APIError
from radixgen.runtime.server.ipc import Codec, Endpoints
from radixgen.runtime.server.tokenizer_manager import TokenizerManager

pytestmark = pytest.mark.model


def _received(inbox, codec) -> list:
    out = []
    while inbox.poll(200):
        out.append(codec.decode(inbox.recv()))
    return out


def test_a_new_constraint_is_compiled_while_it_is_checked(tokenizer):
    endpoints, _ = Endpoints.in_new_dir()
    ctx = zmq.Context()
    inbox = ctx.socket(zmq.PULL)
    inbox.bind(endpoints.scheduler)
    manager = TokenizerManager(tokenizer, endpoints)
    codec = Codec(ToSchedulerProcess)
    good = Constraint(
        "json_schema", json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    )
    bad = Constraint("regex", "a(b")

    async def check(constraint):
        await manager.check_constraints([SamplingParams(constraint=constraint)], "sampling_params")

    try:
        asyncio.run(check(good))
        assert _received(inbox, codec) == [CompileReq(good)]
        asyncio.run(check(good))  # checked before: the scheduler has it (or is compiling it)
        assert _received(inbox, codec) == []
        with pytest.raises(APIError) as caught:  # a bad one is still a 400 here
            asyncio.run(check(bad))
        assert caught.value.status == 400 and _received(inbox, codec) == [CompileReq(bad)]
    finally:
        asyncio.run(manager.close())
        inbox.close(0)
        ctx.term()

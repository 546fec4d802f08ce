"""Weight-version operations as the scheduler's owner (the Engine, or the scheduler process)
runs them: a `WeightsReq` in, `WeightsResp` answers out once each operation completes."""

from __future__ import annotations

from typing import Any

from radixgen.runtime.lora.adapter import LoraError
from radixgen.runtime.messages import WeightsReq, WeightsResp
from radixgen.runtime.weights.gate import Answer
from radixgen.runtime.weights.manager import UpdateSource, WeightUpdateError

OPS = ("update", "rollback", "release", "pause", "resume", "load_lora", "unload_lora")


def submit(scheduler: Any, msg: WeightsReq) -> None:
    """Start `msg` on `scheduler` (its answer comes from `answers`)."""
    gate = scheduler.gate
    if msg.op == "update":
        try:
            source = _source(msg)
        except WeightUpdateError as exc:
            gate.answers.append(Answer(msg.op_id, error=exc))
            return
        gate.update(msg.op_id, source)
    elif msg.op == "rollback":
        gate.rollback(msg.op_id)
    elif msg.op == "release":
        gate.release(msg.op_id)
    elif msg.op == "pause":
        num = scheduler.pause(abort=msg.abort)
        gate.answers.append(
            Answer(
                msg.op_id,
                {
                    "num_paused_requests": 0 if msg.abort else num,
                    "num_aborted_requests": num if msg.abort else 0,
                },
            )
        )
    elif msg.op == "resume":
        scheduler.paused = False
        gate.answers.append(Answer(msg.op_id, {}))
    elif msg.op in ("load_lora", "unload_lora"):
        gate.answers.append(_lora_op(scheduler, msg))
    else:
        gate.answers.append(
            Answer(
                msg.op_id,
                error=WeightUpdateError(
                    f"unknown weights operation {msg.op!r}; one of {', '.join(OPS)}",
                    "invalid_operation",
                ),
            )
        )


def _lora_op(scheduler: Any, msg: WeightsReq) -> Answer:
    """Load or unload an adapter, between two steps (a PEFT folder of a few MB reads in
    milliseconds); the answer lists the adapters loaded after it."""
    lora = scheduler.runner.lora
    if lora is None:
        error = WeightUpdateError(
            "LoRA adapters are not enabled (start the server with --enable-lora)",
            "lora_not_enabled",
        )
        return Answer(msg.op_id, error=error)
    try:
        if msg.op == "load_lora":
            adapter = lora.load(msg.lora_name, msg.lora_path or "", msg.pinned)
        else:
            adapter = lora.unload(msg.lora_name)
    except LoraError as exc:
        return Answer(msg.op_id, error=WeightUpdateError(exc.message, exc.code, exc.status))
    return Answer(msg.op_id, {"adapter": adapter, "lora_adapters": lora.info()})


def answers(scheduler: Any) -> list[WeightsResp]:
    """The operations that completed since the last call."""
    return [to_resp(a) for a in scheduler.gate.take_answers()]


def to_resp(answer: Answer) -> WeightsResp:
    err = answer.error
    if err is None:
        return WeightsResp(answer.op_id, result=answer.result)
    return WeightsResp(
        answer.op_id, status=err.status, code=err.code, message=err.message, check=err.check
    )


def _source(msg: WeightsReq) -> UpdateSource:
    if msg.tensors is None:
        return UpdateSource(msg.version, msg.model_path, msg.load_format)
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        tensors = load(msg.tensors)
    except (SafetensorError, ValueError, OSError) as exc:
        raise WeightUpdateError(
            f"the tensors are not a safetensors file: {exc}", "invalid_tensors"
        ) from None
    if not tensors:
        raise WeightUpdateError("no tensors given", "invalid_tensors")
    return UpdateSource(msg.version, None, "tensor", tensors)

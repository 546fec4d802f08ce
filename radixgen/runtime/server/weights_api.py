"""Weight-version routes (SGLang's names): update from disk or from tensors, rollback, release
of the standby version, pause and continue. The scheduler process does the work; each route
answers once its operation completed (an update: once the new version serves)."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request

from radixgen.runtime.messages import WeightsReq, WeightsResp
from radixgen.runtime.server.errors import APIError, invalid
from radixgen.runtime.server.http_common import body_schema, json_body, server_state
from radixgen.runtime.server.protocol import (
    PauseGenerationRequest,
    UpdateWeightsFromDiskRequest,
    UpdateWeightsFromTensorRequest,
)

router = APIRouter()


async def run_op(request: Request, op: str, **fields: Any) -> dict[str, Any]:
    """Send one operation and turn its answer into a response body, or raise its error."""
    tm = server_state(request).tm
    resp: WeightsResp = await tm.weights_op(WeightsReq(op_id=uuid.uuid4().hex, op=op, **fields))
    if resp.result is None:
        code = f"{resp.check}_check_failed" if resp.check else resp.code or "weight_update_failed"
        raise APIError(resp.status, resp.message or "the weight operation failed", None, code)
    return resp.result


async def _abort_all(request: Request) -> int:
    """SGLang's abort_all_requests: every request in flight ends with abort, then serving goes
    on."""
    paused = await run_op(request, "pause", abort=True)
    await run_op(request, "resume")
    return paused["num_aborted_requests"]


def _version(body: UpdateWeightsFromDiskRequest) -> str | None:
    if body.version and body.weight_version and body.version != body.weight_version:
        raise invalid("version and weight_version name different versions; give one", "version")
    return body.weight_version or body.version


@router.post("/update_weights_from_disk", openapi_extra=body_schema(UpdateWeightsFromDiskRequest))
async def update_weights_from_disk(
    request: Request,
    body: UpdateWeightsFromDiskRequest = Depends(json_body(UpdateWeightsFromDiskRequest)),
) -> Any:
    """Load a checkpoint folder as a new weight version beside the serving one, validate it
    (architecture and shapes, no NaN/Inf, the canary) and switch once the running requests
    finished; 400 naming the failed check, with the serving version untouched."""
    version = _version(body)
    aborted = await _abort_all(request) if body.abort_all_requests else 0
    result = await run_op(
        request,
        "update",
        model_path=body.model_path,
        load_format=body.load_format or "auto",
        version=version,
    )
    return _update_answer(result, aborted)


@router.post(
    "/update_weights_from_tensor", openapi_extra=body_schema(UpdateWeightsFromTensorRequest)
)
async def update_weights_from_tensor(
    request: Request,
    body: UpdateWeightsFromTensorRequest = Depends(json_body(UpdateWeightsFromTensorRequest)),
) -> Any:
    """A new weight version from tensors (every weight, by HF name, as a base64 safetensors
    file)."""
    try:
        raw = base64.b64decode(body.serialized_named_tensors[0], validate=True)
    except (binascii.Error, ValueError):
        raise invalid(
            "serialized_named_tensors[0] is not base64", "serialized_named_tensors"
        ) from None
    aborted = await _abort_all(request) if body.abort_all_requests else 0
    result = await run_op(request, "update", tensors=raw, version=body.weight_version)
    return _update_answer(result, aborted)


def _update_answer(result: dict[str, Any], aborted: int) -> dict[str, Any]:
    return {
        "success": True,
        "message": f"serving weight version {result['weight_version']!r}",
        "num_paused_requests": 0,
        "num_aborted_requests": aborted,
        **result,
    }


@router.post("/rollback_weights")
async def rollback_weights(request: Request) -> Any:
    """Serve the previous weight version again (a pointer switch once running requests of the
    serving version finished); 400 when there is none."""
    result = await run_op(request, "rollback")
    return {
        "success": True,
        "message": f"serving weight version {result['weight_version']!r}",
        **result,
    }


@router.post("/release_standby_weights")
async def release_standby_weights(request: Request) -> Any:
    """Free the previous weight version's memory; 400 when none is resident."""
    result = await run_op(request, "release")
    return {
        "success": True,
        "message": f"released weight version {result['released_version']!r}",
        **result,
    }


@router.get("/get_weight_version")
async def get_weight_version(request: Request) -> Any:
    """The serving version (SGLang's route), with the resident versions' records."""
    stats = await server_state(request).tm.get_stats()
    return {"weight_version": stats["weights"]["active"]["name"], **stats["weights"]}


@router.post("/pause_generation", openapi_extra=body_schema(PauseGenerationRequest))
async def pause_generation(
    request: Request, body: PauseGenerationRequest = Depends(json_body(PauseGenerationRequest))
) -> Any:
    """Stop scheduling; `mode` says what happens to the requests in flight."""
    result = await run_op(request, "pause", abort=body.mode == "abort")
    return {"success": True, **result}


@router.post("/continue_generation")
async def continue_generation(request: Request) -> Any:
    """Resume scheduling after /pause_generation."""
    await run_op(request, "resume")
    return {"success": True}

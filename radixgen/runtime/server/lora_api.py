"""LoRA adapter routes (SGLang's names): load a PEFT folder under a name, unload one. The
scheduler process loads and checks the adapter between two steps; the event loop only awaits
its answer. Each refusal is an OpenAI-style error: 400 (rank above --max-lora-rank, a target
the model lacks, a missing file, another base model's shapes, a name already loaded), 404 (no
such adapter to unload), 409 (unloading an adapter that requests still use: refused, retry once
they finished)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from radixgen.runtime.server.errors import invalid
from radixgen.runtime.server.http_common import body_schema, json_body, server_state
from radixgen.runtime.server.protocol import LoadLoraAdapterRequest, UnloadLoraAdapterRequest
from radixgen.runtime.server.weights_api import run_op

router = APIRouter()


@router.post("/load_lora_adapter", openapi_extra=body_schema(LoadLoraAdapterRequest))
async def load_lora_adapter(
    request: Request,
    body: LoadLoraAdapterRequest = Depends(json_body(LoadLoraAdapterRequest)),
) -> Any:
    """Load the PEFT adapter at `lora_path` as `lora_name`; requests may name it from then on
    (OpenAI `model`, or native `lora_path`)."""
    if body.lora_name == server_state(request).served_model_name:
        raise invalid("lora_name must differ from the served model's name", "lora_name")
    result = await run_op(
        request, "load_lora", lora_name=body.lora_name, lora_path=body.lora_path, pinned=body.pinned
    )
    return {
        "success": True,
        "message": f"loaded LoRA adapter {body.lora_name!r}",
        "loaded_adapters": {a["lora_name"]: a["lora_path"] for a in result["lora_adapters"]},
        **result,
    }


@router.post("/unload_lora_adapter", openapi_extra=body_schema(UnloadLoraAdapterRequest))
async def unload_lora_adapter(
    request: Request,
    body: UnloadLoraAdapterRequest = Depends(json_body(UnloadLoraAdapterRequest)),
) -> Any:
    """Unload an adapter; refused with 409 while requests on it are in flight."""
    result = await run_op(request, "unload_lora", lora_name=body.lora_name)
    return {
        "success": True,
        "message": f"unloaded LoRA adapter {body.lora_name!r}",
        "loaded_adapters": {a["lora_name"]: a["lora_path"] for a in result["lora_adapters"]},
        **result,
    }

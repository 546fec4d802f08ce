"""Triton kernels with plain-torch references (no radixgen imports). Filled by the kernels issue.

Each `kernels/<op>.py` holds the `@triton.jit` kernels, launchers that validate their inputs
(raising ValueError) and `<op>_ref` functions in plain torch. This module is the one place that
picks between them: `dispatch` runs the Triton launcher for CUDA tensors and the torch reference
otherwise. The op modules (and so triton) are imported lazily, on first use.

    quantize_nvfp4(x, tensor_scale=None) -> (codes uint8, block_scales float8_e4m3fn, tensor_scale)
    dequantize_nvfp4(codes, block_scales, tensor_scale, dtype=torch.bfloat16) -> tensor
    quantize_fp8(x, scale=None, per_head_dim=None) -> (q float8_e4m3fn, scale)
    dequantize_fp8(q, scale, dtype=torch.bfloat16) -> tensor
    apply_token_bitmask(logits, bitmask) -> None (disallowed logits set to -inf in place)
    store_kv_fp8(cache, scale, slots, x) -> None (in place)
    store_kv_nvfp4(codes, bscale, tscale, slots, x) -> None (in place)
    decode_attention(q, kv, kv_indptr, kv_indices, sm_scale) -> (o, lse)
    decode_attention_pools(q, [(kv, kv_indptr, kv_indices), ...], sm_scale) -> (o, lse)
    extend_attention(q, kv, qo_indptr, kv_indptr, kv_indices, num_new, sm_scale,
                     custom_mask=None, mask_indptr=None) -> (o, lse)
    merge_state(o_a, lse_a, o_b, lse_b) -> (o, lse)
    fused_experts(x, w13, w2, topk_weights, topk_ids) -> [T, H] (mixture-of-experts FFN)
    mla_decode(q, kv, kv_indptr, kv_indices, sm_scale, v_dim) -> (o, lse) (MLA, absorbed, over
                     a latent pool's two planes)
KV pools are passed as `KVBuffers` (kv_layout.py). decode_attention, extend_attention and
mla_decode have no wrapper here (importing their modules would shadow it): call
`dispatch("decode_attention", ...)`.
`flashinfer_ops` wraps flashinfer's paged decode/prefill for benchmarks and runtime dispatch; import
it directly (never from here).
"""

import importlib
from typing import Any

# op -> module that defines `op` (Triton launcher) and `op_ref` (torch reference)
_OPS = {
    "quantize_nvfp4": "nvfp4",
    "dequantize_nvfp4": "nvfp4",
    "quantize_fp8": "fp8",
    "dequantize_fp8": "fp8",
    "apply_token_bitmask": "bitmask",
    "store_kv_fp8": "kv_store",
    "store_kv_nvfp4": "kv_store",
    "decode_attention": "decode_attention",
    "decode_attention_pools": "decode_attention",
    "merge_state": "state_merge",
    "extend_attention": "extend_attention",
    "fused_experts": "fused_moe",
    "mla_decode": "mla_decode",
}
# helpers without a Triton variant, loaded lazily from their module
_HELPERS = {
    "nvfp4_tensor_scale": "nvfp4",
    "nvfp4_global_scale": "nvfp4",
    "nvfp4_tensor_scale_from_global": "nvfp4",
    "fp8_scale": "fp8",
    "KVBuffers": "kv_layout",
}
BACKENDS = ("auto", "triton", "torch")

__all__ = ["BACKENDS", "dispatch", *_OPS, *_HELPERS]


def _module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def dispatch(op: str, *args: Any, backend: str = "auto", **kwargs: Any) -> Any:
    """Run kernel `op` with the Triton launcher or the torch reference and return its result.

    backend="auto" picks Triton when the first argument is a CUDA tensor and the torch reference
    otherwise; "triton" forces the launcher (on the CPU only under TRITON_INTERPRET=1, set before
    triton is imported); "torch" forces the reference. Raises ValueError for an unknown op or
    backend, and whatever ValueError the chosen implementation raises for bad inputs.
    """
    if op not in _OPS:
        raise ValueError(f"unknown kernel op {op!r}; known: {sorted(_OPS)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        on_cuda = bool(args) and getattr(args[0], "is_cuda", False)
        backend = "triton" if on_cuda else "torch"
    module = _module(_OPS[op])
    return getattr(module, op if backend == "triton" else f"{op}_ref")(*args, **kwargs)


def _dense(x):
    """x made contiguous: the (de)quantize wrappers take any strides (the KV pools hand them k and
    v as views of the fused qkv projection), while the Triton launchers take flat buffers only."""
    return x.contiguous() if hasattr(x, "is_contiguous") and not x.is_contiguous() else x


def quantize_nvfp4(x, tensor_scale=None, *, backend: str = "auto"):
    """NVFP4-quantize x [..., n] (any strides); see `radixgen.kernels.nvfp4.quantize_nvfp4`."""
    return dispatch("quantize_nvfp4", _dense(x), tensor_scale, backend=backend)


def dequantize_nvfp4(codes, block_scales, tensor_scale, dtype=None, *, backend: str = "auto"):
    """Dequantize NVFP4 to `dtype` (default bfloat16); see
    `radixgen.kernels.nvfp4.dequantize_nvfp4`."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    return dispatch(
        "dequantize_nvfp4",
        _dense(codes),
        _dense(block_scales),
        tensor_scale,
        backend=backend,
        **kwargs,
    )


def quantize_fp8(x, scale=None, per_head_dim=None, *, backend: str = "auto"):
    """FP8 E4M3-quantize x (any strides); see `radixgen.kernels.fp8.quantize_fp8`."""
    return dispatch("quantize_fp8", _dense(x), scale, per_head_dim, backend=backend)


def dequantize_fp8(q, scale, dtype=None, *, backend: str = "auto"):
    """Dequantize FP8 to `dtype` (default bfloat16); see `radixgen.kernels.fp8.dequantize_fp8`."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    return dispatch("dequantize_fp8", _dense(q), scale, backend=backend, **kwargs)


def apply_token_bitmask(logits, bitmask, *, backend: str = "auto"):
    """logits[r, t] = -inf where token t's bit in bitmask row r is clear; see
    `radixgen.kernels.bitmask.apply_token_bitmask`."""
    return dispatch("apply_token_bitmask", logits, bitmask, backend=backend)


def store_kv_fp8(cache, scale, slots, x, *, backend: str = "auto"):
    """Quantize x into an fp8 pool at `slots`, in place; see `radixgen.kernels.kv_store`."""
    return dispatch("store_kv_fp8", cache, scale, slots, x, backend=backend)


def store_kv_nvfp4(codes, bscale, tscale, slots, x, *, backend: str = "auto"):
    """Quantize x into an nvfp4 pool at `slots`, in place; see `radixgen.kernels.kv_store`."""
    return dispatch("store_kv_nvfp4", codes, bscale, tscale, slots, x, backend=backend)


def merge_state(o_a, lse_a, o_b, lse_b, *, backend: str = "auto"):
    """Merge two attention states over disjoint key sets; see
    `radixgen.kernels.decode_attention`."""
    return dispatch("merge_state", o_a, lse_a, o_b, lse_b, backend=backend)


def fused_experts(x, w13, w2, topk_weights, topk_ids, *, backend: str = "auto"):
    """Routed mixture-of-experts output [T, H]; see `radixgen.kernels.fused_moe`."""
    return dispatch("fused_experts", x, w13, w2, topk_weights, topk_ids, backend=backend)


def __getattr__(name: str) -> Any:
    if name in _HELPERS:
        return getattr(_module(_HELPERS[name]), name)
    if (
        _OPS.get(name) == name
    ):  # an op whose module has its name: the module, as an import would set
        return _module(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

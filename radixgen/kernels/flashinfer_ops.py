"""Optional flashinfer paged attention over radixgen's pools (page size 1, the same CSR slot lists).

Used by benchmarks/bench_kernels.py and by runtime dispatch: where our Triton kernel measures
faster on a shape, the runtime prefers it. flashinfer is imported lazily; `available()` is true
only with CUDA and an importable flashinfer. Supported pools: bf16/fp16, and fp8 with per-head
scales (folded into q and o, since flashinfer takes one scalar scale per tensor). flashinfer
returns base-2 log-sum-exp; the results here are natural-log, like the Triton kernels'.

A wrapper is planned once per batch layout (host work, like flashinfer's own plan) and run for
every layer: `FlashInferDecode(...).plan(...)` then `.run(q, kv)` per layer.
"""

from __future__ import annotations

import importlib
import importlib.util
import math

import torch

from .kv_layout import FMT_FLOAT, FMT_FP8, KVBuffers

WORKSPACE_BYTES = 128 << 20


def available() -> bool:
    """True when CUDA is usable and flashinfer can be imported."""
    if not torch.cuda.is_available() or importlib.util.find_spec("flashinfer") is None:
        return False
    try:
        importlib.import_module("flashinfer")
    except Exception:  # a broken install (missing CUDA libs, ABI mismatch) counts as absent
        return False
    return True


def _flashinfer():
    if not available():
        raise RuntimeError(
            "flashinfer is not available (needs CUDA and the flashinfer-python package)"
        )
    return importlib.import_module("flashinfer")


def _kv_dtype_and_cache(kv: KVBuffers):
    """(kv dtype, (k, v) as [num_slots, 1, Hkv, D] NHD pages) for a bf16/fp16 or fp8 pool."""
    if kv.fmt not in (FMT_FLOAT, FMT_FP8) or kv.k.dtype == torch.float32:
        raise ValueError("flashinfer_ops supports bf16/fp16 and fp8 pools only")
    return kv.k.dtype, (kv.k.unsqueeze(1), kv.v.unsqueeze(1))


def _fold_scales(q: torch.Tensor, kv: KVBuffers):
    """q with the fp8 per-head K scale folded in, and the per-head V scale [Hq, 1] for the
    output."""
    if kv.fmt != FMT_FP8:
        return q, None
    group = q.shape[1] // kv.num_kv_heads
    k_scale = kv.k_scale.repeat_interleave(group)[None, :, None]  # [1, Hq, 1]
    return (q.float() * k_scale).to(q.dtype), kv.v_scale.repeat_interleave(group)[:, None]


class FlashInferDecode:
    """flashinfer BatchDecodeWithPagedKVCacheWrapper over token slots (page size 1)."""

    def __init__(self, device: torch.device | str = "cuda", use_tensor_cores: bool = False):
        fi = _flashinfer()
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(
            self.workspace, "NHD", use_tensor_cores=use_tensor_cores
        )

    def plan(
        self,
        kv_indptr,
        kv_indices,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        q_dtype: torch.dtype,
        kv_dtype: torch.dtype,
        sm_scale: float,
    ) -> None:
        """Plan for one batch layout (CSR of slots per request; requests must be non-empty)."""
        batch = kv_indptr.numel() - 1
        last = torch.ones(batch, dtype=torch.int32, device=kv_indptr.device)
        self.wrapper.plan(
            kv_indptr.int(),
            kv_indices.int(),
            last,
            num_qo_heads,
            num_kv_heads,
            head_dim,
            1,
            q_data_type=q_dtype,
            kv_data_type=kv_dtype,
            sm_scale=sm_scale,
        )

    def run(self, q: torch.Tensor, kv: KVBuffers):
        """(o [B, Hq, D] q.dtype, lse [B, Hq] float32 natural log) for q [B, Hq, D]."""
        return _run_planned(self.wrapper, q, kv)


class FlashInferExtend:
    """flashinfer BatchPrefillWithPagedKVCacheWrapper, causal among the new tokens (page size 1)."""

    def __init__(self, device: torch.device | str = "cuda"):
        fi = _flashinfer()
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(self.workspace, "NHD")

    def plan(
        self,
        qo_indptr,
        kv_indptr,
        kv_indices,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        q_dtype: torch.dtype,
        kv_dtype: torch.dtype,
        sm_scale: float,
        causal: bool = True,
    ) -> None:
        """Plan for one batch layout; the queries are the last keys of each request (causal)."""
        batch = kv_indptr.numel() - 1
        last = torch.ones(batch, dtype=torch.int32, device=kv_indptr.device)
        self.wrapper.plan(
            qo_indptr.int(),
            kv_indptr.int(),
            kv_indices.int(),
            last,
            num_qo_heads,
            num_kv_heads,
            head_dim,
            1,
            causal=causal,
            sm_scale=sm_scale,
            q_data_type=q_dtype,
            kv_data_type=kv_dtype,
        )

    def run(self, q: torch.Tensor, kv: KVBuffers):
        """(o [T, Hq, D] q.dtype, lse [T, Hq] float32 natural log) for q [T, Hq, D]."""
        return _run_planned(self.wrapper, q, kv)


def _run_planned(wrapper, q: torch.Tensor, kv: KVBuffers):
    """Run a planned flashinfer wrapper: fp8 scales folded into q and o, flashinfer's base-2 lse
    turned into natural log."""
    _, cache = _kv_dtype_and_cache(kv)
    q, v_scale = _fold_scales(q, kv)
    o, lse = wrapper.run(q, cache, return_lse=True)
    if v_scale is not None:
        o = (o.float() * v_scale).to(q.dtype)
    return o, lse.float() * math.log(2.0)


def decode_attention(
    q: torch.Tensor,
    kv: KVBuffers,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
):
    """One-shot flashinfer decode (plan + run) with decode_attention's contract (non-empty
    requests)."""
    kv_dtype, _ = _kv_dtype_and_cache(kv)
    op = FlashInferDecode(q.device)
    op.plan(
        kv_indptr, kv_indices, q.shape[1], kv.num_kv_heads, q.shape[2], q.dtype, kv_dtype, sm_scale
    )
    return op.run(q, kv)


class FlashInferMLADecode:
    """flashinfer BatchMLAPagedAttentionWrapper (absorbed MLA, page size 1) over its own latent
    layout: c_kv [num_slots, 1, ckv_dim] and k_pe [num_slots, 1, kpe_dim] in two bf16 tensors
    (or two strided views of one [num_slots, 1, ckv_dim + kpe_dim]). radixgen's latent pool
    splits each latent over a K and a V plane at its midpoint (radix/latent_pool.py), which is
    not that layout, so the runtime decodes with kernels/mla_decode.py; this wrapper is for
    benchmarks and for checking against it."""

    def __init__(self, device: torch.device | str = "cuda"):
        fi = _flashinfer()
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.wrapper = fi.mla.BatchMLAPagedAttentionWrapper(self.workspace, backend="auto")

    def plan(
        self, kv_indptr, kv_indices, num_heads: int, ckv_dim: int, kpe_dim: int, dtype, sm_scale
    ):
        """Plan one decode batch layout (CSR of slots per request, one query each)."""
        batch = kv_indptr.numel() - 1
        qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=kv_indptr.device)
        kv_lens = (kv_indptr[1:] - kv_indptr[:-1]).int()
        self.ckv_dim = ckv_dim
        self.wrapper.plan(
            qo_indptr,
            kv_indptr.int(),
            kv_indices.int(),
            kv_lens,
            num_heads,
            ckv_dim,
            kpe_dim,
            1,
            False,
            sm_scale,
            dtype,
            dtype,
        )

    def run(self, q: torch.Tensor, ckv: torch.Tensor, kpe: torch.Tensor):
        """(o [B, H, ckv_dim], lse [B, H] float32 natural log) for q [B, H, ckv_dim + kpe_dim]."""
        q_nope, q_pe = q[..., : self.ckv_dim], q[..., self.ckv_dim :]
        o, lse = self.wrapper.run(q_nope.contiguous(), q_pe.contiguous(), ckv, kpe, return_lse=True)
        return o, lse.float() * math.log(2.0)


def mla_decode(q, ckv, kpe, kv_indptr, kv_indices, sm_scale: float):
    """One-shot flashinfer MLA decode (plan + run): see FlashInferMLADecode."""
    op = FlashInferMLADecode(q.device)
    op.plan(kv_indptr, kv_indices, q.shape[1], ckv.shape[-1], kpe.shape[-1], q.dtype, sm_scale)
    return op.run(q, ckv, kpe)

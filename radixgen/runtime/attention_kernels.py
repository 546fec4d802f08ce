"""Attention through `radixgen.kernels`: paged decode and extend kernels that read each KV pool
in place (bf16, FP8 or NVFP4, dequantized in registers), one pass per pool when a sequence lives
in two pools (mixed precision): decode writes both pools' split partials into one buffer and
reduces them once (`decode_attention_pools`); extend merges its passes by log-sum-exp state
merging (`merge_state`).

Dispatch: `kernels.dispatch` runs the Triton kernels on CUDA (and under TRITON_INTERPRET=1 when
`backend="triton"`), else the torch references. Extend over a single bf16/fp16 pool (of q's
dtype) without tree masks goes to flashinfer's paged prefill where flashinfer is installed and q
is on a CUDA GPU (about 2x faster than our Triton extend on an H200: 0.75 vs 1.5-1.7 ms at 4096
new tokens over a 4096-token prefix); FP8 pools (flashinfer would pick its FA3 backend for a bf16 q
over FP8 KV, not yet checked here), NVFP4 and mixed pools, tree-masked batches and the rest keep
the Triton kernel. Extend over a request whose *new* tokens span
both pools (a retracted request prefilled again across its prompt/output boundary) is rare and
goes through `TorchAttention` instead: the kernel's causal mask is positional within one pool.
"""

from __future__ import annotations

import math

import torch

from radixgen.kernels import dispatch
from radixgen.kernels.cpu_decode_attention import available as cpu_kernel_available
from radixgen.runtime.attention import TorchAttention
from radixgen.runtime.forward_batch import ForwardBatch
from radixgen.runtime.mla_attention import LatentAttention, expand_threshold
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.slot_csr import batch_slot_csr, pool_parts

FLASHINFER_HEAD_DIMS = (64, 128, 256)  # head dims flashinfer's paged prefill compiles for


class KernelAttention:
    """The `AttentionBackend` over the paged attention kernels (see the module docstring)."""

    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        backend: str = "auto",
        flashinfer_extend: bool | None = None,
    ):
        """flashinfer_extend: send eligible extends to flashinfer (module docstring); None: where
        flashinfer is installed, False: never."""
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.backend, self.sm_scale = backend, 1.0 / math.sqrt(head_dim)
        self.flashinfer_extend = flashinfer_extend
        self._fi_extend = None  # flashinfer_ops.FlashInferExtend, made at the first eligible extend
        self.flashinfer_extends = (
            0  # extend calls that went to flashinfer (for tests and benchmarks)
        )
        self.fallback = TorchAttention(num_heads, num_kv_heads, head_dim)  # rare extends only
        self.batch = self.ext_batch = self.dec_batch = None  # ForwardBatch (and its two parts)
        self._fallback_ready = False
        self.meta: dict = {}

    def begin(self, batch: ForwardBatch) -> None:
        self.batch, self.meta = batch, {"csr": {}}
        self.ext_batch, self.dec_batch = batch.parts()
        self._fallback_ready = False  # TorchAttention plans only if an extend needs it
        if self.ext_batch is not None:
            b = self.ext_batch
            lens = torch.tensor(b.extend_lens, dtype=torch.int64)
            self.meta["qo_indptr"] = torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(
                b.kv_slots.device
            )
            self.meta["tree_blocks"] = _tree_blocks(b)

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pool
    ) -> torch.Tensor:
        pool.store(layer, self.batch.out_slots, k, v)
        q = q.contiguous()
        ext, dec = self.ext_batch, self.dec_batch
        outs = []
        if ext is not None:
            t_ext = sum(ext.extend_lens)
            outs.append(self._extend(layer, q[:t_ext].contiguous(), pool))
            q = q[t_ext:]
        if dec is not None:
            outs.append(self._decode(layer, q.contiguous(), pool))
        return torch.cat(outs) if len(outs) > 1 else outs[0]

    def _decode(self, layer: int, q: torch.Tensor, pool) -> torch.Tensor:
        parts = pool_parts(pool)
        parts = [
            (part.kv_buffers(layer), *self._cached_csr("dec", lo, hi, len(parts) == 1))
            for part, lo, hi in parts
        ]
        o, _ = dispatch(
            "decode_attention_pools",
            q,
            parts,
            self.sm_scale,
            backend=self.backend,
            out_dtype=torch.float32,
        )
        return o.to(q.dtype)

    def _extend(self, layer: int, q: torch.Tensor, pool) -> torch.Tensor:
        parts = pool_parts(pool)
        if len(parts) == 1:
            kv = parts[0][0].kv_buffers(layer)
            if self._flashinfer_eligible(q, kv):
                return self._extend_flashinfer(q, kv)
        num_new = self._num_new_per_part(parts, q.device)
        if num_new is None:
            if not self._fallback_ready:
                self.fallback.begin(self.batch)
                self._fallback_ready = True
            return self.fallback._extend(layer, q, pool)
        state = None
        for i, ((part, lo, hi), new) in enumerate(zip(parts, num_new)):
            indptr, indices = self._cached_csr("ext", lo, hi, len(parts) == 1)
            o, lse = dispatch(
                "extend_attention",
                q,
                part.kv_buffers(layer),
                self.meta["qo_indptr"],
                indptr,
                indices,
                new,
                self.sm_scale,
                *self._part_mask(i, new),
                backend=self.backend,
                out_dtype=torch.float32,
                max_qo_len=max(self.ext_batch.extend_lens),
            )
            state = (
                (o, lse)
                if state is None
                else dispatch("merge_state", *state, o, lse, backend=self.backend)
            )
        return state[0].to(q.dtype)

    def _flashinfer_eligible(self, q: torch.Tensor, kv) -> bool:
        """Whether this extend goes to flashinfer: enabled and installed, q bf16/fp16 on CUDA, a
        pool of q's dtype, a head dim it compiles for, no tree mask in the batch (a single pool
        holds every request's new tokens, so the mask is causal, bottom-right aligned as
        flashinfer's)."""
        if self.flashinfer_extend is False or self.backend != "triton" or not q.is_cuda:
            return False
        if q.dtype not in (torch.bfloat16, torch.float16) or self.meta["tree_blocks"] is not None:
            return False
        if kv.k.dtype != q.dtype:  # bf16/fp16 pools only (not FP8 yet, nor NVFP4's uint8 codes)
            return False
        if (
            self.head_dim not in FLASHINFER_HEAD_DIMS
        ):  # its Hopper prefill asserts these at compile time
            return False
        if self.flashinfer_extend is None:  # imported here: kernel modules must not load before
            from radixgen.kernels import (
                flashinfer_ops,  # TRITON_INTERPRET is set (tests/kernels/conftest.py)
            )

            self.flashinfer_extend = flashinfer_ops.available()
        return self.flashinfer_extend

    def _extend_flashinfer(self, q: torch.Tensor, kv) -> torch.Tensor:
        """Causal paged prefill by flashinfer, planned once per forward (host work) and run per
        layer."""
        if "fi_planned" not in self.meta:
            if self._fi_extend is None:
                from radixgen.kernels import flashinfer_ops

                self._fi_extend = flashinfer_ops.FlashInferExtend(q.device)
            indptr, indices = self._cached_csr("ext", 0, kv.k.shape[0], True)
            self._fi_extend.plan(
                self.meta["qo_indptr"],
                indptr,
                indices,
                self.num_heads,
                self.num_kv_heads,
                self.head_dim,
                q.dtype,
                kv.k.dtype,
                self.sm_scale,
                causal=True,
            )
            self.meta["fi_planned"] = True
        self.flashinfer_extends += 1
        return self._fi_extend.run(q, kv)[0]

    def _num_new_per_part(self, parts, device) -> list[torch.Tensor] | None:
        """Per pool part, each extend request's new-token count in it ([B]), computed once per
        forward; None when some request's new tokens span two parts. One host sync for the
        whole batch."""
        if "num_new" not in self.meta:
            b = self.ext_batch
            width = b.kv_slots.shape[1]
            col = torch.arange(width, device=b.kv_slots.device)[None, :]
            prefix = torch.tensor(b.prefix_lens, device=device)[:, None]
            seq = torch.tensor(b.seq_lens, device=device)[:, None]
            new = (col >= prefix) & (col < seq)  # [B, L]: the new tokens' columns
            inside = torch.stack(
                [((b.kv_slots >= lo) & (b.kv_slots < hi) | ~new).all(1) for _, lo, hi in parts]
            )
            homes = [
                next((i for i, here in enumerate(flags) if here), None)
                for flags in zip(*inside.tolist())
            ]
            self.meta["num_new"] = (
                None
                if any(h is None for h in homes)
                else [
                    torch.tensor(
                        [n if h == i else 0 for n, h in zip(b.extend_lens, homes)], device=device
                    )
                    for i in range(len(parts))
                ]
            )
        return self.meta["num_new"]

    def _part_mask(
        self, i: int, num_new: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(custom_mask, mask_indptr) of pool part i: the tree blocks of the requests whose new
        tokens live there (the others pass over cached keys only and need none)."""
        blocks = self.meta["tree_blocks"]
        if blocks is None:
            return None, None
        key = ("mask", i)
        if key not in self.meta:
            here = [blk if n > 0 else blk[:0] for blk, n in zip(blocks, num_new.tolist())]
            sizes = torch.tensor([len(b) for b in here], dtype=torch.int64)
            indptr = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)])
            device = num_new.device
            self.meta[key] = (torch.cat(here).to(device), indptr.to(device))
        return self.meta[key]

    def _cached_csr(
        self, kind: str, lo: int, hi: int, whole: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The CSR of the decode or extend requests' slots in [lo, hi), built once per forward
        (whole: the pool has no other part; see slot_csr)."""
        key = (kind, lo)
        if key not in self.meta["csr"]:
            b = self.dec_batch if kind == "dec" else self.ext_batch
            self.meta["csr"][key] = batch_slot_csr(b, lo, hi, whole)
        return self.meta["csr"][key]


def _tree_blocks(batch: ForwardBatch) -> list[torch.Tensor] | None:
    """Each extend request's [ext, ext] mask among its new tokens, flattened row-major (causal
    where it has no tree mask), on the CPU; None when no request has a tree mask."""
    if batch.tree_masks is None or all(m is None for m in batch.tree_masks):
        return None
    return [
        (m.cpu() if m is not None else torch.ones(e, e).tril()).to(torch.bool).reshape(-1)
        for m, e in zip(batch.tree_masks, batch.extend_lens)
    ]


def make_attention(
    kind: str, arch: ModelArch, device: torch.device, mla_expand_threshold: float | None = None
):
    """'torch' (TorchAttention), 'triton' (KernelAttention), or 'auto': kernels on CUDA. MLA
    models get LatentAttention under either (extends in torch, decode through the MLA kernel on
    CUDA): the latent pool's planes are not the per-head layout KernelAttention reads; their
    extends go expanded by `mla_expand_threshold` (None: the FLOP crossover of their dims)."""
    if kind not in ("auto", "torch", "triton"):
        raise ValueError(f"attention backend must be auto, torch or triton, got {kind!r}")
    if arch.mla is not None:
        threshold = (
            expand_threshold(arch.mla) if mla_expand_threshold is None else mla_expand_threshold
        )
        return LatentAttention(arch.num_heads, arch.mla.latent_dim, expand_threshold=threshold)
    if kind == "auto":
        kind = "triton" if device.type == "cuda" else "torch"
    if kind == "torch":
        if device.type == "cpu":
            # compile the C++ decode kernel now (once per machine), not mid-request
            cpu_kernel_available()
        return TorchAttention(arch.num_heads, arch.num_kv_heads, arch.head_dim)
    return KernelAttention(arch.num_heads, arch.num_kv_heads, arch.head_dim, backend="triton")

"""Attention for multi-head latent attention models (model/mla.py's two forms).

Decode is absorbed: on CUDA through the MLA decode kernel (kernels/mla_decode.py), which reads
the latent pool's pages in place (bf16, FP8, NVFP4; each pool of a mixed pair in its own launch,
the two states merged by log-sum-exp), else TorchAttention's decode over the gathered latents.
An extend (prefill chunks, token trees) runs absorbed through TorchAttention's extend, or
expanded: each request's latents decompressed into per-head K and V, then SDPA.

Which form an extend takes (`expands`): per head, the expanded form pays r * (nope + v) per
context token to decompress and (nope + rope) + v per (query, key) pair; the absorbed form pays
r * (nope + v) per new token (q through W_UK, the output through W_UV) and W + r per pair. With
T new tokens over a cached prefix P (context L = P + T), expanded costs less iff
T * L * (pair_absorbed - pair_expanded) >= (L - T) * r * (nope + v), i.e. iff
T * L >= threshold * P with threshold = r * (nope + v) / (pair_absorbed - pair_expanded): about
171 new tokens at DeepSeek's dims over a long prefix, any length without one. A batch's extend
part takes one form, by the sums of T * L and P over its requests. The default threshold is that
FLOP crossover, not a GPU measurement (benchmarks/bench_mla.py's extend section measures it);
--mla-expand-threshold sets another.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from radixgen.radix.latent_pool import LatentPool
from radixgen.runtime.attention import TorchAttention, _extend_mask
from radixgen.runtime.forward_batch import ForwardBatch
from radixgen.runtime.slot_csr import batch_slot_csr, pool_parts


class LatentAttention(TorchAttention):
    """TorchAttention over one latent KV head, whose decode runs the MLA kernel (`use_kernel`:
    None = on CUDA; True also runs it on the CPU, under TRITON_INTERPRET=1 or with
    backend="torch", the kernel's reference, for tests)."""

    def __init__(
        self,
        num_heads: int,
        latent_dim: int,
        use_kernel: bool | None = None,
        backend: str = "triton",
        expand_threshold: float = float("inf"),
    ):
        """expand_threshold: extends take the expanded form by the module docstring's rule
        (0: always, inf: never)."""
        super().__init__(num_heads, 1, latent_dim)
        self.use_kernel, self.backend = use_kernel, backend
        self.expand_threshold = expand_threshold
        self.expanded_extends = 0  # forwards whose extend part ran expanded (tests, benchmarks)

    def begin(self, batch: ForwardBatch) -> None:
        super().begin(batch)
        self.csr: list[tuple] | None = None  # per pool part: (kv_buffers of, indptr, indices)
        ext = self.ext_batch
        self.expanded_tokens = 0  # the batch's leading rows attended in the expanded form
        if ext is not None and expands(ext.prefix_lens, ext.extend_lens, self.expand_threshold):
            self.expanded_tokens = sum(ext.extend_lens)
            self.expanded_extends += 1

    def attend_mla(
        self,
        layer: int,
        q_nope: torch.Tensor,
        q_pe: torch.Tensor,
        latent: torch.Tensor,
        pool: LatentPool,
        heads,
    ) -> torch.Tensor:
        """Write the batch's latents [T, 1, W] at its out_slots, then attend the queries q_nope
        [T, H, nope] and q_pe [T, H, rope]: per-head outputs [T, H, v]. The extend part runs
        expanded where begin() chose so, everything else absorbed. `heads`: the layer's maps
        (model/mla.py LatentHeads)."""
        pool.store(layer, self.batch.out_slots, latent)
        n, outs = self.expanded_tokens, []
        if n:
            outs.append(self._extend_expanded(layer, q_nope[:n], q_pe[:n], pool, heads))
        if n < q_nope.shape[0]:  # decode rows (after an expanded extend part), or every row
            q = heads.absorb(q_nope[n:], q_pe[n:])
            out = self._decode(layer, q, pool) if n else self._attend_stored(layer, q, pool)
            outs.append(heads.absorbed_values(out))
        return torch.cat(outs) if len(outs) > 1 else outs[0]

    def _extend_expanded(
        self, layer: int, q_nope: torch.Tensor, q_pe: torch.Tensor, pool: LatentPool, heads
    ) -> torch.Tensor:
        """The extend part in the expanded form: per request, its context's latents (cached and
        new) decompressed into per-head K, V and attended causally (or by its tree mask)."""
        b, outs = self.ext_batch, []
        q = torch.cat([q_nope, q_pe], dim=-1).transpose(0, 1)  # [H, T_ext, nope + rope]
        for i, (start, ext) in enumerate(zip(b.extend_starts, b.extend_lens)):
            latent, _ = pool.gather(layer, b.kv_slots[i, : b.seq_lens[i]])  # [L, 1, W]
            k, v = heads.expand(latent[:, 0].to(q.dtype))  # [H, L, nope + rope], [H, L, v]
            mask = _extend_mask(b.prefix_lens[i], ext, b.tree_mask(i), q.device)
            o = F.scaled_dot_product_attention(
                q[:, start : start + ext],
                k,
                v,
                attn_mask=mask,
                is_causal=mask is None,
                scale=heads.softmax_scale,
            )  # [H, ext, v]
            outs.append(o.transpose(0, 1))
        return torch.cat(outs)

    def decodes_in_place(self, pool: LatentPool, device: torch.device) -> bool:
        """Whether decode over `pool` runs the MLA kernel on `device`: then it reads the pool in
        place with no host sync, so a CUDA graph can capture it (the torch path cannot)."""
        wanted = device.type == "cuda" if self.use_kernel is None else self.use_kernel
        return wanted and _kernel_reads(pool)

    def _decode(self, layer: int, q: torch.Tensor, pool) -> torch.Tensor:
        if not (isinstance(pool, LatentPool) and self.decodes_in_place(pool, q.device)):
            # a static (graph) batch's seq_lens are only its context bucket: the torch path,
            # which reads them, must never see one
            assert self.dec_batch.device_seq_lens is None, "static decode needs the MLA kernel"
            return super()._decode(layer, q, pool)
        from radixgen.kernels import dispatch, merge_state

        if self.csr is None:
            self.csr = decode_csr(self.dec_batch, pool)
            self.splits = _splits(self.dec_batch, self.num_heads, q.device)
        width, q, state = q.shape[-1], q.contiguous(), None
        for kv_of, indptr, indices in self.csr:
            args = (q, kv_of(layer), indptr, indices, width**-0.5, width, self.splits)
            o, lse = dispatch("mla_decode", *args, backend=self.backend)
            state = (o, lse) if state is None else merge_state(*state, o, lse)
        return state[0]


def expands(prefix_lens: list[int], extend_lens: list[int], threshold: float) -> bool:
    """Whether an extend of these requests takes the expanded form (the module docstring's
    rule: sum of T * L >= threshold * sum of P)."""
    new_by_context = sum(t * (p + t) for p, t in zip(prefix_lens, extend_lens))
    return new_by_context >= threshold * sum(prefix_lens)


def expand_threshold(mla) -> float:
    """The FLOP crossover of the module docstring for an MLAArch's dims."""
    r, w = mla.kv_lora_rank, mla.latent_dim
    pair_absorbed = w + r  # scores over the latent, values over c_kv
    pair_expanded = mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim
    return r * (mla.qk_nope_head_dim + mla.v_head_dim) / (pair_absorbed - pair_expanded)


def _splits(batch: ForwardBatch, num_heads: int, device: torch.device) -> int:
    """Split-KV programs per request for this decode batch (kernels.mla_decode.decode_splits);
    a static batch's seq_lens are its context bucket, so each graph has one split count."""
    from radixgen.kernels.mla_decode import decode_splits

    sms = (
        torch.cuda.get_device_properties(device).multi_processor_count
        if device.type == "cuda"
        else 4
    )
    return decode_splits(batch.batch_size, num_heads, max(batch.seq_lens), sms)


def _kernel_reads(pool: LatentPool) -> bool:
    """Whether the kernel takes this pool's planes: every part has kv_buffers and the plane
    width splits into its chunks."""
    from radixgen.kernels.mla_decode import plane_chunks

    if not all(hasattr(p, "kv_buffers") for p, _, _ in pool_parts(pool.pool)):
        return False
    try:
        plane_chunks(pool.latent_dim // 2)
    except ValueError:
        return False
    return True


def decode_csr(batch: ForwardBatch, pool: LatentPool) -> list[tuple]:
    """Per pool part: (its kv_buffers, kv_indptr, kv_indices) of each decode request's slots,
    in that part's own slot numbering (a branch pool's slots start at the mixed boundary); with
    fixed shapes from the device lengths for a static (CUDA graph) batch."""
    parts = pool_parts(pool.pool)
    return [
        (part.kv_buffers, *batch_slot_csr(batch, lo, hi, len(parts) == 1)) for part, lo, hi in parts
    ]

"""Attention for multi-head latent attention models: TorchAttention's extends (prefill chunks,
token trees) and, on CUDA, decode through the MLA decode kernel (kernels/mla_decode.py), which
reads the latent pool's pages in place (bf16, FP8, NVFP4; each pool of a mixed pair in its own
launch, the two states merged by log-sum-exp)."""

from __future__ import annotations

import torch

from radixgen.radix.latent_pool import LatentPool
from radixgen.runtime.attention import TorchAttention
from radixgen.runtime.forward_batch import ForwardBatch


class LatentAttention(TorchAttention):
    """TorchAttention over one latent KV head, whose decode runs the MLA kernel (`use_kernel`:
    None = on CUDA; True also runs it on the CPU under TRITON_INTERPRET=1, for tests)."""

    def __init__(self, num_heads: int, latent_dim: int, use_kernel: bool | None = None):
        super().__init__(num_heads, 1, latent_dim)
        self.use_kernel = use_kernel

    def begin(self, batch: ForwardBatch) -> None:
        super().begin(batch)
        self.csr: list[tuple] | None = None  # per pool part: (kv_buffers of, indptr, indices)

    def _decode(self, layer: int, q: torch.Tensor, pool) -> torch.Tensor:
        wanted = q.is_cuda if self.use_kernel is None else self.use_kernel
        if not (wanted and isinstance(pool, LatentPool) and _kernel_reads(pool)):
            return super()._decode(layer, q, pool)
        from radixgen.kernels import dispatch, merge_state

        if self.csr is None:
            self.csr = _part_csr(self.dec_batch, pool)
            self.splits = _splits(self.dec_batch, self.num_heads, q.device)
        width, q, state = q.shape[-1], q.contiguous(), None
        for kv_of, indptr, indices in self.csr:
            args = (q, kv_of(layer), indptr, indices, width**-0.5, width, self.splits)
            o, lse = dispatch("mla_decode", *args, backend="triton")
            state = (o, lse) if state is None else merge_state(*state, o, lse)
        return state[0]


def _splits(batch: ForwardBatch, num_heads: int, device: torch.device) -> int:
    """Split-KV programs per request for this decode batch (kernels.mla_decode.decode_splits)."""
    from radixgen.kernels.mla_decode import decode_splits

    sms = (
        torch.cuda.get_device_properties(device).multi_processor_count
        if device.type == "cuda"
        else 4
    )
    return decode_splits(batch.batch_size, num_heads, max(batch.seq_lens), sms)


def _parts(pool) -> list:
    """The plain pools behind `pool` (a mixed pair's prefix and branch, or itself)."""
    return [pool.prefix, pool.branch] if hasattr(pool, "boundary") else [pool]


def _kernel_reads(pool: LatentPool) -> bool:
    """Whether the kernel takes this pool's planes: every part has kv_buffers and the plane
    width splits into its chunks."""
    from radixgen.kernels.mla_decode import plane_chunks

    if not all(hasattr(p, "kv_buffers") for p in _parts(pool.pool)):
        return False
    try:
        plane_chunks(pool.latent_dim // 2)
    except ValueError:
        return False
    return True


def _part_csr(batch: ForwardBatch, pool: LatentPool) -> list[tuple]:
    """Per pool part: (its kv_buffers, kv_indptr, kv_indices) of each decode request's slots,
    in that part's own slot numbering (a branch pool's slots start at the mixed boundary)."""
    device = batch.kv_slots.device
    lens = torch.tensor(batch.seq_lens, device=device)
    cols = torch.arange(batch.kv_slots.shape[1], device=device)
    seen = cols[None, :] < lens[:, None]  # [B, S]
    parts = _parts(pool.pool)
    if len(parts) == 1:
        return [(parts[0].kv_buffers, _indptr(seen), batch.kv_slots[seen])]
    boundary = pool.pool.boundary
    prefix = seen & (batch.kv_slots < boundary)
    branch = seen & (batch.kv_slots >= boundary)
    return [
        (parts[0].kv_buffers, _indptr(prefix), batch.kv_slots[prefix]),
        (parts[1].kv_buffers, _indptr(branch), batch.kv_slots[branch] - boundary),
    ]


def _indptr(mask: torch.Tensor) -> torch.Tensor:
    """[B + 1] int64 row offsets of the True entries of mask [B, S]."""
    counts = mask.sum(dim=1)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])

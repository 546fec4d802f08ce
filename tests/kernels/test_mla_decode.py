"""mla_decode (Triton under TRITON_INTERPRET=1 here, and its torch reference) over latent pools
(bf16/fp32, FP8, NVFP4 planes written through radix.LatentPool) against float64 attention over
the latents as stored; launcher validation."""

import math

import pytest
import torch

from radixgen.kernels import mla_decode as mla
from radixgen.radix.latent_pool import LatentPool, latent_groups
from radixgen.radix.quant_kv_pool import make_kv_pool
from tests.kernels.conftest import KERNEL_DEVICE

SLOTS = 96


def _pool(kind, kv_lora_rank, rope, dtype, seed=0):
    """A one-layer latent pool of `kind` filled with random latents: (KVBuffers, the latents
    as the pool returns them [SLOTS, W] float64)."""
    gen = torch.Generator().manual_seed(seed)
    groups, width = latent_groups(kv_lora_rank, rope)
    pool = make_kv_pool(kind, SLOTS, 1, groups, width, dtype, KERNEL_DEVICE)
    latent_pool = LatentPool(pool, groups, width)
    latents = torch.randn(SLOTS, 1, kv_lora_rank + rope, generator=gen)
    latents[..., kv_lora_rank:] *= 8  # the rope key larger than c_kv, as in real checkpoints
    latent_pool.store(
        0, torch.arange(SLOTS, device=KERNEL_DEVICE), latents.to(KERNEL_DEVICE, dtype)
    )
    stored = latent_pool.gather(0, torch.arange(SLOTS, device=KERNEL_DEVICE))[0][:, 0]
    return pool.kv_buffers(0), stored.double().cpu()


def _csr(lens, gen):
    perm = torch.randperm(SLOTS, generator=gen)
    indices = torch.cat([perm[:n] for n in lens]) if lens else torch.zeros(0, dtype=torch.int64)
    indptr = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()])
    return indptr, indices


def _oracle(q, latents, indptr, indices, sm_scale, v_dim):
    outs, lses = [], []
    for b in range(q.shape[0]):
        lat = latents[indices[indptr[b] : indptr[b + 1]]]  # [L, W]
        scores = q[b].double() @ lat.T * sm_scale
        lse = torch.logsumexp(scores, -1)
        outs.append(torch.exp(scores - lse[:, None]).nan_to_num(0.0) @ lat[:, :v_dim])
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


@pytest.mark.parametrize(
    "kind, dtype, rank, rope, tol",
    [
        ("fp32", torch.float32, 48, 16, 1e-4),  # one 32-wide chunk per plane
        ("bf16", torch.bfloat16, 512, 64, 2e-2),  # DeepSeek's: 288 = 256 + 32 per plane
        ("fp8_e4m3", torch.float32, 512, 64, 1e-4),
        ("nvfp4", torch.float32, 512, 64, 1e-4),
        ("nvfp4", torch.float32, 48, 16, 1e-4),
    ],
)
def test_mla_decode_matches_float64_over_the_stored_latents(kind, dtype, rank, rope, tol):
    gen = torch.Generator().manual_seed(1)
    kv, latents = _pool(kind, rank, rope, dtype)
    lens = [1, 40, 0, 75]  # one token, several tiles, no keys, a partial last tile
    indptr, indices = _csr(lens, gen)
    heads = 20  # two head blocks, the second partial
    q = torch.randn(len(lens), heads, rank + rope, generator=gen).to(dtype)
    sm_scale = 1 / math.sqrt(192)
    want_o, want_lse = _oracle(q, latents, indptr, indices, sm_scale, rank)
    dev = KERNEL_DEVICE
    args = (q.to(dev), kv, indptr.to(dev), indices.to(dev), sm_scale, rank)
    for fn, splits in ((mla.mla_decode, 1), (mla.mla_decode, 3), (mla.mla_decode_ref, 1)):
        o, lse = fn(*args, num_splits=splits)  # 3: split-KV partials, merged
        assert o.shape == (len(lens), heads, rank) and o.dtype == dtype
        torch.testing.assert_close(o.double().cpu(), want_o, atol=tol, rtol=tol)
        torch.testing.assert_close(lse.double().cpu(), want_lse, atol=tol, rtol=tol)
    assert (o[2] == 0).all() and torch.isinf(lse[2]).all()


def test_mla_decode_rejects_bad_inputs():
    kv, _ = _pool("fp32", 48, 16, torch.float32)
    dev = KERNEL_DEVICE
    indptr, indices = torch.tensor([0, 2], device=dev), torch.tensor([3, 4], device=dev)
    with pytest.raises(ValueError, match="must be"):
        mla.mla_decode(torch.randn(1, 4, 60, device=dev), kv, indptr, indices, 0.1, 48)
    with pytest.raises(ValueError, match="v_dim"):
        mla.mla_decode(torch.randn(1, 4, 64, device=dev), kv, indptr, indices, 0.1, 0)
    with pytest.raises(ValueError, match="kv_indptr"):
        mla.mla_decode(torch.randn(2, 4, 64, device=dev), kv, indptr, indices, 0.1, 48)
    with pytest.raises(ValueError, match="num_splits"):
        mla.mla_decode(torch.randn(1, 4, 64, device=dev), kv, indptr, indices, 0.1, 48, 0)
    with pytest.raises(ValueError, match="power-of-two"):
        mla.plane_chunks(240)  # 128 + 112


@pytest.mark.parametrize("mixed", [False, True])
def test_latent_attention_decode_through_the_kernel_equals_torch(mixed):
    """The runtime's MLA decode on the kernel (each pool of a mixed fp8 / nvfp4 pair in its own
    launch, merged) against TorchAttention over the same latent pool."""
    from radixgen.radix.kv_pool import KVPool
    from radixgen.radix.mixed_kv_pool import MixedKVPool
    from radixgen.radix.quant_kv_pool import FP8KVPool, NVFP4KVPool
    from radixgen.runtime.attention import TorchAttention
    from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
    from radixgen.runtime.mla_attention import LatentAttention

    gen = torch.Generator().manual_seed(2)
    groups, width = latent_groups(48, 16)
    dev, half = KERNEL_DEVICE, SLOTS // 2
    if mixed:
        pool = MixedKVPool(
            FP8KVPool(half, 1, groups, width, torch.float32, dev),
            NVFP4KVPool(half, 1, groups, width, torch.float32, dev),
            half,
        )
    else:
        pool = KVPool(SLOTS, 1, groups, width, torch.float32, dev)
    latent_pool = LatentPool(pool, groups, width)
    latent_pool.store(0, torch.arange(SLOTS, device=dev), torch.randn(SLOTS, 1, 64, generator=gen))
    lens = [5, 33, 60]
    kv_slots = torch.zeros(3, 60, dtype=torch.int64)
    for b, n in enumerate(lens):
        kv_slots[b, :n] = torch.randperm(SLOTS, generator=gen)[:n]  # both pools, any order
    batch = ForwardBatch(
        mode=ForwardMode.DECODE,
        input_ids=torch.zeros(3, dtype=torch.int64, device=dev),
        positions=torch.tensor([n - 1 for n in lens], device=dev),
        out_slots=kv_slots[torch.arange(3), torch.tensor(lens) - 1].to(dev),
        kv_slots=kv_slots.to(dev),
        seq_lens=lens,
        extend_lens=[1, 1, 1],
        logits_indices=torch.arange(3, device=dev),
    )
    q = torch.randn(3, 4, 64, generator=gen).to(dev)
    new = torch.randn(3, 1, 64, generator=gen).to(dev)
    outs = []
    for attn in (TorchAttention(4, 1, 64, cascade=False), LatentAttention(4, 64, use_kernel=True)):
        attn.begin(batch)
        outs.append(attn.attend(0, q, new, new, latent_pool))
    torch.testing.assert_close(outs[1], outs[0], atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_gpu_mla_decode_matches_flashinfer_mla():
    """Our kernel over a bf16 latent pool against flashinfer's MLA wrapper over the same latents
    in its layout (c_kv and k_pe as views of one [N, 1, 576] tensor)."""
    from radixgen.kernels import flashinfer_ops

    if not flashinfer_ops.available():
        pytest.skip("flashinfer is not installed")
    gen = torch.Generator().manual_seed(5)
    kv, latents = _pool("bf16", 512, 64, torch.bfloat16)
    indptr, indices = _csr([70, 1, 33], gen)
    q = torch.randn(3, 16, 576, generator=gen).bfloat16().cuda()
    indptr, indices = indptr.cuda(), indices.cuda()
    sm_scale = 1 / math.sqrt(192)
    whole = latents.cuda().bfloat16()[:, None]  # [N, 1, 576]
    fi_o, fi_lse = flashinfer_ops.mla_decode(
        q, whole[..., :512], whole[..., 512:], indptr, indices, sm_scale
    )
    o, lse = mla.mla_decode(q, kv, indptr, indices, sm_scale, 512)
    torch.testing.assert_close(o.float(), fi_o.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, fi_lse, atol=2e-2, rtol=2e-2)

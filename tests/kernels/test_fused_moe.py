"""The fused-MoE grouped GEMM (Triton, under the interpreter on the CPU) and the torch expert
path both equal a per-token loop over each token's top-k experts; the block alignment groups
every (token, expert) pair under its expert exactly once."""

import pytest
import torch
import torch.nn.functional as F

from tests.kernels.conftest import KERNEL_DEVICE


def per_token_moe(x, w13, w2, topk_weights, topk_ids):
    """out[t] = sum_j w_j * down_e(silu(gate_e x) * up_e x), one token and expert at a time."""
    inter = w2.shape[2]
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for weight, e in zip(topk_weights[t].tolist(), topk_ids[t].tolist()):
            gate, up = (w13[e] @ x[t]).split(inter)
            out[t] += weight * (w2[e] @ (F.silu(gate) * up))
    return out


def random_moe(num_tokens, num_experts, top_k, hidden, inter, device, seed=0, skew=False):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    scores = torch.randn(num_tokens, num_experts, generator=gen)
    if skew:  # most tokens on expert 0: one expert's run spans several tiles
        scores[:, 0] += 10
    weights, ids = torch.softmax(scores, -1).topk(top_k, dim=-1)
    return [t.to(device) for t in (x, w13, w2, weights, ids)]


@pytest.mark.parametrize(
    "num_tokens,num_experts,top_k,block_m", [(1, 4, 2, 16), (7, 8, 2, 16), (40, 4, 3, 16)]
)
def test_align_block_size_groups_each_pair_under_its_expert(
    num_tokens, num_experts, top_k, block_m
):
    from radixgen.kernels.fused_moe import align_block_size

    _, _, _, _, ids = random_moe(num_tokens, num_experts, top_k, 8, 8, "cpu", skew=True)
    sorted_ids, expert_ids, num_padded = align_block_size(ids, num_experts, block_m)
    num_pairs, used = ids.numel(), int(num_padded)
    assert used % block_m == 0 and sorted_ids.numel() >= used
    real = sorted_ids[:used][sorted_ids[:used] < num_pairs]
    assert sorted(real.tolist()) == list(range(num_pairs))
    assert (sorted_ids[used:] == num_pairs).all()
    flat = ids.reshape(-1)
    for tile in range(used // block_m):
        entries = sorted_ids[tile * block_m : (tile + 1) * block_m]
        entries = entries[entries < num_pairs].long()
        assert (flat[entries] == expert_ids[tile]).all(), tile
    assert (expert_ids[used // block_m :] == num_experts).all()


@pytest.mark.parametrize(
    "num_tokens,num_experts,top_k,skew", [(1, 4, 2, False), (9, 8, 2, False), (37, 4, 2, True)]
)
def test_triton_grouped_gemm_matches_per_token_loop(num_tokens, num_experts, top_k, skew):
    from radixgen.kernels.fused_moe import fused_experts

    # hidden and width not multiples of the tiles: the K and N masks are exercised
    args = random_moe(
        num_tokens, num_experts, top_k, 40, 24, KERNEL_DEVICE, seed=num_tokens, skew=skew
    )
    ref = per_token_moe(*[a.cpu() for a in args])
    out = fused_experts(*args).cpu()
    tol = 1e-4 if KERNEL_DEVICE == "cpu" else 2e-2  # TF32 dots on a GPU
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


def test_torch_expert_path_matches_per_token_loop():
    from radixgen.kernels import fused_experts

    args = random_moe(23, 8, 2, 32, 16, "cpu", seed=5, skew=True)
    out = fused_experts(*args, backend="torch")
    torch.testing.assert_close(out, per_token_moe(*args), atol=1e-5, rtol=1e-5)


def test_launcher_rejects_mismatched_shapes():
    from radixgen.kernels.fused_moe import fused_experts

    x, w13, w2, weights, ids = random_moe(3, 4, 2, 32, 16, "cpu")
    with pytest.raises(ValueError, match="shapes disagree"):
        fused_experts(x, w13, w2[:, :, :8].contiguous(), weights, ids)
    with pytest.raises(ValueError, match=r"\[T, k\]"):
        fused_experts(x, w13, w2, weights[:2], ids[:2])

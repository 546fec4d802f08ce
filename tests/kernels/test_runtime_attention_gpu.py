"""The runtime's kernel attention path (`KernelAttention`, attention_backend="triton") against the
torch path (`TorchAttention`) on a GPU: one attention layer over real KV pools (bf16, FP8, NVFP4,
FP8 prefix + NVFP4 branch) with speculative tree masks (ForwardBatch.tree_masks) in extend and
mixed batches, checked row by row against a float64 reference; and whole-engine greedy output
of the two backends on dummy weights. Skipped without CUDA (the CPU runs the interpreter versions
in test_kernel_attention_engine.py). Run with -s to see the measured differences."""

import math

import pytest
import torch

from radixgen.radix.mixed_kv_pool import MixedKVPool
from radixgen.radix.quant_kv_pool import make_kv_pool
from radixgen.runtime.attention import TorchAttention
from radixgen.runtime.attention_kernels import KernelAttention
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode

pytestmark = pytest.mark.gpu
HQ, HKV, D = 32, 8, 128
KINDS = ["bf16", "fp8_e4m3", "nvfp4", "mixed"]


def random_tree(n: int, gen: torch.Generator, bushy: bool) -> torch.Tensor:
    """[n, n] bool ancestor-or-self mask of a random tree whose nodes are in topological order
    (node 0 the root); a chain when not bushy."""
    parents = [-1] + [
        int(torch.randint(0, i, (1,), generator=gen)) if bushy else i - 1 for i in range(1, n)
    ]
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parents[j]
    return mask


def make_pool(kind: str, n_prefix: int, n_branch: int):
    if kind == "mixed":
        return MixedKVPool(
            make_kv_pool("fp8_e4m3", n_prefix, 1, HKV, D, torch.bfloat16, "cuda"),
            make_kv_pool("nvfp4", n_branch, 1, HKV, D, torch.bfloat16, "cuda"),
            n_prefix,
        )
    return make_kv_pool(kind, n_prefix + n_branch, 1, HKV, D, torch.bfloat16, "cuda")


def build_batch(kind, prefix_lens, extend_lens, masks, num_decode, gen):
    """A batch whose last num_decode requests decode; prefixes stored in the pool already.
    Returns (batch, pool, q, k, v)."""
    n_prefix, n_branch = 4096, 2048
    pool = make_pool(kind, n_prefix, n_branch)
    # prefix KV in [0, n_prefix), new tokens in [n_prefix, ...) (the branch pool when mixed)
    pre_perm = torch.randperm(n_prefix, generator=gen)
    new_perm = torch.randperm(n_branch, generator=gen) + n_prefix
    slots, out_slots, pi, ni = [], [], 0, 0
    for p, e in zip(prefix_lens, extend_lens):
        pre, new = pre_perm[pi : pi + p], new_perm[ni : ni + e]
        pi, ni = pi + p, ni + e
        slots.append(torch.cat([pre, new]))
        out_slots.append(new)
    all_pre = torch.cat([s[:p] for s, p in zip(slots, prefix_lens)]).cuda()
    kp = torch.randn(len(all_pre), HKV, D, generator=gen).cuda().bfloat16()
    vp = torch.randn(len(all_pre), HKV, D, generator=gen).cuda().bfloat16()
    pool.store(0, all_pre, kp, vp)
    seq_lens = [p + e for p, e in zip(prefix_lens, extend_lens)]
    kv_slots = torch.zeros(len(seq_lens), max(seq_lens), dtype=torch.int64)
    for i, s in enumerate(slots):
        kv_slots[i, : len(s)] = s
    t = sum(extend_lens)
    mode = (
        ForwardMode.MIXED
        if num_decode and num_decode < len(seq_lens)
        else (ForwardMode.DECODE if num_decode else ForwardMode.EXTEND)
    )
    positions = torch.cat([torch.arange(p, p + e) for p, e in zip(prefix_lens, extend_lens)])
    batch = ForwardBatch(
        mode,
        torch.zeros(t, dtype=torch.int64).cuda(),
        positions.cuda(),
        torch.cat(out_slots).cuda(),
        kv_slots.cuda(),
        seq_lens,
        list(extend_lens),
        torch.arange(t).cuda(),
        num_decode=num_decode if mode is ForwardMode.MIXED else 0,
        tree_masks=masks,
    )
    q = torch.randn(t, HQ, D, generator=gen).cuda().bfloat16()
    k = torch.randn(t, HKV, D, generator=gen).cuda().bfloat16()
    v = torch.randn(t, HKV, D, generator=gen).cuda().bfloat16()
    pool.store(0, batch.out_slots, k, v)  # so both backends' own stores rewrite the same values
    return batch, pool, q, k, v


def reference(batch, pool, q, masks):
    """float64 attention over the pool's dequantized KV, each row seeing its prefix + its
    visible new tokens."""
    out, start = [], 0
    for i, (s, e) in enumerate(zip(batch.seq_lens, batch.extend_lens)):
        keys, values = pool.gather(0, batch.kv_slots[i, :s])
        keys = keys.double().repeat_interleave(HQ // HKV, 1)
        values = values.double().repeat_interleave(HQ // HKV, 1)
        qi = q[start : start + e].double()
        sc = torch.einsum("nhd,lhd->hnl", qi, keys) / math.sqrt(D)
        tree = (
            masks[i]
            if masks is not None and i < len(masks) and masks[i] is not None
            else torch.ones(e, e, dtype=torch.bool).tril()
        )
        vis = torch.cat([torch.ones(e, s - e, dtype=torch.bool), tree.bool()], 1).cuda()
        sc = sc.masked_fill(~vis, -math.inf)
        out.append(torch.einsum("hnl,lhd->nhd", sc.softmax(-1), values))
        start += e
    return torch.cat(out)


def run_both(batch, pool, q, k, v, flashinfer_extend=None):
    outs = []
    for attn in (
        TorchAttention(HQ, HKV, D),
        KernelAttention(HQ, HKV, D, "triton", flashinfer_extend),
    ):
        attn.begin(batch)
        outs.append(attn.attend(0, q, k, v, pool).float())
    return outs


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bushy", [False, True], ids=["chain", "bushy"])
def test_tree_mask_extend_triton_matches_torch(kind, bushy):
    gen = torch.Generator().manual_seed(3)
    prefix_lens, extend_lens = [1030, 77, 500, 0], [9, 33, 17, 5]
    masks = [
        random_tree(9, gen, bushy),
        random_tree(33, gen, bushy),
        None,
        random_tree(5, gen, bushy),
    ]
    batch, pool, q, k, v = build_batch(kind, prefix_lens, extend_lens, masks, 0, gen)
    want = reference(batch, pool, q, masks)
    got_t, got_k = run_both(batch, pool, q, k, v)
    d_tk = (got_t - got_k).abs().max().item()
    d_kr = (got_k.double() - want).abs().max().item()
    d_tr = (got_t.double() - want).abs().max().item()
    print(
        f"\n[tree extend {kind} {'bushy' if bushy else 'chain'}] max|triton-torch| {d_tk:.2e}  "
        f"max|triton-ref| {d_kr:.2e}  max|torch-ref| {d_tr:.2e}"
    )
    assert d_kr < 2e-2 and d_tk < 3e-2
    if not bushy:  # a chain is causal: same rows as no tree mask at all
        batch.tree_masks = None
        got_c = run_both(batch, pool, q, k, v, flashinfer_extend=False)[1]
        # the same math in two compiled variants of the kernel: equal up to fp32 rounding, which
        # can move a bf16 output by one unit in the last place
        assert (got_c - got_k).abs().max().item() < 1e-2


@pytest.mark.parametrize("kind", KINDS)
def test_tree_mask_mixed_batch_triton_matches_torch(kind):
    """Extend requests with tree masks followed by decode requests in one MIXED forward."""
    gen = torch.Generator().manual_seed(4)
    prefix_lens, extend_lens = [300, 64, 700, 1100], [17, 8, 1, 1]
    masks = [random_tree(17, gen, True), random_tree(8, gen, True)]
    batch, pool, q, k, v = build_batch(kind, prefix_lens, extend_lens, masks, 2, gen)
    want = reference(batch, pool, q, masks)
    got_t, got_k = run_both(batch, pool, q, k, v)
    d_tk = (got_t - got_k).abs().max().item()
    d_kr = (got_k.double() - want).abs().max().item()
    print(f"\n[tree mixed batch {kind}] max|triton-torch| {d_tk:.2e}  max|triton-ref| {d_kr:.2e}")
    assert d_kr < 2e-2 and d_tk < 3e-2


@pytest.mark.parametrize("kind", KINDS)
def test_extend_dispatch_matches_torch(kind):
    """Extends without tree masks: a bf16 pool goes to flashinfer where it is installed (the
    dispatch is checked), FP8, NVFP4 and mixed pools to the Triton kernel; every path against the
    float64 reference and TorchAttention, incl. a request with no cached prefix and a 600-token prompt."""
    from radixgen.kernels import flashinfer_ops

    gen = torch.Generator().manual_seed(7)
    prefix_lens, extend_lens = [1030, 0, 500, 77], [9, 600, 17, 130]
    batch, pool, q, k, v = build_batch(kind, prefix_lens, extend_lens, None, 0, gen)
    want = reference(batch, pool, q, None)
    got_t = run_both(batch, pool, q, k, v)[0]
    attn = KernelAttention(HQ, HKV, D, "triton")
    attn.begin(batch)
    got_k = attn.attend(0, q, k, v, pool).float()
    to_flashinfer = kind == "bf16" and flashinfer_ops.available()
    assert attn.flashinfer_extends == int(to_flashinfer)
    d_tk = (got_t - got_k).abs().max().item()
    d_kr = (got_k.double() - want).abs().max().item()
    print(
        f"\n[extend dispatch {kind}: {'flashinfer' if to_flashinfer else 'triton'}] "
        f"max|kernel-torch| {d_tk:.2e}  max|kernel-ref| {d_kr:.2e}"
    )
    assert d_kr < 2e-2 and d_tk < 3e-2
    triton_only = KernelAttention(HQ, HKV, D, "triton", flashinfer_extend=False)
    triton_only.begin(batch)
    got_tr = triton_only.attend(0, q, k, v, pool).float()
    assert triton_only.flashinfer_extends == 0 and (got_tr - got_k).abs().max().item() < 3e-2


GREEDY = {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True, "return_logprob": True}
ENGINE_KV = {
    "bf16": {"kv_cache_dtype": "bf16"},
    "fp8": {"kv_cache_dtype": "fp8_e4m3"},
    "nvfp4": {"kv_cache_dtype": "nvfp4"},
    "mixed": {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4"},
}


def engine_outputs(model_path, backend, dtype, kv, prompts):
    from radixgen.runtime.engine import Engine

    eng = Engine(
        str(model_path),
        load_format="dummy",
        dtype=dtype,
        max_total_tokens=4096,
        attention_backend=backend,
        **kv,
    )
    try:
        first = eng.generate(
            input_ids=prompts[0], sampling_params=GREEDY
        )  # the rest hit its prefix
        rest = eng.generate(input_ids=prompts, sampling_params=GREEDY)
    finally:
        eng.shutdown()
    return [first] + rest


def shared_prefix_prompts():
    gen = torch.Generator().manual_seed(5)
    prefix = torch.randint(100, 40000, (300,), generator=gen).tolist()
    return [
        prefix + torch.randint(100, 40000, (n,), generator=gen).tolist()
        for n in (3, 17, 40, 1, 64, 9)
    ]


@pytest.mark.parametrize("dtype", ["bfloat16"])
@pytest.mark.parametrize("kv", list(ENGINE_KV))
def test_engine_triton_matches_torch(model_path, kv, dtype):
    prompts = shared_prefix_prompts()
    torch_out = engine_outputs(model_path, "torch", dtype, ENGINE_KV[kv], prompts)
    kern_out = engine_outputs(model_path, "triton", dtype, ENGINE_KV[kv], prompts)
    same = total = 0
    first_diverge, max_lp = [], 0.0
    for a, b in zip(torch_out, kern_out):
        ids_a, ids_b = a["output_ids"], b["output_ids"]
        n = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y), len(ids_a))
        first_diverge.append(n)
        same += sum(x == y for x, y in zip(ids_a, ids_b))
        total += len(ids_a)
        lp_a = [lp for lp, _ in a["meta_info"]["output_token_logprobs"][:n]]
        lp_b = [lp for lp, _ in b["meta_info"]["output_token_logprobs"][:n]]
        max_lp = max([max_lp] + [abs(x - y) for x, y in zip(lp_a, lp_b)])
    print(
        f"\n[engine {kv} {dtype}] tokens equal {same}/{total}; identical prefix per request "
        f"{first_diverge}; max |logprob diff| before divergence {max_lp:.2e}; "
        f"cached tokens {[o['meta_info']['cached_tokens'] for o in kern_out]}"
    )
    assert max_lp < 0.1  # bf16 on random weights: near-ties may flip a token, then outputs part
    if dtype == "float32":
        assert same >= 0.9 * total


@pytest.mark.parametrize("kind", ["fp8_e4m3", "nvfp4"])
def test_quantized_pool_stores_strided_views(kind):
    """The model hands the pool k and v as views of the fused qkv output (not contiguous)."""
    gen = torch.Generator().manual_seed(6)
    qkv = torch.randn(7, (HQ + 2 * HKV) * D, generator=gen).cuda().bfloat16()
    k = qkv[:, HQ * D : (HQ + HKV) * D].view(-1, HKV, D)
    v = qkv[:, (HQ + HKV) * D :].view(-1, HKV, D)
    assert not k.is_contiguous() and not v.is_contiguous()
    pool = make_kv_pool(kind, 64, 1, HKV, D, torch.bfloat16, "cuda")
    slots = torch.tensor([3, 9, 1, 40, 41, 0, 63], device="cuda")
    pool.store(0, slots, k, v)
    ref = make_kv_pool(kind, 64, 1, HKV, D, torch.bfloat16, "cuda")
    ref.store(0, slots, k.contiguous(), v.contiguous())
    for a, b in zip(pool.gather(0, slots), ref.gather(0, slots)):
        assert torch.equal(a, b)

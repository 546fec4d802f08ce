"""MLA extends in the expanded form (per-head K/V decompressed from the cached latents, then
SDPA) against the absorbed form, and the rule that picks one (runtime/mla_attention.py). The
HF-equality of both forms is in test_moe_families.py (an unchunked prefill runs expanded,
later 8-token chunks over their prefix absorbed, and test_mla_absorbed_only_matches_hf)."""

import copy

import pytest
import torch

from benchmarks.model_shapes import DEEPSEEK_TINY, DEEPSEEK_V2_LITE
from radixgen.radix.kv_pool import KVPool
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
from radixgen.runtime.mla_attention import LatentAttention, expand_threshold, expands
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import dummy_state_dict
from radixgen.runtime.model.registry import build_model

VOCAB = 1000


def test_expand_rule():
    """Expanded without a cached prefix (any length), from `threshold` new tokens over a long
    prefix; 0 always, inf never. DeepSeek's dims cross over at ~171 new tokens."""
    mla = ModelArch.from_config(DEEPSEEK_V2_LITE).mla
    threshold = expand_threshold(mla)
    assert threshold == pytest.approx(512 * 256 / (576 + 512 - 320))
    assert expands([0], [3], threshold) and expands([0, 0], [1, 9], threshold)
    assert not expands([100_000], [170], threshold) and expands([100_000], [172], threshold)
    assert expands([4096], [4096], threshold)  # T * L = 2 * 4096^2 >= 171 * 4096
    assert not expands([4096, 4096], [1, 1], threshold)
    assert expands([4096], [1], 0.0) and not expands([0], [4096], float("inf"))


def _model():
    """The tiny DeepSeek-V3 with dummy weights at std ~0.2 (the default 0.02 makes every
    attention output nearly uniform, which would hide a wrong form)."""
    cfg = {**DEEPSEEK_TINY, "architectures": ["DeepseekV3ForCausalLM"], "q_lora_rank": 40}
    cfg["vocab_size"] = VOCAB
    arch = ModelArch.from_config(cfg)
    weights = dummy_state_dict(arch, torch.float32, torch.device("cpu"), seed=4)
    for name, w in weights.items():
        if w.ndim == 2 and "embed" not in name:
            w.mul_(10)
    return arch, build_model(arch, weights, torch.device("cpu"))


def _batch(mode, ids, positions, out_slots, rows, seq_lens, ext_lens, logits, **kw):
    return ForwardBatch(
        mode,
        torch.tensor(ids),
        torch.tensor(positions),
        torch.tensor(out_slots),
        torch.tensor(rows),
        seq_lens,
        ext_lens,
        torch.tensor(logits),
        **kw,
    )


def test_expanded_extend_equals_absorbed():
    """A mixed batch (a 9-token chunk over a 20-token prefix, a 4-token tree over a 12-token
    prefix, one decode row): the expanded extend part gives the absorbed logits, and the same
    latents in the pool."""
    arch, model = _model()
    gen = torch.Generator().manual_seed(0)
    pool = KVPool(128, arch.num_layers, *arch.pool_shape, torch.float32)
    lens = (20, 12, 30)  # the cached prefixes of the three requests
    rows = [[n * 40 + i for i in range(40)] for n in range(3)]  # slot of each position
    prefill = _batch(
        ForwardMode.EXTEND,
        torch.randint(3, VOCAB, (sum(lens),), generator=gen).tolist(),
        [p for n in lens for p in range(n)],
        [s for n, r in zip(lens, rows) for s in r[:n]],
        rows,
        list(lens),
        list(lens),
        [sum(lens) - 1],
    )
    model.forward(prefill, pool, LatentAttention(arch.num_heads, arch.mla.latent_dim))
    tree = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    new = (9, 4, 1)
    step = _batch(
        ForwardMode.MIXED,
        torch.randint(3, VOCAB, (sum(new),), generator=gen).tolist(),
        [p for n, t in zip(lens, new) for p in range(n, n + t)],
        [s for n, t, r in zip(lens, new, rows) for s in r[n : n + t]],
        rows,
        [n + t for n, t in zip(lens, new)],
        list(new),
        list(range(sum(new))),
        num_decode=1,
        tree_masks=[None, tree],
    )
    outs = []
    for threshold in (0.0, float("inf")):
        attn = LatentAttention(arch.num_heads, arch.mla.latent_dim, expand_threshold=threshold)
        step_pool = copy.deepcopy(pool)
        outs.append((model.forward(step, step_pool, attn), step_pool))
        assert attn.expanded_extends == (threshold == 0)
    (expanded, pool_a), (absorbed, pool_b) = outs
    torch.testing.assert_close(expanded, absorbed, rtol=1e-4, atol=1e-4)
    assert (expanded - absorbed).abs().max() < 1e-3 * absorbed.std()
    assert torch.equal(pool_a.k[0], pool_b.k[0]) and torch.equal(pool_a.v[0], pool_b.v[0])
    for layer in range(1, arch.num_layers):  # past layer 0, inputs differ by rounding
        torch.testing.assert_close(pool_a.k[layer], pool_b.k[layer], rtol=1e-4, atol=1e-5)

"""Decode steps from static, padded buffers (runtime/cuda_graph.py). On the CPU the static
forward runs eagerly (capture=False): padding, the device-built CSR and the context buckets are
checked against the ordinary forward; on CUDA the graphs are replayed (marked gpu)."""

import random

import pytest
import torch

from radixgen.runtime.attention_kernels import KernelAttention
from radixgen.runtime.cuda_graph import BATCH_SIZES, DecodeGraphs, context_width, padded_batch
from radixgen.runtime.engine import Engine


def test_padded_batch_and_context_width():
    assert [padded_batch(n, 64) for n in (1, 3, 5, 33, 64)] == [1, 4, 8, 40, 64]
    assert padded_batch(65, 64) is None and padded_batch(100, 256) == 112
    assert all(padded_batch(b, 256) == b for b in BATCH_SIZES)
    assert [context_width(n, 1 << 20) for n in (1, 256, 257, 1024, 3000, 5000)] == [
        256,
        256,
        1024,
        1024,
        4096,
        16384,
    ]
    assert context_width(5000, 4096) == 4096  # capped at the table's width


def _engine(tiny_model_path, kv, dtype="float32"):
    """A CPU engine whose attention is KernelAttention over the kernels' torch references (the
    backend CUDA graphs capture, with the Triton kernels, on a GPU)."""
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype=dtype,
        device="cpu",
        max_total_tokens=2048,
        kv_cache_dtype=kv,
    )
    runner = engine.scheduler.runner
    a = runner.arch
    runner.attn = KernelAttention(a.num_heads, a.num_kv_heads, a.head_dim, backend="torch")
    return engine, runner


def _prompts(n, seed=0):
    rng = random.Random(seed)
    system = [rng.randrange(100, 40000) for _ in range(40)]
    return [
        system + [rng.randrange(100, 40000) for _ in range(rng.randrange(2, 30))] for _ in range(n)
    ]


@pytest.mark.parametrize("dtype,kv", [("float32", "fp32"), ("bfloat16", "bf16")])
def test_static_decode_equals_eager(tiny_model_path, dtype, kv):
    """Greedy generations of 5 requests (padded to 8) through the static decode forward equal
    the ordinary forward's."""
    prompts = _prompts(5)
    params = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}
    outs = []
    for static in (False, True):
        engine, runner = _engine(tiny_model_path, kv, dtype)
        assert runner.graphs is None  # never on the CPU by default
        if static:
            runner.graphs = DecodeGraphs(
                runner.model,
                runner.pool,
                runner.attn,
                runner.table,
                runner.device,
                max_bs=8,
                capture=False,
            )
            calls = []
            run = runner.graphs.run
            runner.graphs.run = lambda *a, calls=calls, run=run: calls.append(len(a[0])) or run(*a)
        outs.append(
            [r["output_ids"] for r in engine.generate(input_ids=prompts, sampling_params=params)]
        )
    assert outs[0] == outs[1]
    # 11 decode steps each; a step that shares its forward with a prefill chunk runs eagerly
    assert 5 * 10 <= sum(calls) <= 5 * 11
    graphs = runner.graphs.graphs
    assert (8, 256, False) in graphs and {w for _, w, _ in graphs} == {256}


def _decode_logits_both_ways(engine, runner, graphs, seed=1):
    """Logits of one decode step of 3 cached prompts through `graphs` and through the eager
    forward (the same KV is written twice)."""
    from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode

    prompts = _prompts(3, seed=seed)
    engine.generate(input_ids=prompts, sampling_params={"max_new_tokens": 1, "temperature": 0})
    rows = [runner.table.alloc_row() for _ in prompts]
    cached = [
        engine.scheduler.cache.match_prefix(p, engine.scheduler.gate.namespace(None)).slots
        for p in prompts
    ]
    for row, slots in zip(rows, cached):
        runner.table.write(row, 0, slots)
    lens = [len(s) for s in cached]
    ids = [p[len(s)] if len(s) < len(p) else 7 for p, s in zip(prompts, cached)]
    new = runner.allocator.alloc(3)
    got = graphs.run(rows, ids, lens, new)
    width = max(lens) + 1
    dev = runner.device
    batch = ForwardBatch(
        ForwardMode.DECODE,
        torch.tensor(ids, device=dev),
        torch.tensor(lens, device=dev),
        new,
        runner.table.table[rows, :width],
        [n + 1 for n in lens],
        [1] * 3,
        torch.arange(3, device=dev),
    )
    return got, runner.model.forward(batch, runner.pool, runner.attn)


def test_static_decode_logits_match(tiny_model_path):
    """The static forward's logits equal the eager decode forward's, with padding rows (3 -> 4)
    and a context bucket wider than the longest request."""
    engine, runner = _engine(tiny_model_path, "fp32")
    graphs = DecodeGraphs(
        runner.model, runner.pool, runner.attn, runner.table, runner.device, max_bs=4, capture=False
    )
    got, want = _decode_logits_both_ways(engine, runner, graphs)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


MIXED_KV = {"kv_prefix_dtype": "fp8_e4m3", "kv_branch_dtype": "nvfp4"}


@pytest.mark.gpu
@pytest.mark.parametrize("kv", ["bf16", "fp8_e4m3", "nvfp4", "mixed"])
def test_graph_decode_logits_match_eager(tiny_model_path, kv):
    """On CUDA, a replayed graph's logits equal the eager forward's (bf16 weights; FP8, NVFP4
    and the default mixed pools), and a generation replays graphs for its decode steps."""
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=4096,
        **MIXED_KV if kv == "mixed" else {"kv_cache_dtype": kv},
    )
    runner = engine.scheduler.runner
    assert runner.graphs is not None
    got, want = _decode_logits_both_ways(engine, runner, runner.graphs)
    assert runner.graphs.replays == 1 and got.shape == want.shape
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert (got - want).abs().max() <= 0.02 * want.abs().max()
    engine.generate(
        input_ids=_prompts(5, seed=2), sampling_params={"max_new_tokens": 8, "ignore_eos": True}
    )
    assert runner.graphs.replays >= 1 + 6


@pytest.mark.gpu
def test_graphs_off_and_too_large_batches_run_eagerly(tiny_model_path):
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=4096,
        disable_cuda_graph=True,
    )
    assert engine.scheduler.runner.graphs is None
    engine = Engine(
        str(tiny_model_path),
        load_format="dummy",
        dtype="bfloat16",
        device="cuda",
        max_total_tokens=4096,
        cuda_graph_max_bs=2,
    )
    runner = engine.scheduler.runner
    outs = engine.generate(
        input_ids=_prompts(4), sampling_params={"max_new_tokens": 4, "ignore_eos": True}
    )
    assert all(len(o["output_ids"]) == 4 for o in outs) and runner.graphs.replays == 0

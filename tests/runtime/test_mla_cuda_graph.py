"""Decode of DeepSeek (MLA) models from static, padded buffers (runtime/cuda_graph.py over
LatentAttention). On the CPU the static forward runs eagerly (capture=False) through the MLA
decode kernel's torch reference: padding rows, the device-built latent CSR and the context
buckets against the ordinary forward. On CUDA the graphs are captured and replayed (gpu)."""

import pytest
import torch

from benchmarks.model_shapes import DEEPSEEK_TINY
from radixgen.radix.kv_pool import KVPool
from radixgen.radix.latent_pool import LatentPool, latent_groups
from radixgen.radix.mixed_kv_pool import MixedKVPool
from radixgen.runtime.cuda_graph import DecodeGraphs
from radixgen.runtime.engine import Engine
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
from radixgen.runtime.mla_attention import LatentAttention, decode_csr
from tests.runtime.conftest import write_model_folder
from tests.runtime.test_cuda_graph import MIXED_KV, _decode_logits_both_ways, _prompts

GREEDY = {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True}
V3_TINY = {
    **DEEPSEEK_TINY,
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "q_lora_rank": 40,
    "n_group": 4,
    "topk_group": 2,
    "topk_method": "noaux_tc",
    "max_position_embeddings": 1024,
}


@pytest.fixture(scope="module")
def deepseek_path(tmp_path_factory, model_path):
    """A tiny DeepSeek-V3 folder (config + the embedded tokenizer) for load_format="dummy"."""
    return write_model_folder(tmp_path_factory.mktemp("tiny-deepseek-v3"), V3_TINY, model_path)


@pytest.fixture(scope="module")
def cpu_engine(deepseek_path):
    """A float32 CPU engine on the tiny DeepSeek-V3 (default attention: the torch latent path)."""
    with Engine(
        str(deepseek_path),
        load_format="dummy",
        dtype="float32",
        device="cpu",
        max_total_tokens=2048,
    ) as engine:
        yield engine, engine.scheduler.runner


def _static(runner, max_bs):
    """Static decode graphs run eagerly (capture=False), with the latent decode through the MLA
    kernel's reference (the path graphs capture, with the Triton kernel, on a GPU)."""
    a = runner.arch
    runner.attn = LatentAttention(a.num_heads, a.mla.latent_dim, use_kernel=True, backend="torch")
    return DecodeGraphs(
        runner.model, runner.pool, runner.attn, runner.table, runner.device, max_bs, capture=False
    )


def test_static_mla_decode_equals_eager(cpu_engine):
    """Greedy generations of 5 requests (padded to 8) through the static decode forward equal
    the ordinary forward's (the torch latent path, no kernel)."""
    engine, runner = cpu_engine
    prompts = _prompts(5)
    assert runner.graphs is None  # never on the CPU by default
    want = [r["output_ids"] for r in engine.generate(input_ids=prompts, sampling_params=GREEDY)]
    assert engine.scheduler.flush_cache()  # the same prefills again, then static decode steps
    runner.graphs = graphs = _static(runner, max_bs=8)
    got = [r["output_ids"] for r in engine.generate(input_ids=prompts, sampling_params=GREEDY)]
    assert got == want
    assert (8, 256, False) in graphs.graphs and {w for _, w, _ in graphs.graphs} == {256}


def test_static_mla_decode_logits_match(cpu_engine):
    """One padded decode step (3 -> 4 rows, a 256 bucket over ~50-token contexts): the static
    forward's logits equal the eager forward's."""
    engine, runner = cpu_engine
    got, want = _decode_logits_both_ways(engine, runner, _static(runner, max_bs=4))
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _decode_batch(rows, lens, on_device: bool) -> ForwardBatch:
    b = len(lens)
    zeros = torch.zeros(b, dtype=torch.int64)
    width = rows.shape[1]
    return ForwardBatch(
        ForwardMode.DECODE,
        zeros,
        zeros,
        zeros,
        rows,
        [width] * b if on_device else lens,
        [1] * b,
        torch.arange(b),
        device_seq_lens=torch.tensor(lens) if on_device else None,
    )


@pytest.mark.parametrize("mixed", [False, True])
def test_static_latent_csr_holds_the_eager_one(mixed):
    """The latent CSR built from device lengths with fixed shapes (padding rows of length 0)
    starts with the host-built one, per pool part, in each part's own slot numbering."""
    groups, width = latent_groups(48, 16)
    plain = lambda n: KVPool(n, 1, groups, width, torch.float32)  # noqa: E731
    pool = MixedKVPool(plain(180), plain(320), 180) if mixed else plain(500)
    gen = torch.Generator().manual_seed(int(mixed))
    lens = torch.randint(1, 40, (5,), generator=gen).tolist() + [0, 0, 0]
    rows = torch.zeros(8, 64, dtype=torch.int64)
    for b, n in enumerate(lens):
        rows[b, :n] = torch.randperm(500, generator=gen)[:n]
    latent = LatentPool(pool, groups, width)
    eager = decode_csr(_decode_batch(rows[:5, : max(lens)], lens[:5], False), latent)
    static = decode_csr(_decode_batch(rows, lens, True), latent)
    assert len(eager) == len(static) == (2 if mixed else 1)
    for (_, e_ptr, e_idx), (_, s_ptr, s_idx) in zip(eager, static):
        assert torch.equal(s_ptr[: len(e_ptr)], e_ptr) and (s_ptr[len(e_ptr) :] == e_ptr[-1]).all()
        assert s_idx.numel() == rows.numel() + 1
        assert torch.equal(s_idx[: int(e_ptr[-1])], e_idx)
    if mixed:  # the branch part's slots rebased to its own rows
        assert int(static[1][2][: int(static[1][1][-1])].max()) < 320


def test_graphs_need_the_latent_kernel():
    """Decode is capturable where it runs the MLA kernel: on CUDA (use_kernel None) over planes
    it reads; never through the torch path (use_kernel False) or planes it cannot split."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    groups, width = latent_groups(48, 16)
    fits = LatentPool(KVPool(8, 1, groups, width, torch.float32), groups, width)
    odd_groups, odd_width = latent_groups(40, 8)  # planes of 24 values: no 2-chunk split
    odd = LatentPool(KVPool(8, 1, odd_groups, odd_width, torch.float32), odd_groups, odd_width)
    assert LatentAttention(4, 64).decodes_in_place(fits, cuda)
    assert not LatentAttention(4, 64).decodes_in_place(fits, cpu)
    assert not LatentAttention(4, 64, use_kernel=False).decodes_in_place(fits, cuda)
    assert not LatentAttention(4, 48).decodes_in_place(odd, cuda)


def _gpu_engine(folder, dtype="bfloat16", **kv):
    return Engine(
        str(folder),
        load_format="dummy",
        dtype=dtype,
        device="cuda",
        max_total_tokens=4096,
        **kv,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("kv", ["bf16", "fp8_e4m3", "nvfp4", "mixed"])
def test_graph_mla_decode_logits_match_eager(deepseek_path, kv):
    """On CUDA, a replayed MLA graph's logits equal the eager forward's (latent pools in bf16,
    FP8, NVFP4 and the default mixed pair), and a generation replays its decode steps."""
    engine = _gpu_engine(deepseek_path, **MIXED_KV if kv == "mixed" else {"kv_cache_dtype": kv})
    with engine:
        runner = engine.scheduler.runner
        assert runner.graphs is not None
        got, want = _decode_logits_both_ways(engine, runner, runner.graphs)
        assert runner.graphs.replays == 1 and got.shape == want.shape
        assert torch.equal(got.argmax(-1), want.argmax(-1))
        assert (got - want).abs().max() <= 0.02 * want.abs().max()
        engine.generate(input_ids=_prompts(5, seed=2), sampling_params=GREEDY)
        assert runner.graphs.replays >= 1 + 8


@pytest.mark.gpu
def test_graph_mla_greedy_ids_equal_eager(deepseek_path):
    """Greedy tokens with decode graphs equal those with graphs off (float32: the split count
    of a graph's bucket differs from the eager step's, so bf16 near-ties could flip)."""
    prompts = _prompts(6, seed=3)
    outs = []
    for off in (True, False):
        with _gpu_engine(deepseek_path, "float32", disable_cuda_graph=off) as engine:
            runner = engine.scheduler.runner
            assert (runner.graphs is None) == off
            results = engine.generate(input_ids=prompts, sampling_params=GREEDY)
            outs.append([r["output_ids"] for r in results])
            if not off:
                assert runner.graphs.replays >= 8
    assert outs[0] == outs[1]

"""Qwen3 (dense, q/k norm) and the mixture-of-experts families (Qwen3-MoE, Qwen2-MoE with its
gated shared expert, Mixtral, DeepSeek-V2/V3 with multi-head latent attention) as tiny random HF
checkpoints with random routers: the Engine's greedy tokens equal HF `generate`, first-token
logprobs equal HF's, and batching, prefix hits, chunked prefill and speculative decoding leave
the tokens unchanged (float32, CPU).

DeepSeek-V2: a direct q_proj, greedy softmax routing, YaRN with unequal mscales (cos and sin
scaled too, beside the softmax scale). DeepSeek-V3: low-rank queries (q_lora_rank), sigmoid
routing over groups with a random correction bias. Both: a dense first layer
(first_k_dense_replace), a shared expert, and a prompt past YaRN's original 64 positions."""

import json

import jsonschema
import pytest
import torch

from radixgen.runtime.engine import Engine
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import param_bytes
from radixgen.runtime.model.registry import param_shapes
from tests.runtime.test_model_families import build_hf_model, copy_tokenizer, one_thread  # noqa: F401

MAX_NEW = 8
PROMPT_LENS = (3, 5, 9, 12, 17, 20, 31, 70)
TINY = dict(
    hidden_size=64,
    intermediate_size=96,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=49152,
    max_position_embeddings=256,
    initializer_range=0.2,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)
MLA_TINY = dict(
    num_hidden_layers=3,
    num_key_value_heads=4,  # HF's MLA repeats no KV heads
    first_k_dense_replace=1,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    n_shared_experts=1,
    kv_lora_rank=48,  # with rope 16: a latent of 4 groups of 16 (nvfp4 blocks)
    qk_rope_head_dim=16,
    qk_nope_head_dim=16,
    v_head_dim=24,
)
YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
FAMILIES = {
    "qwen3": ("Qwen3Config", dict(num_hidden_layers=2)),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        dict(
            num_hidden_layers=3,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            norm_topk_prob=True,
            mlp_only_layers=[1],
        ),
    ),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        dict(
            num_hidden_layers=2,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
        ),
    ),
    "mixtral": (
        "MixtralConfig",
        dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32),
    ),
    "deepseek_v2": (
        "DeepseekV2Config",
        dict(
            **MLA_TINY,
            q_lora_rank=None,
            routed_scaling_factor=1.5,
            rope_scaling={**YARN, "mscale": 1.0, "mscale_all_dim": 0.8},
        ),
    ),
    "deepseek_v3": (
        "DeepseekV3Config",
        dict(
            **MLA_TINY,
            q_lora_rank=40,
            n_group=4,
            topk_group=2,
            routed_scaling_factor=2.5,
            rope_scaling={**YARN, "mscale": 0.707, "mscale_all_dim": 0.707},
        ),
    ),
}
GREEDY = {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True, "top_logprobs_num": 5}
ENGINE = dict(dtype="float32", max_total_tokens=1024, max_running_requests=8)


def save_tiny_moe(folder, family: str, tokenizer_src, seed: int = 0, **overrides):
    """A tiny random `family` checkpoint in `folder`; returns the HF model. Routers get large
    random weights (and a correction bias random values) so different tokens pick different
    experts."""
    import transformers

    cls_name, family_overrides = FAMILIES[family]
    config = getattr(transformers, cls_name)(
        **{**TINY, **family_overrides, **overrides},
        architectures=[cls_name.replace("Config", "ForCausalLM")],
    )
    model = build_hf_model(config, seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("gate.weight") and param.shape[0] > 1:
                param.normal_(0, 1.0)
        for name, buf in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buf.normal_(0, 0.3)
    model.save_pretrained(str(folder), safe_serialization=True)
    copy_tokenizer(tokenizer_src, folder)
    return model


def _ids(results):
    return [r["output_ids"] for r in results]


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory, model_path):
    """(name, folder, prompts, HF greedy outputs, HF model, Engine with 8-token prefill chunks
    and its batched results)."""
    name, seed = request.param, len(request.param)
    folder = tmp_path_factory.mktemp(name)
    hf = save_tiny_moe(folder, name, model_path, seed).eval()
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, 49152, (n,), generator=gen).tolist() for n in PROMPT_LENS]
    with torch.no_grad():
        ref = [
            hf.generate(
                torch.tensor([p]),
                attention_mask=torch.ones(1, len(p), dtype=torch.long),
                max_new_tokens=MAX_NEW,
                do_sample=False,
                eos_token_id=None,
            )[0, len(p) :].tolist()
            for p in prompts
        ]
    engine = Engine(str(folder), chunked_prefill_size=8, **ENGINE)
    results = engine.generate(input_ids=prompts, sampling_params=GREEDY)
    yield name, folder, prompts, ref, hf, engine, results
    engine.shutdown()


def test_batched_chunked_greedy_matches_hf(family):
    _, _, _, ref, _, _, results = family
    assert all(len(out) == MAX_NEW for out in ref)
    assert _ids(results) == ref


def test_first_token_logprobs_match_hf(family):
    _, _, prompts, _, hf, _, results = family
    for ids, result in zip(prompts, results):
        with torch.no_grad():
            ref = torch.log_softmax(hf(torch.tensor([ids])).logits[0, -1].float(), -1)
        tokens, ours = zip(
            *[(int(t), lp) for lp, t, _ in result["meta_info"]["output_top_logprobs"][0]]
        )
        torch.testing.assert_close(torch.tensor(ours), ref[list(tokens)], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(torch.tensor(ours), ref.topk(5).values, atol=1e-4, rtol=1e-4)


def test_one_at_a_time_and_prefix_hit_equal_batched(family):
    _, _, prompts, ref, _, engine, _ = family
    for ids, expected in list(zip(prompts, ref))[-2:]:
        first = engine.generate(input_ids=ids, sampling_params=GREEDY)
        again = engine.generate(input_ids=ids, sampling_params=GREEDY)
        assert again["meta_info"]["cached_tokens"] >= len(ids) - 1
        assert first["output_ids"] == again["output_ids"] == expected


def test_unchunked_and_speculative_equal_chunked(family):
    _, folder, prompts, ref, _, _, _ = family
    with Engine(str(folder), **ENGINE) as unchunked:
        assert _ids(unchunked.generate(input_ids=prompts, sampling_params=GREEDY)) == ref
    # the model drafting for itself: tree verification runs on every step
    with Engine(
        str(folder),
        speculative_algorithm="draft",
        speculative_draft_model_path=str(folder),
        speculative_num_draft_tokens=4,
        speculative_depth=3,
        speculative_draft_max_total_tokens=1024,
        **ENGINE,
    ) as spec:
        plain = {k: v for k, v in GREEDY.items() if k != "top_logprobs_num"}  # logprobs: no drafts
        outs = spec.generate(input_ids=prompts, sampling_params=plain)
        assert _ids(outs) == ref
        assert all(o["meta_info"].get("spec_verify_ct", 0) > 0 for o in outs)


@pytest.mark.slow
def test_mla_absorbed_only_matches_hf(family):
    """MLA models: the fixture's engine ran its first chunks expanded (no cached prefix) and
    later ones absorbed; absorbed-only extends (mla_expand_threshold inf) give HF's tokens too."""
    _, folder, prompts, ref, _, engine, _ = family
    if engine.scheduler.runner.arch.mla is None:
        pytest.skip("MLA models only")
    assert engine.scheduler.runner.attn.expanded_extends > 0
    options = dict(chunked_prefill_size=8, mla_expand_threshold=float("inf"), **ENGINE)
    with Engine(str(folder), **options) as absorbed:
        assert _ids(absorbed.generate(input_ids=prompts, sampling_params=GREEDY)) == ref
        assert absorbed.scheduler.runner.attn.expanded_extends == 0


def test_dummy_loader_knows_every_checkpoint_name(family):
    name, folder, prompts, _, hf, _, _ = family
    arch = ModelArch.from_folder(folder)
    hf_shapes = {k: tuple(v.shape) for k, v in hf.state_dict().items()}
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        saved = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    assert param_shapes(arch) == saved, name
    assert param_bytes(arch, torch.float32) == sum(
        4 * torch.Size(s).numel() for s in saved.values()
    )
    assert len(hf_shapes) > 0
    with Engine(str(folder), load_format="dummy", **ENGINE) as dummy:
        out = dummy.generate(input_ids=prompts[0], sampling_params=GREEDY)
        assert len(out["output_ids"]) == MAX_NEW


def test_json_schema_request_on_moe_model(tmp_path, model_path):
    save_tiny_moe(tmp_path, "qwen3_moe", model_path)
    schema = {
        "type": "object",
        "required": ["name", "tags"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        },
    }
    with Engine(str(tmp_path), **ENGINE) as engine:
        out = engine.generate(
            input_ids=[5, 6, 7],
            sampling_params={
                "max_new_tokens": 30,
                "temperature": 1.0,
                "seed": 1,
                "json_schema": json.dumps(schema),
            },
        )
    jsonschema.validate(json.loads(out["text"]), schema)


QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
    "rope_theta": 1e6,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}


def test_qwen3_30b_a3b_shape_counts_its_parameters():
    """The GPU benchmark builds this shape from its config alone: 30.5B parameters, 3.3B active."""
    arch = ModelArch.from_config(QWEN3_30B_A3B)
    assert (
        arch.moe is not None and arch.moe.top_k == 8 and arch.qk_norm and not arch.moe.dense_layers
    )
    total = param_bytes(arch, torch.bfloat16) / 2
    assert 30.0e9 < total < 31.0e9, total

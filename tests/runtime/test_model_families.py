"""Every supported decoder family, as a tiny random HF checkpoint: the Engine's greedy output
equals HF `generate` on the same folder, and its logprobs at every generated position equal
HF's teacher-forced log-softmax (float32 throughout).

Families: Llama with llama3 and linear RoPE scaling, Qwen2 (qkv bias, untied lm_head),
Mistral, and Llama with untied embeddings stored as float16 / bfloat16."""

import shutil
from pathlib import Path

import pytest
import torch

from radixgen.runtime.engine import Engine

MAX_NEW = 20
TOP_K = 5
PROMPT_LENS = (3, 29, 90)  # the long prompt reaches positions past llama3's original 64
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=49152,
    max_position_embeddings=512,
    initializer_range=0.2,
    rms_norm_eps=1e-5,
)


def tiny_config(family: str, **overrides):
    """A tiny transformers config of `family` ("llama", "qwen2", "mistral")."""
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[family]
    architectures = [cls.__name__.replace("Config", "ForCausalLM")]  # as in real checkpoints
    return cls(**{"num_hidden_layers": 2, "architectures": architectures, **TINY, **overrides})


def build_hf_model(config, seed: int = 0):
    """A random HF model; norms and biases are randomised too (HF initialises them to 1 and 0,
    which would hide a missing norm weight or bias)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * torch.randn_like(param))
            elif name.endswith(".bias"):
                param.copy_(0.2 * torch.randn_like(param))
    return model


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copy(Path(src) / name, Path(dst) / name)


def save_tiny_model(
    folder: Path,
    family: str,
    tokenizer_src: Path,
    save_dtype=torch.float32,
    seed: int = 0,
    **overrides,
):
    """Save a tiny random `family` model (safetensors, `save_dtype`) plus the embedded
    tokenizer into `folder`; returns the float32 HF model it was saved from."""
    model = build_hf_model(tiny_config(family, **overrides), seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.to(save_dtype).save_pretrained(str(folder), safe_serialization=True)
    copy_tokenizer(tokenizer_src, folder)
    return model.float()


def random_prompts(seed: int, vocab: int = 49152) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in PROMPT_LENS]


FAMILIES = {
    "llama3-rope": (
        "llama",
        torch.float32,
        dict(
            num_hidden_layers=3,
            tie_word_embeddings=True,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),
    ),
    "linear-rope": (
        "llama",
        torch.float32,
        dict(
            tie_word_embeddings=True,
            rope_theta=5000.0,
            rope_scaling={"rope_type": "linear", "factor": 4.0},
        ),
    ),
    "qwen2": ("qwen2", torch.float32, dict(tie_word_embeddings=False, rope_theta=1e6)),
    "mistral": ("mistral", torch.float32, dict(num_hidden_layers=4, sliding_window=4096)),
    "llama-untied-fp16": ("llama", torch.float16, dict(tie_word_embeddings=False)),
    "llama-untied-bf16": ("llama", torch.bfloat16, dict(tie_word_embeddings=False)),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread avoids OpenMP oversubscription
    (which makes every op ~100x slower when other processes hold the cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


GREEDY = {
    "max_new_tokens": MAX_NEW,
    "temperature": 0,
    "ignore_eos": True,
    "top_logprobs_num": TOP_K,
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_run(request, tmp_path_factory, model_path):
    """(prompts, Engine results, HF greedy outputs, HF float32 model reloaded from the folder).
    The Engine runs with a small prefill chunk, so the long prompt is prefilled in pieces."""
    from transformers import AutoModelForCausalLM

    family, save_dtype, overrides = FAMILIES[request.param]
    seed = len(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    save_tiny_model(folder, family, model_path, save_dtype, seed=seed, **overrides)
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None  # the Engine side runs with ignore_eos
    prompts = random_prompts(seed)
    hf_outputs = []
    with torch.no_grad():
        for ids in prompts:
            gen = hf.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=MAX_NEW,
                do_sample=False,
            )
            hf_outputs.append(gen[0, len(ids) :].tolist())
    engine = Engine(
        str(folder),
        dtype="float32",
        max_total_tokens=512,
        max_running_requests=4,
        chunked_prefill_size=32,
    )
    results = engine.generate(input_ids=prompts, sampling_params=GREEDY)
    return prompts, results, hf_outputs, hf


def test_greedy_output_matches_hf(family_run):
    _, results, hf_outputs, _ = family_run
    assert all(len(out) == MAX_NEW for out in hf_outputs)
    assert [r["output_ids"] for r in results] == hf_outputs


def test_logprobs_match_hf_at_every_position(family_run):
    """Prefill (first token) and decode (the rest) logprobs against HF's log-softmax over the
    prompt + generated sequence; a wrong RoPE scale or bias shows up here even when the
    argmax happens to survive it."""
    prompts, results, hf_outputs, hf = family_run
    for ids, ref_out, result in zip(prompts, hf_outputs, results):
        top = result["meta_info"]["output_top_logprobs"]
        assert len(top) == MAX_NEW
        with torch.no_grad():
            logits = hf(torch.tensor([ids + ref_out])).logits[0, len(ids) - 1 : -1]
        ref = torch.log_softmax(logits.float(), -1)  # [MAX_NEW, vocab]
        for step, pairs in enumerate(top):
            tokens = [int(t) for t, _ in pairs]
            ours = torch.tensor([lp for _, lp in pairs])
            best = ref[step].topk(TOP_K)
            # the same top-k values in order, and each token's value is HF's for that token: two
            # tokens may only trade places where HF's values tie within the tolerance (summation
            # order differs between attention kernels)
            torch.testing.assert_close(ours, best.values, atol=1e-4, rtol=1e-4, msg=f"step {step}")
            torch.testing.assert_close(
                ours, ref[step, tokens], atol=1e-4, rtol=1e-4, msg=f"step {step}"
            )
            assert len(set(tokens)) == TOP_K, step


def test_checkpoint_dtype_is_kept_by_auto(tmp_path, model_path):
    """`auto` on the CPU: bfloat16 checkpoints stay bfloat16, float16 ones run as float32."""
    for save_dtype, expected in ((torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)):
        folder = tmp_path / str(save_dtype)
        save_tiny_model(
            folder, "llama", model_path, save_dtype, num_hidden_layers=1, tie_word_embeddings=False
        )
        eng = Engine(str(folder), dtype="auto", max_total_tokens=64, max_running_requests=2)
        runner = eng.scheduler.runner
        assert runner.dtype == expected
        assert runner.model.lm_head.dtype == expected
        lm_head = runner.model.lm_head
        lm_head = lm_head.to_dense() if lm_head.is_mkldnn else lm_head  # CPU: oneDNN-packed
        assert lm_head.shape == runner.model.embed.shape
        assert not torch.equal(lm_head, runner.model.embed), (
            "untied lm_head must not be the embedding"
        )
        out = eng.generate(
            input_ids=[5, 6, 7], sampling_params={"max_new_tokens": 3, "ignore_eos": True}
        )
        assert len(out["output_ids"]) == 3


def test_sliding_window_caps_the_context(tmp_path, model_path):
    """Attention is full, so a Mistral whose sliding window is shorter than its positions runs
    only within the window: there it matches HF; longer prompts are refused."""
    from transformers import AutoModelForCausalLM

    window = 16
    save_tiny_model(tmp_path, "mistral", model_path, sliding_window=window)
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    engine = Engine(str(tmp_path), dtype="float32", max_total_tokens=128, max_running_requests=2)
    fits, too_long = (
        random_prompts(seed=3)[1][: window // 2],
        random_prompts(seed=4)[1][: window + 4],
    )
    out, refused = engine.generate(input_ids=[fits, too_long], sampling_params=GREEDY)
    assert len(fits) + len(out["output_ids"]) == window
    assert out["meta_info"]["finish_reason"]["type"] == "length"
    with torch.no_grad():
        ref = hf.generate(
            torch.tensor([fits]),
            max_new_tokens=window - len(fits),
            do_sample=False,
            attention_mask=torch.ones(1, len(fits), dtype=torch.long),
            eos_token_id=None,
        )
    assert out["output_ids"] == ref[0, len(fits) :].tolist()
    assert refused["output_ids"] == [] and refused["meta_info"]["finish_reason"]["type"] == "abort"

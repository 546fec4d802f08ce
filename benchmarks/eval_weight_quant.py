"""Weight quantization vs quality on the embedded model (CPU): perplexity of two passages
(kv_quality_prompts.PASSAGE and SECOND_PASSAGE below) and greedy agreement with bf16 on the
first prompts of kv_quality_prompts, for bf16, fp32, FP8 per-channel, NVFP4 round-to-nearest,
NVFP4 with the per-block MSE scale search (opt-in: --nvfp4-scale-search), and INT4 group-16
round-to-nearest (symmetric, one bf16-rounded scale per 16: the same bits as NVFP4 without the
tensor scale).

Each quantized config is written as a dense fp32 folder of its dequantized weights and run in
bf16, which is what the runtime computes (it dequantizes into the activation dtype).

    .venv/bin/python benchmarks/eval_weight_quant.py [--prompts 8] [--max-new-tokens 32] \
        [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kv_quality_prompts import PASSAGE, PROMPTS  # noqa: E402

from radixgen.runtime.engine import Engine  # noqa: E402
from radixgen.runtime.model.embedded import default_model_path  # noqa: E402
from radixgen.runtime.quant.weight import is_quantizable, quantize_weight  # noqa: E402

SECOND_PASSAGE = """\
The water cycle describes how water moves between the oceans, the air and the land. Sunlight
warms the surface of seas and lakes, and some of the water evaporates into invisible vapour.
Plants add more vapour through their leaves, a process called transpiration. As warm, moist air
rises it cools, and the vapour condenses on tiny particles of dust and salt to form clouds. When
the droplets in a cloud grow heavy enough they fall as rain, or as snow and hail when the air is
cold. Some of that water runs off the surface into streams and rivers that carry it back to the
sea; some soaks into the ground, where it can stay for years as groundwater before it reaches a
spring or a well. Glaciers and ice caps store water for much longer, sometimes for thousands of
years. Over a year, the same amount of water that evaporates must fall again somewhere, so the
total stays nearly constant even as the weather moves it around the planet. Human activity
changes the cycle: cities cover soil with concrete, so rain runs off faster and floods more
often, and pumping groundwater for farms can lower water tables faster than rain refills them.
"""


def int4_group16(w: torch.Tensor) -> torch.Tensor:
    """Symmetric INT4 round-to-nearest, one scale (amax / 7, rounded to bf16) per 16 values."""
    blocks = w.float().unflatten(-1, (-1, 16))
    scale = (blocks.abs().amax(-1, keepdim=True) / 7).to(torch.bfloat16).float().clamp(min=1e-12)
    return ((blocks / scale).round().clamp(-8, 7) * scale).flatten(-2)


def fake_quant(src: Path, dst: Path, config: str) -> None:
    weights = load_file(str(src / "model.safetensors"))
    for name, t in weights.items():
        if not is_quantizable(name, t, False):
            continue
        if config == "int4-g16":
            weights[name] = int4_group16(t)
        else:
            method, search = config.split("-")[0], config != "nvfp4-rtn"
            weights[name] = quantize_weight(t.float(), method, search).dequantize(torch.float32)
    dst.mkdir(parents=True)
    save_file(
        {k: v.float().contiguous() for k, v in weights.items()}, str(dst / "model.safetensors")
    )
    for f in src.iterdir():
        if f.suffix == ".json":
            shutil.copy(f, dst / f.name)


def perplexity(engine: Engine, text: str) -> float:
    ids = engine.tokenizer.encode(text)
    res = engine.generate(
        input_ids=ids,
        sampling_params={"max_new_tokens": 0, "return_logprob": True, "logprob_start_len": 1},
    )
    lps = [lp for lp in res["meta_info"]["input_token_logprobs"] if lp is not None]
    return math.exp(-sum(lps) / len(lps))


def agreement(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--configs", default="bf16,fp32,fp8,nvfp4-rtn,nvfp4-search,int4-g16")
    parser.add_argument("--out")
    args = parser.parse_args()
    src = default_model_path()
    greedy = {"max_new_tokens": args.max_new_tokens, "temperature": 0}
    rows, ref_out = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs.split(","):
            folder = src if config in ("bf16", "fp32") else Path(tmp) / config
            if folder != src:
                fake_quant(src, folder, config)
            dtype = "float32" if config == "fp32" else "bfloat16"
            with Engine(str(folder), dtype=dtype, max_total_tokens=4096) as eng:
                prompts = [
                    eng.tokenizer.apply_chat_template(
                        [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
                    )
                    for p in PROMPTS[: args.prompts]
                ]
                out = [r["output_ids"] for r in eng.generate(prompts, greedy)]
                row = {
                    "config": config,
                    "ppl_passage": perplexity(eng, PASSAGE),
                    "ppl_second": perplexity(eng, SECOND_PASSAGE),
                }
            ref_out = ref_out or out
            row["greedy_prefix_agreement"] = sum(map(agreement, out, ref_out)) / sum(
                map(len, ref_out)
            )
            row["exact_match"] = sum(a == b for a, b in zip(out, ref_out)) / len(out)
            rows.append(row)
            base = rows[0]
            d1 = 100 * (row["ppl_passage"] / base["ppl_passage"] - 1)
            d2 = 100 * (row["ppl_second"] / base["ppl_second"] - 1)
            print(
                f"{config:14s} ppl {row['ppl_passage']:.3f} ({d1:+.1f}%)"
                f"  ppl2 {row['ppl_second']:.3f} ({d2:+.1f}%)"
                f"  greedy agree {row['greedy_prefix_agreement']:.2f}"
                f" exact {row['exact_match']:.2f}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

"""Grammar engines: compile time and per-token mask time on the SmolLM2 tokenizer.

For each case (JSON schemas, a regex; the CFG worker registers the SQL grammar in CASES) every
engine compiles the constraint cold, then replays the same seeded random valid token walks
(sampled with radixgen's matcher) and times filling one bitmask row per token. Engines:
radixgen, outlines-core used directly, and xgrammar / llguidance when installed (benchmark only;
radixgen never imports them). A walk token an engine rejects (its grammar differs, e.g. in
whitespace) ends that engine's walk; the table shows how many tokens each engine timed.

    .venv/bin/python benchmarks/bench_grammar.py [--walks 5] [--steps 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from radixgen.core import Constraint  # noqa: E402
from radixgen.grammar.bitmask import allocate_bitmask, unpack_row  # noqa: E402
from radixgen.grammar.compiler import GrammarCompiler  # noqa: E402
from radixgen.grammar.tokenizer_info import TokenizerInfo  # noqa: E402

MODEL = Path.home() / ".cache" / "radixgen" / "SmolLM2-135M-Instruct"
_ADDR = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "zip": {"type": "string", "pattern": "[0-9]{5}"},
    },
    "required": ["city", "zip"],
}
# name -> Constraint; the SQL CFG case is appended here by the CFG worker, e.g.
#   CASES["sql"] = Constraint("lark", "sql")   (engines without CFG support skip it)
CASES: dict[str, Constraint] = {
    "json_person": Constraint(
        "json_schema",
        {
            "type": "object",
            "required": ["name", "age", "email"],
            "properties": {
                "name": {"type": "string", "maxLength": 40},
                "age": {"type": "integer"},
                "email": {"type": "string", "format": "email"},
                "address": _ADDR,
            },
        },
    ),
    "json_tool_call": Constraint(
        "json_schema",
        {
            "type": "object",
            "required": ["tool", "arguments"],
            "properties": {
                "tool": {"enum": ["search", "calculator", "weather"]},
                "arguments": {
                    "type": "object",
                    "required": ["query"],
                    "properties": {
                        "query": {"type": "string"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    },
                },
            },
        },
    ),
    "json_list": Constraint(
        "json_schema",
        {
            "type": "array",
            "minItems": 1,
            "maxItems": 8,
            "items": {
                "type": "object",
                "required": ["id", "tags"],
                "properties": {
                    "id": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                },
            },
        },
    ),
    "regex_phone_email": Constraint(
        "regex", r"\(\d{3}\) \d{3}-\d{4} <[a-z]{2,12}@[a-z]{2,10}\.(com|org|net)>"
    ),
}


def _walks(grammar, info, num_walks: int, max_steps: int) -> list[list[int]]:
    """Seeded random valid token walks (EOS included at the end when reached)."""
    import random

    walks = []
    for seed in range(num_walks):
        rng, matcher, ids = random.Random(seed), grammar.matcher(), []
        bitmask = allocate_bitmask(1, info.vocab_size)
        for step in range(max_steps):
            matcher.fill_bitmask(bitmask, 0)
            allowed = unpack_row(bitmask[0], info.vocab_size)
            short = [t for t in allowed if len(info.token_bytes[t]) <= 1 or t in info.eos_ids]
            pool = short if (short and rng.random() < min(0.9, step / 60)) else allowed
            ids.append(int(pool[rng.randrange(len(pool))]))
            matcher.accept_token(ids[-1])
            if matcher.is_terminated():
                break
        walks.append(ids)
    return walks


# ---------------------------------------------------------------- engines: compile -> stepper


def radixgen_engine(info, tokenizer):
    def compile_(constraint):
        grammar = GrammarCompiler(info).compile(constraint)  # fresh compiler: no cache hit
        bitmask = allocate_bitmask(1, info.vocab_size)

        def start():
            matcher = grammar.matcher()
            if hasattr(matcher, "limit_tokens"):
                matcher.limit_tokens(4096)  # as the runtime does (max_new_tokens); not binding here
            return (lambda: matcher.fill_bitmask(bitmask, 0)), matcher.accept_token

        return start

    return compile_


def outlines_engine(info, tokenizer):
    from outlines_core import Guide, Index
    from outlines_core.json_schema import build_regex_from_schema

    from radixgen.grammar.index.token_index import outlines_vocabulary

    def compile_(constraint):
        if constraint.kind not in ("json_schema", "regex"):
            return None
        regex = (
            build_regex_from_schema(constraint.spec, "")
            if constraint.kind == "json_schema"
            else constraint.spec
        )
        index = Index(regex, outlines_vocabulary(info).vocabulary)
        mask = torch.zeros(1, (info.vocab_size + 31) // 32, dtype=torch.int32)

        def start():
            guide = Guide(index)
            fill = lambda: guide.write_mask_into(mask.data_ptr(), mask.numel(), 4)  # noqa: E731
            return fill, lambda t: _ok(lambda: guide.advance(t, False))

        return start

    return compile_


def xgrammar_engine(info, tokenizer):
    import xgrammar as xgr

    xinfo = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=info.vocab_size)

    def compile_(constraint):
        compiler = xgr.GrammarCompiler(xinfo, cache_enabled=False)
        if constraint.kind == "json_schema":
            compiled = compiler.compile_json_schema(
                constraint.spec, any_whitespace=False, separators=(",", ":")
            )
        elif constraint.kind == "regex":
            compiled = compiler.compile_regex(constraint.spec)
        else:
            return None
        bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)

        def start():
            matcher = xgr.GrammarMatcher(compiled)
            return (lambda: matcher.fill_next_token_bitmask(bitmask, 0)), matcher.accept_token

        return start

    return compile_


def llguidance_engine(info, tokenizer):
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lltok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=info.vocab_size)

    def compile_(constraint):
        if constraint.kind == "json_schema":
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                constraint.spec,
                defaults={
                    "whitespace_flexible": False,
                    "item_separator": ",",
                    "key_separator": ":",
                },
            )
        elif constraint.kind == "regex":
            grammar = llguidance.LLMatcher.grammar_from_regex(constraint.spec)
        else:
            return None
        llguidance.LLMatcher(lltok, grammar)  # compile (validates) once, cold
        bitmask = llguidance.torch.allocate_token_bitmask(1, info.vocab_size)

        def start():
            matcher = llguidance.LLMatcher(lltok, grammar)
            fill = lambda: llguidance.torch.fill_next_token_bitmask(matcher, bitmask, 0)  # noqa: E731
            return fill, lambda t: matcher.consume_token(t) and not matcher.is_error()

        return start

    return compile_


ENGINES = {
    "radixgen": radixgen_engine,
    "outlines-core": outlines_engine,
    "xgrammar": xgrammar_engine,
    "llguidance": llguidance_engine,
}


def _ok(fn) -> bool:
    try:
        fn()
        return True
    except Exception:
        return False


def _measure(start, walks) -> list[float]:
    """Seconds per fill_bitmask along every walk (stops a walk at a rejected token)."""
    times = []
    for ids in walks:
        fill, accept = start()
        for token in ids:
            t0 = time.perf_counter()
            fill()
            times.append(time.perf_counter() - t0)
            if not accept(token):
                break
    return times


def run_case(name, constraint, engines, walks) -> list[dict]:
    rows = []
    for engine_name, compile_ in engines.items():
        t0 = time.perf_counter()
        try:
            start = compile_(constraint)
        except Exception as exc:  # an engine that cannot compile the case is reported, not fatal
            rows.append({"case": name, "engine": engine_name, "error": repr(exc)[:120]})
            continue
        compile_s = time.perf_counter() - t0
        if start is None:
            continue
        times = sorted(_measure(start, walks))
        rows.append(
            {
                "case": name,
                "engine": engine_name,
                "compile_ms": 1e3 * compile_s,
                "tokens": len(times),
                "mean_us": 1e6 * statistics.fmean(times),
                "p99_us": 1e6 * times[min(len(times) - 1, int(0.99 * len(times)))],
            }
        )
    return rows


def _print_table(rows: list[dict]) -> None:
    print(
        f"{'case':20s} {'engine':14s} {'compile ms':>11s} {'tokens':>7s} {'mean us':>8s} {'p99 us':>8s}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['case']:20s} {r['engine']:14s} error: {r['error']}")
        else:
            print(
                f"{r['case']:20s} {r['engine']:14s} {r['compile_ms']:11.1f} {r['tokens']:7d} "
                f"{r['mean_us']:8.1f} {r['p99_us']:8.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    info = TokenizerInfo.from_hf(tokenizer)
    engines = {}
    for name in args.engines.split(","):
        try:
            engines[name] = ENGINES[name](info, tokenizer)
        except ImportError as exc:
            print(f"# {name}: not installed ({exc})")
    rows = []
    for name in args.cases.split(","):
        grammar = GrammarCompiler(info).compile(CASES[name])
        rows += run_case(name, CASES[name], engines, _walks(grammar, info, args.walks, args.steps))
    _print_table(rows)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"rows": rows, "vocab_size": info.vocab_size}, indent=1)
        )


if __name__ == "__main__":
    main()

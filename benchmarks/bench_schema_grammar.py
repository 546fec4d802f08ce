"""JSON Schemas too large for one regex, compiled to the CFG matcher (json_grammar.cfg): compile time and
per-token mask time on the SmolLM2 tokenizer (49k vocab), CPU.

Schemas: a synthetic one past the regex budget (objects of 9 optional properties nested 5 levels,
each level a $defs member used 8 times: outlines-core's regex would be gigabytes), plus any JSON
Schema files given on the command line (the SchemaStore / CloudFormation ones of
docs/BENCHMARKS.md; none is shipped). For each: the compile (schema -> rules -> LALR table and
token lexer), then seeded random walks (tests/grammar/walks.py) timing `fill_bitmask` per step,
cold (first visits: each (lexer state, parser stack) mask computed once) and warm (the same walks
again), every output validated with `jsonschema`. Peer in the same run: the same schema's regex
path where it compiles (the synthetic one cannot), and the SQL CFG numbers of bench_grammar_cfg.
Usage: `python benchmarks/bench_schema_grammar.py [--walks N] [FILE ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_grammar_cfg import _stats as mask_stats  # noqa: E402
from radixgen.core import Constraint  # noqa: E402
from radixgen.grammar.bitmask import allocate_bitmask  # noqa: E402
from radixgen.grammar.cfg.grammar import CfgGrammar  # noqa: E402
from radixgen.grammar.compiler import GrammarCompiler  # noqa: E402
from radixgen.grammar.tokenizer_info import TokenizerInfo  # noqa: E402
from tests.grammar.json_grammar.test_cfg import _too_large_schema  # noqa: E402
from tests.grammar.walks import random_walk  # noqa: E402


def _mask_times(grammar, info, walks: list[list[int]]) -> list[float]:
    bitmask, out = allocate_bitmask(1, info.vocab_size), []
    for ids in walks:
        matcher = grammar.matcher()
        for token in ids:
            start = time.perf_counter()
            matcher.fill_bitmask(bitmask, 0)
            out.append(time.perf_counter() - start)
            assert matcher.accept_token(token)
    return out


def _stats(times: list[float]) -> str:
    s = mask_stats(times)
    return f"mean {s['mean_us']:.0f} us, p50 {s['p50_us']:.0f}, p99 {s['p99_us']:.0f}, max {s['max_us']:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*")
    parser.add_argument("--walks", type=int, default=8)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from radixgen.runtime.model.embedded import default_model_path

    info = TokenizerInfo.from_hf(AutoTokenizer.from_pretrained(str(default_model_path())))
    schemas = [("synthetic 9x5 levels", _too_large_schema())]
    schemas += [(os.path.basename(f), json.load(open(f, encoding="utf-8-sig"))) for f in args.files]
    for name, schema in schemas:
        compiler = GrammarCompiler(info)
        start = time.perf_counter()
        grammar = compiler.compile(Constraint("json_schema", json.dumps(schema)))
        compile_s = time.perf_counter() - start
        kind = "grammar" if isinstance(grammar, CfgGrammar) else "regex"
        walks, texts = [], []
        for seed in range(args.walks):
            ids, text = random_walk(grammar, info, seed, max_steps=2000)
            jsonschema.validate(json.loads(text), schema)
            walks.append(ids)
            texts.append(text)
        cold = _mask_times(grammar, info, walks) if kind == "regex" else None
        if kind == "grammar":  # a fresh compile, so the first pass sees no cached mask
            grammar = GrammarCompiler(info).compile(Constraint("json_schema", json.dumps(schema)))
            cold = _mask_times(grammar, info, walks)
        warm = _mask_times(grammar, info, walks)
        tokens = sum(map(len, walks))
        print(
            f"{name}: {kind}, compile {compile_s:.2f} s (lexer states "
            f"{grammar.lexer.num_states if kind == 'grammar' else '-'}), {args.walks} walks, {tokens} tokens, "
            f"all valid\n  cold {_stats(cold)}\n  warm {_stats(warm)}\n  e.g. {texts[0][:100]}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

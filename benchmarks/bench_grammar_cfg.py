"""CFG (Lark) mask-time benchmark on the SQL grammar with the SmolLM2 tokenizer (49k vocab).

Measures `fill_bitmask` per step over (a) real SQL queries as the tokenizer encodes them and
(b) seeded random walks that sample only allowed tokens until EOS, reporting compile time, cold
(first pass: every (lexer state, parser stack) mask computed on first use) and warm (second pass
over the same walks) mean / p50 / p99 / max, in wall time and in CPU time (thread time: leaves
out preemption on a shared machine), and the first visits alone; load averages are recorded.
Like the server (runtime/grammar_backend.py), the process calls `gc.freeze()` after each compile,
so cyclic-GC passes walk only what the masks allocate; `--no-freeze` leaves the GC as it is.
If `llguidance` or `xgrammar` are importable, their SQL mask times are measured on the same
token sequences for comparison (benchmark only; radixgen never imports them). Usage: `python benchmarks/bench_grammar_cfg.py [--walks N]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import time

import numpy as np
import torch

SQL_QUERIES = [
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name ASC LIMIT 10;",
    "SELECT u.name, COUNT(*) AS n FROM users u LEFT JOIN orders o ON u.id = o.user_id "
    "GROUP BY u.name HAVING COUNT(*) > 2 ORDER BY n DESC",
    "SELECT DISTINCT city FROM customers WHERE country IN ('FR', 'DE') AND NOT city LIKE 'B%'",
    "SELECT * FROM products WHERE price BETWEEN 10 AND 20.5 OR stock IS NULL",
    "SELECT name FROM employees WHERE salary > (SELECT AVG(salary) FROM employees)",
    "SELECT a.x, b.y FROM a INNER JOIN b USING (id) WHERE EXISTS (SELECT 1 FROM c WHERE c.id = a.id)",
    "INSERT INTO logs (level, message) VALUES ('info', 'started'), ('warn', 'slow');",
    "UPDATE accounts SET balance = balance - 100, updated = 1 WHERE id = 42;",
    "DELETE FROM sessions WHERE expires < 1700000000",
    "SELECT title FROM books UNION SELECT title FROM magazines ORDER BY title LIMIT 5 OFFSET 10",
]


def _tokenizer():
    from transformers import AutoTokenizer

    path = os.path.expanduser("~/.cache/radixgen/SmolLM2-135M-Instruct")
    return AutoTokenizer.from_pretrained(path)


def allowed_ids(bitmask_row: torch.Tensor, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask_row.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def random_walk_ids(matcher, info, rng: random.Random, max_tokens: int = 64) -> list[int]:
    """Token ids of one walk that samples allowed tokens (biased to EOS and short tokens)."""
    row = torch.zeros(1, (info.vocab_size + 31) // 32, dtype=torch.int32)
    out, eos = [], set(info.eos_ids)
    for step in range(max_tokens):
        matcher.fill_bitmask(row, 0)
        ids = allowed_ids(row[0], info.vocab_size)
        if not len(ids):
            break
        eos_ok = [i for i in ids if i in eos]
        if eos_ok and (rng.random() < 0.15 + step / max_tokens or len(ids) == len(eos_ok)):
            out.append(eos_ok[0])
            break
        sample = [int(i) for i in rng.sample(list(ids), min(64, len(ids))) if i not in eos]
        sample.sort(key=lambda i: len(info.token_bytes[i]) + rng.random() * 4)
        tok = sample[0] if rng.random() < 0.7 else rng.choice(sample)
        assert matcher.accept_token(tok)
        out.append(tok)
    return out


def time_masks(
    grammar,
    sequences: list[list[int]],
    clock=time.perf_counter,
    first_visits: list[float] | None = None,
    limit: int | None = None,
) -> list[float]:
    """Seconds per fill_bitmask over every prefix of every sequence. `time.thread_time` gives
    CPU time, which leaves out preemption on a shared machine. `first_visits`, if given, also
    receives the times of the steps whose (lexer state, parser stack) mask was not cached yet.
    `limit`: each matcher is told it may take that many tokens (limit_tokens, as the runtime
    does with max_new_tokens)."""
    row = torch.zeros(1, grammar.num_words, dtype=torch.int32)
    times = []
    for seq in sequences:
        m = grammar.matcher()
        if limit is not None:
            m.limit_tokens(limit)
        for tok in seq:
            q, stack, _ = m._history[-1]
            first = (q, stack) not in grammar._masks
            t0 = clock()
            m.fill_bitmask(row, 0)
            times.append(clock() - t0)
            if first and first_visits is not None:
                first_visits.append(times[-1])
            if not m.accept_token(tok):
                break
    return times


def _stats(times: list[float]) -> dict:
    us = np.array(times) * 1e6
    return {
        "n": len(us),
        "mean_us": round(float(us.mean()), 1),
        "p50_us": round(float(np.percentile(us, 50)), 1),
        "p99_us": round(float(np.percentile(us, 99)), 1),
        "max_us": round(float(us.max()), 1),
        "over_1ms": int((us > 1000).sum()),
    }


def benchmark_sql_masks(
    num_walks: int = 30, seed: int = 0, peers: bool = True, freeze: bool = True
) -> dict:
    """Mask times (µs) of radixgen's CFG matcher on the SQL grammar; peers when installed."""
    from radixgen.core import Constraint
    from radixgen.grammar.cfg.grammar import compile_cfg
    from radixgen.grammar.tokenizer_info import TokenizerInfo

    tok = _tokenizer()
    info = TokenizerInfo.from_hf(tok)

    def compiled():
        grammar = compile_cfg(Constraint("lark", "sql"), info)
        if freeze:
            gc.freeze()
        return grammar

    t0 = time.perf_counter()
    grammar = compiled()
    result: dict = {
        "compile_s": round(time.perf_counter() - t0, 3),
        "load_avg_start": os.getloadavg(),
    }
    real = [tok.encode(q) + [tok.eos_token_id] for q in SQL_QUERIES]
    rng = random.Random(seed)
    walks = [random_walk_ids(grammar.matcher(), info, rng) for _ in range(num_walks)]
    grammar = compiled()  # fresh caches for the cold pass
    result["cold"] = _stats(time_masks(grammar, real + walks))
    result["warm"] = _stats(time_masks(grammar, real + walks))
    grammar = compiled()
    first: list[float] = []
    result["cold_cpu_time"] = _stats(time_masks(grammar, real + walks, time.thread_time, first))
    result["first_visits_cpu_time"] = _stats(first)
    result["warm_cpu_time"] = _stats(time_masks(grammar, real + walks, time.thread_time))
    result["lexer_states"] = grammar.lexer.num_states
    result["indexed_lexer_states"] = len(grammar._tries)
    result["warm_real_queries"] = _stats(time_masks(grammar, real))
    # under max_new_tokens (cfg.closing): with 256 tokens left every step checks how far the
    # end is and nothing narrows; walks capped at 24 tokens narrow their last ~20 masks
    grammar = compiled()
    result["cold_cpu_time_limit_256"] = _stats(
        time_masks(grammar, real + walks, time.thread_time, limit=256)
    )
    grammar = compiled()
    capped = []
    for _ in range(num_walks):
        matcher = grammar.matcher()
        matcher.limit_tokens(24)
        capped.append(random_walk_ids(matcher, info, rng, max_tokens=24))
    grammar = compiled()
    result["cold_cpu_time_limit_24"] = _stats(
        time_masks(grammar, capped, time.thread_time, limit=24)
    )
    result["warm_cpu_time_limit_24"] = _stats(
        time_masks(grammar, capped, time.thread_time, limit=24)
    )
    result["load_avg_end"] = os.getloadavg()
    if peers:  # on the real queries only: a peer may be orders of magnitude slower
        result["peers_real_queries"] = _peer_stats(tok, real)
    return result


def _peer_stats(tok, sequences: list[list[int]]) -> dict:
    out = {}
    for name, fn in (("xgrammar", _xgrammar_times), ("llguidance", _llguidance_times)):
        try:
            out[name] = _stats(fn(tok, sequences))
        except ImportError as exc:
            out[name] = f"not installed ({exc.name})"
        except Exception as exc:  # a peer failing must not sink our numbers
            out[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    return out


def _sql_text() -> str:
    from radixgen.grammar.cfg.grammar import shipped_grammar

    return shipped_grammar("sql")


def _xgrammar_times(tok, sequences):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok)
    compiler = xgr.GrammarCompiler(info)
    compiled = compiler.compile_grammar(xgr.Grammar.from_lark(_sql_text()))
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    times = []
    for seq in sequences:
        m = xgr.GrammarMatcher(compiled)
        for t in seq:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(bitmask, 0)
            times.append(time.perf_counter() - t0)
            if not m.accept_token(t):
                break
    return times


def _llguidance_times(tok, sequences):
    import llguidance
    import llguidance.hf
    import llguidance.numpy

    ll_tok = llguidance.hf.from_tokenizer(tok)
    grammar = llguidance.LLMatcher.grammar_from_lark(_sql_text())
    times = []
    mask = np.zeros((1, (ll_tok.vocab_size + 31) // 32), dtype=np.int32)
    for seq in sequences:
        m = llguidance.LLMatcher(ll_tok, grammar)
        for t in seq:
            t0 = time.perf_counter()
            llguidance.numpy.fill_next_token_bitmask(m, mask, 0)
            times.append(time.perf_counter() - t0)
            if not m.consume_token(t):
                break
    return times


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--walks", type=int, default=30)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-freeze", action="store_true", help="no gc.freeze() after the compiles")
    args = ap.parse_args()
    print(
        json.dumps(
            benchmark_sql_masks(args.walks, peers=not args.no_peers, freeze=not args.no_freeze),
            indent=2,
        )
    )

"""CFG masks equal a slow token-by-token reference (cfg_reference.py) in every state of seeded
random walks: SQL and a JSON-like grammar, on SmolLM2's first 3000 tokens (many walks) and on its
full 49k vocabulary (fewer walks). The grammar object is shared across walks, so later states
are served from warm caches and first visits alike."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from radixgen.core import Constraint
from radixgen.grammar.cfg.grammar import compile_cfg
from tests.grammar.cfg.reference import RefMasker
from tests.grammar.conftest import JSON_LARK, toy_info

GRAMMARS = {"sql": Constraint("lark", "sql"), "json": Constraint("lark", JSON_LARK)}
# toy vocabularies with whitespace glued to closing tokens (";\n", "}\n"): ignored text after a
# finished parse must be refused inside a token too
TOY_PIECES = {
    "sql": [
        "SELECT",
        "select",
        " a",
        "a",
        " FROM",
        " t",
        "t",
        ";",
        ";\n",
        "; ",
        "\n",
        " ",
        ",",
        ", ",
        " WHERE",
        " a =",
        " 1",
        "1",
        " (",
        ")",
        ");",
        ");\n",
        " IN",
        " AND",
        "*",
        " *",
        "ab",
        "c",
    ],
    "json": [
        "{",
        "}",
        "}\n",
        "} ",
        "[",
        "]",
        "]\n",
        " ",
        "\n",
        '"',
        '"a"',
        '":',
        ":",
        ": ",
        ",",
        ", ",
        "1",
        "-",
        "2.5",
        "e",
        "true",
        "null",
        ' "b',
        "x",
        "\\",
        "]}",
        "}]",
    ],
}


def allowed_ids(matcher, vocab_size: int) -> set[int]:
    row = torch.zeros(1, (vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(row, 0)
    bits = np.unpackbits(row[0].numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


def check_walk(grammar, ref: RefMasker, rng: random.Random, max_tokens: int) -> int:
    """Walk by sampling allowed tokens (short ones more often, EOS more and more likely),
    asserting at each step that the mask equals the reference. Returns the steps checked."""
    info, eos = grammar.info, set(grammar.eos_ids)
    matcher = grammar.matcher()
    for step in range(max_tokens):
        q, stack, _ = matcher._history[-1]
        expected = ref.allowed(q, stack)
        assert allowed_ids(matcher, info.vocab_size) == expected, (q, stack)
        entry = grammar.mask(q, stack)
        single = next(iter(expected)) if len(expected) == 1 and not expected & eos else -1
        assert (entry.num_allowed, entry.single_id) == (len(expected), single)
        if not expected - eos:  # finished (or a dead end of a toy vocabulary)
            return step + 1
        if expected & eos and rng.random() < 0.1 + step / max_tokens:
            return step + 1
        sample = rng.sample(sorted(expected - eos), min(24, len(expected - eos)))
        sample.sort(key=lambda i: len(info.token_bytes[i]) + 4 * rng.random())
        assert matcher.accept_token(sample[0] if rng.random() < 0.7 else rng.choice(sample))
    return max_tokens


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_match_reference_small_vocab(name, small_info):
    grammar = compile_cfg(GRAMMARS[name], small_info, precompute=False)
    ref, rng = RefMasker(grammar), random.Random(7)
    steps = sum(check_walk(grammar, ref, rng, max_tokens=60) for _ in range(40))
    assert steps >= 400


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_match_reference_toy_vocab(name):
    info = toy_info([b""] + [p.encode() for p in TOY_PIECES[name]])
    grammar = compile_cfg(GRAMMARS[name], info, precompute=False)
    ref, rng = RefMasker(grammar), random.Random(3)
    steps = sum(check_walk(grammar, ref, rng, max_tokens=40) for _ in range(200))
    assert steps >= 1000


@pytest.mark.model
@pytest.mark.parametrize("name, walks", [("sql", 6), ("json", 3)])
def test_masks_match_reference_full_vocab(name, walks, smol_info):
    grammar = compile_cfg(GRAMMARS[name], smol_info, precompute=False)
    ref, rng = RefMasker(grammar), random.Random(11)
    steps = sum(check_walk(grammar, ref, rng, max_tokens=40) for _ in range(walks))
    assert steps >= 2 * walks


@pytest.mark.model
def test_masks_match_reference_along_real_queries(smol_tokenizer, smol_info):
    """Real tokenizations, up to the state after `;` (only EOS may follow)."""
    grammar = compile_cfg(GRAMMARS["sql"], smol_info, precompute=False)
    ref = RefMasker(grammar)
    for query in ["SELECT a, b FROM t WHERE x >= 2 ;\n", "DELETE FROM t WHERE (a) IN (1, 2);"]:
        matcher = grammar.matcher()
        for token in smol_tokenizer.encode(query) + [smol_info.eos_ids[0]]:
            q, stack, _ = matcher._history[-1]
            assert allowed_ids(matcher, smol_info.vocab_size) == ref.allowed(q, stack), (query, q)
            if not matcher.accept_token(token):
                assert query.endswith("\n")  # whitespace after the final `;` is refused
                break

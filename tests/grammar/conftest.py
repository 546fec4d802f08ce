"""Tokenizers for grammar tests: the embedded SmolLM2 tokenizer (realistic cases), a prefix of it
(the same BPE pieces, 3000 tokens, so the many-schema tests compile fast) and toy vocabularies."""

from pathlib import Path

import pytest

from radixgen.grammar.compiler import GrammarCompiler
from radixgen.grammar.tokenizer_info import TokenizerInfo

SMOL = Path.home() / ".cache" / "radixgen" / "SmolLM2-135M-Instruct"
SMALL_VOCAB = 3000
# a JSON-like Lark grammar with %ignore'd whitespace, shared by the CFG tests
JSON_LARK = r"""
start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""


@pytest.fixture(scope="session")
def smol_tokenizer():
    if not (SMOL / "tokenizer.json").exists():
        pytest.skip("the embedded SmolLM2 tokenizer is not materialised")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMOL))


@pytest.fixture(scope="session")
def smol_info(smol_tokenizer) -> TokenizerInfo:
    return TokenizerInfo.from_hf(smol_tokenizer)


@pytest.fixture(scope="session")
def small_info(smol_info) -> TokenizerInfo:
    """SmolLM2's first 3000 tokens: every byte plus the most frequent merges."""
    return TokenizerInfo(
        smol_info.token_bytes[:SMALL_VOCAB],
        smol_info.eos_ids,
        frozenset(i for i in smol_info.special_ids if i < SMALL_VOCAB),
        SMALL_VOCAB,
        name="smol-3000",
    )


@pytest.fixture(scope="session")
def small_compiler(small_info) -> GrammarCompiler:
    return GrammarCompiler(small_info)


@pytest.fixture(scope="session")
def smol_compiler(smol_info) -> GrammarCompiler:
    return GrammarCompiler(smol_info)


def toy_info(pieces: list[bytes], eos_ids=(0,)) -> TokenizerInfo:
    """Token i spells pieces[i]; b"" marks a special token (e.g. EOS at id 0)."""
    special = frozenset(i for i, p in enumerate(pieces) if not p)
    return TokenizerInfo(tuple(pieces), tuple(eos_ids), special, len(pieces), name="toy")

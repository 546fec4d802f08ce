"""What a grammar needs to know about a tokenizer: the bytes each token id decodes to.

Built once per tokenizer (`TokenizerInfo.from_hf`) and shared by every compiled grammar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 byte-level BPE's byte -> printable character map (the standard table)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


_BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}


@dataclass(frozen=True, eq=False)
class TokenizerInfo:
    """token_bytes[i] is what token i decodes to as raw bytes (b"" for special tokens);
    `special_ids` never match grammar text; `eos_ids` end a grammar in an accepting state.
    `vocab_size` is the logits width (may exceed len(token_bytes))."""

    token_bytes: tuple[bytes, ...]
    eos_ids: tuple[int, ...]
    special_ids: frozenset[int]
    vocab_size: int
    name: str = ""  # identifies the tokenizer in compile-cache keys
    _id: int = field(default=0, repr=False)

    @classmethod
    def from_hf(
        cls, tokenizer: Any, vocab_size: int | None = None, eos_ids: tuple[int, ...] | None = None
    ) -> "TokenizerInfo":
        """From a transformers tokenizer (byte-level BPE, SentencePiece byte-fallback or plain)."""
        vocab = tokenizer.get_vocab()
        size = max(vocab.values()) + 1
        pieces = [""] * size
        for piece, i in vocab.items():
            pieces[i] = piece
        special = frozenset(int(i) for i in tokenizer.all_special_ids)
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special |= {int(i) for i, tok in added.items() if getattr(tok, "special", False)}
        token_bytes = tuple(b"" if i in special else _piece_bytes(p) for i, p in enumerate(pieces))
        if eos_ids is None:
            eos_ids = (tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else ()
        return cls(
            token_bytes,
            tuple(eos_ids),
            special,
            max(vocab_size or 0, size),
            name=getattr(tokenizer, "name_or_path", ""),
        )


def _piece_bytes(piece: str) -> bytes:
    """Raw bytes of one vocabulary piece, for byte-level BPE ('Ġ' = space) and SentencePiece
    ('▁' = space, '<0x0A>' byte-fallback pieces)."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:5], 16)])
    if all(c in _BYTE_DECODER for c in piece):
        return bytes(_BYTE_DECODER[c] for c in piece)
    return piece.replace("▁", " ").encode("utf-8")

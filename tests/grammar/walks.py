"""Seeded random walks through a grammar: sample only allowed tokens until EOS."""

import json
import random

import numpy as np

from radixgen.grammar.bitmask import allocate_bitmask, unpack_row

_CLOSERS = (b'"', b"}", b"]", b",")


def random_walk(grammar, info, seed: int, max_steps: int = 1000) -> tuple[list[int], str]:
    """Token ids (EOS excluded) and their text. Each step samples uniformly among allowed tokens,
    but prefers EOS, closing punctuation and single bytes more and more as the walk grows, so it
    ends; the matcher is also told the walk's length (limit_tokens), so it closes in time."""
    rng, matcher = random.Random(seed), grammar.matcher()
    matcher.limit_tokens(max_steps - 1)  # (and EOS at the last step)
    bitmask = allocate_bitmask(1, info.vocab_size)
    eos = np.asarray(info.eos_ids)
    closers = np.flatnonzero(np.isin(np.array(info.token_bytes, dtype=object), _CLOSERS))
    single = np.flatnonzero(np.array([len(b) == 1 for b in info.token_bytes]))
    ids = []
    for step in range(max_steps):
        matcher.fill_bitmask(bitmask, 0)
        allowed = unpack_row(bitmask[0], info.vocab_size)
        assert len(allowed), f"dead end after {info_text(info, ids)!r}"
        urge = min(0.9, 0.2 + step / 100)
        pools = [np.intersect1d(allowed, eos)] if rng.random() < 0.7 else []
        if rng.random() < urge:
            pools += [np.intersect1d(allowed, closers), np.intersect1d(allowed, single)]
        pool = next((p for p in pools if len(p)), allowed)
        token = int(pool[rng.randrange(len(pool))])
        assert matcher.accept_token(token)
        if matcher.is_terminated():
            return ids, info_text(info, ids)
        ids.append(token)
    raise AssertionError(f"no EOS within {max_steps} steps: {info_text(info, ids)[:200]!r}")


def valid_walks(grammar, info, schema: dict, walks: int) -> list:
    """The parsed outputs of `walks` seeded random walks, each validated against `schema` under
    the validator its `$schema` names (2020-12 otherwise)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )(schema)
    values = [json.loads(random_walk(grammar, info, seed)[1]) for seed in range(walks)]
    for value in values:
        validator.validate(value)
    return values


def accepts_text(grammar, info, text: str) -> bool:
    """Whether the grammar accepts `text` as a whole, fed one byte token at a time."""
    matcher = grammar.matcher()
    return accepts_prefix(grammar, info, text, matcher) and matcher.is_accepting()


def accepts_prefix(grammar, info, text: str, matcher=None) -> bool:
    """Whether the grammar accepts `text` as a prefix, fed one byte token at a time."""
    byte_ids = {data[0]: i for i, data in enumerate(info.token_bytes) if len(data) == 1}
    matcher = grammar.matcher() if matcher is None else matcher
    return all(matcher.accept_token(byte_ids[c]) for c in text.encode())


def info_text(info, ids) -> str:
    return b"".join(info.token_bytes[i] for i in ids).decode("utf-8", errors="replace")


def checked_mask_after(grammar, info, tokenizer, prefix: str) -> set[int]:
    """The tokens the grammar's mask allows after `prefix` (which it must accept), checked
    against accept_token for every token of the vocabulary."""
    matcher = grammar.matcher()
    assert all(
        matcher.accept_token(t) for t in tokenizer.encode(prefix, add_special_tokens=False)
    ), prefix
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    allowed = set(unpack_row(bitmask[0], info.vocab_size).tolist())
    for token in range(info.vocab_size):
        if token not in info.special_ids:
            assert matcher.fork().accept_token(token) == (token in allowed), (prefix[-12:], token)
    return allowed

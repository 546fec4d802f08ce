"""Choice scores from prompt logprobs, without a tokenizer on the client.

The endpoint sends one batched prefill-only `/generate` over `[prefix, prefix + c_1, ...]`
whose prompt logprobs start at `start`: where the prompts' token ids first differ (radixgen's
`logprob_start_common_prefix`), or, from a server without it, a few tokens before the end of
the prefix whose token count a pin request returned (`logprob_start`). Each answer's
`input_token_logprobs` lists `[logprob, token_id]` from `start` on, which is also the
server's own tokenization of that tail. Where `prefix + c` merges across the boundary (a
prefix ending in a space, a choice starting with one), its ids part from the prefix's ids
before the prefix ends; every choice is scored from the first position where *any* choice
parts from the prefix, so all scores condition on the same token ids and stay comparable.
"""

from __future__ import annotations

from typing import Any

# prefix tokens re-read before the boundary: enough for any merge of a BPE tokenizer seen here
BOUNDARY_TOKENS = 4


def logprob_start(prefix_len: int) -> int:
    """Where prompt logprobs begin for a prefix of `prefix_len` tokens (>= 1: position 0 has none)."""
    return max(prefix_len - BOUNDARY_TOKENS, 1) if prefix_len > 1 else 0


def starts_at_common_prefix(metas: list[dict[str, Any]], entries: list[list[list[Any]]]) -> bool:
    """True if a batch's prompt logprobs start exactly where its prompts first differ: every
    answer reports the same `logprob_start_len` s, and at s a prompt ends or the token ids
    differ. A server that ignored `logprob_start_common_prefix` fails this."""
    starts = {m.get("logprob_start_len") for m in metas}
    if len(starts) != 1 or None in starts:
        return False
    start = starts.pop()
    if any(m.get("prompt_tokens") == start for m in metas):
        return True
    return len({int(e[0][1]) if e else None for e in entries}) > 1


def first_divergence(prefix_ids: list[int], choice_ids: list[int]) -> int:
    """Index of the first id where a choice's tokens part from the prefix's."""
    for i, (a, b) in enumerate(zip(prefix_ids, choice_ids)):
        if a != b:
            return i
    return min(len(prefix_ids), len(choice_ids))


def choice_tails(
    prefix_entries: list[list[Any]], choice_entries: list[list[list[Any]]]
) -> list[list[list[Any]]]:
    """Each choice's `[logprob, token_id]` entries after the common divergence (the tokens
    the choices are scored on). Entries are lists aligned at the same `start` (a third item,
    SGLang's token text, is kept)."""
    prefix_ids = [int(e[1]) for e in prefix_entries]
    ids = [[int(e[1]) for e in entries] for entries in choice_entries]
    common = min(first_divergence(prefix_ids, c) for c in ids)
    return [[list(e) for e in entries[common:] if e[0] is not None] for entries in choice_entries]


def score_choices(
    prefix_entries: list[list[Any]], choice_entries: list[list[list[Any]]]
) -> tuple[list[float], list[int]]:
    """Summed logprob and token count of each choice's tokens after the common divergence."""
    tails = choice_tails(prefix_entries, choice_entries)
    return [float(sum(e[0] for e in tail)) for tail in tails], [len(tail) for tail in tails]


def normalize(sums: list[float], counts: list[int]) -> list[float]:
    """Mean logprob per token (a choice with no scored token gets its sum, 0.0)."""
    return [s / c if c else s for s, c in zip(sums, counts)]


def argmax(scores: list[float]) -> int:
    """First index of the highest score (ties go to the earlier choice)."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))

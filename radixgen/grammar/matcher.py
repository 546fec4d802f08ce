"""The grammar contract the runtime and the speculative decoder rely on.

A `CompiledGrammar` is the immutable, shareable product of compiling one `Constraint` against one
tokenizer (cached by both). A `Matcher` is one request's cursor through it: cheap to create,
mutated by `accept_token` / `rollback`, copied by `fork`.

Bitmask convention (all matchers, and `radixgen.grammar.bitmask`): int32 `[batch, ceil(vocab/32)]`;
token t is allowed in row r iff bit (t % 32) of word (t // 32) is set. Ids at or beyond the
tokenizer's vocabulary (padding columns of the logits) are never allowed.

End of sequence: while the grammar is in an accepting state, the tokenizer's EOS ids are allowed;
accepting one of them terminates the matcher (`is_terminated()`), after which nothing is allowed.
When an accepting state has no other continuation, EOS is the only allowed token.
"""

from __future__ import annotations

from typing import Protocol

import torch


class Matcher(Protocol):
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False, leaving the state unchanged, if the grammar
        rejects it (the caller then finishes the request with an error rather than emitting it)."""

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed-next-token set into row `row` of an int32 bitmask (CPU tensor).
        Mutates only that row."""

    def limit_tokens(self, num_tokens: int) -> None:
        """At most `num_tokens` more tokens will be accepted (the request's max_new_tokens, or
        its context, left): in the last tokens `fill_bitmask` keeps to those after which the
        text can still be completed in time, so an output that runs to its limit is complete."""

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (speculative rejection). ValueError if more
        than were accepted."""

    def fork(self) -> "Matcher":
        """An independent copy in the same state (for n > 1 samples and draft-tree walks)."""

    def is_terminated(self) -> bool:
        """True once an EOS token was accepted."""

    def jump_forward_token_ids(self) -> list[int]:
        """Token ids the grammar forces next, from the current state, without sampling: empty
        when more than one continuation is possible. Not accepted yet: the caller accepts them."""


class CompiledGrammar(Protocol):
    def matcher(self) -> Matcher:
        """A fresh matcher at the start state."""


class GrammarError(ValueError):
    """A constraint that cannot be compiled, or one that radixgen refuses because it could not be
    enforced exactly. The message names the problem (and, for JSON Schema, the keyword and its
    JSON path); the server turns it into an HTTP 400."""


class RegexTooLarge(GrammarError):
    """A constraint whose regex, or its automaton or token index, would pass its budget (a JSON
    Schema is then compiled to a grammar instead, where it can be)."""


def refuse(keyword: str, path: str, why: str, error: type[GrammarError] = GrammarError):
    """Raise `error` naming the JSON Schema keyword that cannot be enforced exactly, and where."""
    raise error(f"unsupported JSON Schema keyword {keyword!r} at {path}: {why}")

"""A tiny DFA matcher over token ids, following radixgen.grammar.matcher.Matcher (tests only)."""

from __future__ import annotations

import torch

EOS = 0


class DfaMatcher:
    """transitions: {state: {token: next_state}}; EOS is allowed (and terminates) in `accepting`
    states. History is a state stack, so rollback is exact."""

    def __init__(self, transitions: dict[int, dict[int, int]], accepting: set[int], start: int = 0):
        self.transitions, self.accepting = transitions, accepting
        self.stack = [start]
        self.terminated = False

    def _allowed(self) -> dict[int, int]:
        if self.terminated:
            return {}
        out = dict(self.transitions.get(self.stack[-1], {}))
        if self.stack[-1] in self.accepting:
            out[EOS] = -1
        return out

    def accept_token(self, token_id: int) -> bool:
        allowed = self._allowed()
        if token_id not in allowed:
            return False
        self.terminated = token_id == EOS
        self.stack.append(self.stack[-1] if self.terminated else allowed[token_id])
        return True

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        words = [0] * bitmask.shape[1]
        for t in self._allowed():
            words[t // 32] |= 1 << (t % 32)
        bitmask[row] = torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in words])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > len(self.stack) - 1:
            raise ValueError("rollback past the start")
        for _ in range(num_tokens):
            self.stack.pop()
            self.terminated = False

    def fork(self) -> "DfaMatcher":
        twin = DfaMatcher(self.transitions, self.accepting)
        twin.stack, twin.terminated = list(self.stack), self.terminated
        return twin

    def is_terminated(self) -> bool:
        return self.terminated

    def jump_forward_token_ids(self) -> list[int]:
        out, state = [], self.stack[-1]
        while not self.terminated and state not in self.accepting:
            nxt = self.transitions.get(state, {})
            if len(nxt) != 1:
                break
            ((token, state),) = nxt.items()
            out.append(token)
        return out


def example_grammar() -> DfaMatcher:
    """Tokens 1 2 then either 3 or 4 5 6, then 7, then EOS (0). Vocabulary 0..7."""
    transitions = {0: {1: 1}, 1: {2: 2}, 2: {3: 5, 4: 3}, 3: {5: 4}, 4: {6: 5}, 5: {7: 6}}
    return DfaMatcher(transitions, accepting={6})

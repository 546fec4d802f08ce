"""How `select` turns per-token logprobs of each choice into a decision: SGLang's three
choice-sampling methods, callable objects with SGLang's keyword interface.

Every method sees, per choice, `input_token_logprobs`: the `[logprob, token_id]` entries of
the choice's own tokens after the text (where all choices condition on the same token ids,
see select_scoring.py), and `normalized_prompt_logprobs`: their means."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class ChoicesDecision:
    decision: str
    meta_info: dict[str, Any] = field(default_factory=dict)


def _argmax_first(values: list[float]) -> int:
    """Index of the highest value, the earliest on ties; NaN never wins."""
    if not values:
        raise ValueError("no choices to pick from")
    return max(range(len(values)), key=lambda i: (not math.isnan(values[i]), values[i], -i))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _logprobs(entries: list[list[Any]]) -> list[float]:
    return [float(e[0]) for e in entries if e[0] is not None]


class ChoicesSamplingMethod:
    """`method(choices=..., normalized_prompt_logprobs=..., input_token_logprobs=...,
    output_token_logprobs=..., unconditional_token_logprobs=None) -> ChoicesDecision`."""

    requires_unconditional_logprobs = False
    name = "custom"

    def __call__(
        self,
        *,
        choices: list[str],
        normalized_prompt_logprobs: list[float],
        input_token_logprobs: list[list[list[Any]]],
        output_token_logprobs: list[list[list[Any]]],
        unconditional_token_logprobs: Optional[list[list[list[Any]]]] = None,
    ) -> ChoicesDecision:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


def _base_meta(normalized, inputs, outputs) -> dict[str, Any]:
    return {
        "normalized_prompt_logprobs": normalized,
        "input_token_logprobs": inputs,
        "output_token_logprobs": outputs,
    }


class TokenLengthNormalized(ChoicesSamplingMethod):
    """The highest mean logprob per token."""

    name = "token_length_normalized"

    def __call__(
        self,
        *,
        choices,
        normalized_prompt_logprobs,
        input_token_logprobs,
        output_token_logprobs,
        unconditional_token_logprobs=None,
    ):
        best = choices[_argmax_first(normalized_prompt_logprobs)]
        return ChoicesDecision(
            best,
            _base_meta(normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs),
        )


class GreedyTokenSelection(ChoicesSamplingMethod):
    """Token by token, keep the choices with the highest logprob at that position; a choice
    shorter than the others continues with its own mean logprob."""

    name = "greedy_token_selection"

    def __call__(
        self,
        *,
        choices,
        normalized_prompt_logprobs,
        input_token_logprobs,
        output_token_logprobs,
        unconditional_token_logprobs=None,
    ):
        matrix = self.logprob_matrix(input_token_logprobs)
        remaining = list(range(len(choices)))
        for j in range(len(matrix[0]) if matrix else 0):
            top = max(matrix[i][j] for i in remaining)
            remaining = [i for i in remaining if matrix[i][j] == top]
            if len(remaining) == 1:
                break
        meta = {
            **_base_meta(normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs),
            "greedy_logprob_matrix": matrix,
        }
        return ChoicesDecision(choices[remaining[0]], meta)

    @staticmethod
    def logprob_matrix(input_token_logprobs: list[list[list[Any]]]) -> list[list[float]]:
        rows = [_logprobs(entries) for entries in input_token_logprobs]
        width = max((len(r) for r in rows), default=0)
        return [r + [_mean(r)] * (width - len(r)) for r in rows]


class UnconditionalLikelihoodNormalized(ChoicesSamplingMethod):
    """The highest mean of (logprob after the text - logprob of the choice on its own), which
    discounts choices that are likely whatever precedes them."""

    name = "unconditional_likelihood_normalized"
    requires_unconditional_logprobs = True

    def __call__(
        self,
        *,
        choices,
        normalized_prompt_logprobs,
        input_token_logprobs,
        output_token_logprobs,
        unconditional_token_logprobs=None,
    ):
        if unconditional_token_logprobs is None:
            raise ValueError(
                "unconditional_likelihood_normalized needs unconditional token logprobs"
            )
        scores = [
            self.score(c, u) for c, u in zip(input_token_logprobs, unconditional_token_logprobs)
        ]
        meta = {
            **_base_meta(normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs),
            "unconditional_token_logprobs": unconditional_token_logprobs,
            "normalized_unconditional_prompt_logprobs": scores,
        }
        return ChoicesDecision(choices[_argmax_first(scores)], meta)

    @staticmethod
    def score(conditional: list[list[Any]], unconditional: list[list[Any]]) -> float:
        """Mean difference over the choice's tokens. The unconditional entries are aligned at
        the end (a choice alone may tokenize its first characters differently); a position
        without an unconditional logprob (the very first token of a sequence) counts as 0."""
        cond = [float(e[0]) if e[0] is not None else 0.0 for e in conditional]
        uncond = (
            [float(e[0]) if e[0] is not None else 0.0 for e in unconditional][-len(cond) :]
            if cond
            else []
        )
        uncond = [0.0] * (len(cond) - len(uncond)) + uncond
        return _mean([c - u for c, u in zip(cond, uncond)])


class Unnormalized(ChoicesSamplingMethod):
    """The highest summed logprob (favours short choices; radixgen's `"unnormalized"`)."""

    name = "unnormalized"

    def __call__(
        self,
        *,
        choices,
        normalized_prompt_logprobs,
        input_token_logprobs,
        output_token_logprobs,
        unconditional_token_logprobs=None,
    ):
        sums = [sum(_logprobs(entries)) for entries in input_token_logprobs]
        meta = {
            **_base_meta(normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs),
            "unnormalized_prompt_logprobs": sums,
        }
        return ChoicesDecision(choices[_argmax_first(sums)], meta)


token_length_normalized = TokenLengthNormalized()
greedy_token_selection = GreedyTokenSelection()
unconditional_likelihood_normalized = UnconditionalLikelihoodNormalized()

METHODS_BY_NAME = {
    m.name: m
    for m in (
        token_length_normalized,
        greedy_token_selection,
        unconditional_likelihood_normalized,
        Unnormalized(),
    )
}

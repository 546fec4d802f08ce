"""A step's wall time predicted from its shape, fitted to the scheduler's own step timings, so
the prefill planner can size long prompts' chunks to a step-time target (`--max-step-ms`).

    seconds ~= w0 + w1 * rows + w2 * prefill_pairs + w3 * decode_kv
rows: tokens through the forward (weight GEMMs: linear in rows); prefill_pairs: query-key pairs
of the prefill chunks' causal attention, sum of ext * (prefix + (ext + 1) / 2), so a chunk deep
in a long prompt costs more than the same chunk at its start; decode_kv: context tokens read by
decode rows. Fitted by exponentially weighted least squares (recent steps count most: the
device's speed does not change, the mix of shapes does), with the weights kept >= 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# features in units that keep the normal equations well conditioned
_SCALES = (1.0, 1e3, 1e6, 1e5)  # 1, rows, pairs, decode context tokens
FORGET = 0.97  # weight of a step's sample after each later one (~33 steps remembered)
RIDGE = 1e-6
MIN_SAMPLES = 3  # fitted steps before a prediction is trusted
STALL_FACTOR = 8.0  # a step this many times slower than predicted was a stall (compile, capture)
MAX_GROWTH = 2  # a fitted chunk is at most this many times the largest step (in rows) seen


@dataclass
class StepShape:
    """What a forward computes, in the cost model's terms."""

    rows: int = 0
    prefill_pairs: float = 0.0
    decode_kv: int = 0

    def add_prefill(self, prefix_len: int, ext: int) -> None:
        self.rows += ext
        self.prefill_pairs += prefill_pairs(prefix_len, ext)

    def add_decode(self, context_len: int, rows: int = 1) -> None:
        self.rows += rows
        self.decode_kv += context_len * rows

    def features(self) -> torch.Tensor:
        raw = (1.0, self.rows, self.prefill_pairs, self.decode_kv)
        return torch.tensor([x / s for x, s in zip(raw, _SCALES)], dtype=torch.float64)


def prefill_pairs(prefix_len: int, ext: int) -> float:
    """Causal attention pairs of ext new tokens after prefix_len cached ones."""
    return ext * (prefix_len + (ext + 1) / 2)


class StepCostModel:
    """Online least-squares fit of step seconds to `StepShape` features."""

    def __init__(self) -> None:
        n = len(_SCALES)
        self.gram = torch.zeros(n, n, dtype=torch.float64)  # sum of decayed x x^T
        self.moment = torch.zeros(n, dtype=torch.float64)  # sum of decayed x y
        self.weights = torch.zeros(n, dtype=torch.float64)
        self.num_samples = 0
        self.max_rows = 0
        self._skipped_first = False

    @property
    def ready(self) -> bool:
        return self.num_samples >= MIN_SAMPLES

    def observe(self, shape: StepShape, seconds: float) -> bool:
        """Fit one measured step; False when it was left out (the very first step, which pays
        one-time warm-up, or a stall far beyond the prediction)."""
        if not self._skipped_first:
            self._skipped_first = True
            return False
        if self.ready and seconds > STALL_FACTOR * max(self.predict(shape), 1e-4):
            return False
        x = shape.features()
        self.gram = FORGET * self.gram + torch.outer(x, x)
        self.moment = FORGET * self.moment + x * seconds
        self.num_samples += 1
        self.max_rows = max(self.max_rows, shape.rows)
        self.weights = _nonnegative_fit(self.gram, self.moment)
        return True

    def predict(self, shape: StepShape) -> float:
        """Predicted seconds of a step of this shape."""
        return float(self.weights @ shape.features())

    def max_chunk(self, prefix_len: int, seconds: float, cap: int) -> int:
        """The most prefill tokens (<= cap) after prefix_len cached ones whose predicted added
        time stays within `seconds`; cap itself while the model is not ready."""
        if not self.ready:
            return cap
        cap = min(cap, MAX_GROWTH * max(self.max_rows, 1))
        if seconds <= 0:
            return 0
        w_rows, w_pairs = float(self.weights[1]) / _SCALES[1], float(self.weights[2]) / _SCALES[2]
        # added time of c tokens: w_rows * c + w_pairs * c * (prefix + (c + 1) / 2), increasing in c
        a, b = w_pairs / 2, w_rows + w_pairs * (prefix_len + 0.5)
        if a <= 0 and b <= 0:
            return cap
        c = seconds / b if a <= 0 else (-b + math.sqrt(b * b + 4 * a * seconds)) / (2 * a)
        return max(0, min(cap, int(c)))


def _nonnegative_fit(gram: torch.Tensor, moment: torch.Tensor) -> torch.Tensor:
    """Ridge least squares with every weight >= 0: a feature whose weight comes out negative
    (collinear features while the mix of shapes is narrow) is dropped and the rest refitted."""
    active = list(range(len(moment)))
    weights = torch.zeros_like(moment)
    while active:
        idx = torch.tensor(active)
        sub = gram[idx][:, idx] + RIDGE * torch.eye(len(active), dtype=gram.dtype)
        solved = torch.linalg.solve(sub, moment[idx])
        if (solved >= 0).all():
            weights[idx] = solved
            return weights
        active = [i for i, w in zip(active, solved.tolist()) if w >= 0]
    return weights

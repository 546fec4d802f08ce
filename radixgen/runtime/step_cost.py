"""A step's wall time predicted from its shape, fitted to the scheduler's own step timings, so
the prefill planner can size long prompts' chunks to a step-time target (`--max-step-ms`).

On a GPU the host launches a step's kernels asynchronously, so a step takes about the longer of
the host's work and the device's, not their sum:

    seconds ~= max(host(shape), device(shape)), each  w0 + w1 * requests + w2 * rows
                                                        + w3 * prefill_pairs + w4 * decode_kv
requests: requests in the forward (the host's per-request work); rows: tokens through it
(weight GEMMs: linear in rows); prefill_pairs: query-key pairs of the prefill chunks' causal
attention, sum of ext * (prefix + (ext + 1) / 2), so a chunk deep in a long prompt costs more
than the same chunk at its start; decode_kv: context tokens read by decode rows.

A measured step teaches the model that bounded it: one that still waited on the device after
its launches returned fits `device`, one that did not fits `host` (on the CPU every step, so
`host` is the whole additive model there). An additive model fitted to a mix of both kinds
overstates long chunks' cost several times where the host bounds a step: a step whose launches
take 27 ms carries ~600-1,600 long-prompt tokens within 50 ms on an H100, the additive fit
allowed ~290 (docs/BENCHMARKS.md, prefill step cost). Each fit is exponentially weighted least
squares (recent steps count most: the device's speed does not change, the mix of shapes does),
with the weights kept >= 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import torch

# features in units that keep the normal equations well conditioned
_SCALES = (1.0, 10.0, 1e3, 1e6, 1e5)  # 1, requests, rows, pairs, decode context tokens
FORGET = 0.97  # weight of a step's sample after each later one (~33 steps remembered)
RIDGE = 1e-6
MIN_SAMPLES = 3  # fitted steps before a fit's prediction is trusted
STALL_FACTOR = 8.0  # a step this many times slower than predicted was a stall (compile, capture)
MAX_GROWTH = 2  # a fitted chunk is at most this many times the largest step (in rows) seen
# a step waited on the device when its readback took this long after the launches returned
DEVICE_WAIT_MIN_S = 0.002
DEVICE_WAIT_FRACTION = 0.2


@dataclass
class StepShape:
    """What a forward computes, in the cost model's terms."""

    requests: int = 0
    rows: int = 0
    prefill_pairs: float = 0.0
    decode_kv: int = 0

    def add_prefill(self, prefix_len: int, ext: int) -> None:
        self.requests += 1
        self.rows += ext
        self.prefill_pairs += prefill_pairs(prefix_len, ext)

    def add_decode(self, context_len: int, rows: int = 1) -> None:
        """One request's decode row, or its speculative tree of `rows` rows."""
        self.requests += 1
        self.rows += rows
        self.decode_kv += context_len * rows

    def with_request(self) -> StepShape:
        return StepShape(self.requests + 1, self.rows, self.prefill_pairs, self.decode_kv)

    def features(self) -> torch.Tensor:
        raw = (1.0, self.requests, self.rows, self.prefill_pairs, self.decode_kv)
        return torch.tensor([x / s for x, s in zip(raw, _SCALES)], dtype=torch.float64)


def prefill_pairs(prefix_len: int, ext: int) -> float:
    """Causal attention pairs of ext new tokens after prefix_len cached ones."""
    return ext * (prefix_len + (ext + 1) / 2)


def step_shape(
    prefills: Iterable[tuple[object, int]], decoding: Iterable, trees: Iterable = ()
) -> StepShape:
    """A forward in the cost model's terms, before its requests' kv_len moves on: prefill
    chunks (request, ext), one decode row of each decoding request, and speculative trees."""
    shape = StepShape()
    for req, ext in prefills:
        shape.add_prefill(req.kv_len, ext)
    for req in decoding:
        shape.add_decode(req.kv_len + 1)
    for tree in trees:
        shape.add_decode(tree.req.kv_len + len(tree.slots), rows=len(tree.slots))
    return shape


class _LinearFit:
    """Online nonnegative least-squares fit of step seconds to `StepShape` features."""

    def __init__(self) -> None:
        n = len(_SCALES)
        self.gram = torch.zeros(n, n, dtype=torch.float64)  # sum of decayed x x^T
        self.moment = torch.zeros(n, dtype=torch.float64)  # sum of decayed x y
        self.weights = torch.zeros(n, dtype=torch.float64)
        self.num_samples = 0

    @property
    def ready(self) -> bool:
        return self.num_samples >= MIN_SAMPLES

    def observe(self, shape: StepShape, seconds: float) -> None:
        x = shape.features()
        self.gram = FORGET * self.gram + torch.outer(x, x)
        self.moment = FORGET * self.moment + x * seconds
        self.num_samples += 1
        self.weights = _nonnegative_fit(self.gram, self.moment)

    def predict(self, shape: StepShape) -> float:
        return float(self.weights @ shape.features())

    def max_added(self, base: StepShape, prefix_len: int, seconds: float, cap: int) -> int:
        """The most prefill tokens (<= cap) after prefix_len cached ones that a step of shape
        `base` can add while this fit predicts it within `seconds`."""
        spare = seconds - self.predict(base)
        if spare <= 0:
            return 0
        w_rows, w_pairs = float(self.weights[2]) / _SCALES[2], float(self.weights[3]) / _SCALES[3]
        # added time of c tokens: w_rows * c + w_pairs * c * (prefix + (c + 1) / 2), increasing in c
        a, b = w_pairs / 2, w_rows + w_pairs * (prefix_len + 0.5)
        if a <= 0 and b <= 0:
            return cap
        c = spare / b if a <= 0 else (-b + math.sqrt(b * b + 4 * a * spare)) / (2 * a)
        return max(0, min(cap, int(c)))


class StepCostModel:
    """A step's seconds as the longer of the host's and the device's work (module docstring)."""

    def __init__(self) -> None:
        self.host, self.device = _LinearFit(), _LinearFit()
        self.max_rows = 0
        self._skipped_first = False

    @property
    def ready(self) -> bool:
        return self.host.ready or self.device.ready

    def _fits(self) -> list[_LinearFit]:
        return [f for f in (self.host, self.device) if f.ready]

    def observe(self, shape: StepShape, seconds: float, launched: float | None = None) -> bool:
        """Fit one measured step: `seconds` from its start to its results read back, `launched`
        to its forward's launches returned (None: the same as seconds, a synchronous device).
        False when it was left out (the very first step, which pays one-time warm-up, or a
        stall far beyond the prediction)."""
        if not self._skipped_first:
            self._skipped_first = True
            return False
        if self.ready and seconds > STALL_FACTOR * max(self.predict(shape), 1e-4):
            return False
        waited = seconds - (seconds if launched is None else launched)
        device_bound = waited > max(DEVICE_WAIT_MIN_S, DEVICE_WAIT_FRACTION * seconds)
        (self.device if device_bound else self.host).observe(shape, seconds)
        self.max_rows = max(self.max_rows, shape.rows)
        return True

    def predict(self, shape: StepShape) -> float:
        """Predicted seconds of a step of this shape (0 before any fit is ready)."""
        return max((f.predict(shape) for f in self._fits()), default=0.0)

    def max_chunk(self, shape: StepShape, prefix_len: int, seconds: float, cap: int) -> int:
        """The most prefill tokens (<= cap) of one more request, after prefix_len cached ones,
        that a step planned so far as `shape` can take while its predicted time stays within
        `seconds`; cap itself while the model is not ready. Grows at most MAX_GROWTH times
        the largest step seen, so a fit learns the larger shapes before it is trusted there."""
        if not self.ready:
            return cap
        cap = min(cap, MAX_GROWTH * max(self.max_rows, 1))
        base = shape.with_request()
        return min(f.max_added(base, prefix_len, seconds, cap) for f in self._fits())


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

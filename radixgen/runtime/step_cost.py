"""The long prompts' tokens a step, steered by feedback so a step takes about the step-time
target (`--max-step-ms`): after each step that carried long-prompt chunks, the next step's
allowance is what this one carried, scaled by sqrt(target / measured seconds) (at most x1.5 up
and x0.5 down a step). The fixed point is a step of the target's length; the square root damps
the response to the noise of the step's other work (new short prompts, decode rows).

Feedback rather than a predictive cost model, because a step's time is not one formula of its
shape: on a GPU the host's launches overlap the device's work, so a step takes about the longer
of the two, and the host's part moves with what else the step carries (radix-tree matches,
sampling, bookkeeping). A least-squares fit of time to shape, additive or as max(host, device),
was measured on an H100 and an H200 to cut long chunks to ~64-300 tokens where 500-1,500 fitted
the target (docs/BENCHMARKS.md, GPU serving); the controller measures the quantity it steers.
A step's chunk deep in a long prompt costs more than at its start (attention grows with depth);
the allowance follows as the prompt deepens, a few percent a step.
"""

from __future__ import annotations

GAIN = 0.5  # exponent of target / measured: 1 jumps to the fixed point and overshoots on noise
MAX_UP, MAX_DOWN = 1.5, 0.5  # one step's change of the allowance, at most


class LongChunkController:
    """Prompt tokens of long prompts per step (module docstring)."""

    def __init__(self, target_s: float, initial: int, least: int, most: int):
        self.target_s, self.least, self.most = target_s, least, most
        self.tokens = max(least, min(initial, most))

    def observe(self, long_tokens: int, seconds: float) -> None:
        """A measured step (start to its sampled tokens read back) that carried `long_tokens`
        tokens of long prompts; steps without any do not steer."""
        if long_tokens <= 0 or seconds <= 0:
            return
        factor = min(MAX_UP, max(MAX_DOWN, (self.target_s / seconds) ** GAIN))
        # too slow: down from what the step carried; fast enough: up only from an allowance the
        # step used (a prompt's last chunk may take less, which says nothing about more)
        steered = long_tokens * factor if factor < 1 else max(self.tokens, long_tokens * factor)
        self.tokens = int(max(self.least, min(self.most, steered)))

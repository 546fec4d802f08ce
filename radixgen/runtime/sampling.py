"""Sampling on the logits tensor: penalties, temperature, top-k, top-p, min-p, seeds, logprobs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from radixgen.runtime.request import Request


@dataclass
class SampleResult:
    token_ids: list[int]
    logprobs: list[float] | None  # logprob of each chosen token under the model distribution
    top_logprobs: list[list[tuple[int, float]]] | None


@torch.inference_mode()  # logits come from the inference-mode forward and are edited in place
def sample(logits: torch.Tensor, reqs: list[Request]) -> SampleResult:
    """logits [batch, vocab] float32 (modified in place) -> one token per request."""
    want_logprobs = any(r.params.return_logprob or r.params.top_logprobs_num for r in reqs)
    raw_logprobs = torch.log_softmax(logits, dim=-1) if want_logprobs else None
    _apply_penalties(logits, reqs)
    tokens = logits.argmax(dim=-1)
    sampled = [i for i, req in enumerate(reqs) if not req.params.is_greedy]
    if sampled:
        tokens[sampled] = _sample_rows(logits, sampled, reqs)
    token_ids = tokens.tolist()
    if raw_logprobs is None:
        return SampleResult(token_ids, None, None)
    chosen = raw_logprobs.gather(1, tokens[:, None])[:, 0].tolist()
    k = max(r.params.top_logprobs_num for r in reqs)
    top = None
    if k:
        values, indices = raw_logprobs.topk(k, dim=-1)
        top = [
            list(zip(indices[i].tolist(), values[i].tolist()))[: r.params.top_logprobs_num]
            for i, r in enumerate(reqs)
        ]
    return SampleResult(token_ids, chosen, top)


@torch.inference_mode()
def hold_back_stop_tokens(
    logits: torch.Tensor, reqs: list[Request], eos_token_ids: set[int]
) -> None:
    """logits [batch, vocab] (in place): a request short of min_new_tokens cannot pick EOS
    (unless ignore_eos) or a stop token id, unless nothing else is left (a grammar that
    allows only EOS ends the request at its own length)."""
    for i, req in enumerate(reqs):
        p = req.params
        if len(req.output_ids) >= p.min_new_tokens:
            continue
        stops = set(p.stop_token_ids) | (set() if p.ignore_eos else eos_token_ids)
        ids = torch.tensor(
            sorted(t for t in stops if t < logits.shape[1]), dtype=torch.int64, device=logits.device
        )
        kept = logits[i, ids].clone()
        logits[i, ids] = float("-inf")
        if not torch.isfinite(logits[i]).any():
            logits[i, ids] = kept


def _apply_penalties(logits: torch.Tensor, reqs: list[Request]) -> None:
    for i, req in enumerate(reqs):
        p = req.params
        if p.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(req.all_ids)), dtype=torch.int64, device=logits.device)
            row = logits[i, seen]
            logits[i, seen] = torch.where(
                row > 0, row / p.repetition_penalty, row * p.repetition_penalty
            )
        if (p.frequency_penalty or p.presence_penalty) and req.output_ids:
            ids = torch.tensor(req.output_ids, dtype=torch.int64, device=logits.device)
            counts = torch.bincount(ids, minlength=logits.shape[1]).to(logits.dtype)
            logits[i] -= (
                counts * p.frequency_penalty + (counts > 0).to(logits.dtype) * p.presence_penalty
            )


def _sample_rows(logits: torch.Tensor, rows: list[int], reqs: list[Request]) -> torch.Tensor:
    """Tokens [len(rows)] for the sampled rows, drawn together on the logits' device: one
    softmax at each row's temperature, one filtering sort, one CDF inversion (per row, this was
    a copy of the row to the host and a sync each). Each request's generator (a CPU one) gives
    its uniform, so seeded requests repeat."""
    params = [reqs[i].params for i in rows]
    device = logits.device
    temperature = torch.tensor([p.temperature for p in params], device=device)[:, None]
    probs = torch.softmax(logits[rows].float() / temperature, dim=-1)
    if any(p.top_k > 0 or p.top_p < 1.0 or p.min_p > 0.0 for p in params):
        probs = filter_probs(
            probs, [p.top_k for p in params], [p.top_p for p in params], [p.min_p for p in params]
        )
    u = torch.stack(
        [torch.rand((), generator=reqs[i].generator, dtype=torch.float64) for i in rows]
    )
    return draw_rows(probs, u.to(device))


def draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One index with probability probs[i] (non-negative, any total), by inverting the CDF at
    one uniform draw: ~30x cheaper than torch.multinomial on the CPU over a 49k vocabulary
    (which draws an exponential per entry, ~1 ms a row). A zero-probability index is never
    chosen: its CDF step is empty."""
    u = torch.rand((), generator=generator, dtype=torch.float64)
    return int(draw_rows(probs[None], u[None])[0])


def draw_rows(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """`draw` for each row of probs [n, vocab] at its uniform u [n] (float64, in [0, 1))."""
    cdf = probs.double().cumsum(-1)
    picks = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]
    return picks.clamp(max=probs.shape[-1] - 1)


def filter_probs(probs: torch.Tensor, top_k, top_p, min_p) -> torch.Tensor:
    """probs [vocab] or [rows, vocab] restricted to the top-k / top-p / min-p head of each row,
    renormalised; each parameter is one value or one per row (top_k <= 0, top_p >= 1 and
    min_p <= 0 turn a filter off)."""
    rows = probs if probs.ndim == 2 else probs[None]
    per_row = lambda v, dtype: torch.as_tensor(v, dtype=dtype, device=rows.device).reshape(-1, 1)  # noqa: E731
    k, p, m = per_row(top_k, torch.int64), per_row(top_p, rows.dtype), per_row(min_p, rows.dtype)
    sorted_probs, order = rows.sort(dim=-1, descending=True)
    rank = torch.arange(rows.shape[-1], device=rows.device)[None, :]
    # the top k; the smallest head whose mass reaches top_p (the token crossing it included);
    # at least min_p times the top probability; and always the top token
    keep = ((rank < k) | (k <= 0)) & (
        ((sorted_probs.cumsum(-1) - sorted_probs) < p) | (p >= 1.0)
    ) & ((sorted_probs >= m * sorted_probs[:, :1]) | (m <= 0.0)) | (rank == 0)
    filtered = torch.zeros_like(rows).scatter_(-1, order, sorted_probs * keep)
    filtered = filtered / filtered.sum(-1, keepdim=True)
    return filtered if probs.ndim == 2 else filtered[0]

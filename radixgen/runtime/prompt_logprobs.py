"""Prompt-token logprobs (`logprob_start_len`): which rows of a prefill chunk need logits, and
their log-softmax at the next prompt token. The KV of wanted positions is never taken from the
cache (`Request.max_cached_len`), so every wanted row is computed by some chunk."""

from __future__ import annotations

import torch

from radixgen.runtime.request import Request


def input_logprob_rows(req: Request, ext: int) -> tuple[int, int]:
    """(offset, count): the positions of req's next prefill chunk [kv_len, kv_len + ext) whose
    logits give prompt-token logprobs it still needs."""
    pos = req.next_input_logprob_pos
    if pos is None or pos >= req.kv_len + ext:
        return 0, 0
    assert pos >= req.kv_len, "the KV of wanted logit positions is never taken from the cache"
    end = min(req.kv_len + ext, len(req.input_ids) - 1)
    return pos - req.kv_len, end - pos


@torch.inference_mode()
def record_input_logprobs(
    reqs: list[Request], rows: list[tuple[int, int]], logits: torch.Tensor
) -> None:
    """logits [sum(counts), vocab]: row p predicts prompt token p + 1."""
    start = 0
    for req, (off, count) in zip(reqs, rows):
        if not count:
            continue
        first = req.kv_len + off + 1  # the prompt position of the first token scored
        targets = torch.tensor(req.input_ids[first : first + count], device=logits.device)
        lp = torch.log_softmax(logits[start : start + count].float(), dim=-1)
        req.input_logprobs.extend(lp.gather(1, targets[:, None])[:, 0].tolist())
        record_input_top_logprobs(req, lp)
        start += count


def record_input_top_logprobs(req: Request, logprobs: torch.Tensor) -> None:
    """The top_logprobs_num most likely tokens of each scored prompt row (logprobs [rows, vocab])."""
    k = req.params.top_logprobs_num
    if k and logprobs.shape[0]:
        values, indices = logprobs.topk(k, dim=-1)
        req.input_top_logprobs.extend(
            [list(zip(i, v)) for i, v in zip(indices.tolist(), values.tolist())]
        )

"""Token bitmask application: disallowed logits become -inf, in place.

Bitmask layout (see radixgen.grammar.matcher): int32 `[batch, ceil(vocab / 32)]`; token t of row
r is allowed iff bit (t % 32) of word (t // 32) is set. Logit columns beyond the bitmask's
`32 * num_words` (padding of the logits) are always disallowed.
"""

import torch
import triton
import triton.language as tl

from ._common import check_kernel_tensor

BLOCK = 1024  # logit columns per Triton program
_LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not isinstance(bitmask, torch.Tensor):
        raise ValueError("logits and bitmask must be torch tensors")
    if logits.dim() != 2 or bitmask.dim() != 2:
        raise ValueError(
            f"logits and bitmask must be 2-D, got {logits.dim()}-D and {bitmask.dim()}-D"
        )
    if logits.dtype not in _LOGIT_DTYPES:
        raise ValueError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.shape[0] != bitmask.shape[0]:
        raise ValueError(
            f"batch mismatch: logits {logits.shape[0]} rows, bitmask {bitmask.shape[0]}"
        )


# ---------------------------------------------------------------- torch reference


def apply_token_bitmask_ref(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Plain torch: set logits[r, t] = -inf wherever the bit of token t in row r is clear.
    Mutates `logits` only; `bitmask` may live on another device (it is copied over)."""
    _check(logits, bitmask)
    vocab, num_bits = logits.shape[1], 32 * bitmask.shape[1]
    words = bitmask.to(logits.device, non_blocking=True)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((words.unsqueeze(-1) >> shifts) & 1).bool().view(words.shape[0], num_bits)
    width = min(vocab, num_bits)
    logits[:, :width].masked_fill_(~allowed[:, :width], float("-inf"))
    if vocab > num_bits:
        logits[:, num_bits:] = float("-inf")


# ---------------------------------------------------------------- Triton kernel


@triton.jit
def _apply_token_bitmask_kernel(
    logits_ptr, mask_ptr, vocab, num_words, logits_stride, mask_stride, BLOCK: tl.constexpr
):
    # grid (batch, cdiv(vocab, BLOCK)): one program masks BLOCK columns of one row
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_vocab = cols < vocab
    word_idx = cols // 32
    words = tl.load(
        mask_ptr + row * mask_stride + word_idx, mask=in_vocab & (word_idx < num_words), other=0
    )
    banned = ((words >> (cols % 32)) & 1) == 0
    ptrs = logits_ptr + row * logits_stride + cols
    tl.store(
        ptrs,
        tl.full([BLOCK], float("-inf"), tl.float32).to(logits_ptr.dtype.element_ty),
        mask=in_vocab & banned,
    )


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Triton: set logits[r, t] = -inf wherever the bit of token t in row r is clear (in place).

    logits [batch, vocab] fp32/fp16/bf16 with contiguous rows, on CUDA (or the CPU under
    TRITON_INTERPRET=1); bitmask int32 [batch, num_words], copied to logits' device if needed.
    Raises ValueError for bad shapes, dtypes or devices."""
    _check(logits, bitmask)
    if logits.stride(1) != 1:
        raise ValueError("logits rows must be contiguous (stride 1 along the vocabulary)")
    check_kernel_tensor(logits, "logits")
    bitmask = bitmask.to(logits.device, non_blocking=True).contiguous()
    batch, vocab = logits.shape
    if batch == 0 or vocab == 0:
        return
    grid = (batch, triton.cdiv(vocab, BLOCK))
    _apply_token_bitmask_kernel[grid](
        logits, bitmask, vocab, bitmask.shape[1], logits.stride(0), bitmask.stride(0), BLOCK=BLOCK
    )

"""MSE-optimal NVFP4 block scales, a mitigation that needs no calibration data.

Round-to-nearest sets a block's scale so that its largest value maps to 6, the E2M1 maximum.
That wastes the grid on one outlier: a slightly smaller scale clips the outlier a little and
represents the 15 other values more finely. The block scale is an E4M3 number, so the candidates
are exactly the E4M3 values next to the round-to-nearest one (consecutive bit patterns of a
positive E4M3 number are consecutive values); each block keeps the candidate with the least
squared reconstruction error. The codes are the kernels' own E2M1 rounding (kernels/nvfp4.py).
"""

from __future__ import annotations

import torch

from radixgen.kernels.nvfp4 import BLOCK_SIZE, E2M1_VALUES, e2m1_codes_ref, quantize_nvfp4_ref

# E4M3 bit-pattern offsets from the round-to-nearest scale that are tried (smaller scales clip);
# round-to-nearest first, so a tie (an all-zero block, say) keeps it
CANDIDATE_STEPS = (0, -1, -2, 1)
_E4M3_LARGEST_BITS = 0x7E  # 448; 0x7F is NaN
_ROWS_PER_CHUNK = 256  # bounds the float32 temporaries to ~5 x rows x K values


def search_block_scales(
    w: torch.Tensor, tensor_scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes uint8 [..., N, K/2], block_scales float8_e4m3fn [..., N, K/16]) for float32 w
    [..., N, K] under the FP32 `tensor_scale` (0-d), each block scale the least-error candidate."""
    rows = w.reshape(-1, w.shape[-1])
    codes, scales = [], []
    for start in range(0, rows.shape[0], _ROWS_PER_CHUNK):
        c, s = _search_rows(rows[start : start + _ROWS_PER_CHUNK], tensor_scale)
        codes.append(c)
        scales.append(s)
    lead = w.shape[:-1]
    return (
        torch.cat(codes).view(*lead, -1),
        torch.cat(scales).view(torch.float8_e4m3fn).view(*lead, -1),
    )


def _search_rows(
    rows: torch.Tensor, tensor_scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """codes uint8 [R, K/2] and block-scale bits uint8 [R, K/16] of float32 rows [R, K]."""
    _, rtn_scales, _ = quantize_nvfp4_ref(rows, tensor_scale)
    rtn_bits = rtn_scales.view(torch.uint8).long()  # [R, K/16]
    blocks = rows.unflatten(-1, (-1, BLOCK_SIZE))  # [R, K/16, 16]
    magnitudes = blocks.abs()
    best_err = best_bits = None
    for step in CANDIDATE_STEPS:
        bits = (rtn_bits + step).clamp(1, _E4M3_LARGEST_BITS)
        scale = _scale_of(bits) * tensor_scale  # [R, K/16]
        err = _grid_error(magnitudes, scale.unsqueeze(-1))
        if best_err is None:
            best_err, best_bits = err, bits
            continue
        better = err < best_err
        best_err = torch.where(better, err, best_err)
        best_bits = torch.where(better, bits, best_bits)
    # the codes of the chosen scales: exactly the kernels' E2M1 rounding
    codes = e2m1_codes_ref(blocks / (_scale_of(best_bits) * tensor_scale).unsqueeze(-1)).flatten(-2)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8), best_bits.to(torch.uint8)


def _scale_of(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.uint8).view(torch.float8_e4m3fn).float()


def _grid_error(magnitudes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Squared error per block of |x| [R, B, 16] rounded to the nearest E2M1 magnitude times
    `scale` [R, B, 1] (ties cost the same either way, so which side wins does not matter)."""
    grid = _GRID.to(magnitudes.device)
    nearest = grid[torch.bucketize(magnitudes / scale, _MIDPOINTS.to(magnitudes.device))]
    return ((nearest * scale - magnitudes) ** 2).sum(-1)


_GRID = torch.tensor(E2M1_VALUES[:8], dtype=torch.float32)  # 0, 0.5, ..., 6
_MIDPOINTS = (_GRID[1:] + _GRID[:-1]) / 2

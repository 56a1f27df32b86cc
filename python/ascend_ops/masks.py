"""The two encodings of `target_mask` (SPEC §1).

Row i is masked (its target lies in another vocabulary shard) when
`(target_mask[i // 8] >> (i % 8)) & 1` for the bit-packed uint8 form (LSB first), or
when `target_mask[i]` for the bool form of length BT.

The padding bits of the packed form (rows BT .. 8 * ceil(BT / 8) - 1) are read by no
one. `fused_linear_online_max_sum` writes them as CANN's kernel does (SPEC §3): the
padding rows count as target id 0, so they are 0 on the shard that owns id 0 and 1
elsewhere (`padding_masked`).
"""

from __future__ import annotations

import torch

__all__ = ["pack_target_mask", "padding_masked", "unpack_target_mask"]

_BIT_WEIGHTS = 1 << torch.arange(8, dtype=torch.int32)  # LSB first


def padding_masked(vocab_start_index: int, vocab_end_index: int) -> bool:
    """The padding bit of the mask of the id range [start, end): that of target id 0."""
    return 0 < vocab_start_index or 0 >= vocab_end_index


def pack_target_mask(masked: torch.Tensor, padding: bool = True) -> torch.Tensor:
    """Bit-pack a bool mask of length BT into uint8[ceil(BT / 8)], the padding bits set
    to `padding` (`padding_masked(start, end)` gives those CANN's forward writes)."""
    if masked.dtype != torch.bool or masked.dim() != 1:
        raise ValueError(
            f"pack_target_mask: 'masked' must be a 1-D torch.bool tensor, "
            f"got {masked.dim()}-D {masked.dtype}"
        )
    rows = masked.numel()
    padded = torch.full((-(-rows // 8) * 8,), bool(padding), dtype=torch.bool, device=masked.device)
    padded[:rows] = masked
    bits = padded.view(-1, 8).to(torch.int32) * _BIT_WEIGHTS.to(masked.device)
    return bits.sum(dim=1).to(torch.uint8)


def unpack_target_mask(target_mask: torch.Tensor, rows: int) -> torch.Tensor:
    """The bool mask (True = masked) of the first `rows` rows, from either encoding."""
    if target_mask.dtype == torch.bool:
        return target_mask[:rows]
    packed = target_mask[: -(-rows // 8)].to(torch.int32)
    bits = (packed[:, None] >> torch.arange(8, device=target_mask.device)) & 1
    return bits.flatten()[:rows].bool()

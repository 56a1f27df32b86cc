"""The two encodings of `target_mask` (SPEC §1).

Row i is masked (its target lies in another vocabulary shard) when
`(target_mask[i // 8] >> (i % 8)) & 1` for the bit-packed uint8 form (LSB first,
padding bits 1), or when `target_mask[i]` for the bool form of length BT.
"""

from __future__ import annotations

import torch

__all__ = ["pack_target_mask", "unpack_target_mask"]

_BIT_WEIGHTS = 1 << torch.arange(8, dtype=torch.int32)  # LSB first


def pack_target_mask(masked: torch.Tensor) -> torch.Tensor:
    """Bit-pack a bool mask of length BT into uint8[ceil(BT / 8)], padding bits set to 1."""
    if masked.dtype != torch.bool or masked.dim() != 1:
        raise ValueError(
            f"pack_target_mask: 'masked' must be a 1-D torch.bool tensor, "
            f"got {masked.dim()}-D {masked.dtype}"
        )
    rows = masked.numel()
    padded = torch.ones(-(-rows // 8) * 8, dtype=torch.bool, device=masked.device)
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

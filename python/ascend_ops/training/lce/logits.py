"""The head's logits on the device routes, and the one logit transform of SPEC §7:

    y = softcap * tanh(logit_scale * (x @ W.T + linear_bias) / softcap)

applied by the composition forward and by the npu_custom route's bias gradient (the CPU
kernels apply the same transform in C++: op_plugin/csrc/cpu/cross_entropy/logit_options.h).
"""

from __future__ import annotations

import torch

from .call import LossOptions

__all__ = ["fp32_logits", "transform_logits", "logits_grad_to_raw", "WEIGHT_BLOCK_BYTES"]

#: fp32 copy of one vocabulary block of the weight, where the device has no mixed-dtype mm.
WEIGHT_BLOCK_BYTES = 16 << 20


def fp32_logits(x_chunk: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x_chunk @ weight.T with fp32 sums and output, as the SPEC §3 forward forms logits:
    one mixed-dtype mm where the device has it (aten::mm.dtype), else products of fp32
    copies of the chunk and of the weight's vocabulary blocks (exact: the products of half
    values are exact in fp32)."""
    device_type = x_chunk.device.type
    key = {"cuda": "CUDA", "cpu": "CPU"}.get(device_type, "PrivateUse1")
    if x_chunk.dtype != torch.float32 and torch._C._dispatch_has_kernel_for_dispatch_key(
            "aten::mm.dtype", key):
        return torch.mm(x_chunk, weight.T, out_dtype=torch.float32)
    vocab, h = weight.shape
    out = torch.empty(x_chunk.size(0), vocab, dtype=torch.float32, device=x_chunk.device)
    x32 = x_chunk.float()
    block = max(1, WEIGHT_BLOCK_BYTES // max(1, 4 * h))
    for v0 in range(0, vocab, block):
        torch.mm(x32, weight[v0:v0 + block].float().T, out=out[:, v0:v0 + block])
    return out


def transform_logits(raw: torch.Tensor, bias: torch.Tensor | None,
                     options: LossOptions) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(y, tanh(z / softcap) or None) of fp32 raw logits [rows, V]: y is what the loss reads;
    the tanh, when there is a soft-cap, gives the transform's slope 1 - tanh**2 for the
    gradient. Python scalars only: no host synchronisation on a device."""
    y = raw if bias is None else raw + bias.float()
    if options.logit_scale != 1.0:
        y = y * options.logit_scale
    if options.softcap is None:
        return y, None
    t = torch.tanh(y / options.softcap)
    return options.softcap * t, t


def logits_grad_to_raw(grad_y: torch.Tensor, tanh: torch.Tensor | None,
                       options: LossOptions) -> torch.Tensor:
    """dL/draw from dL/dy: through the soft-cap's slope and the scale (the bias adds 1)."""
    if tanh is not None:
        grad_y = grad_y * (1 - tanh * tanh)
    return grad_y * options.logit_scale

"""linear_cross_entropy with loss options off the CPU kernels (the NPU routes of
routes.py), in device-agnostic torch over the operators: it runs on CPU tensors too, where
the tests check it against float64 autograd.

Forward, by route:
  "operators"    fused_linear_online_max_sum (SPEC §3) on the shard, the statistics made
                 global (lce_options.combine_statistics); used only where the options do
                 not change the logits (class weights, returned lse / z-loss).
  "composition"  chunked torch on the device: per row chunk of at most 48 MiB of fp32
                 logits, logits = f32(x_c @ W.T), the options applied, the row statistics
                 (max, exp sum, target logit, weighted sum, argmax); never [BT, V].
Backward, by route:
  "operators"    fused_linear_cross_entropy_loss_grad (SPEC §1, CANN's op on the NPU) in
                 memory-saving mode with grad = alpha (= beta: a·w[t] times the upstream
                 gradient), from the global statistics.
  "npu_custom"   our Ascend C op with the options (routes.CUSTOM_OP_NEEDS) in its vector
                 stage, memory-saving mode, the bias gradient from a chunked pass
                 (npu/options_support.py); refused before the forward when the installed
                 op package or the adapter does not take them.
No host synchronisation: the counts, sums and coefficients stay tensors.
"""

from __future__ import annotations

import torch

from .. import ops
from . import lce_options as _math
from .routes import Route
from .vocab_parallel import check_one_owner

__all__ = ["device_linear_cross_entropy", "COMPOSITION_CHUNK_BYTES"]

#: fp32 logits of one row chunk of the composition forward, at most.
COMPOSITION_CHUNK_BYTES = 48 << 20


def device_linear_cross_entropy(route: Route, x, weight, bias, rows, ce_weight, options,
                                ignore_index, reduction, group, start, needs_grad, shape):
    if route.backward == "npu_custom":
        from ..npu import options_support

        options_support.require(route.needs, x.device)  # before any work
    outputs = _DeviceOptionsFunction.apply(x, weight, bias, rows, ce_weight, options, route,
                                           ignore_index, reduction, group, start, shape)
    loss, z_loss, lse, accuracy = outputs
    return loss, (z_loss if options.return_z_loss else None), \
        (lse if options.return_lse else None), \
        (accuracy if options.return_token_accuracy else None)


class _DeviceOptionsFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, rows, ce_weight, options, route, ignore_index, reduction,
                group, start, shape):
        bt, vocab = x.size(0), weight.size(0)
        targets = _math.row_targets(rows, ignore_index, start, vocab, ce_weight, group)
        if route.forward == "operators":
            shard_target = torch.where(targets.kept, rows, -1)
            m, s, p, target_mask, masked_target, _ = ops.fused_linear_online_max_sum(
                x, weight, shard_target, start, start + vocab, False)
            stats = _math.combine_statistics({"max": m, "sum": s, "predicted": p}, targets,
                                             slice(0, bt), start, group)
        else:
            stats = _composition_forward(x, weight, bias, ce_weight, targets, options, start,
                                         group)
            target_mask = ~targets.in_shard  # the bool form (SPEC §1)
            masked_target = torch.where(targets.in_shard, targets.columns, 0).to(rows.dtype)
        check_one_owner((stats["owners"] != 1) & targets.kept, rows, stats["owners"], ignore_index)
        ce, z = _math.row_losses(stats, targets, options)
        loss, z_loss, lse, accuracy = _math.reduce_outputs(ce, z, stats, targets, options,
                                                           reduction, shape)
        ctx.reduction, ctx.options, ctx.targets, ctx.route = reduction, options, targets, route
        ctx.stats = {"max": stats["max"], "sum": stats["sum"]}
        ctx.bias, ctx.class_weight = bias, ce_weight  # the npu_custom backward's operands
        ctx.save_for_backward(x, weight, target_mask, masked_target)
        extras = [t if t is not None else loss.new_empty(0) for t in (z_loss, lse, accuracy)]
        ctx.mark_non_differentiable(*extras)
        return (loss, *extras)

    @staticmethod
    def backward(ctx, grad_loss, *_extra_grads):
        x, weight, target_mask, masked_target = ctx.saved_tensors
        targets = ctx.targets
        if ctx.reduction == "none":
            upstream = grad_loss.reshape(-1).float()
        else:
            upstream = grad_loss.float().reshape(1).expand(x.size(0))
        a, b = _math.upstream_scales(targets, ctx.reduction)
        alpha, beta, gamma = _math.coefficients(ctx.stats, targets, ctx.options, a * upstream,
                                                b * upstream)
        if ctx.route.backward == "npu_custom":
            from ..npu import options_support

            return options_support.custom_backward(
                ctx, x, weight, target_mask, masked_target, alpha, beta, gamma) + (None,) * 9
        # alpha == beta and gamma == 0 on this route: G = alpha * (softmax - onehot)
        input_grad, weight_grad = ops.fused_linear_cross_entropy_loss_grad(
            alpha, x, weight, target_mask, masked_target, 0.0, ctx.stats["max"],
            ctx.stats["sum"], None)
        want_x, want_w = ctx.needs_input_grad[:2]
        return ((input_grad if want_x else None), (weight_grad if want_w else None)) + (None,) * 10


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


def _composition_forward(x, weight, bias, ce_weight, targets, options, start, group):
    """Global row statistics from the chunked torch forward."""
    bt, vocab = x.size(0), weight.size(0)
    step = max(1, min(max(bt, 1), COMPOSITION_CHUNK_BYTES // max(1, 4 * vocab)))
    w = ce_weight.float() if ce_weight is not None else None
    parts = []
    for r0 in range(0, bt, step):
        rs = slice(r0, min(bt, r0 + step))
        y = fp32_logits(x[rs], weight)  # chunk x V
        if bias is not None:
            y = y + bias.float()
        if options.logit_scale != 1.0:
            y = y * options.logit_scale
        if options.softcap is not None:
            y = options.softcap * torch.tanh(y / options.softcap)
        rows_here = y.size(0)
        if vocab:
            m = y.amax(dim=1)
        else:
            m = y.new_full((rows_here,), -torch.inf)
        shifted = y - m[:, None]
        col = targets.columns[rs]
        hit = shifted.gather(1, col.clamp_min(0).unsqueeze(1)).squeeze(1) if vocab \
            else torch.zeros_like(m)
        local = {"max": m, "sum": torch.exp(shifted).sum(dim=1),
                 "predicted": torch.where(col >= 0, hit, 0.0)}
        if options.label_smoothing != 0.0:
            local["weighted"] = (shifted * w).sum(dim=1) if w is not None else shifted.sum(dim=1)
        if options.return_token_accuracy:
            local["argmax"] = y.argmax(dim=1) if vocab else torch.full_like(col, -1)
        parts.append(_math.combine_statistics(local, targets, rs, start, group))
    if not parts:
        empty = x.new_empty(0, dtype=torch.float32)
        return {"max": empty, "sum": empty, "predicted": empty, "owners": empty,
                "weighted": empty, "argmax": x.new_empty(0, dtype=torch.int64)}
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}

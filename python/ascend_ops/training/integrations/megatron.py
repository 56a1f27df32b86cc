"""Megatron-core's GPTModel trained with ascend_ops' vocab-parallel linear cross entropy.

    import ascend_ops.integrations.megatron as aom
    aom.apply(model)                # GPTModel; in place, the same model returned
    loss = model(input_ids, position_ids, attention_mask, labels=labels)   # [b, s] float32
    aom.restore(model)

or, per call, without patching: `model(..., labels=labels,
output_processor=aom.output_processor, output_processor_context=aom.Options(...))`.

GPTModel.forward hands its `output_processor` the decoder's hidden states ([s, b, h], or
this rank's [s/tp, b, h] under sequence parallel) and the output layer; Megatron's own path
then builds the [s, b, V/tp] logits and takes `vocab_parallel_cross_entropy` of them.
`output_processor` computes the same per-token loss, float32 [b, s], from the hidden states
and the [V/tp, h] weight shard (the output layer's, or the shared embedding's) with
`ascend_ops.linear_cross_entropy` over the output layer's tensor-parallel group, never
building the logits:

    hidden = all-gather over the sequence (sequence parallel), else the hidden states
    loss[b, s] = linear_cross_entropy(hidden[s, b], W_shard, labels[b, s], reduction="none",
                                      process_group=tp_group, vocab_start_index=rank * V/tp,
                                      logit_scale=mup_output_mult (MuP), label_smoothing=eps)

The hidden states' gradient is summed over the group (all_reduce_grad), or reduce-scattered
back to each rank's sequence slice under sequence parallel, as the output layer's own
collectives do. Without labels (generation) the processor runs Megatron's own output layer
and returns the logits as GPTModel does. docs/integrations.md says what differs.
"""

from __future__ import annotations

import dataclasses
import inspect

import torch
import torch.distributed as dist

import ascend_ops

MEMORY_SAVING, HIGH_PERFORMANCE = "memory-saving", "high-performance"  # linear_cross_entropy's

__all__ = ["Options", "output_processor", "apply", "restore", "is_patched"]

_NAME = "ascend_ops.integrations.megatron"
_PATCH_ATTR = "_ascend_ops_megatron"


@dataclasses.dataclass(frozen=True)
class Options:
    """The loss's settings, passed as GPTModel's `output_processor_context`.

    label_smoothing: Megatron's α of `vocab_parallel_cross_entropy(label_smoothing=α)`:
        the loss is (1 − s)·nll + s·mean_c(−log p_c) with s = α·V/(V − 1), V the whole
        vocabulary (torch's label smoothing of s). Megatron's own kernel takes that mean and
        V over each rank's shard only, so at tensor-parallel size 1 the two are the same and
        above it each of Megatron's ranks computes a loss of its own; this one is the whole
        vocabulary's on every rank.
    mode: linear_cross_entropy's "memory-saving" (recomputes the logits in the backward) or
        "high-performance" (keeps this shard's softmax).
    """

    label_smoothing: float = 0.0
    mode: str = MEMORY_SAVING

    def __post_init__(self):
        if not isinstance(self.label_smoothing, (int, float)) or isinstance(self.label_smoothing, bool) \
                or not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"{_NAME}: 'label_smoothing' must be a number in [0, 1) (Megatron's "
                             f"range), got {self.label_smoothing!r}")
        if self.mode not in (MEMORY_SAVING, HIGH_PERFORMANCE):
            raise ValueError(f"{_NAME}: 'mode' must be {MEMORY_SAVING!r} or {HIGH_PERFORMANCE!r}, "
                             f"got {self.mode!r}")


def output_processor(*, hidden_states: torch.Tensor, output_layer: torch.nn.Module,
                     output_weight: torch.Tensor | None, labels: torch.Tensor | None,
                     config, context: Options | None = None, runtime_gather_output=None,
                     **unused) -> torch.Tensor:
    """GPTModel's `output_processor`: the per-token loss [b, s] float32 from the hidden
    states and the vocabulary shard (module docstring); without labels, the logits [b, s,
    V/tp] as GPTModel returns them."""
    options = context if context is not None else Options()
    if not isinstance(options, Options):
        raise TypeError(f"{_NAME}.output_processor: 'output_processor_context' must be an "
                        f"{_NAME}.Options or None, got {type(options).__name__}")
    scale = _mup_scale(config)
    if labels is None:  # generation or evaluation of logits: Megatron's own output layer
        logits, _ = output_layer(hidden_states, weight=output_weight,
                                 runtime_gather_output=runtime_gather_output)
        return (logits * scale if scale != 1.0 else logits).transpose(0, 1).contiguous()
    weight = output_layer.weight if output_weight is None else output_weight  # [V/tp, h]
    group = output_layer.tp_group
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if getattr(output_layer, "sequence_parallel", False) and world > 1:
        from megatron.core.tensor_parallel.mappings import gather_from_sequence_parallel_region

        # [s/tp, b, h] → [s, b, h]; the backward reduce-scatters: each rank gets the sum of
        # the ranks' gradients of its own sequence slice
        hidden = gather_from_sequence_parallel_region(hidden_states, True, group)
    else:
        # the same [s, b, h] on every rank; the backward sums the ranks' shares
        hidden = ascend_ops.distributed.all_reduce_grad(hidden_states, group if world > 1 else None)
    if labels.shape != (hidden.size(1), hidden.size(0)):
        raise ValueError(f"{_NAME}.output_processor: 'labels' must be [b, s] = "
                         f"{[hidden.size(1), hidden.size(0)]} for hidden states [s, b, h] = "
                         f"{list(hidden.shape)}, got {list(labels.shape)}")
    vocab = weight.size(0) * world  # Megatron's shards are equal (its vocabulary is padded)
    smoothing = options.label_smoothing * vocab / (vocab - 1)
    s, b, h = hidden.shape
    loss = ascend_ops.linear_cross_entropy(
        hidden.reshape(s * b, h), weight.to(hidden.dtype),
        labels.transpose(0, 1).reshape(s * b),  # row t * b + j is labels[j, t]
        reduction="none", label_smoothing=smoothing, logit_scale=scale,
        process_group=group if world > 1 else None, vocab_start_index=rank * weight.size(0),
        mode=options.mode)
    return loss.view(s, b).transpose(0, 1).contiguous()  # [b, s], as GPTModel's loss


def _mup_scale(config) -> float:
    """The factor GPTModel's _scale_logits multiplies the logits by (MuP), else 1."""
    if getattr(config, "use_mup", False):
        return float(getattr(config, "mup_output_mult", 1.0))
    return 1.0


class _PatchedForward:
    """`model.forward` while patched: GPTModel's own, with our output_processor unless the
    call passes one."""

    def __init__(self, model: torch.nn.Module, options: Options, previous=None):
        self.model, self.options, self.previous = model, options, previous
        self.__signature__ = inspect.signature(type(model).forward.__get__(model))
        self.__name__ = "forward"

    def __call__(self, *args, **kwargs):
        kwargs.setdefault("output_processor", output_processor)
        kwargs.setdefault("output_processor_context", self.options)
        forward = self.previous or type(self.model).forward.__get__(self.model)
        return forward(*args, **kwargs)

    def __reduce__(self):  # pickled as "this model, patched"
        return _PatchedForward, (self.model, self.options, self.previous)


def apply(model: torch.nn.Module, *, label_smoothing: float = 0.0,
          mode: str = MEMORY_SAVING) -> torch.nn.Module:
    """Patch a megatron-core GPTModel (the unwrapped module, on the last pipeline stage or
    any) in place: a forward with `labels` computes its loss with `output_processor`.
    Returns `model`; applying again replaces the settings; `restore` undoes it."""
    options = Options(label_smoothing=label_smoothing, mode=mode)
    params = inspect.signature(type(model).forward).parameters
    if "output_processor" not in params:
        raise TypeError(f"{_NAME}.apply: {type(model).__name__}.forward takes no "
                        f"output_processor (megatron-core's GPTModel has it from 0.19; a "
                        f"wrapper such as DDP or Float16Module: apply to the model inside it)")
    if not isinstance(getattr(model, "output_layer", None), torch.nn.Module) and \
            getattr(model, "post_process", True):
        raise TypeError(f"{_NAME}.apply: {type(model).__name__} has no output_layer")
    if is_patched(model):
        restore(model)
    model.__dict__[_PATCH_ATTR] = options
    model.forward = _PatchedForward(model, options, model.__dict__.get("forward"))
    return model


def restore(model: torch.nn.Module) -> torch.nn.Module:
    """Undo `apply`."""
    if _PATCH_ATTR not in model.__dict__:
        raise ValueError(f"{_NAME}.restore: this {type(model).__name__} is not patched")
    del model.__dict__[_PATCH_ATTR]
    installed = model.__dict__.get("forward")
    if isinstance(installed, _PatchedForward):
        del model.forward
        if installed.previous is not None:
            model.forward = installed.previous
    return model


def is_patched(model: torch.nn.Module) -> bool:
    return _PATCH_ATTR in model.__dict__

"""Hugging Face Transformers causal LMs trained with ascend_ops' fused linear cross entropy.

    import ascend_ops.integrations.transformers as aot
    model = aot.apply(model)        # in place; the same model object is returned
    loss = model(input_ids, labels=labels).loss       # no [B, T, V] logits made
    aot.restore(model)              # the original forward back

With `labels` in training mode the loss is `ascend_ops.linear_cross_entropy` on the final
hidden states and `lm_head.weight` (float32 on CPU: in float32), with the model's own label
shift, ignore_index, logit scaling, MoE auxiliary loss and `num_items_in_batch` (Trainer's
gradient accumulation), and `outputs.logits` is None; in eval mode the model's own forward
(logits and loss) unless `eval_logits=False`; without labels (generation, inference) the
model's forward runs unchanged. docs/integrations.md lists every difference and refusal.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..lce import HIGH_PERFORMANCE, MEMORY_SAVING
from ._hf_forward import PATCH_ATTR, CapturingHead, Patch, PatchedForward, labels_position
from ._hf_heads import RULES, supported_class

__all__ = ["apply", "restore", "is_patched", "SUPPORTED_CLASSES"]

SUPPORTED_CLASSES = tuple(sorted(RULES))
_API = "ascend_ops.integrations.transformers.apply"


def apply(
    model: torch.nn.Module,
    mode: str = MEMORY_SAVING,
    *,
    compute_dtype: torch.dtype | None = None,
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
    eval_logits: bool = True,
) -> torch.nn.Module:
    """Patch `model` (a Transformers causal LM, see SUPPORTED_CLASSES) in place so that a
    forward with `labels` computes the loss with `linear_cross_entropy` and no logits.

    Args:
        mode: linear_cross_entropy's "memory-saving" or "high-performance".
        compute_dtype: the head's dtype for the loss (float16, bfloat16 or float32).
            Default: the autocast dtype when autocast is on, else the head weight's dtype.
            float32 runs on CPU only (the NPU kernels take half types); a float32 head on
            an NPU without autocast needs compute_dtype=torch.bfloat16.
        process_group: the ranks over which the user has split `lm_head.weight` by rows
            (vocab-parallel head); the hidden states must be the same on every rank.
        vocab_start_index: first vocabulary id of this rank's shard (default rank * V).
        eval_logits: in eval mode (`model.eval()`) a forward with labels is the model's own,
            logits included, as Trainer's evaluation and compute_metrics expect; False
            computes the eval loss as in training, without logits.

    Returns `model`. Applying again replaces the settings; `restore` undoes it.
    """
    if mode not in (MEMORY_SAVING, HIGH_PERFORMANCE):
        raise ValueError(f"{_API}: 'mode' must be {MEMORY_SAVING!r} or {HIGH_PERFORMANCE!r}, "
                         f"got {mode!r}")
    if compute_dtype not in (None, torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{_API}: 'compute_dtype' must be None, torch.float16, "
                        f"torch.bfloat16 or torch.float32, got {compute_dtype}")
    if not isinstance(eval_logits, bool):
        raise TypeError(f"{_API}: 'eval_logits' must be a bool, got {eval_logits!r}")
    cls = supported_class(model)
    _check_head(model)
    _check_loss_function(model)
    if is_patched(model):
        restore(model)
    patch = Patch(mode=mode, compute_dtype=compute_dtype, process_group=process_group,
                  vocab_start_index=vocab_start_index, eval_logits=eval_logits,
                  labels_position=labels_position(model), rule=RULES[cls.__name__])
    head = model.get_output_embeddings()
    model.__dict__[PATCH_ATTR] = patch
    # Installed once; a forward with labels only flips the head's capture flag, so nothing
    # is swapped inside a torch.compile'd region.
    head.forward = CapturingHead(head, head.__dict__.get("forward"))
    model.forward = PatchedForward(model, model.__dict__.get("forward"))
    # nn.Module.__repr__ prints extra_repr() on the line after the class name, above the
    # children.
    model.extra_repr = patch.describe
    return model


def restore(model: torch.nn.Module) -> torch.nn.Module:
    """Undo `apply`: the forwards it replaced (model's and head's) are back. Where
    something wrapped the model's forward since (Accelerate's autocast), the wrapper stays
    and calls the original forward through the inert patch."""
    patch = model.__dict__.get(PATCH_ATTR)
    if patch is None:
        raise ValueError(f"ascend_ops.integrations.transformers.restore: this "
                         f"{type(model).__name__} is not patched")
    del model.__dict__[PATCH_ATTR]
    del model.extra_repr
    installed = model.__dict__.get("forward")
    if isinstance(installed, PatchedForward):
        del model.forward
        if installed.previous is not None:
            model.forward = installed.previous
    head = model.get_output_embeddings()
    capture = head.__dict__.get("forward")
    if isinstance(capture, CapturingHead):
        del head.forward
        if capture.previous is not None:
            head.forward = capture.previous
    return model


def is_patched(model: torch.nn.Module) -> bool:
    """Whether `apply` is in effect on `model`."""
    return PATCH_ATTR in model.__dict__


def _check_head(model: torch.nn.Module) -> None:
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise ValueError(f"{_API}: {type(model).__name__}'s head must be a torch.nn.Linear, "
                         f"got {type(head).__name__}")


def _check_loss_function(model: torch.nn.Module) -> None:
    """The patch reproduces ForCausalLMLoss; a model given another loss is not patched."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    if model.loss_function is not ForCausalLMLoss:
        raise ValueError(f"{_API}: {type(model).__name__}.loss_function is "
                         f"{getattr(model.loss_function, '__name__', model.loss_function)}, "
                         f"the patch reproduces ForCausalLMLoss only")

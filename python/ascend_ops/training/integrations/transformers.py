"""Hugging Face Transformers causal LMs (and vision-language models) trained with ascend_ops'
fused linear cross entropy.

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

Which models: any whose forward is its decoder, a torch.nn.Linear head, at most a scale and a
soft-cap from its configuration, then `self.loss_function` (ForCausalLMLoss) and a MoE's
auxiliary loss (_hf_heads.py reads the forward), and whose class the checker found exact
(_hf_check.py; SUPPORTED_CLASSES are the ones the shipped sweep verified; `python -m
ascend_ops.integrations.transformers --check MODEL_TYPE_OR_CLASS` checks another one).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..lce import HIGH_PERFORMANCE, MEMORY_SAVING
from . import _hf_verdicts
from ._hf_forward import PATCH_ATTR, CapturingHead, Patch, PatchedForward, labels_position
from ._hf_heads import HeadRule, NotPatchable, forward_owner, head_rule

__all__ = ["apply", "restore", "is_patched", "SUPPORTED_CLASSES"]

SUPPORTED_CLASSES = _hf_verdicts.verified_classes()
_API = "ascend_ops.integrations.transformers.apply"
_CLI = "python -m ascend_ops.integrations.transformers --check"


def apply(
    model: torch.nn.Module,
    mode: str = MEMORY_SAVING,
    *,
    compute_dtype: torch.dtype | None = None,
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
    eval_logits: bool = True,
) -> torch.nn.Module:
    """Patch `model` (a Transformers causal LM or vision-language model whose class the
    checker verified, see SUPPORTED_CLASSES) in place so that a forward with `labels`
    computes the loss with `linear_cross_entropy` and no logits.

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

    Returns `model`. Applying again replaces the settings; `restore` undoes it. Raises
    ValueError naming the class and the reason for a model it cannot patch.
    """
    if mode not in (MEMORY_SAVING, HIGH_PERFORMANCE):
        raise ValueError(f"{_API}: 'mode' must be {MEMORY_SAVING!r} or {HIGH_PERFORMANCE!r}, "
                         f"got {mode!r}")
    if compute_dtype not in (None, torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{_API}: 'compute_dtype' must be None, torch.float16, "
                        f"torch.bfloat16 or torch.float32, got {compute_dtype}")
    if not isinstance(eval_logits, bool):
        raise TypeError(f"{_API}: 'eval_logits' must be a bool, got {eval_logits!r}")
    rule = _rule(model, vocab_parallel=process_group is not None)
    _require_verdict(model, rule)
    return install(model, rule, mode=mode, compute_dtype=compute_dtype,
                   process_group=process_group, vocab_start_index=vocab_start_index,
                   eval_logits=eval_logits)


def install(model: torch.nn.Module, rule: HeadRule, *, mode: str = MEMORY_SAVING,
            compute_dtype: torch.dtype | None = None, process_group=None,
            vocab_start_index: int | None = None, eval_logits: bool = True) -> torch.nn.Module:
    """`apply` without its checks: the checker patches a class with it before any verdict."""
    if is_patched(model):
        restore(model)
    patch = Patch(mode=mode, compute_dtype=compute_dtype, process_group=process_group,
                  vocab_start_index=vocab_start_index, eval_logits=eval_logits,
                  labels_position=labels_position(model), rule=rule)
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


def _rule(model: torch.nn.Module, vocab_parallel: bool = False) -> HeadRule:
    name = type(model).__name__
    try:
        return head_rule(model, vocab_parallel)
    except NotPatchable as e:
        owner = forward_owner(model)
        overrides = ""
        if not owner.__module__.startswith("transformers."):
            base = next((c for c in type(model).__mro__[1:] if "forward" in c.__dict__
                         and c.__module__.startswith("transformers.")), None)
            if base is not None and base is not torch.nn.Module:
                overrides = f" ({name} overrides the forward of {base.__name__})"
        raise ValueError(f"{_API}: {name} cannot be patched{overrides}: {e}") from None


def _require_verdict(model: torch.nn.Module, rule: HeadRule) -> None:
    """The class's own code must have been found exact by the checker (shipped or by the
    user's --check)."""
    import transformers

    name = type(model).__name__
    verdict = _hf_verdicts.lookup(name, rule.key)
    if verdict is not None and verdict["verdict"] == "exact":
        return
    if verdict is None:
        shipped = _hf_verdicts.shipped().get(name)
        why = (f"its forward differs from the one checked with Transformers "
               f"{_hf_verdicts.shipped_file()['transformers']} (Transformers "
               f"{transformers.__version__} is installed)" if shipped else
               "no check of it is recorded")
        raise ValueError(f"{_API}: {name} is not verified: {why}; `{_CLI} {_check_name(model)}` "
                         f"checks it in seconds and records the verdict, after which apply "
                         f"takes it")
    if verdict["verdict"] == "differs":
        raise ValueError(f"{_API}: {name}: the checker found the patched loss differs from "
                         f"the model's own ({verdict.get('reason', '')})")
    raise ValueError(f"{_API}: {name} is not verified: the check of a tiny default "
                     f"{name} was {verdict['verdict']} ({verdict.get('reason', '')}); "
                     f"`{_CLI} MODEL_DIR` checks a tiny model of your configuration")


def _check_name(model: torch.nn.Module) -> str:
    cls = type(model)
    if cls.__module__.startswith("transformers."):
        return cls.__name__
    return f"{cls.__module__}:{cls.__qualname__}"

"""The patched forward of a Transformers causal LM: without labels the model's own forward,
untouched; with labels the same forward with the head swapped, for that one call, for a
stand-in that keeps the hidden states it is given and returns [B, T, 0] "logits", then the
loss from those hidden states and the head's weight (_hf_loss.py). The model's own code
thus runs everything it runs for a loss (decoder, caches, outputs), minus the logits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect

import torch

from ._hf_loss import causal_lm_loss

PATCH_ATTR = "_ascend_ops_patch"


@dataclasses.dataclass
class Patch:
    """What `apply` installed on one model, and what `restore` puts back."""

    mode: str
    logit_scale: float
    compute_dtype: torch.dtype | None
    process_group: object
    vocab_start_index: int | None
    previous_forward: object  # an instance-level forward there before (None: the class's)

    def describe(self) -> str:
        return f"ascend_ops: loss from linear_cross_entropy ({self.mode}), no logits with labels"


@contextlib.contextmanager
def capturing_head(head: torch.nn.Module):
    """Within the block, `head(hidden)` records `hidden` and returns an empty [*, 0]
    tensor, so nothing [B, T, V] is made; the head's own forward is back afterwards."""
    seen: list[torch.Tensor] = []
    had_own = "forward" in head.__dict__
    own = head.__dict__.get("forward")

    def keep_hidden(hidden, *args, **kwargs):
        seen.append(hidden)
        return hidden.new_empty(*hidden.shape[:-1], 0)

    head.forward = keep_hidden
    try:
        yield seen
    finally:
        if had_own:
            head.forward = own
        else:
            del head.forward


def _original_forward(model: torch.nn.Module):
    patch: Patch = getattr(model, PATCH_ATTR)
    if patch.previous_forward is not None:
        return patch.previous_forward
    return type(model).forward.__get__(model)


def patched_forward(self, *args, **kwargs):
    """Bound to the model as its `forward` (see apply); the signature shown is the model's."""
    original = _original_forward(self)
    # labels may come by position or keyword; the loss keywords arrive in **kwargs.
    signature = inspect.signature(original)
    bound = signature.bind_partial(*args, **kwargs)
    labels = bound.arguments.get("labels")
    if labels is None:  # no loss asked for (shift_labels alone gives none either)
        return original(*args, **kwargs)

    patch: Patch = getattr(self, PATCH_ATTR)
    extra = next((bound.arguments.get(name, {}) for name, p in signature.parameters.items()
                  if p.kind is p.VAR_KEYWORD), {})
    loss_kwargs = dict(extra)
    return_dict = extra.pop("return_dict", None)
    if return_dict is None:
        return_dict = getattr(self.config, "return_dict", True)
    bound.arguments["labels"] = None
    head = self.get_output_embeddings()
    with capturing_head(head) as seen:
        outputs = original(*bound.args, **bound.kwargs, return_dict=True)
    if len(seen) != 1:
        raise RuntimeError(f"ascend_ops.integrations.transformers: {type(self).__name__}'s "
                           f"forward called its head {len(seen)} times, expected once")
    loss = causal_lm_loss(
        seen[0], head.weight, labels,
        shift_labels=loss_kwargs.get("shift_labels"),
        ignore_index=loss_kwargs.get("ignore_index", -100),
        num_items_in_batch=loss_kwargs.get("num_items_in_batch"),
        logit_scale=patch.logit_scale, compute_dtype=patch.compute_dtype,
        process_group=patch.process_group, vocab_start_index=patch.vocab_start_index,
        mode=patch.mode)
    fields = {f.name: getattr(outputs, f.name) for f in dataclasses.fields(outputs)}
    fields.update(loss=loss, logits=None)
    outputs = type(outputs)(**fields)
    return outputs if return_dict else outputs.to_tuple()


def bind_patched_forward(model: torch.nn.Module):
    """`patched_forward` bound to `model`, showing the class forward's signature (Trainer
    and generate inspect it: loss kwargs, the columns a batch may carry)."""
    wrapper = functools.wraps(type(model).forward)(
        lambda self, *args, **kwargs: patched_forward(self, *args, **kwargs))
    return wrapper.__get__(model)

"""The patched forward of a Transformers causal LM.

`apply` installs two callables, once, as instance attributes: `model.forward` (a
PatchedForward) and `lm_head.forward` (a CapturingHead). A forward with labels runs the
model's own forward with labels=None while the head is in capture mode, where it returns
the hidden states it is given instead of logits; the model's own code thus runs all it
runs for a loss (decoder, caches, its logit scaling, MoE router outputs) and what it calls
`logits` is the (scaled) hidden states [B, T, H]. The loss is then linear_cross_entropy of
those and the head's weight (_hf_loss.py). Nothing is swapped per call (only a flag is
set), so torch.compile traces the whole forward; both callables pickle as "this model,
patched", so torch.save and copy.deepcopy give a patched model.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

import torch

from ._hf_loss import causal_lm_loss, check_labels

PATCH_ATTR = "_ascend_ops_patch"
_NAME = "ascend_ops.integrations.transformers"


@dataclasses.dataclass
class Patch:
    """What `apply` installed on one model."""

    mode: str
    compute_dtype: torch.dtype | None
    process_group: object
    vocab_start_index: int | None
    eval_logits: bool
    labels_position: int | None  # index of `labels` among the forward's positional args

    def describe(self) -> str:
        return f"ascend_ops: loss from linear_cross_entropy ({self.mode}), no logits with labels"


class CapturingHead:
    """`lm_head.forward` while patched: the head's own forward, except in capture mode
    (set by PatchedForward around one call), where `head(hidden)` returns `hidden`."""

    def __init__(self, head: torch.nn.Module, previous=None):
        self.head, self.previous, self.capturing = head, previous, False

    def __call__(self, hidden, *args, **kwargs):
        if self.capturing:
            return hidden
        if self.previous is not None:
            return self.previous(hidden, *args, **kwargs)
        return type(self.head).forward(self.head, hidden, *args, **kwargs)

    def __reduce__(self):  # pickled as "this head, not capturing"
        return CapturingHead, (self.head, self.previous)


class PatchedForward:
    """`model.forward` while patched (see the module docstring). It keeps the signature of
    the forward it replaced (Trainer and generate inspect it). After `restore` it calls
    that forward: a wrapper someone put around it since (Accelerate's autocast) keeps
    working, minus the patch."""

    def __init__(self, model: torch.nn.Module, previous=None):
        self.model, self.previous = model, previous  # previous: an instance forward, or None
        self.__signature__ = inspect.signature(self.original())
        self.__doc__ = type(model).forward.__doc__
        self.__name__ = "forward"

    def original(self):
        if self.previous is not None:
            return self.previous
        return type(self.model).forward.__get__(self.model)

    def __reduce__(self):  # pickled as "this model, patched": torch.save / deepcopy keep it
        return PatchedForward, (self.model, self.previous)

    def __call__(self, *args, **kwargs):
        model = self.model
        original = self.original()
        patch = model.__dict__.get(PATCH_ATTR)
        if patch is None:  # restored while a wrapper still calls us
            return original(*args, **kwargs)
        labels = kwargs.get("labels")
        at = patch.labels_position
        if "labels" not in kwargs and at is not None and len(args) > at:
            labels = args[at]
        if labels is None:
            if model.training and torch.is_grad_enabled():
                refuse_a_trainer_computing_its_own_loss()
            return original(*args, **kwargs)
        if not model.training and patch.eval_logits:  # as unpatched: logits and its loss
            return original(*args, **kwargs)
        check_labels(labels, kwargs.get("shift_labels"))
        if "labels" in kwargs:
            kwargs = {**kwargs, "labels": None}
        else:
            args = (*args[:at], None, *args[at + 1:])
        return_dict = kwargs.pop("return_dict", None)
        if return_dict is None:
            return_dict = getattr(model.config, "return_dict", True)
        head = model.get_output_embeddings()
        capture = head.__dict__["forward"]
        capture.capturing = True
        try:
            outputs = original(*args, return_dict=True, **kwargs)
        finally:
            capture.capturing = False
        loss = causal_lm_loss(
            outputs.logits, head.weight, labels,
            shift_labels=kwargs.get("shift_labels"),
            ignore_index=kwargs.get("ignore_index", -100),
            num_items_in_batch=kwargs.get("num_items_in_batch"),
            compute_dtype=patch.compute_dtype, process_group=patch.process_group,
            vocab_start_index=patch.vocab_start_index, mode=patch.mode)
        aux_loss = getattr(outputs, "aux_loss", None)
        if aux_loss is not None:  # MoE: what the model adds to its loss when given labels
            loss = loss + model.router_aux_loss_coef * aux_loss.to(loss.device)
        fields = {f.name: getattr(outputs, f.name) for f in dataclasses.fields(outputs)}
        fields.update(loss=loss, logits=None)
        if return_dict:
            return type(outputs)(**fields)
        # Transformers' tuple leaves out what is None; logits keep their place (None) so that
        # `loss, logits = out[:2]` reads as on an unpatched model.
        return tuple(v for k, v in fields.items() if v is not None or k == "logits")


def refuse_a_trainer_computing_its_own_loss() -> None:
    """Trainer takes the labels out of the batch when it computes the loss itself
    (label_smoothing_factor, compute_loss_func): the model would then make the full logits
    and the patch would do nothing. Refuse, naming the setting, rather than fall back."""
    if torch.compiler.is_compiling():
        return  # frames cannot be read in a traced graph; see docs/integrations.md
    frame = sys._getframe(2)
    for _ in range(16):  # Trainer, Module.__call__, Accelerate's wrappers, us
        if frame is None:
            return
        if frame.f_code.co_name == "compute_loss":
            trainer = frame.f_locals.get("self")
            smoothing = getattr(getattr(trainer, "args", None), "label_smoothing_factor", 0)
            if getattr(trainer, "label_smoother", None) is not None:
                raise ValueError(
                    f"{_NAME}: Trainer's label_smoothing_factor = {smoothing} takes the labels "
                    f"out of the batch, so the model would build the full logits and the "
                    f"patch would do nothing; set label_smoothing_factor = 0 or leave the "
                    f"model unpatched (restore)")
            if getattr(trainer, "compute_loss_func", None) is not None:
                raise ValueError(
                    f"{_NAME}: Trainer's compute_loss_func computes the loss from the logits, "
                    f"so the patch would do nothing; drop compute_loss_func or leave the model "
                    f"unpatched (restore)")
            return
        frame = frame.f_back


def labels_position(model: torch.nn.Module) -> int | None:
    """The index of `labels` among the positional arguments of the class's forward."""
    params = list(inspect.signature(type(model).forward).parameters.values())[1:]
    for i, p in enumerate(params):
        if p.name == "labels":
            return i if p.kind is p.POSITIONAL_OR_KEYWORD else None
    return None

"""The patched forward of a Transformers causal LM.

`apply` installs two callables, once, as instance attributes: `model.forward` (a
PatchedForward) and `lm_head.forward` (a CapturingHead). A forward with labels runs the
model's own forward with labels=None while the head is in capture mode, where it keeps the
hidden states [B, T, H] it is given and returns them instead of logits; the model's own
code thus runs all it runs for a loss (decoder, caches, MoE router outputs), and what it
then does to its `logits` (a scale, a soft-cap) touches only that [B, T, H] stand-in. The
loss is linear_cross_entropy of the kept hidden states, the head's weight and bias, with
the model's transform as its options (_hf_heads.py, _hf_loss.py). Nothing is swapped per call (only a flag is
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
    rule: object = None  # what the forward does between head and loss (_hf_heads.HeadRule)

    def describe(self) -> str:
        return f"ascend_ops: loss from linear_cross_entropy ({self.mode}), no logits with labels"


class CapturingHead:
    """`lm_head.forward` while patched: the head's own forward, except in capture mode
    (set by PatchedForward around one call), where `head(hidden)` returns `hidden`."""

    def __init__(self, head: torch.nn.Module, previous=None):
        self.head, self.previous, self.capturing = head, previous, False
        self.captured = None  # the hidden states of the capturing call

    def __call__(self, hidden, *args, **kwargs):
        if self.capturing:
            self.captured = hidden
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
        label_smoothing = 0.0
        if labels is None:
            trainer = None
            if model.training and torch.is_grad_enabled():
                trainer = trainer_computing_its_own_loss()
            if trainer is None:
                return original(*args, **kwargs)
            # Trainer's label_smoothing_factor: its labels, its smoothing, our loss
            labels, label_smoothing = trainer_labels(trainer)
            kwargs = {**kwargs, "ignore_index": trainer.label_smoother.ignore_index}
        if not model.training and patch.eval_logits:  # as unpatched: logits and its loss
            return original(*args, **kwargs)
        check_labels(labels, kwargs.get("shift_labels"))
        if "labels" in kwargs:
            kwargs = {**kwargs, "labels": None}
        elif at is not None and len(args) > at:
            args = (*args[:at], None, *args[at + 1:])
        return_dict = kwargs.pop("return_dict", None)
        if return_dict is None:
            return_dict = getattr(model.config, "return_dict", True)
        head = model.get_output_embeddings()
        capture = head.__dict__["forward"]
        capture.capturing = True
        model_kwargs = {k: v for k, v in kwargs.items() if k != "ignore_index" or label_smoothing == 0.0}
        try:
            outputs = original(*args, return_dict=True, **model_kwargs)
            hidden, capture.captured = capture.captured, None
        finally:
            capture.capturing = False
        loss = causal_lm_loss(
            hidden, head.weight, labels, linear_bias=head.bias,
            label_smoothing=label_smoothing, **patch.rule.options(),
            shift_labels=kwargs.get("shift_labels"),
            ignore_index=kwargs.get("ignore_index", -100),
            num_items_in_batch=kwargs.get("num_items_in_batch"),
            compute_dtype=patch.compute_dtype, process_group=patch.process_group,
            vocab_start_index=patch.vocab_start_index, mode=patch.mode)
        aux_loss = getattr(outputs, "aux_loss", None)
        if aux_loss is not None and patch.rule.aux_loss_coef is not None:
            # MoE: what the forward adds to its loss when given labels
            loss = loss + patch.rule.aux_loss_coef * aux_loss.to(loss.device)
        fields = {f.name: getattr(outputs, f.name) for f in dataclasses.fields(outputs)}
        fields.update(loss=loss, logits=None)
        if return_dict:
            return type(outputs)(**fields)
        # Transformers' tuple leaves out what is None; logits keep their place (None) so that
        # `loss, logits = out[:2]` reads as on an unpatched model.
        return tuple(v for k, v in fields.items() if v is not None or k == "logits")


def trainer_computing_its_own_loss():
    """The Trainer whose compute_loss calls us after taking the labels out of the batch to
    compute the loss itself, when that loss is its label smoother (label_smoothing_factor):
    the patch computes it (trainer_labels) instead of letting the model build the logits.
    A compute_loss_func needs the logits: refused, naming the setting, rather than a silent
    fall-back to them. None when no Trainer computes the loss itself."""
    if torch.compiler.is_compiling():
        return None  # frames cannot be read in a traced graph; see docs/integrations.md
    frame = sys._getframe(2)
    for _ in range(16):  # Trainer, Module.__call__, Accelerate's wrappers, us
        if frame is None:
            return None
        if frame.f_code.co_name == "compute_loss":
            trainer = frame.f_locals.get("self")
            if getattr(trainer, "compute_loss_func", None) is not None:
                raise ValueError(
                    f"{_NAME}: Trainer's compute_loss_func computes the loss from the logits, "
                    f"so the patch would do nothing; drop compute_loss_func or leave the model "
                    f"unpatched (restore)")
            if getattr(trainer, "label_smoother", None) is not None and \
                    frame.f_locals.get("labels") is not None:
                trainer._ascend_ops_labels = frame.f_locals["labels"]
                return trainer
            return None
        frame = frame.f_back
    return None


def trainer_labels(trainer):
    """(labels, label_smoothing) of the Trainer's compute_loss in progress; its label
    smoother is handed our loss from then on (LossFromPatchedModel)."""
    labels = trainer.__dict__.pop("_ascend_ops_labels")
    smoother = trainer.label_smoother
    if not isinstance(smoother, LossFromPatchedModel):
        trainer.label_smoother = smoother = LossFromPatchedModel(smoother)
    return labels, float(smoother.epsilon)


class LossFromPatchedModel:
    """Stands in for Trainer's LabelSmoother once the patch computes the smoothed loss: it
    returns the loss of a patched model's output (which has no logits) and calls the
    original smoother on any other output. Trainer's LabelSmoother computes the same loss
    from the logits: (1 - eps) * nll + eps * mean_c(-log p_c), over the shifted labels,
    divided by num_items_in_batch or the count of kept labels (torch's label_smoothing)."""

    def __init__(self, smoother):
        self.smoother = smoother
        self.epsilon, self.ignore_index = smoother.epsilon, smoother.ignore_index

    def __call__(self, model_output, labels, shift_labels=False, num_items_in_batch=None):
        if isinstance(model_output, dict) and model_output.get("logits") is None \
                and model_output.get("loss") is not None:
            return model_output["loss"]
        return self.smoother(model_output, labels, shift_labels=shift_labels,
                             num_items_in_batch=num_items_in_batch)


def labels_position(model: torch.nn.Module) -> int | None:
    """The index of `labels` among the positional arguments of the class's forward."""
    params = list(inspect.signature(type(model).forward).parameters.values())[1:]
    for i, p in enumerate(params):
        if p.name == "labels":
            return i if p.kind is p.POSITIONAL_OR_KEYWORD else None
    return None

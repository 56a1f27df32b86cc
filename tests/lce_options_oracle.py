"""The oracle of linear_cross_entropy's loss options (SPEC §7): float64 autograd of the plain
formula, written out term by term so that a test can put a 5 % error into one term
(`mutate`) and see the comparison fail; `torch_semantics` is the same loss through torch's
own F.cross_entropy, which the written-out formula is checked against."""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Option values large enough for every term to weigh in the loss and the gradients.
STRONG = {
    "linear_bias": True,
    "ce_weight": True,
    "label_smoothing": 0.3,
    "logit_scale": 0.7,
    "softcap": 2.5,
    "lse_square_scale": 0.05,
}


def problem(bt=37, h=24, v=67, dtype=torch.bfloat16, seed=0, ignore_every=5,
            ignore_index=-100, bias=False, ce_weight=False):
    """input [bt, h], weight [v, h], target [bt] (every `ignore_every`-th row ignored),
    and optionally a bias [v] (input's dtype) and class weights [v] (float32)."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(bt, h, generator=gen) / 2).to(dtype)
    w = (torch.randn(v, h, generator=gen) / 1.5).to(dtype)
    t = torch.randint(0, v, (bt,), generator=gen)
    if ignore_every:
        t[::ignore_every] = ignore_index
    b = torch.randn(v, generator=gen).to(dtype) if bias else None
    cw = (0.5 + 1.5 * torch.rand(v, generator=gen)) if ce_weight else None
    return x, w, t, b, cw


def _logits(x, w, b, logit_scale, softcap, mutate):
    z = x @ w.T
    if b is not None:
        z = z + b * (1.05 if mutate == "linear_bias" else 1.0)
    z = z * (logit_scale * (1.05 if mutate == "logit_scale" else 1.0))
    if softcap is not None:
        cap = softcap * (1.05 if mutate == "softcap" else 1.0)
        z = cap * torch.tanh(z / cap)
    return z


def oracle(x, w, t, *, linear_bias=None, ce_weight=None, ignore_index=-100, reduction="mean",
           label_smoothing=0.0, logit_scale=1.0, softcap=None, lse_square_scale=0.0,
           grad=None, mutate=None, want_grads=True):
    """(outputs, grads) in float64: outputs {"loss", "z_loss", "lse", "token_accuracy"},
    grads {"input", "weight", "linear_bias"} of loss.backward(grad). `mutate` names one
    term to put 5 % off: "linear_bias", "logit_scale", "softcap", "ce_weight" (the target
    weights in the numerator), "label_smoothing" (the smoothing term) or
    "lse_square_scale" (the z-loss)."""
    x64 = x.double().requires_grad_(want_grads)
    w64 = w.double().requires_grad_(want_grads)
    b64 = linear_bias.double().requires_grad_(want_grads) if linear_bias is not None else None
    cw = ce_weight.double() if ce_weight is not None else None
    y = _logits(x64, w64, b64, logit_scale, softcap, mutate)  # BT x C
    kept = t != ignore_index
    tt = torch.where(kept, t, 0).long()
    lse = torch.logsumexp(y, dim=1)
    logp = y - lse[:, None]
    eps = label_smoothing
    classes = y.size(1)
    w_all = cw if cw is not None else torch.ones(classes, dtype=torch.float64)
    w_t = w_all[tt] * kept
    nll = -logp.gather(1, tt[:, None]).squeeze(1)
    w_num = w_t * (1.05 if mutate == "ce_weight" else 1.0)
    smooth = -(logp * w_all).sum(dim=1) * (1.05 if mutate == "label_smoothing" else 1.0)
    ce = torch.where(kept, (1 - eps) * w_num * nll + eps / classes * smooth, 0.0)
    z = torch.where(kept, lse_square_scale * lse**2, 0.0) * (1.05 if mutate == "lse_square_scale" else 1.0)
    count = kept.sum()
    if reduction == "mean":
        loss = ce.sum() / w_t.sum() + (z.sum() / count if lse_square_scale else 0.0)
        z_loss = z.sum() / count
    elif reduction == "sum":
        loss, z_loss = ce.sum() + z.sum(), z.sum()
    else:
        loss, z_loss = ce + z, z
    correct = ((y.argmax(dim=1) == t) & kept).double()
    accuracy = correct if reduction == "none" else correct.sum() / count
    outputs = {"loss": loss.detach(), "z_loss": z_loss.detach(), "lse": lse.detach(),
               "token_accuracy": accuracy.detach()}
    grads = {}
    if want_grads:
        loss.backward(None if grad is None else grad.double())
        grads = {"input": x64.grad, "weight": w64.grad}
        if b64 is not None:
            grads["linear_bias"] = b64.grad
    return outputs, grads


def torch_semantics(x, w, t, *, linear_bias=None, ce_weight=None, ignore_index=-100,
                    reduction="mean", label_smoothing=0.0, logit_scale=1.0, softcap=None,
                    lse_square_scale=0.0):
    """The loss through torch's own F.cross_entropy (float64) plus Liger's z-loss."""
    y = _logits(x.double(), w.double(), None if linear_bias is None else linear_bias.double(),
                logit_scale, softcap, None)
    ce = F.cross_entropy(y, t, weight=None if ce_weight is None else ce_weight.double(),
                         ignore_index=ignore_index, reduction=reduction,
                         label_smoothing=label_smoothing)
    kept = t != ignore_index
    z = torch.where(kept, lse_square_scale * torch.logsumexp(y, dim=1) ** 2, 0.0)
    if reduction == "mean":
        return ce + (z.sum() / kept.sum() if lse_square_scale else 0.0)
    return ce + (z.sum() if reduction == "sum" else z)

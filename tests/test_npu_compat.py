"""The torch_npu-named functions have torch_npu's documented signatures and its results."""

import ast
import inspect

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import FlceCase, OnlineCase

# The Python prototypes as torch_npu's API documentation gives them (torch_npu's docs for
# npu_fused_linear_online_max_sum, npu_fused_cross_entropy_loss_with_max_sum and
# npu_fused_linear_cross_entropy_loss_with_max_sum_backward, "函数原型" sections).
DOCUMENTED = {
    "npu_fused_linear_online_max_sum":
        "npu_fused_linear_online_max_sum(input, weight, target, vocab_start_index, "
        "vocab_end_index, return_logits=False)",
    "npu_fused_cross_entropy_loss_with_max_sum":
        "npu_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits, "
        "*, label_smoothing=0.0, input=None, weight=None, vocab_parallel_logits=None)",
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward":
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward(grad, input, weight, "
        "target_mask, masked_target, label_smoothing=0.0, logits_max=None, sum_exp_logits=None, "
        "softmax=None)",
}


def documented_parameters(prototype: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter of a documented prototype."""
    fn = ast.parse(f"def {prototype}: pass").body[0]
    args = fn.args
    params = []
    positional_defaults = [None] * (len(args.args) - len(args.defaults)) + args.defaults
    for arg, default in zip(args.args, positional_defaults):
        params.append((arg.arg, "POSITIONAL_OR_KEYWORD",
                       inspect.Parameter.empty if default is None else ast.literal_eval(default)))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append((arg.arg, "KEYWORD_ONLY",
                       inspect.Parameter.empty if default is None else ast.literal_eval(default)))
    return params


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_signature_is_torch_npus(name):
    ours = inspect.signature(getattr(ascend_ops, name)).parameters.values()
    assert [(p.name, p.kind.name, p.default) for p in ours] == documented_parameters(DOCUMENTED[name])


def test_npu_names_give_the_same_results():
    online = testing.online_inputs(OnlineCase(21, 9, 30, return_logits=True, vocab_start=30))
    a = ascend_ops.npu_fused_linear_online_max_sum(*online.values())
    b = ascend_ops.fused_linear_online_max_sum(**online)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    loss_a = ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(a[0], a[1], a[2],
                                                                  vocab_parallel_logits=a[5])
    loss_b = ascend_ops.fused_cross_entropy_loss_with_max_sum(b[0], b[1], b[2],
                                                              vocab_parallel_logits=b[5])
    assert all(torch.equal(x, y) for x, y in zip(loss_a, loss_b))
    flce = testing.flce_inputs(FlceCase(13, 7, 20))
    grads_a = ascend_ops.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(*flce.values())
    grads_b = ascend_ops.fused_linear_cross_entropy_loss_grad(**flce)
    assert all(torch.equal(x, y) for x, y in zip(grads_a, grads_b))

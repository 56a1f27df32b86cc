"""The torch_npu-named functions follow torch_npu 2.13.0: its schemas, its documented
prototypes, its return conventions (None for an output not asked for) and its results."""

import ast
import inspect

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import FlceCase, LossCase, OnlineCase

# torch_npu 2.13.0's schemas (torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml in
# its wheel): what `torch.ops.npu.<name>` accepts, positionally and by keyword.
SCHEMAS = {
    "npu_fused_linear_online_max_sum":
        "npu_fused_linear_online_max_sum(Tensor input, Tensor weight, Tensor target, "
        "int vocab_start_index, int vocab_end_index, bool return_logits=False) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_fused_cross_entropy_loss_with_max_sum":
        "npu_fused_cross_entropy_loss_with_max_sum(Tensor logits_max, Tensor sum_exp_logits, "
        "Tensor predicted_logits, *, float? label_smoothing=0.0, Tensor? input=None, "
        "Tensor? weight=None, Tensor? vocab_parallel_logits=None) -> (Tensor, Tensor)",
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward":
        "npu_fused_linear_cross_entropy_loss_with_max_sum_backward(Tensor grad, Tensor input, "
        "Tensor weight, Tensor target_mask, Tensor masked_target, float label_smoothing=0.0, "
        "Tensor? logits_max=None, Tensor? sum_exp_logits=None, Tensor? softmax=None) "
        "-> (Tensor, Tensor)",
}

# The Python prototypes as torch_npu's API documentation gives them ("函数原型").
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


def schema_parameters(schema: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each argument of a torch schema."""
    params = []
    for arg in torch._C.parse_schema(schema).arguments:
        kind = "KEYWORD_ONLY" if arg.kwarg_only else "POSITIONAL_OR_KEYWORD"
        default = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        params.append((arg.name, kind, default))
    return params


def ours(name):
    return [(p.name, p.kind.name, p.default)
            for p in inspect.signature(getattr(ascend_ops, name)).parameters.values()]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_signature_is_torch_npus_documented_prototype(name):
    assert ours(name) == documented_parameters(DOCUMENTED[name])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_signature_is_torch_npus_schema(name):
    assert ours(name) == schema_parameters(SCHEMAS[name])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_output_count_is_the_schemas(name):
    returns = torch._C.parse_schema(SCHEMAS[name]).returns
    case = {"npu_fused_linear_online_max_sum": lambda: ascend_ops.npu_fused_linear_online_max_sum(
                **testing.online_inputs(OnlineCase(5, 3, 8))),
            "npu_fused_cross_entropy_loss_with_max_sum":
                lambda: ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
                    **testing.loss_inputs(LossCase(5, 8))),
            "npu_fused_linear_cross_entropy_loss_with_max_sum_backward":
                lambda: ascend_ops.npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
                    **testing.flce_inputs(FlceCase(5, 3, 8)))}[name]
    assert len(case()) == len(returns)


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


def test_logits_not_asked_for_are_none():
    """torch_npu: 'vocab_parallel_logits ... return_logits为False时返回None'."""
    online = testing.online_inputs(OnlineCase(21, 9, 30, return_logits=False, vocab_start=30))
    outputs = ascend_ops.npu_fused_linear_online_max_sum(**online)
    assert outputs[5] is None
    ours_ = ascend_ops.fused_linear_online_max_sum(**online)
    assert all(torch.equal(x, y) for x, y in zip(outputs[:5], ours_[:5]))


def test_softmax_not_asked_for_is_none():
    """torch_npu: 'softmax(float32，vocab_parallel_logits为None时返回None)'."""
    inputs = testing.loss_inputs(LossCase(17, 9, None))
    loss, softmax = ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
        inputs["logits_max"], inputs["sum_exp_logits"], inputs["predicted_logits"])
    assert softmax is None
    assert torch.equal(loss, ascend_ops.fused_cross_entropy_loss_with_max_sum(
        inputs["logits_max"], inputs["sum_exp_logits"], inputs["predicted_logits"])[0])


def test_input_and_weight_are_accepted_and_do_not_enter_the_result():
    """torch_npu passes input= and weight= on to aclnn, which reserves them (they do not
    enter the result); callers that pass them must run unchanged."""
    inputs = testing.loss_inputs(LossCase(17, 9, torch.bfloat16))
    stats = inputs["logits_max"], inputs["sum_exp_logits"], inputs["predicted_logits"]
    plain = ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
        *stats, vocab_parallel_logits=inputs["vocab_parallel_logits"])
    hidden, head = torch.randn(17, 4, dtype=torch.bfloat16), torch.randn(9, 4, dtype=torch.bfloat16)
    given = ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
        *stats, label_smoothing=None, input=hidden, weight=head,
        vocab_parallel_logits=inputs["vocab_parallel_logits"])
    assert all(torch.equal(x, y) for x, y in zip(plain, given))


def test_input_that_is_not_a_tensor_is_refused():
    inputs = testing.loss_inputs(LossCase(3, 4, None))
    with pytest.raises(TypeError, match="'weight' must be a Tensor or None, got list"):
        ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
            inputs["logits_max"], inputs["sum_exp_logits"], inputs["predicted_logits"],
            weight=[1.0])


def test_label_smoothing_other_than_zero_is_refused_as_on_the_npu():
    inputs = testing.loss_inputs(LossCase(3, 4, None))
    with pytest.raises(ValueError, match="'label_smoothing' must be 0.0"):
        ascend_ops.npu_fused_cross_entropy_loss_with_max_sum(
            inputs["logits_max"], inputs["sum_exp_logits"], inputs["predicted_logits"],
            label_smoothing=0.1)

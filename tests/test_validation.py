"""Bad input: every SPEC rule gives the same clear error from every implementation and
from the fake kernel, and nothing is written."""

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import BnCase, FlceCase

from conftest import call_on_fake_tensors, clone_inputs


def flce_base(mode=testing.MEMORY_SAVING):
    return testing.flce_inputs(FlceCase(10, 8, 16, mode=mode, masked_fraction=0.0))


def hp(**change):
    return (testing.HIGH_PERFORMANCE, change)


def ms(**change):
    return (testing.MEMORY_SAVING, change)


# (id, base mode, changed arguments, error type, argument the message must name)
FLCE_BAD = [
    ("grad-dtype", ms(grad=torch.ones(10, dtype=torch.float64)), TypeError, "grad"),
    ("grad-2d", ms(grad=torch.ones(10, 1)), ValueError, "grad"),
    ("grad-length", ms(grad=torch.ones(9)), ValueError, "grad"),
    ("input-float32", ms(input=torch.randn(10, 8)), TypeError, "input"),
    ("input-3d", ms(input=torch.randn(10, 8, 1).bfloat16()), ValueError, "input"),
    ("weight-dtype", ms(weight=torch.randn(16, 8).half()), TypeError, "weight"),
    ("weight-hidden", ms(weight=torch.randn(16, 7).bfloat16()), ValueError, "weight"),
    ("weight-1d", ms(weight=torch.randn(16).bfloat16()), ValueError, "weight"),
    ("target-dtype", ms(masked_target=torch.zeros(10)), TypeError, "masked_target"),
    ("target-length", ms(masked_target=torch.zeros(11, dtype=torch.int64)), ValueError, "masked_target"),
    ("target-2d", ms(masked_target=torch.zeros(10, 1, dtype=torch.int32)), ValueError, "masked_target"),
    ("target-too-large", ms(masked_target=torch.full((10,), 16)), ValueError, "masked_target"),
    ("target-negative", ms(masked_target=torch.full((10,), -1, dtype=torch.int32)), ValueError, "masked_target"),
    ("mask-dtype", ms(target_mask=torch.zeros(2, dtype=torch.int32)), TypeError, "target_mask"),
    ("mask-packed-short", ms(target_mask=torch.zeros(1, dtype=torch.uint8)), ValueError, "target_mask"),
    ("mask-bool-length", ms(target_mask=torch.zeros(9, dtype=torch.bool)), ValueError, "target_mask"),
    ("mask-2d", ms(target_mask=torch.zeros(2, 1, dtype=torch.uint8)), ValueError, "target_mask"),
    ("label-smoothing", ms(label_smoothing=0.1), ValueError, "label_smoothing"),
    ("logits-max-missing", ms(logits_max=None), ValueError, "logits_max"),
    ("sum-exp-missing", ms(sum_exp_logits=None), ValueError, "sum_exp_logits"),
    ("logits-max-dtype", ms(logits_max=torch.zeros(10).half()), TypeError, "logits_max"),
    ("sum-exp-length", ms(sum_exp_logits=torch.ones(7)), ValueError, "sum_exp_logits"),
    ("softmax-dtype", hp(softmax=torch.rand(10, 16).bfloat16()), TypeError, "softmax"),
    ("softmax-shape", hp(softmax=torch.rand(10, 15)), ValueError, "softmax"),
    ("softmax-1d", hp(softmax=torch.rand(160)), ValueError, "softmax"),
    ("device", ms(grad=torch.ones(10, device="meta")), ValueError, "grad"),
]
VALUE_RULES = {"target-too-large", "target-negative"}  # need the data: not on fake tensors


def flce_bad_inputs(mode, change):
    inputs = flce_base(mode)
    inputs.update(change)
    return inputs


def check_message(error, arg):
    message = str(error.value)
    assert f"'{arg}'" in message, message
    assert "got" in message, message
    assert message.startswith("fused_linear_cross_entropy_loss_grad") or \
        message.startswith("batch_norm_reduce_backward"), message


@pytest.mark.parametrize("impl", ["cpu", "reference", "sim"])
@pytest.mark.parametrize("rule", FLCE_BAD, ids=lambda r: r[0])
def test_flce_bad_input(impl, rule):
    name, (mode, change), error_type, arg = rule
    inputs = flce_bad_inputs(mode, change)
    with pytest.raises(error_type) as error:
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl=impl)
    check_message(error, arg)


@pytest.mark.parametrize("rule", [r for r in FLCE_BAD if r[0] not in VALUE_RULES], ids=lambda r: r[0])
def test_flce_bad_input_rejected_by_fake_kernel(rule):
    name, (mode, change), error_type, arg = rule
    with pytest.raises(error_type) as error:
        call_on_fake_tensors(torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad,
                             flce_bad_inputs(mode, change))
    check_message(error, arg)


def test_flce_label_smoothing_message_matches_the_npu():
    with pytest.raises(ValueError, match="only 0.0 is supported"):
        ascend_ops.fused_linear_cross_entropy_loss_grad(**dict(flce_base(), label_smoothing=0.1))


def test_flce_error_writes_nothing():
    inputs = flce_base(testing.HIGH_PERFORMANCE)
    inputs["masked_target"] = torch.full((10,), 99)
    softmax = inputs["softmax"].clone()
    with pytest.raises(ValueError):
        torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
    assert torch.equal(inputs["softmax"], softmax)


def test_flce_direct_op_call_is_validated_too():
    with pytest.raises(TypeError, match="'grad'"):
        torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad(
            **dict(flce_base(), grad=torch.ones(10, dtype=torch.float16)))


def bn_base():
    return testing.bn_inputs(BnCase((4, 3, 5)))


BN_BAD = [
    ("grad-out-dtype", dict(grad_out=torch.randn(4, 3, 5).half()), TypeError, "grad_out"),
    ("grad-out-shape", dict(grad_out=torch.randn(4, 3, 6)), ValueError, "grad_out"),
    ("input-float64", dict(input=torch.randn(4, 3, 5).double(), grad_out=torch.randn(4, 3, 5).double()), TypeError, "input"),
    ("input-int", dict(input=torch.ones(4, 3, 5, dtype=torch.int32)), TypeError, "input"),
    ("input-1d", dict(input=torch.randn(4), grad_out=torch.randn(4)), ValueError, "input"),
    ("input-9d", dict(input=torch.randn([1, 3] + [1] * 7), grad_out=torch.randn([1, 3] + [1] * 7)), ValueError, "input"),
    ("no-channels", dict(input=torch.randn(4, 0, 5), grad_out=torch.randn(4, 0, 5)), ValueError, "input"),
    ("mean-length", dict(mean=torch.zeros(4)), ValueError, "mean"),
    ("mean-2d", dict(mean=torch.zeros(3, 1)), ValueError, "mean"),
    ("mean-dtype", dict(mean=torch.zeros(3, dtype=torch.int64)), TypeError, "mean"),
    ("invstd-length", dict(invstd=torch.ones(2)), ValueError, "invstd"),
    ("weight-length", dict(weight=torch.ones(5)), ValueError, "weight"),
    ("device", dict(mean=torch.zeros(3, device="meta")), ValueError, "mean"),
]


@pytest.mark.parametrize("impl", ["cpu", "reference", "sim"])
@pytest.mark.parametrize("rule", BN_BAD, ids=lambda r: r[0])
def test_bn_bad_input(impl, rule):
    name, change, error_type, arg = rule
    with pytest.raises(error_type) as error:
        ascend_ops.batch_norm_reduce_backward(**dict(bn_base(), **change), impl=impl)
    check_message(error, arg)


@pytest.mark.parametrize("rule", BN_BAD, ids=lambda r: r[0])
def test_bn_bad_input_rejected_by_fake_kernel(rule):
    name, change, error_type, arg = rule
    with pytest.raises(error_type) as error:
        call_on_fake_tensors(torch.ops.ascend_ops.batch_norm_reduce_backward,
                             dict(bn_base(), **change))
    check_message(error, arg)


def test_bad_impl_names_the_choices():
    with pytest.raises(ValueError, match="impl must be 'auto' or one of"):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="gpu")


def test_cpu_impl_refuses_other_devices():
    inputs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in bn_base().items()}
    with pytest.raises(ValueError, match="impl='cpu' needs CPU tensors"):
        ascend_ops.batch_norm_reduce_backward(**inputs, impl="cpu")
    with pytest.raises(ValueError, match="impl='sim' needs CPU tensors"):
        ascend_ops.batch_norm_reduce_backward(**inputs, impl="sim")
    with pytest.raises(RuntimeError, match="no implementation of batch_norm_reduce_backward runs on meta"):
        ascend_ops.batch_norm_reduce_backward(**inputs)


@pytest.mark.parametrize("impl", ["sim", "npu_custom"])
def test_forward_ops_name_the_implementations_they_have(impl):
    inputs = testing.online_inputs(testing.online_cases()[0])
    with pytest.raises(ValueError, match=rf"impl='{impl}' does not implement fused_linear_online_max_sum"):
        ascend_ops.fused_linear_online_max_sum(**inputs, impl=impl)


def raised(check, *args):
    """(type, message) of what `check(*args)` raises, or None."""
    try:
        check(*args)
    except (TypeError, ValueError) as error:
        return type(error), str(error)
    return None


def checks_agree(name, *args):
    """_C's check and its Python statement (used when _C cannot load) raise the same error."""
    from ascend_ops import _C, _validation

    native = raised(getattr(_C, name), *args)
    python = raised(getattr(_validation, name), *args)
    assert native is not None, f"{name}: the native check accepts this input"
    assert python == native


@pytest.mark.parametrize("rule", FLCE_BAD, ids=lambda r: r[0])
def test_flce_python_checks_match_the_native_ones(rule):
    name, (mode, change), error_type, arg = rule
    inputs = flce_bad_inputs(mode, change)
    checks_agree("check_fused_linear_cross_entropy_loss_grad", *inputs.values(), True)


@pytest.mark.parametrize("rule", BN_BAD, ids=lambda r: r[0])
def test_bn_python_checks_match_the_native_ones(rule):
    name, change, error_type, arg = rule
    inputs = dict(bn_base(), **change)
    checks_agree("check_batch_norm_reduce_backward", inputs["grad_out"], inputs["input"],
                 inputs["mean"], inputs["invstd"], inputs["weight"])


def test_python_checks_accept_what_the_native_ones_accept():
    from ascend_ops import _validation

    for mode in (testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE):
        _validation.check_fused_linear_cross_entropy_loss_grad(*flce_base(mode).values(), True)
    bn = bn_base()
    _validation.check_batch_norm_reduce_backward(bn["grad_out"], bn["input"], bn["mean"],
                                                 bn["invstd"], None)
    _validation.check_scratch_bytes("op", None)
    assert raised(_validation.check_scratch_bytes, "op", 0) == (
        ValueError, "op: 'scratch_bytes' must be a positive number of bytes or None, got 0")


def test_bn_output_dtype_rule_matches_the_native_one():
    from ascend_ops import _C, _validation

    dtypes = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
    for input_dtype in dtypes:
        for mean_dtype in dtypes:
            assert (_validation.batch_norm_reduce_output_dtype(input_dtype, mean_dtype)
                    == _C.batch_norm_reduce_output_dtype(input_dtype, mean_dtype)), (input_dtype, mean_dtype)

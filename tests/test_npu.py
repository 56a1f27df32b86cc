"""The NPU implementation (op_plugin/csrc/npu through torch_npu).

Tests marked `npu` run the adapter on an Ascend device against the float64 oracle and
the shared validation table; without a device (torch_npu, CANN or the adapter missing)
they skip, naming what is missing. The unmarked tests check how "npu" is offered and
refused where it cannot run. Building and linking the adapter is checked separately,
without hardware, by tests/npu_link (CI's torch_npu environment).
"""

import re

import pytest
import torch

import ascend_ops
from ascend_ops import testing

from conftest import assert_matches, clone_inputs
from test_validation import BN_BAD, FLCE_BAD, bn_base, check_message, flce_bad_inputs

NPU = ascend_ops.available_impls()["npu"]
on_npu = pytest.mark.skipif(not NPU.available, reason=f"npu unavailable: {NPU.reason}")

# The hint of the adapter's error when CANN's built-in refuses a shape (SPEC §1).
BUILTIN_LIMITS = "CANN's built-in rejects V = weight.size(0) < 128"


def to_npu(inputs: dict) -> dict:
    """CPU tensors moved to the NPU; others (e.g. a rule's meta tensor) left where they are."""
    return {k: v.to("npu") if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v
            for k, v in inputs.items()}


def to_cpu(outputs):
    return tuple(None if o is None else o.cpu() for o in outputs)


@pytest.mark.skipif(NPU.available, reason="the NPU adapter can run here")
def test_impl_npu_raises_why_it_cannot_run():
    with pytest.raises(RuntimeError, match=re.escape(f"impl='npu' is not available: {NPU.reason}")):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="npu")


@on_npu
def test_impl_npu_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="impl='npu' needs NPU tensors"):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="npu")


def run_flce_or_skip_builtin_limit(case, inputs):
    try:
        return ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(clone_inputs(inputs)))
    except RuntimeError as error:
        # Only the documented shape limits of the built-in may refuse a valid case.
        assert BUILTIN_LIMITS in str(error), str(error)
        limited = case.v < 128 or (case.mode == testing.MEMORY_SAVING and case.h > 65535)
        assert limited, f"{case.name} is within the built-in's limits: {error}"
        pytest.skip(f"{case.name}: CANN's built-in refuses it (install the custom op package)")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.flce_cases(), ids=lambda c: c.name)
def test_flce_npu_matches_oracle(case):
    inputs = testing.flce_inputs(case)
    ours = run_flce_or_skip_builtin_limit(case, inputs)  # impl="auto" picks npu
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs),
                   what=f"npu {case.name}")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.bn_cases(), ids=lambda c: c.name)
def test_bn_npu_matches_oracle(case):
    inputs = testing.bn_inputs(case)
    ours = ascend_ops.batch_norm_reduce_backward(**to_npu(inputs), impl="npu")
    assert_matches(to_cpu(ours), testing.bn_oracle(inputs), testing.bn_naive(inputs),
                   what=f"npu {case.name}")
    dtype = torch.float16 if inputs["input"].dtype == inputs["mean"].dtype == torch.float16 \
        else torch.float32
    assert all(o.dtype == dtype for o in ours)


@pytest.mark.npu
@on_npu
def test_empty_inputs_give_zeros_not_garbage():
    # The built-ins leave outputs unwritten for empty input; fill the cache with non-zeros
    # first so stale memory would show.
    torch.full((1 << 20,), 7.0, device="npu").sum().item()
    flce = testing.flce_inputs(testing.FlceCase(0, 16, 256))
    _, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(flce))
    assert torch.count_nonzero(weight_grad.cpu()) == 0
    bn = testing.bn_inputs(testing.BnCase((0, 4, 3)))
    for out in ascend_ops.batch_norm_reduce_backward(**to_npu(bn)):
        assert torch.count_nonzero(out.cpu()) == 0


@pytest.mark.npu
@on_npu
def test_non_contiguous_inputs():
    case = testing.FlceCase(40, 64, 256, torch.bfloat16)
    inputs = testing.flce_inputs(case)
    npu = to_npu(inputs)
    npu["input"] = npu["input"].t().contiguous().t()  # same values, column-major
    npu["weight"] = npu["weight"].t().contiguous().t()
    assert not npu["input"].is_contiguous()
    ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**npu)
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs), "npu")
    bn = testing.bn_inputs(testing.BnCase((4, 6, 5, 5), channels_last=True))
    ours = ascend_ops.batch_norm_reduce_backward(**to_npu(bn))
    assert_matches(to_cpu(ours), testing.bn_oracle(bn), testing.bn_naive(bn), "npu channels_last")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("rule", FLCE_BAD, ids=lambda r: r[0])
def test_flce_npu_rejects_bad_input_like_cpu(rule):
    name, (mode, change), error_type, arg = rule
    inputs = to_npu(flce_bad_inputs(mode, change))
    with pytest.raises(error_type) as error:
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="npu")
    check_message(error, arg)


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("rule", BN_BAD, ids=lambda r: r[0])
def test_bn_npu_rejects_bad_input_like_cpu(rule):
    name, change, error_type, arg = rule
    inputs = to_npu(dict(bn_base(), **change))
    with pytest.raises(error_type) as error:
        ascend_ops.batch_norm_reduce_backward(**inputs, impl="npu")
    check_message(error, arg)

"""SPEC §4's tolerances can fail: a plausible bug in any output is caught on every sample
case, for every implementation the parity table runs here.

Two kinds of wrong result:
- a weight_grad (and input_grad) whose softmax term is scaled by 1.1 or 0.5: the
  implementation itself computes it, fed a softmax scaled by that factor (high-performance
  mode) or a sum_exp_logits divided by it (memory-saving mode: P = exp(l − m) / S);
- any floating output of any operator off by 5 %: the implementation's output times 1.05.
"""

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops._impls import OP_IMPLS

from conftest import clone_inputs

AVAILABLE = [name for name, status in ascend_ops.available_impls().items() if status.available]


def impls_of(op):
    return [impl for impl in OP_IMPLS[op] if impl in AVAILABLE]


def with_softmax_term_scaled(inputs: dict, factor: float) -> dict:
    mutated = clone_inputs(inputs)
    if mutated["softmax"] is not None:
        mutated["softmax"] = mutated["softmax"] * factor
    else:
        mutated["sum_exp_logits"] = mutated["sum_exp_logits"] / factor
    return mutated


FLCE_CASES = [c for c in testing.flce_cases() if c.bt and c.v]  # the mutation changes something


@pytest.mark.parametrize("factor", [1.1, 0.5])
@pytest.mark.parametrize("impl", impls_of("fused_linear_cross_entropy_loss_grad"))
@pytest.mark.parametrize("case", FLCE_CASES, ids=lambda c: c.name)
def test_softmax_term_off_fails(case, impl, factor):
    inputs = testing.flce_inputs(case)
    oracle = testing.flce_oracle(inputs)
    correct = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs), impl=impl)
    mutant = ascend_ops.fused_linear_cross_entropy_loss_grad(
        **with_softmax_term_scaled(inputs, factor), impl=impl)
    for name, ours, bad, ref in zip(("input_grad", "weight_grad"), correct, mutant, oracle):
        assert testing.compare(ours, ref).passed, f"{impl} {name}: the correct result fails"
        result = testing.compare(bad, ref)
        assert not result.passed, (f"{impl} {name} with the softmax term x{factor} passes: "
                                   f"{result.message}")


SAMPLES = [
    ("fused_linear_cross_entropy_loss_grad", testing.flce_cases(), testing.flce_inputs,
     testing.flce_oracle),
    ("batch_norm_reduce_backward", testing.bn_cases(), testing.bn_inputs, testing.bn_oracle),
    ("fused_linear_online_max_sum", testing.online_cases(), testing.online_inputs,
     testing.online_oracle),
    ("fused_cross_entropy_loss_with_max_sum", testing.loss_cases(), testing.loss_inputs,
     testing.loss_oracle),
]


@pytest.mark.parametrize("op, cases, make, oracle", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_five_percent_off_in_any_output_fails(op, cases, make, oracle):
    checked = 0
    for impl in impls_of(op):
        for case in cases:
            inputs = make(case)
            expected = oracle(inputs)
            outputs = getattr(ascend_ops, op)(**clone_inputs(inputs), impl=impl)
            for index, (ours, ref) in enumerate(zip(outputs, expected)):
                if ours is None or not ours.dtype.is_floating_point:
                    continue
                off = ours * 1.05
                if torch.equal(off, ours):  # empty or all zero: nothing to be off
                    continue
                result = testing.compare(off, ref)
                assert not result.passed, (f"{op} [{impl}, {case.name}] output {index} 5 % off "
                                           f"passes: {result.message}")
                checked += 1
    assert checked > 0

"""batch_norm_reduce_backward: values of every implementation against the oracle."""

import itertools
import os

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import BnCase

from conftest import assert_matches

IMPLS = ["cpu", "reference", "sim"]
CASES = testing.bn_cases()


def check_case(case, impl):
    inputs = testing.bn_inputs(case)
    ours = ascend_ops.batch_norm_reduce_backward(**inputs, impl=impl)
    expected_dtype = ascend_ops.reference.batch_norm_reduce_output_dtype(case.dtype, case.mean_dtype)
    assert all(o.dtype == expected_dtype and o.shape == (case.shape[1],) for o in ours)
    assert_matches(ours, testing.bn_oracle(inputs), testing.bn_naive(inputs), case.name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cpu_matches_float64_reference(case, cpu_path):
    check_case(case, "cpu")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reference_matches_float64_reference(case):
    check_case(case, "reference")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sim_matches_float64_reference(case):
    check_case(case, "sim")  # the Ascend C kernel on the CPU simulator


LAYOUT_CASES = [
    BnCase((4, 6, 5, 7), channels_last=True, seed=3),                       # NHWC, C < 16
    BnCase((3, 37, 4, 5), torch.bfloat16, channels_last=True, seed=4),      # channel tail
    BnCase((2, 300, 3, 3), torch.float16, torch.float16, channels_last=True, seed=5),  # 2 channel blocks
    BnCase((9, 70), seed=6),                                                  # 2-D: rows of C
    BnCase((5, 3, 20_000), torch.bfloat16, seed=7),                           # long runs, many tasks
    BnCase((40, 3, 50), torch.bfloat16, seed=8),     # short runs: float blocks span runs
    BnCase((37, 2, 21), torch.float16, torch.float16, seed=9),  # runs of 21: half steps, tails
]


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=lambda c: c.name + ("-cl" if c.channels_last else ""))
def test_cpu_layouts_and_blocks(case, cpu_path):
    inputs = testing.bn_inputs(case)
    assert_matches(ascend_ops.batch_norm_reduce_backward(**inputs), testing.bn_oracle(inputs),
                   testing.bn_naive(inputs), case.name)


def test_channels_last_3d(cpu_path):
    inputs = testing.bn_inputs(BnCase((2, 19, 3, 4, 5), seed=8))
    for name in ("grad_out", "input"):
        inputs[name] = inputs[name].contiguous(memory_format=torch.channels_last_3d)
    assert_matches(ascend_ops.batch_norm_reduce_backward(**inputs), testing.bn_oracle(inputs))


def test_mixed_layouts(cpu_path):
    inputs = testing.bn_inputs(BnCase((3, 5, 4, 6), channels_last=True, seed=9))
    inputs["grad_out"] = inputs["grad_out"].contiguous()
    assert_matches(ascend_ops.batch_norm_reduce_backward(**inputs), testing.bn_oracle(inputs))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=3)))
def test_outputs_not_asked_for_are_none(impl, flags):
    inputs = testing.bn_inputs(BnCase((3, 4, 5)))
    inputs.update(input_g=flags[0], weight_g=flags[1], bias_g=flags[2])
    ours = ascend_ops.batch_norm_reduce_backward(**inputs, impl=impl)
    wanted = (flags[0], flags[0], flags[1], flags[2])
    assert [o is not None for o in ours] == list(wanted)
    assert_matches(ours, testing.bn_oracle(inputs))


@pytest.mark.parametrize("impl", IMPLS)
def test_empty_input_gives_zero_sums(impl):
    for shape in [(0, 3, 4), (2, 3, 0), (0, 3)]:
        inputs = testing.bn_inputs(BnCase(shape))
        for out in ascend_ops.batch_norm_reduce_backward(**inputs, impl=impl):
            assert torch.equal(out, torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_mean_does_not_cancel(dtype, cpu_path):
    # |mean| = 1e4 with std 1: Σ dy·x − mean·Σ dy loses every digit in fp32.
    case = BnCase((16, 3, 32, 32), dtype, torch.float32, mean_offset=1e4, seed=5)
    inputs = testing.bn_inputs(case)
    ours = ascend_ops.batch_norm_reduce_backward(**inputs, impl="cpu")
    assert_matches(ours, testing.bn_oracle(inputs), what=case.name)
    # The cancelling formula in fp32 really is far off here, so the test can tell.
    dims = [0, 2, 3]
    dy, x = inputs["grad_out"].float(), inputs["input"].float()
    cancelling = (dy * x).sum(dims) - inputs["mean"] * dy.sum(dims)
    assert not testing.compare(cancelling, testing.bn_oracle(inputs)[1]).passed


def test_channels_last_and_non_contiguous_inputs():
    case = BnCase((4, 6, 5, 7), channels_last=True, seed=3)
    inputs = testing.bn_inputs(case)
    assert inputs["input"].is_contiguous(memory_format=torch.channels_last)
    assert_matches(ascend_ops.batch_norm_reduce_backward(**inputs), testing.bn_oracle(inputs))
    sliced = dict(inputs, grad_out=inputs["grad_out"][:, :, ::2], input=inputs["input"][:, :, ::2])
    assert_matches(ascend_ops.batch_norm_reduce_backward(**sliced), testing.bn_oracle(sliced))


def test_weight_does_not_enter_the_math():
    inputs = testing.bn_inputs(BnCase((5, 4, 6)))
    a = ascend_ops.batch_norm_reduce_backward(**inputs)
    b = ascend_ops.batch_norm_reduce_backward(**dict(inputs, weight=None))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("shape", [(8, 32, 40, 40), (4096, 3), (2, 2, 70_000), (16, 600, 6, 6)])
def test_deterministic_across_runs_and_thread_counts(shape, channels_last, threads, cpu_path):
    inputs = testing.bn_inputs(BnCase(shape, channels_last=channels_last, seed=11))
    results = []
    for n in (1, 2, 1, 2):
        torch.set_num_threads(n)
        results.append(ascend_ops.batch_norm_reduce_backward(**inputs, impl="cpu"))
    for other in results[1:]:
        assert all(torch.equal(x, y) for x, y in zip(results[0], other))


def _cpu_flags() -> set[str]:
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_loops_build_auto_is_the_widest_this_cpu_runs(monkeypatch):
    from ascend_ops import _C

    for variable in ("ASCEND_OPS_CPU_PORTABLE", "ASCEND_OPS_CPU_GEMM", "ASCEND_OPS_CPU_BN_LOOPS"):
        monkeypatch.delenv(variable, raising=False)
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        widest = "avx512"
    elif {"avx2", "fma", "f16c"} <= flags:
        widest = "avx2"
    else:
        widest = "portable"
    assert _C.cpu_batch_norm_engine() == widest
    monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", "auto")
    assert _C.cpu_batch_norm_engine() == widest
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "portable")  # the general switch sends them too
    assert _C.cpu_batch_norm_engine() == "portable"


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_loops_build_switch_refuses_bad_values(monkeypatch):
    from ascend_ops import _C

    monkeypatch.delenv("ASCEND_OPS_CPU_GEMM", raising=False)
    monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", "sse")
    with pytest.raises(ValueError, match="ASCEND_OPS_CPU_BN_LOOPS must be one of auto, avx512, "
                                         "avx2, portable; got 'sse'"):
        _C.cpu_batch_norm_engine()
    inputs = testing.bn_inputs(BnCase((2, 3, 4), seed=1))
    with pytest.raises(ValueError, match="ASCEND_OPS_CPU_BN_LOOPS"):  # the op says so too
        ascend_ops.batch_norm_reduce_backward(**inputs, impl="cpu")
    if "avx512f" not in _cpu_flags():
        monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", "avx512")
        with pytest.raises(ValueError, match="asks for a build this CPU cannot run: it needs "
                                             "AVX512-F/BW/VL/DQ"):
            _C.cpu_batch_norm_engine()
    if {"avx2", "fma", "f16c"} <= _cpu_flags():
        monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", "avx2")
        monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "portable")
        with pytest.raises(ValueError, match="ASCEND_OPS_CPU_GEMM=portable asks for the portable "
                                             "loops but ASCEND_OPS_CPU_BN_LOOPS='avx2'"):
            _C.cpu_batch_norm_engine()
    monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", "portable")  # agreeing is fine
    assert _C.cpu_batch_norm_engine() == "portable"

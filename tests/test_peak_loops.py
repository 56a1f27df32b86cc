"""The instruction loops scripts/benchmark_gemm_peak.py measures GEMMs against
(op_plugin/csrc/cpu/gemm/peak_loops/peak_loops.h): which this CPU lists, that each runs, and the errors
for a loop it cannot run. Their speeds are the benchmark's business, not a test's."""

import pytest

from ascend_ops import _C

# each loop's flops per iteration: 12 register chains, 4 tiles of 16 x 16 x 32, or one K step
# of the own kernel the `_from_l1` loop mirrors (12 x 2 zmm, 4 tiles, 6 x 2 ymm accumulators)
FLOPS = {"vdpbf16ps_zmm": 12 * 64, "vdpbf16ps_zmm_from_l1": 24 * 64,
         "tdpbf16ps": 4 * 16 * 16 * 32 * 2, "tdpbf16ps_from_l1": 4 * 16 * 16 * 32 * 2,
         "vfmadd231ps_zmm": 12 * 32,
         "vfmadd231ps_ymm": 12 * 16, "vfmadd231ps_ymm_from_l1": 12 * 16}
ALL_LOOPS = set(FLOPS)


def test_the_listed_loops_are_known_ones_with_their_flops():
    loops = dict(_C.cpu_peak_loops())
    assert set(loops) <= ALL_LOOPS
    for name, flops in loops.items():
        assert flops == FLOPS[name], name


@pytest.mark.parametrize("name", ["vdpbf16ps_zmm", "tdpbf16ps", "vfmadd231ps_ymm"])
def test_a_kernel_loop_comes_with_its_twin_from_l1(name):
    # the twin is the register-only loop's ceiling for that kernel: never one alone
    loops = dict(_C.cpu_peak_loops())
    assert (name in loops) == (f"{name}_from_l1" in loops)


@pytest.mark.parametrize("name", sorted(ALL_LOOPS))
def test_every_listed_loop_runs(name):
    if name not in dict(_C.cpu_peak_loops()):
        pytest.skip(f"this CPU does not run {name}")
    assert _C.cpu_peak_loop_seconds(name, 0) >= 0
    assert _C.cpu_peak_loop_seconds(name, 1000) > 0


def test_an_unknown_loop_is_refused_by_name():
    with pytest.raises(ValueError, match=r"'instruction' must be one this CPU runs .*got 'vpdpbusd'"):
        _C.cpu_peak_loop_seconds("vpdpbusd", 10)


def test_a_negative_iteration_count_is_refused():
    loops = [name for name, _ in _C.cpu_peak_loops()]
    if not loops:
        pytest.skip("no peak loop runs on this CPU")
    with pytest.raises(ValueError, match="'iterations' must be >= 0, got -1"):
        _C.cpu_peak_loop_seconds(loops[0], -1)

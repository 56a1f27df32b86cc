"""The Ascend C kernels on the CPU simulator: the simulator's rules (one deliberately
wrong kernel per rule), the launcher, and the kernels on shapes that exercise tails,
multi-block splits, cross-core reduction and many or few cores."""

import pytest
import torch

import ascend_ops
from ascend_ops import _sim, testing
from ascend_ops.testing import BnCase, FlceCase

from conftest import assert_matches, clone_inputs

pytestmark = pytest.mark.skipif(_sim.load_error is not None, reason=str(_sim.load_error))

# Bug number in ascendc_kernels/sim/selftest/selftest_kernel.cpp -> the call and the
# words the simulator's message must contain.
RULES = {
    "ub_overflow": (1, "TPipe::InitBuffer", "UB overflow"),
    "unaligned_datacopy": (2, "DataCopy(GM->UB)", "not a positive multiple of 32 bytes"),
    "queue_beyond_depth": (3, "TQue::AllocTensor", "queue used beyond its depth"),
    "read_before_deque": (4, "Muls", "read before EnQue/DeQue"),
    "read_after_free": (5, "Muls", "after FreeTensor"),
    "alloc_without_free": (6, "kernel end", "unbalanced AllocTensor/FreeTensor"),
    "gm_out_of_bounds": (7, "DataCopy(GM->UB)", "exceed the GlobalTensor's 56 elements"),
    "count_beyond_operand": (8, "Muls", "exceed the operand's 64 elements"),
    "wait_without_set": (9, "WaitFlag", "no matching SetFlag"),
    "copy_out_before_deque": (10, "DataCopy(UB->GM)", "copied out before EnQue/DeQue"),
    "unaligned_ub_operand": (11, "Muls", "not 32-byte aligned"),
    "enqueue_on_full_queue": (12, "TQue::EnQue", "beyond its depth 1"),
    "padding_over_32_bytes": (13, "DataCopyPad(GM->UB)", "may not exceed 32 bytes"),
    "widening_cast_with_round_mode": (14, "Cast", "use CAST_NONE"),
    # A TBuf (no queue) handed between pipes without the flag the hand-over needs.
    "tbuf_missing_mte2_to_v": (15, "Muls", "the vector pipe reads UB bytes [1024, 1056) that MTE2 (copy-in) wrote, "
                                          "with no MTE2 -> V synchronisation"),
    "tbuf_missing_v_to_s": (16, "LocalTensor::GetValue", "the scalar unit reads UB bytes [1024, 1056) that the vector "
                                                         "pipe wrote, with no V -> S synchronisation"),
    "tbuf_missing_s_to_mte3": (17, "DataCopy(UB->GM)", "MTE3 (copy-out) reads UB bytes [1024, 1056) that the scalar "
                                                       "unit wrote, with no S -> MTE3 synchronisation"),
    "tbuf_missing_v_to_mte3": (18, "DataCopy(UB->GM)", "MTE3 (copy-out) reads UB bytes [1024, 1056) that the vector "
                                                       "pipe wrote, with no V -> MTE3 synchronisation"),
    "hard_coded_event_id": (19, "SetFlag", "eventID 0 of HardEvent::V_S was not taken from the pipe"),
    "bf16_arithmetic": (20, "Muls", "bfloat16_t operands: this instruction takes half or float"),
    "double_scalar_on_float_tensor": (21, "Muls", "scalarValue is double on a float tensor"),
    "partially_overlapping_operands": (22, "Muls", "partially overlap"),
    "reduce_sum_scratch_too_small": (23, "ReduceSum", "holds 4 elements; ReduceSum of 64 needs at least 8"),
    "event_id_allocated_and_never_released": (24, "kernel end", "AllocEventID without ReleaseEventID (HardEvent::V_S)"),
    "fetched_event_id_reused": (25, "SetFlag", "eventID 0 of HardEvent::V_S was not taken from the pipe"),
}


def test_selftest_kernel_runs_clean_without_a_bug():
    error, y = _sim.run_selftest_kernel(0, blocks=3)
    assert error is None
    assert torch.equal(y, torch.arange(3 * 64, dtype=torch.float32) * 2)


@pytest.mark.parametrize("rule", list(RULES))
def test_each_rule_stops_the_wrong_kernel(rule):
    bug, call, words = RULES[rule]
    error, _ = _sim.run_selftest_kernel(bug, blocks=3)
    assert error is not None, f"{rule}: the simulator let the wrong kernel run"
    # Named: the kernel, the block that misbehaved (only the last one does), the call.
    assert "kernel 'selftest_scale' block 2/3" in error, error
    assert f", {call}: " in error, error
    assert words in error, error


@pytest.mark.parametrize("blocks", [16, 48])
def test_syncall_is_a_barrier_across_block_threads(blocks):
    error, seen = _sim.run_selftest_syncall(blocks)
    assert error is None
    assert seen.tolist() == [(b + 1) % blocks + 1 for b in range(blocks)]


def test_syncall_without_the_mix_kernel_type_is_rejected():
    error, _ = _sim.run_selftest_syncall(4, kernel_type=False)
    assert error is not None and ", SyncAll: " in error, error
    assert "must declare KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)" in error


def test_syncall_with_more_blocks_than_cores_is_rejected():
    # One block more than the 910B's vector cores (48): it would run in a second round
    # while the first waits in SyncAll for it.
    cores = _sim.platform_910b().vectorCores
    assert _sim.run_selftest_syncall(cores)[0] is None
    error, _ = _sim.run_selftest_syncall(cores + 1)
    assert error is not None and ", SyncAll: " in error, error
    assert f"SyncAll with blockDim {cores + 1} > the {cores} vector cores" in error


def test_cast_to_half_saturates_like_the_hardware():
    x = torch.tensor([1e5, -1e5, 65504.0, 65520.0, 3e38, float("inf"), float("-inf"), 1.0] + [0.5] * 8)
    y = _sim.run_selftest_cast(x)
    # Finite values beyond float16's range become +-65504 (the hardware's default
    # saturation), not inf; inf stays inf; everything else rounds to nearest even.
    expected = [65504.0, -65504.0, 65504.0, 65504.0, 65504.0, float("inf"), float("-inf"), 1.0] + [0.5] * 8
    assert y.float().tolist() == expected


def test_a_block_that_skips_syncall_is_caught_instead_of_hanging():
    error, _ = _sim.run_selftest_syncall(4, skip_last=True)
    assert error is not None and "kernel 'selftest_syncall' block " in error and ", SyncAll: " in error
    assert "1 block(s) returned without reaching this SyncAll" in error


def _bn_sim(inputs, cores):
    return _sim.batch_norm_reduce_backward(*inputs.values(), vector_cores=cores)


@pytest.mark.parametrize("cores", [1, 3, 48, 200])
@pytest.mark.parametrize("shape", [
    (2, 3, 20_000),      # rows longer than a tile: column tiles with a tail
    (300, 5, 7),         # many short rows per tile, a partial last row tile
    (5, 600, 3),         # more channels than the 256 staged per copy-out
    (4099, 2),           # S = 1, more rows than DataCopyPad's 4095 blocks
    (1, 1, 1),
])
def test_batch_norm_kernel_on_any_core_count(shape, cores):
    inputs = testing.bn_inputs(BnCase(shape, torch.float32, seed=3))
    assert_matches(_bn_sim(inputs, cores), testing.bn_oracle(inputs), testing.bn_naive(inputs), str(shape))


@pytest.mark.parametrize("dtype,mean_dtype", [(torch.float16, torch.float16), (torch.bfloat16, torch.float32)])
def test_batch_norm_kernel_split_channels_in_half_dtypes(dtype, mean_dtype):
    # 2 channels on 48 cores: each channel's tiles are split over 24 cores and combined
    # through the workspace after SyncAll.
    inputs = testing.bn_inputs(BnCase((64, 2, 3000), dtype, mean_dtype, mean_offset=50.0, seed=4))
    ours = _bn_sim(inputs, 48)
    assert _sim.last_counters().block_dim == 48
    assert_matches(ours, testing.bn_oracle(inputs), testing.bn_naive(inputs))


HALF_AND_FLOAT = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("stat_dtype", HALF_AND_FLOAT)
@pytest.mark.parametrize("dtype", HALF_AND_FLOAT)
def test_batch_norm_kernel_reads_statistics_in_their_own_dtype(dtype, stat_dtype):
    # mean/invstd reach the kernel as float32, float16 or bfloat16 (no host cast); the sums
    # are float16 exactly when input and mean are float16. 300 channels on 48 cores and
    # 3 channels split over cores both read the statistics.
    for shape in [(6, 300, 7), (40, 3, 500)]:
        inputs = testing.bn_inputs(BnCase(shape, dtype, stat_dtype, mean_offset=3.0, seed=11))
        ours = _bn_sim(inputs, 48)
        expected_dtype = torch.float16 if (dtype, stat_dtype) == (torch.float16, torch.float16) else torch.float32
        assert all(o.dtype == expected_dtype for o in ours)
        assert_matches(ours, testing.bn_oracle(inputs), testing.bn_naive(inputs), f"{shape} {dtype} {stat_dtype}")


@pytest.mark.parametrize("flags", [(False, False, True), (False, True, False), (True, False, False)])
def test_batch_norm_kernel_leaves_outputs_not_asked_for_alone(flags):
    # Outputs not asked for are null: the launch registers no GM for them, so any write
    # there would stop it; the others are right.
    inputs = testing.bn_inputs(BnCase((8, 5, 40), seed=12))
    inputs.update(input_g=flags[0], weight_g=flags[1], bias_g=flags[2])
    ours = _bn_sim(inputs, 48)
    wanted = (flags[0], flags[0], flags[1], flags[2])
    assert [o is not None for o in ours] == list(wanted)
    assert_matches(ours, testing.bn_oracle(inputs))


def test_batch_norm_kernel_large_mean_does_not_cancel():
    case = BnCase((16, 3, 32, 32), torch.float32, torch.float32, mean_offset=1e4, seed=5)
    inputs = testing.bn_inputs(case)
    assert_matches(ascend_ops.batch_norm_reduce_backward(**inputs, impl="sim"), testing.bn_oracle(inputs))


def test_batch_norm_kernel_is_deterministic_with_cross_core_reduction():
    inputs = testing.bn_inputs(BnCase((32, 3, 4000), seed=8))
    runs = [_bn_sim(inputs, 48) for _ in range(3)]
    assert _sim.last_counters().block_dim == 48
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other))


@pytest.mark.parametrize("shape", [(8, 16, 28, 28), (16, 512, 7, 7), (2048, 64), (64, 3, 1000)])
def test_batch_norm_traffic_is_near_the_minimum(shape):
    # GM is counted in the 32-byte sectors each burst touches, so short strided copies
    # (one channel's 7x7 run, one element of a [N, C] row) would cost up to 8x.
    inputs = testing.bn_inputs(BnCase(shape, seed=2))
    _bn_sim(inputs, 0)
    counters = _sim.last_counters()
    c = shape[1]
    elements = inputs["input"].numel()
    minimum = 2 * elements * 4 + 2 * c * 4 + 4 * c * 4  # read dy, x, mean, invstd; write 4 sums
    assert minimum <= counters.gm_read_bytes + counters.gm_write_bytes <= 1.2 * minimum
    assert counters.ub_high_water <= _sim.platform_910b().ubBytes


def _flce_sim(inputs, **options):
    return _sim.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs), **options)


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("cores", [1, 5, 48])
def test_flce_kernel_row_chunks_and_core_counts(mode, cores):
    # A 5 KiB budget holds 4 rows of (4 + 2) x 211 bytes in memory-saving mode (12 rows of
    # 2 x 211 in high-performance mode): 7 (3) chunks, weight_grad accumulated in fp32.
    inputs = testing.flce_inputs(FlceCase(25, 24, 211, torch.float16, mode, "packed", torch.int32, seed=4))
    ours = _flce_sim(inputs, workspace_budget=5 * 1024, vector_cores=cores)
    assert _sim.last_counters().launches == (7 if mode == testing.MEMORY_SAVING else 3)
    assert_matches(ours, testing.flce_oracle(inputs), testing.flce_naive(inputs))


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_flce_kernel_rows_longer_than_a_tile(mode):
    # V = 40000 > 16256 columns per tile: each row takes 3 tiles, the last one a tail.
    inputs = testing.flce_inputs(FlceCase(3, 4, 40_000, torch.bfloat16, mode, "bool", torch.int64, seed=6))
    inputs["masked_target"][0] = 39_999  # the target in the tail tile
    inputs["masked_target"][1] = 16_256  # the first column of the second tile
    inputs["target_mask"][:2] = False
    assert_matches(_flce_sim(inputs), testing.flce_oracle(inputs), testing.flce_naive(inputs))


def test_flce_gemm_operands_are_read_as_often_as_the_tiling_says():
    bt, h, v = 40, 32, 300
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.float16, seed=2))
    budget = 12 * v * 6  # 12 rows per chunk: 4 chunks
    _flce_sim(inputs, workspace_budget=budget)
    counters = _sim.last_counters()
    chunks = 4
    assert counters.launches == chunks
    e = 2
    # Per chunk: logits GEMM reads x_c and w; the vector kernel reads logits, writes G;
    # input_grad GEMM reads G and w; weight_grad GEMM reads G and x_c (and the fp32
    # accumulator after the first chunk).
    gemm_reads = 2 * bt * h * e + 2 * chunks * v * h * e + 2 * bt * v * e + (chunks - 1) * v * h * 4
    # logits rows; grad, mask byte, target, max and sum: one 32-byte sector each per row.
    kernel_reads = bt * (-(-v * 4 // 32) + 1) * 32 + bt * 5 * 32
    assert counters.cube_flops == 3 * 2 * bt * h * v
    assert counters.gm_read_bytes <= gemm_reads + kernel_reads


def test_batch_norm_kernel_fills_the_ub_it_is_given():
    inputs = testing.bn_inputs(BnCase((4, 2, 50_000), seed=1))
    _bn_sim(inputs, 0)
    ub = _sim.platform_910b().ubBytes
    assert 0.9 * ub < _sim.last_counters().ub_high_water <= ub


def test_sim_is_listed_and_chosen_only_on_request():
    assert ascend_ops.available_impls()["sim"].available
    inputs = testing.bn_inputs(BnCase((2, 3, 4)))
    ascend_ops.batch_norm_reduce_backward(**inputs, impl="sim")
    assert _sim.last_counters().launches == 1


def test_flce_kernel_leaves_softmax_unchanged():
    inputs = testing.flce_inputs(FlceCase(9, 8, 50, mode=testing.HIGH_PERFORMANCE, seed=3))
    before = inputs["softmax"].clone()
    ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="sim")
    assert torch.equal(inputs["softmax"], before)


def test_the_ctypes_structs_match_the_library():
    assert _sim.layout_mismatches(_sim.library()) == []


def test_a_struct_changed_on_one_side_is_named():
    import ctypes

    class OldPlatform(ctypes.Structure):  # PlatformFacts before l2Bytes and the modelling facts
        _fields_ = [(name, ctypes.c_uint32) for name in
                    ("ubBytes", "blockBytes", "repeatBytes", "vectorCores", "aiCores")]

    class Renamed(ctypes.Structure):
        _fields_ = [("gm_bytes", ctypes.c_uint64)]

    problems = _sim.layout_mismatches(_sim.library(), {OldPlatform: "PlatformFacts", Renamed: "AsimCounters"})
    assert "PlatformFacts: 56 bytes in C, 20 in Python" in problems
    assert "AsimCounters.gm_bytes: missing in C, offset 0 in Python" in problems

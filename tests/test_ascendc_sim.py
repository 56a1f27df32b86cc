"""The Ascend C kernels on the CPU simulator: the simulator's rules (one deliberately
wrong kernel per rule), the launcher, and the kernels on shapes that exercise tails,
multi-block splits, cross-core reduction and many or few cores."""

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.sim import simulator as _sim
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
    # Rule B: QBUF_MAX_LEN = 64 buffers per InitBuffer and per TPipe (asc-devkit kernel_tpipe_impl.h).
    "init_buffer_num_beyond_64": (26, "TPipe::InitBuffer", "num 100 outside [1, QBUF_MAX_LEN = 64]"),
    "buffers_beyond_the_pipe_s_64": (27, "TPipe::InitBuffer", "manages 65 buffers, more than QBUF_MAX_LEN = 64"),
    # Rule C: each EnQue holds one of the 8 event IDs of its HardEvent until DeQue.
    "nine_tensors_enqueued_at_once": (28, "TQue::EnQue", "an event ID of HardEvent::MTE2_V, and all 8 are held"),
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


def test_gm_selftest_kernel_runs_clean_without_a_bug():
    # Scalar stores cleaned to GM, SyncAll, DMA reads of the neighbour's line: allowed.
    error, seen = _sim.run_selftest_gm(0, blocks=3)
    assert error is None, error
    assert seen.tolist() == [4.0, 6.0, 2.0]  # 2 x the neighbour's mark (b + 1)


# Bug number in ascendc_kernels/sim/selftest/selftest_gm_kernel.cpp -> the block and call
# that must be stopped (of 3 blocks) and words of the message.
GM_RULES = {
    # A: GlobalTensor::SetValue stays in the core's data cache until DataCacheCleanAndInvalid.
    "dma_reads_a_line_not_cleaned": (1, "block 1/3", "DataCopy(GM->UB)",
                                     "reads GM 'marks' bytes [128, 192) in the 64-byte data-cache line (its bytes "
                                     "[128, 192)) that block 2 wrote with GlobalTensor::SetValue and has not written "
                                     "back"),
    "dma_reads_its_own_line_not_cleaned": (4, "block 2/3", "DataCopy(GM->UB)",
                                           "reads GM 'marks' bytes [128, 192) in the 64-byte data-cache line (its "
                                           "bytes [128, 192)) that this core wrote with GlobalTensor::SetValue"),
    # E: the write-back of a dirty line carries all 64 bytes.
    "dma_writes_a_line_another_core_holds_dirty": (2, "block 0/3", "DataCopy(UB->GM)",
                                                   "writes GM 'out' bytes [0, 64) in the 64-byte data-cache line (its "
                                                   "bytes [0, 64)) that block 2 holds dirty in its data cache"),
}


@pytest.mark.parametrize("rule", list(GM_RULES))
def test_each_gm_rule_stops_the_wrong_kernel(rule):
    bug, core, call, words = GM_RULES[rule]
    error, _ = _sim.run_selftest_gm(bug, blocks=3)
    assert error is not None, f"{rule}: the simulator let the wrong kernel run"
    assert f"kernel 'selftest_gm' {core}, {call}: " in error, error
    assert words in error, error


def test_two_blocks_writing_the_same_output_bytes_is_a_race():
    # D: outputs are race-checked like the workspace; whichever write comes second is stopped.
    error, _ = _sim.run_selftest_gm(3, blocks=3)
    assert error is not None, "the simulator let two blocks write the same output bytes"
    assert "DataCopy(UB->GM): data race on GM 'out' bytes [" in error, error
    assert "block 0 (MTE3) wrote them" in error or "block 2 (MTE3) wrote them" in error, error


def test_order_dependent_atomic_adds_are_caught_by_the_determinism_check():
    # F: three AICs atomically add different products into one block with nothing ordering
    # them; the two runs of the check apply the adds in opposite orders.
    assert _sim.run_selftest_mix(43, blocks=3)[0] is None  # one run alone passes
    error, _, _ = _sim.run_selftest_mix(43, blocks=3, check_determinism=True)
    assert error is not None, "the order-dependent sum went unnoticed"
    assert "kernel 'selftest_mix' is not deterministic: GM 'y' differs between two runs" in error, error
    # The clean kernel is deterministic under the same check.
    assert _sim.run_selftest_mix(0, blocks=3, check_determinism=True)[0] is None


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


# Bug number in ascendc_kernels/sim/selftest/selftest_mix_kernel.cpp -> the core that
# misbehaves (on the last of 2 AI cores), the call, and words the message must contain.
MIX_RULES = {
    "matmul_on_a_vector_core": (1, "AIV 3/4", "Matmul::Init", "runs on the cube core"),
    "l0a_overflow": (2, "AIC 1/2", "REGIST_MATMUL_OBJ", "L0A overflow"),
    "l0b_overflow": (3, "AIC 1/2", "REGIST_MATMUL_OBJ", "L0B overflow"),
    "l0c_overflow": (4, "AIC 1/2", "REGIST_MATMUL_OBJ", "L0C overflow"),
    "l1_overflow": (5, "AIC 1/2", "REGIST_MATMUL_OBJ", "L1 overflow"),
    "base_block_off_the_fractal": (6, "AIC 1/2", "REGIST_MATMUL_OBJ", "16-row fractal"),
    "base_k_off_the_fractal": (7, "AIC 1/2", "REGIST_MATMUL_OBJ", "multiple of 32 bytes"),
    "transpose_not_declared": (8, "AIC 1/2", "Matmul::SetTensorA", "without ISTRANS"),
    "single_shape_beyond_tiling": (9, "AIC 1/2", "Matmul::SetSingleShape", "exceeds the tiling's singleCore"),
    "iterate_without_operand": (10, "AIC 1/2", "Matmul::IterateAll", "must be called before Iterate"),
    "flag_set_on_the_scalar_pipe": (11, "AIC 1/2", "CrossCoreSetFlag", "PIPE_S: only Atlas 350"),
    "regist_after_init_buffer": (12, "AIC 1/2", "REGIST_MATMUL_OBJ", "after TPipe::InitBuffer"),
    "more_than_four_matmuls": (13, "AIC 1/2", "REGIST_MATMUL_OBJ", "more than 4 Matmul objects"),
    "c_beyond_its_tensor": (14, "AIC 1/2", "Matmul::IterateAll", "beyond its GlobalTensor's 512"),
    "wait_for_a_flag_never_set": (15, "AIV ", "CrossCoreWaitFlag", "none can proceed"),
    "aic_waits_for_one_aiv_only": (16, "AIC 1/2", "CrossCoreWaitFlag", "none can proceed"),
    "flag_left_set_at_kernel_end": (17, "AI core 1", "kernel end", "flag 3 set for AIV 2 was never waited for"),
    "flag_id_out_of_range": (18, "AIC 1/2", "CrossCoreSetFlag", "flagId 11 outside [0, 10]"),
    "kernel_data_in_the_system_workspace": (19, "AIC 1/2", "GlobalTensor::SetGlobalBuffer", "GetUserWorkspace"),
    "syncall_on_the_cube_core": (20, "AIC 1/2", "SyncAll", "called on a cube core"),
    "mix_kernel_launched_on_vector_cores": (21, "block ", "KERNEL_TASK_TYPE_DEFAULT", "launched on vector cores only"),
    "mode_1_flag_on_the_cube_core": (22, "AIC 1/2", "CrossCoreSetFlag", "mode 1 synchronises the two AIVs"),
    # Whichever of the two comes second is stopped: the AIV reading, or the AIC storing.
    "read_before_the_flag_is_a_data_race": (23, "A", None, "data race on GM 'user workspace'"),
    "matmul_used_before_registration": (24, "AIC 1/2", "Matmul::SetOrgShape", "before Init or REGIST_MATMUL_OBJ"),
    "operand_beyond_its_tensor": (25, "AIC 1/2", "Matmul::IterateAll", "beyond its GlobalTensor's 512"),
    "get_tensor_c_before_iterate": (26, "AIC 1/2", "Matmul::GetTensorC", "without a block from Iterate"),
    "cube_pipe_wait_without_set": (27, "AIC 1/2", "WaitFlag", "WaitFlag with no matching SetFlag"),
    # 16 sets of one flag before any wait: A2/A3 counters hold 15.
    "flag_counter_past_15": (29, "AIC 1/2", "CrossCoreSetFlag", "the hardware counts at most 15"),
    "mode_0_flag_not_set_by_every_core": (31, "AIV ", "CrossCoreWaitFlag", "none can proceed"),
    # The flag is issued on MTE2, which the fixpipe's C stores are not ordered before.
    "flag_on_a_pipe_that_does_not_publish_the_data": (32, "AIV ", "DataCopy(GM->UB)",
                                                      "AIC 1 (FIX) wrote them and this core reads them"),
    "tiling_without_its_l1_size": (33, "AIC 1/2", "REGIST_MATMUL_OBJ", "shareL1Size 0 must cover"),
    "vector_pipe_flag_on_the_cube_core": (34, "AIC 1/2", "CrossCoreSetFlag", "not a pipe of the cube core"),
    "tiling_without_its_l0c_size": (35, "AIC 1/2", "REGIST_MATMUL_OBJ", "shareL0CSize 0 must cover one L0C block"),
    "tiling_k_steps_not_multiples": (36, "AIC 1/2", "REGIST_MATMUL_OBJ", "one must be a multiple of the other"),
    "tiling_depth_not_whole_l1_fills": (37, "AIC 1/2", "REGIST_MATMUL_OBJ", "must be 1 or 2 L1 fills"),
    "batch_tiling_on_a_plain_matmul": (38, "AIC 1/2", "REGIST_MATMUL_OBJ", "batch matmul and those features"),
    # Two objects on one TPipe share L1/L0C from one address (kernel_tpipe_base.h): the
    # second may load only after the first's End().
    "second_matmul_before_the_first_s_end": (39, "AIC 1/2", "Matmul::IterateAll",
                                             "Matmul object 2 loads L1 and L0C while object 1 has not called "
                                             "End(): every Matmul object on one TPipe starts at the same L1 and "
                                             "L0C address"),
    # On the device GetUserWorkspace returns the workspace + RESERVED_WORKSPACE (16 MiB).
    "system_workspace_not_reserved_workspace": (41, "A", "GetUserWorkspace",
                                                "the host reserved 4096 bytes of system workspace"),
    "user_workspace_of_another_pointer": (42, "A", "GetUserWorkspace", "the argument is not the launch's workspace"),
}


def _assert_mix_result(y, a, b, blocks):
    expected = 2 * (a.double() @ b.double().T)  # half products are exact; fp32 sums of 32 terms
    assert torch.allclose(y.double(), expected.expand(blocks, 32, 32), rtol=1e-6, atol=1e-5)


def test_mix_selftest_kernel_runs_clean_without_a_bug():
    # 3 AI cores: IterateAll on core 1, Iterate + GetTensorC on cores 0 and 2; mode-2 flags
    # AIC -> AIVs, a mode-1 meeting of the two AIVs, mode-0 meetings of all AIVs and all AICs.
    error, y, (a, b) = _sim.run_selftest_mix(0, blocks=3)
    assert error is None, error
    _assert_mix_result(y, a, b, 3)


def test_mode_0_needs_every_core_of_its_kind_resident():
    # 25 AI cores: 25 AICs (and 50 AIVs) meet with mode-0 flags, more than the 910B holds.
    ai_cores = _sim.platform_910b().aiCores
    assert _sim.run_selftest_mix(0, blocks=ai_cores)[0] is None
    error, _, _ = _sim.run_selftest_mix(0, blocks=ai_cores + 1)
    assert error is not None and ", CrossCoreSetFlag: mode 0 synchronises all " in error, error
    assert "cores of the launch, more than the chip's" in error, error


def test_a_flag_counter_holds_exactly_15_pending_sets():
    # The same kernel as flag_counter_past_15 with one set fewer runs clean.
    error, y, (a, b) = _sim.run_selftest_mix(30, blocks=2)
    assert error is None, error
    _assert_mix_result(y, a, b, 2)


# The KFC self-test kernel (selftest_kfc_kernel.cpp, bug numbers from 100): REGIST_MATMUL_OBJ
# without ASCENDC_CUBE_ONLY makes the AIC a server for Matmul calls issued by the AIVs.
KFC = 100


def test_matmul_issued_by_the_vector_cores_through_kfc_runs():
    error, y, (a, b) = _sim.run_selftest_mix(KFC, blocks=3)
    assert error is None, error
    _assert_mix_result(y, a, b, 3)


def test_cube_side_matmul_under_kfc_is_reported_as_a_hang():
    # The shape the FLCE kernel had: REGIST_MATMUL_OBJ and the Matmul calls on the AIC, the
    # AIVs waiting for its flag. On the device the AIC would serve clients that never come.
    error, _, _ = _sim.run_selftest_mix(KFC + 1, blocks=2)
    assert error is not None and "kernel 'selftest_kfc'" in error, error
    assert "none can proceed (the device would hang)" in error, error
    assert "REGIST_MATMUL_OBJ as a KFC server" in error, error
    assert "CrossCoreWaitFlag(0)" in error, error


def test_kfc_needs_the_system_workspace():
    error, _, _ = _sim.run_selftest_mix(KFC + 2, blocks=2)
    assert error is not None and "kernel 'selftest_kfc' A" in error, error
    assert ", REGIST_MATMUL_OBJ: " in error and "needs the system workspace" in error, error


def test_syncall_in_a_mix_launch_counts_two_vector_cores_per_ai_core():
    # A MIX 1:2 launch's blockDim counts AI cores: SyncAll<true> waits for 2 x blockDim
    # AIVs, so 24 AI cores fill the 910B's 48 vector cores and 25 would hang.
    ai_cores = _sim.platform_910b().aiCores
    error, y, (a, b) = _sim.run_selftest_mix(28, blocks=ai_cores)
    assert error is None, error
    error, _, _ = _sim.run_selftest_mix(28, blocks=ai_cores + 1)
    assert error is not None and ", SyncAll: " in error, error
    assert f"SyncAll with blockDim {ai_cores + 1} ({2 * ai_cores + 2} vector cores) > the {2 * ai_cores} vector" in error


def test_a_second_matmul_after_the_first_s_end_runs_clean():
    # The allowed form of the shared-L1 rule's violation: End() between the objects.
    error, y, (a, b) = _sim.run_selftest_mix(40, blocks=2)
    assert error is None, error
    _assert_mix_result(y, a, b, 2)


@pytest.mark.parametrize("rule", list(MIX_RULES))
def test_each_mix_rule_stops_the_wrong_kernel(rule):
    bug, core, call, words = MIX_RULES[rule]
    error, _, _ = _sim.run_selftest_mix(bug, blocks=2)
    assert error is not None, f"{rule}: the simulator let the wrong kernel run"
    assert f"kernel 'selftest_mix' {core}" in error, error
    assert call is None or f", {call}: " in error, error
    assert words in error, error


FLCE_SHAPES = [
    (300, 24, 611),   # 3 row blocks (the last 44 rows), 3 vocabulary blocks (the last 99 columns)
    (1, 40, 257),     # one row; a 1-column vocabulary tail
    (129, 3, 256),    # a 1-row tail; V exactly one block
    (300, 512, 611),  # memory-saving: one 3 x 3 window on 1, 4 and 24 cores alike
    (1100, 8, 2100),  # memory-saving: many windows (H = 8 keeps them small), the last ones cut
]


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("shape", FLCE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_flce_kernel_is_bitwise_deterministic_on_any_cube_core_count(shape, mode):
    # Each run twice with opposite thread-start orders (check_determinism) on 1, 4 and 24
    # cube cores: every output element is summed in one order whatever the schedule, so
    # runs whose tilings have the same windows (memory-saving; the windows follow H, the L2
    # and, for small H, the chip's cores through the workspace cap) agree bit for bit.
    bt, h, v = shape
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.float16, mode, "packed", torch.int32, seed=4))
    runs = {}
    for cores in (1, 4, 24):
        ours = _flce_sim(inputs, ai_cores=cores, check_determinism=True)
        counters = _sim.last_counters()
        t = _sim.flce_tiling_data(_sim.flce_tiling_func(bt, h, v, torch.float16, mode == testing.MEMORY_SAVING,
                                                        False, cores))
        assert counters.launches == 1 and counters.cube_cores == counters.block_dim == t.cubeCores <= cores
        assert_matches(ours, testing.flce_oracle(inputs), testing.flce_naive(inputs))
        runs.setdefault((t.windowRowBlocks, t.windowColBlocks), []).append(ours)
    for same in runs.values():
        assert all(torch.equal(a, b) for other in same[1:] for a, b in zip(same[0], other))
    if mode == testing.HIGH_PERFORMANCE or h >= 512:
        assert len(runs) == 1  # one tiling shape on every core count: all three runs agree


def test_flce_memory_saving_windows_of_the_test_shapes():
    one = _sim.flce_tiling_data(_sim.flce_tiling_func(300, 512, 611, torch.float16, True, False, 1))
    assert (one.windowRowBlocks, one.windowColBlocks, one.windows) == (3, 3, 1)
    many = _sim.flce_tiling_data(_sim.flce_tiling_func(1100, 8, 2100, torch.float16, True, False))
    assert many.windowRows > 1 and many.windowCols > 1


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_flce_kernel_targets_at_vocabulary_block_edges(mode):
    # V = 1000: blocks of 256 columns, the last one 232 wide; targets on block edges.
    inputs = testing.flce_inputs(FlceCase(6, 16, 1000, torch.bfloat16, mode, "bool", torch.int64, seed=6))
    inputs["masked_target"][:6] = torch.tensor([999, 256, 255, 0, 768, 767])
    inputs["target_mask"][:6] = False
    assert_matches(_flce_sim(inputs, ai_cores=3), testing.flce_oracle(inputs), testing.flce_naive(inputs))


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("bad", [-1, 50, 1 << 40])
def test_flce_kernel_reports_an_unmasked_target_outside_the_vocabulary(mode, bad):
    # Straight to the simulator (ascend_ops' own check would raise first): the kernel
    # computes the row as masked and reports it; the host raises ValueError naming it, as
    # the CPU path does (SPEC §1). Masked rows' targets are never looked at.
    inputs = testing.flce_inputs(FlceCase(40, 8, 50, torch.bfloat16, mode, "bool", torch.int64, seed=9))
    inputs["target_mask"][:] = False
    inputs["target_mask"][3] = True
    inputs["masked_target"][3] = 1 << 40  # masked: ignored
    inputs["masked_target"][17] = bad
    inputs["masked_target"][30] = bad
    with pytest.raises(ValueError, match=rf"masked_target\[17\] = {bad} is outside \[0, 50\) on a row that is "
                                         r"not masked"):
        _flce_sim(inputs, ai_cores=4)
    inputs["masked_target"][17] = inputs["masked_target"][30] = 7
    _flce_sim(inputs, ai_cores=4)


def test_flce_high_performance_mode_writes_g_over_the_softmax():
    # Each row of G in the first half of its own softmax row (row pitch 2V halves), as the
    # vector stage computes it: cast((softmax - onehot) * grad).
    bt, v = 37, 90
    inputs = testing.flce_inputs(FlceCase(bt, 8, v, torch.bfloat16, testing.HIGH_PERFORMANCE, "bool", torch.int64,
                                          seed=5))
    softmax = inputs["softmax"].clone()
    p = softmax.clone()
    rows = torch.nonzero(~inputs["target_mask"]).flatten()
    p[rows, inputs["masked_target"][rows]] -= 1
    expected = (p * inputs["grad"][:, None]).to(torch.bfloat16)
    _sim.fused_linear_cross_entropy_loss_grad(**dict(inputs, softmax=softmax))
    assert torch.equal(softmax.view(torch.bfloat16).view(bt, 2 * v)[:, :v], expected)


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("shape,cores", [((300, 40, 1111), 4), ((1100, 24, 2100), 24), ((129, 3, 256), 1)])
def test_flce_cost_model_walks_what_the_kernel_does(shape, cores, mode):
    # The cost model (sim/host/flce_model.cpp) walks the kernel's order of work without
    # computing anything: its cube work, busiest core, GM traffic and vector repeats must be
    # the simulator's counts of the same launch.
    bt, h, v = shape
    ms = mode == testing.MEMORY_SAVING
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.bfloat16, mode, "packed", torch.int64, seed=3,
                                          masked_fraction=0.0))
    _flce_sim(inputs, ai_cores=cores)
    c = _sim.last_counters()
    m = _sim.flce_model(bt, h, v, torch.bfloat16, ms, ai_cores=cores)
    assert m.cube_flops == c.cube_flops == (3 if ms else 2) * 2 * bt * h * v
    assert m.l2_read_bytes == c.gm_read_bytes
    assert m.l2_write_bytes == c.gm_write_bytes
    assert m.vector_repeats == c.vector_repeats
    assert 1.0 <= m.modelled_s / m.roofline_s


def _options_for(bt, v, ms):
    g = torch.Generator().manual_seed(7)
    return _sim.FlceOptions(torch.rand(bt, generator=g) + 0.5, torch.rand(bt, generator=g) + 0.5,
                            torch.rand(bt, generator=g) / v, torch.randn(v, generator=g) if ms else None,
                            torch.rand(v, generator=g) + 0.25, 0.7, 5.0 if ms else 0.0)


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("shape,cores", [((300, 40, 1111), 4), ((129, 24, 10001), 2)])
def test_flce_cost_model_walks_the_options_launch(shape, cores, mode):
    # The loss options' launch (tiling key + 8): per-row alpha, beta, gamma; bias and class
    # weights once per task (memory-saving) or per chunk and core (high-performance: V =
    # 10001 is two chunks with class weights); the options' vector instructions.
    bt, h, v = shape
    ms = mode == testing.MEMORY_SAVING
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.bfloat16, mode, "packed", torch.int64, seed=3,
                                          masked_fraction=0.0))
    options = _options_for(bt, v, ms)
    _sim.fused_linear_cross_entropy_loss_grad(**inputs, ai_cores=cores, options=options)
    c = _sim.last_counters()
    m = _sim.flce_model(bt, h, v, torch.bfloat16, ms, ai_cores=cores, options=options)
    plain = _sim.flce_model(bt, h, v, torch.bfloat16, ms, ai_cores=cores)
    assert m.cube_flops == c.cube_flops
    assert (m.l2_read_bytes, m.l2_write_bytes, m.vector_repeats) == (c.gm_read_bytes, c.gm_write_bytes,
                                                                      c.vector_repeats)
    assert m.vector_repeats > plain.vector_repeats and m.l2_read_bytes > plain.l2_read_bytes


def test_flce_cost_model_charges_each_call_its_fill_and_drain():
    # Every call at this shape is a whole 128 x 256 tile: its drain is 128 KiB of fp32 at
    # the fixpipe's rate, its first fill stepKa (stepKb) base blocks of A (B) along K at the
    # ND fill rate plus one slice into L0, all from the tilings CANN's library returned.
    bt, h, v = 256, 256, 1024
    d = _sim.flce_tiling_data(_sim.flce_tiling_func(bt, h, v, torch.bfloat16, True, False))
    for end in _sim.RATE_ENDS:
        r = _sim.chip_rates(end)
        m = _sim.flce_model(bt, h, v, torch.bfloat16, True, rates=end)
        logits_calls = (bt // 128) * (v // 256)
        tile_calls = m.calls - logits_calls
        assert m.drain_s == pytest.approx(m.calls * 128 * 256 * 4 / (r.drainBytesPerCycle * r.clockHz), rel=1e-12)

        def fill(mm, m_rows, n_cols, k):
            base_k = mm.baseK
            ka, kb = min(k, mm.stepKa * base_k), min(k, mm.stepKb * base_k)
            nd = r.ndFillBytesPerCycle * r.clockHz
            return (m_rows * ka * 2 + n_cols * kb * 2) / nd + (m_rows + n_cols) * min(k, base_k) * 2 / (
                r.l1ToL0BytesPerCycle * r.clockHz)

        k_input = min(d.windowColBlocks * 256, v)  # a tile's K: the window's columns, or rows
        k_weight = min(d.windowRowBlocks * 128, bt)
        input_tiles = (bt // 128) * (h // 256) * d.windowCols
        weight_tiles = (v // 128) * (h // 256) * d.windowRows
        assert tile_calls == input_tiles + weight_tiles
        expected = (logits_calls * fill(d.logitsMm, 128, 256, h) + input_tiles * fill(d.inputGradMm, 128, 256, k_input)
                    + weight_tiles * fill(d.weightGradMm, 128, 256, k_weight))
        assert m.fill_s == pytest.approx(expected, rel=1e-12)
        assert m.mmad_s == pytest.approx(m.cube_flops / (2 * 4096 * r.clockHz), rel=1e-12)  # whole fractals


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_flce_models_within_its_range_of_the_cube_roofline_with_several_windows(mode):
    # A shape that takes a second to model and has what the training shapes have (several
    # window rows and columns, all 24 cores busy). At the fast end of the rates the calls'
    # drains and fills are most of what is left (within 1.25x); at the slow end the ND
    # fills (69 B a cycle against the 96 the 128 x 256 mmads use) hold the cube back, which
    # NZ operands would undo. scripts/sim_report.py models the training shapes (docs/npu.md).
    ms = mode == testing.MEMORY_SAVING
    fast = _sim.flce_model(2048, 2048, 8192, torch.bfloat16, ms, rates="fast")
    slow = _sim.flce_model(2048, 2048, 8192, torch.bfloat16, ms, rates="slow")
    nz = _sim.flce_model(2048, 2048, 8192, torch.bfloat16, ms, rates="slow", layouts="every operand in NZ")
    assert fast.cube_flops == slow.cube_flops == (3 if ms else 2) * 2 * 2048 * 2048 * 8192
    assert fast.roofline_s <= fast.modelled_s <= 1.25 * fast.roofline_s
    assert fast.operand_wait_s == 0 < slow.operand_wait_s and nz.operand_wait_s == 0
    assert fast.modelled_s / fast.roofline_s < nz.modelled_s / nz.roofline_s < slow.modelled_s / slow.roofline_s


@pytest.mark.parametrize("h", [256, 2048])
def test_flce_cost_model_sees_no_atomic_contention(h):
    # Memory-saving mode adds later windows' tiles into the accumulators; within a step no
    # two cube cores add into one L2 line (64 or 512 bytes) once a row of H is whole lines.
    for line in (64, 512):
        m = _sim.flce_model(2100, h, 4200, torch.bfloat16, True, line_bytes=line)
        assert m.atomic_add_bytes > 0 and m.max_line_adders == 1, (line, m.max_line_adders)


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("shape", [(256, 64, 1024), (300, 40, 1111)], ids=["even", "vocabulary-tail"])
def test_flce_hbm_traffic_is_near_the_minimum_when_it_fits_in_l2(shape, mode):
    # Inputs and outputs are each touched (read from / written to HBM) about once; every
    # other access is an L2 hit (reported separately), the workspace stays in L2.
    bt, h, v = shape
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.bfloat16, mode, "packed", torch.int64, seed=3))
    _flce_sim(inputs)
    c = _sim.last_counters()
    minimum = 2 * (bt * h + v * h) * 2 + bt * 4 + -(-bt // 8) + bt * 8
    minimum += bt * 8 if mode == testing.MEMORY_SAVING else bt * v * 4
    # (A little under the minimum is possible: masked rows' targets are never read.)
    assert 0.95 * minimum <= c.touched_data_bytes <= 1.2 * minimum
    # No [BT, V] buffer in memory-saving mode: per cube core two fp32 logits blocks, two
    # window G buffers, the accumulators; in high-performance mode G is over the softmax.
    t = _sim.flce_tiling_data(_sim.flce_tiling_func(bt, h, v, torch.bfloat16, mode == testing.MEMORY_SAVING, True))
    if mode == testing.MEMORY_SAVING:
        assert c.touched_workspace_bytes <= t.cubeCores * 2 * 128 * 256 * 4 + 2 * t.gWindowBytes + (bt + v) * h * 4 + 512
    else:
        assert c.touched_workspace_bytes <= 2 * t.cubeCores * 8


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


@pytest.mark.parametrize("bt", [0, 5])
def test_flce_with_h_zero_launches_nothing(bt):
    inputs = testing.flce_inputs(FlceCase(bt, 0, 7, torch.float16, seed=1))
    input_grad, weight_grad = _flce_sim(inputs)
    assert input_grad.shape == (bt, 0) and weight_grad.shape == (7, 0)
    assert _sim.last_counters().launches == 0


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
    assert f"PlatformFacts: {ctypes.sizeof(_sim.PlatformFacts)} bytes in C, 20 in Python" in problems
    assert "AsimCounters.gm_bytes: missing in C, offset 0 in Python" in problems


# --- A2 field widths: the simulator fails where the device would silently truncate ---------

# Probe number in ascendc_kernels/sim/selftest/selftest_field_kernel.cpp -> what the message names.
FIELD_PROBES = {
    "nd2nz_src_d_value_of_a": (1, "Matmul A load: Nd2NzParams.srcDValue = 65552"),
    "nd2nz_src_d_value_of_a_transposed": (2, "Matmul A (transposed) load: Nd2NzParams.srcDValue = 65552"),
    "nd2nz_src_d_value_of_b": (3, "Matmul B load: Nd2NzParams.srcDValue = 65552"),
    "nd2nz_src_d_value_of_b_transposed": (4, "Matmul B (transposed) load: Nd2NzParams.srcDValue = 65552"),
    "matmul_org_shape_is_int": (5, "orgM = 2147483648 does not fit the int CANN's Matmul API takes"),
    "data_copy_ext_block_count": (21, "DataCopyExtParams.blockCount = 65537"),
    "data_copy_ext_block_len": (22, "DataCopyExtParams.blockLen = 4294967360"),
    "data_copy_ext_src_stride": (23, "DataCopyExtParams.srcStride = 4294967296"),
    "data_copy_ext_dst_stride": (24, "DataCopyExtParams.dstStride = 4294967296"),
    "data_copy_block_len": (25, "past DataCopyParams.blockLen's 16 bits"),
}


@pytest.mark.parametrize("field", FIELD_PROBES)
def test_each_a2_field_width_stops_a_probe_that_would_truncate(field):
    probe, words = FIELD_PROBES[field]
    error, _, _ = _sim.run_selftest_fields(probe)
    assert error is not None and words in error, error
    if probe <= 4:  # the message says what the device would do and how to avoid it
        assert "would copy with 16 instead" in error and "kernel_struct_data_copy.h:300" in error, error
        assert "GetNormalConfig(true)" in error, error


@pytest.mark.parametrize("operand", [1, 2, 3, 4], ids=["a", "a_transposed", "b", "b_transposed"])
def test_intrinsics_check_takes_a_pitch_past_16_bits_and_computes_the_right_product(operand):
    # The same operands with GetNormalConfig(true): the library copies each fill row by row.
    error, c, expected = _sim.run_selftest_fields(operand + 10)
    assert error is None, error
    torch.testing.assert_close(c, expected, rtol=1e-5, atol=1e-4)
    assert c.abs().max() > 1


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("v", [65536, 131072])
def test_flce_kernel_at_a_vocabulary_past_the_16_bit_pitch(v, mode):
    # High-performance mode's G lies over the softmax at row pitch 2V, past 65535 here: its
    # GEMMs copy those fills row by row (intrinsicsCheck); memory-saving mode's pitches stay
    # H and a window's columns. Small BT and H keep the run short; targets in the last
    # vocabulary block and on the 32768 / 65536 boundaries.
    bt, h = 5, 16
    inputs = testing.flce_inputs(FlceCase(bt, h, v, torch.bfloat16, mode, "bool", torch.int64, seed=12))
    inputs["target_mask"][:] = False
    inputs["masked_target"][:] = torch.tensor([v - 1, 32768, 65535, 0, v // 2 + 1])
    assert_matches(_flce_sim(inputs, ai_cores=4), testing.flce_oracle(inputs), testing.flce_naive(inputs))


# --- Rule G: the vector pipe's own order (auto-sync off) ------------------------------------

VECTOR_HAZARDS = {  # order -> what the simulator names
    "raw": "the vector pipe's Muls reads UB bytes [0, 256) that its earlier Adds wrote, with no PipeBarrier<PIPE_V>",
    "war": "the vector pipe's Duplicate writes UB bytes [0, 256) that its earlier Muls reads",
    "waw": "the vector pipe's Duplicate writes UB bytes [0, 256) that its earlier Duplicate wrote",
}


@pytest.mark.parametrize("order", VECTOR_HAZARDS)
def test_a_same_pipe_hazard_without_a_barrier_fails_with_auto_sync_off(order):
    error, _ = _sim.run_selftest_vector_order(order)
    assert error is not None and VECTOR_HAZARDS[order] in error, error
    # Built with bisheng's auto-sync the compiler inserts the barrier: the same kernel runs.
    error, y = _sim.run_selftest_vector_order(order, auto_sync=True)
    assert error is None, error
    torch.testing.assert_close(y, (torch.arange(64.0) + 1) * 2, rtol=0, atol=0)


@pytest.mark.parametrize("order", ["barrier", "through_scalar", "vector_flag"])
def test_a_same_pipe_dependency_ordered_by_a_barrier_or_flags_runs_clean(order):
    # PipeBarrier<PIPE_V>, the V_S/S_V pair around a scalar access (CANN's ComputeV1 form)
    # and a V_V flag each order the Muls after the Adds.
    error, y = _sim.run_selftest_vector_order(order)
    assert error is None, error
    torch.testing.assert_close(y, (torch.arange(64.0) + 1) * 2, rtol=0, atol=0)

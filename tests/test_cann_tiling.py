"""Both ops' TilingFuncs (ascendc_kernels/*/op_host/*_def.cpp), as shipped, run on the host
against CANN 9.0.0's own host tiling library (asc-devkit, built by
../shared/tools/cann-matmul-tiling) through our TilingContext stand-in
(ascendc_kernels/cann_host). No port of the library's rules is checked here: every
TCubeTiling below is the library's answer, and impl="sim" runs the kernel with it. Each
refusal names what the call got wrong (the TilingFunc logs it, as a device build's would
go to CANN's log).

Without the tool the library is not built and these tests skip naming why; .ci/run sets
ASCEND_OPS_REQUIRE_CANN_TILING=1, which turns that skip into a failure.
"""

import ctypes
import itertools
import pathlib
import re

import pytest
import torch

from ascend_ops import testing
from ascend_ops.sim import cann_tiling as _cann_tiling
from ascend_ops.sim import simulator as _sim
from conftest import skip_without_cann_tiling

ROOT = pathlib.Path(__file__).resolve().parents[1]
SYS_WORKSPACE = 16 << 20  # GetLibApiWorkSpaceSize() on A2/A3 (asc-devkit WORK_SPACE_SIZE_910B)

GRID_H = (1, 8, 16, 100, 128, 240, 255, 256, 4096, 8192)
GRID_BT_V = ((1, 1), (7, 300), (1000, 5000), (8192, 32000), (65536, 152064))


@pytest.fixture(autouse=True)
def _needs_the_library():
    skip_without_cann_tiling()


def _tiling_func(bt, h, v, bf16, mode, target64=False, soc="Ascend910B", ai_cores=0):
    result = _cann_tiling.flce_tiling(bt, h, v, bf16=bf16, mode=mode, target64=target64, soc=soc,
                                      ai_cores=ai_cores)
    assert result.ok, (f"TilingFunc GRAPH_FAILED for BT={bt} H={h} V={v} bf16={bf16} mode={mode} on {soc}: "
                       f"{result.log.strip() or 'no library log'}")
    return result


def _fields(mm) -> dict:
    return {name: getattr(mm, name) for name in _sim.FLCE_MATMUL_FIELDS}


def _check_tiling(result, bt, h, v, bf16, mode, target64=False, ai_cores=24):
    """What the TilingFunc set, and its three Matmul tilings against their requests."""
    assert len(result.tiling) == ctypes.sizeof(_sim.FlceTilingData) == _cann_tiling.tiling_data_size()
    d = _sim.FlceTilingData.from_buffer_copy(result.tiling)
    assert (d.bt, d.h, d.v, d.rowBlocks, d.colBlocks, d.mode) == (bt, h, v, -(-bt // 128), -(-v // 256), mode)
    assert 1 <= result.block_dim == d.cubeCores <= ai_cores
    assert result.schedule_mode == 1  # batch mode: the cross-core flags need every core resident
    assert result.tiling_key == mode + 2 * bf16 + 4 * target64
    assert result.workspace_sizes == 1 and result.workspace_bytes == SYS_WORKSPACE + d.userWorkspaceBytes
    # Never more workspace than CANN's own kernel asks for at this shape on this chip (its
    # host tiling, cann_flce_workspace_bytes); at H = 1 one window's G outweighs its partials.
    cann = _cann_tiling.cann_flce_workspace_bytes(bt, h, v, mode, ai_cores)
    assert result.workspace_bytes <= cann + (64 << 10 if h == 1 else 0), (result.workspace_bytes, cann)
    h_block = -(-h // 16) * 16
    n, base_n = min(256, h), min(256, h_block)
    # The backward GEMMs' K: a window's vocabulary columns and rows (memory-saving), all of
    # V and BT (high-performance, where C is the output itself, in the input dtype).
    k_input = v if mode else min(d.windowColBlocks * 256, v)
    k_weight = bt if mode else min(d.windowRowBlocks * 128, bt)
    requests = {"logitsMm": (128, 256, h, 128, 256), "inputGradMm": (128, n, k_input, 128, base_n),
                "weightGradMm": (128, n, k_weight, 128, base_n)}
    for name, (m, n_, k, base_m, base_n) in requests.items():
        mm = _fields(getattr(d, name))
        what = f"{name} at BT={bt} H={h} V={v}: {mm}"
        assert (mm["usedCoreNum"], mm["M"], mm["N"], mm["Ka"], mm["Kb"]) == (1, m, n_, k, k), what
        assert (mm["singleCoreM"], mm["singleCoreN"], mm["singleCoreK"]) == (m, n_, k), what
        assert (mm["baseM"], mm["baseN"]) == (base_m, base_n), what  # the fixed split, clamped to the problem
        # What the simulator models (sim/src/matmul.cpp CheckCubeTiling): one block per load, M first.
        assert (mm["stepM"], mm["stepN"], mm["iterateOrder"], mm["isBias"]) == (1, 1, 0, 0), what
        l1 = (mm["depthA1"] * mm["baseM"] + mm["depthB1"] * mm["baseN"]) * mm["baseK"] * 2
        assert 0 < l1 <= mm["shareL1Size"] <= 524032, what  # PlatformAscendC's L1 on A2/A3
        assert mm["baseM"] * mm["baseK"] * 2 * mm["dbL0A"] <= 64 << 10, what
        assert mm["baseN"] * mm["baseK"] * 2 * mm["dbL0B"] <= 64 << 10, what
        assert mm["baseM"] * mm["baseN"] * 4 * mm["dbL0C"] <= 128 << 10, what
    return d


@pytest.mark.parametrize("soc", _cann_tiling.SOCS)
@pytest.mark.parametrize("h", GRID_H)
def test_the_tiling_func_succeeds_over_the_grid(h, soc):
    # Every request reaches GetTiling; any -1 fails the TilingFunc (GRAPH_FAILED) and this test.
    for (bt, v), bf16, mode in itertools.product(GRID_BT_V, (False, True), (0, 1)):
        result = _tiling_func(bt, h, v, bf16, mode, target64=bt % 2 == 0, soc=soc)
        _check_tiling(result, bt, h, v, bf16, mode, target64=bt % 2 == 0)


def _shapes_the_other_tests_use() -> set[tuple[int, int, int]]:
    """(BT, H, V) of every FLCE case in tests/ and scripts/: the shared matrix, the lists
    of shapes, and every FlceCase written out with literal sizes."""
    import sim_report
    import parity as parity_script
    from test_ascendc_sim import FLCE_SHAPES

    shapes = {(c.bt, c.h, c.v) for c in testing.flce_cases()}
    shapes |= {(c.bt, c.h, c.v) for c in parity_script.edge_flce_cases()}
    shapes |= set(FLCE_SHAPES) | set(sim_report.FLCE_SHAPES)  # the sim report's rows
    literal = re.compile(r"FlceCase\(\s*(\d+),\s*(\d+),\s*(\d+)")
    for path in list((ROOT / "tests").glob("*.py")) + list((ROOT / "scripts").glob("*.py")):
        shapes |= {tuple(map(int, m)) for m in literal.findall(path.read_text())}
    # BT = 0 or H = 0: the op is not called; H > 65535: refused by name (the parity edge
    # case; test_the_tiling_func_refuses_what_the_copies_cannot_take).
    return {s for s in shapes if s[0] > 0 and 0 < s[1] <= 65535}


@pytest.fixture(scope="module")
def _scripts_on_path():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    yield
    sys.path.remove(str(ROOT / "scripts"))


def test_the_tiling_func_succeeds_for_every_shape_the_other_tests_use(_scripts_on_path):
    shapes = _shapes_the_other_tests_use()
    assert len(shapes) > 30 and (203, 45, 1000) in shapes
    for (bt, h, v), bf16, mode in itertools.product(sorted(shapes), (False, True), (0, 1)):
        for soc in _cann_tiling.SOCS:
            _check_tiling(_tiling_func(bt, h, v, bf16, mode, soc=soc), bt, h, v, bf16, mode)


@pytest.mark.parametrize("cores", [1, 4, 24])
def test_the_tiling_func_launches_the_cores_the_chip_reports(cores):
    for mode in (0, 1):
        result = _tiling_func(1000, 64, 5000, True, mode, ai_cores=cores)
        assert _check_tiling(result, 1000, 64, 5000, True, mode, ai_cores=cores).cubeCores == cores


@pytest.mark.parametrize("shape", [(8192, 4096, 32000), (16384, 8192, 16000), (4096, 5120, 19008), (1000, 64, 5000)])
def test_the_workspace_is_within_cann_s_own_at_the_same_shape(shape):
    # Memory-saving: CANN keeps 2 x 24 x (128 x 256 + 384 x H) fp32 of per-core results
    # beside the accumulators, we keep two logits blocks per core and two window G buffers.
    # High-performance: CANN keeps its wsNum buffers of G in NZ, we write G over the softmax.
    for mode in (0, 1):
        ours = _tiling_func(*shape, True, mode).workspace_bytes
        cann = _cann_tiling.cann_flce_workspace_bytes(*shape, mode)
        assert ours < cann, (shape, mode, ours, cann)
    bt, h, v = 8192, 4096, 32000
    assert _cann_tiling.cann_flce_workspace_bytes(bt, h, v, 0) == (16 << 20) + 2 * 24 * (128 * 256 + 384 * h) * 4 + \
        (bt + v) * h * 4


def test_a3_tiles_as_a2():
    # PlatformAscendC maps Ascend910_93 to SocVersion::ASCEND910B (platform_ascendc.cpp:51).
    for h in GRID_H:
        a2 = _tiling_func(300, h, 611, True, 0, soc="Ascend910B")
        a3 = _tiling_func(300, h, 611, True, 0, soc="Ascend910_93")
        assert a2.tiling == a3.tiling and a2.workspace_bytes == a3.workspace_bytes


def test_the_library_decides_what_the_request_leaves_open():
    # Answers of CANN's library that our own reading of it would not predict: a fixed
    # baseK is a hint (lowered to 16 for K = 8), the L1 depths its own.
    d = _sim.FlceTilingData.from_buffer_copy(_tiling_func(100, 8, 300, True, 0).tiling)
    assert (d.logitsMm.baseK, d.logitsMm.depthA1, d.logitsMm.shareL1Size) == (16, 1, 12288)
    d = _sim.FlceTilingData.from_buffer_copy(_tiling_func(100, 256, 300, True, 0).tiling)
    assert (d.logitsMm.depthA1, d.logitsMm.stepKa, d.logitsMm.depthB1, d.logitsMm.stepKb) == (4, 4, 1, 1)


@pytest.mark.parametrize("bt,h", [(0, 64), (8, 0)])
def test_the_tiling_func_refuses_an_empty_problem(bt, h):
    # No block to launch: the adapter zero-fills the outputs without calling the op.
    assert not _cann_tiling.flce_tiling(bt, h, 300, bf16=True, mode=0).ok


@pytest.mark.parametrize("inputs", [0, 1, 2, 7, 5])
def test_the_tiling_func_refuses_anything_but_one_mode_s_inputs(inputs):
    assert not _cann_tiling.flce_tiling(16, 64, 300, bf16=True, mode=0, inputs=inputs).ok
    assert _cann_tiling.flce_tiling(16, 64, 300, bf16=True, mode=0, inputs=3).ok


@pytest.mark.parametrize("mode", [0, 1])
def test_the_tiling_func_refuses_what_the_copies_cannot_take(mode):
    # H is x's and w's row pitch in the Matmul's 16-bit ND->NZ srcDValue; high-performance
    # mode's G pitch is 2V, copied row by row at int32 offsets up to V = 2^20.
    assert _cann_tiling.flce_tiling(4, 65535, 300, bf16=True, mode=mode).ok
    assert not _cann_tiling.flce_tiling(4, 65536, 300, bf16=True, mode=mode).ok
    big_v = _cann_tiling.flce_tiling(4, 64, 1 << 20, bf16=True, mode=mode)
    assert big_v.ok, big_v.log
    d = _sim.FlceTilingData.from_buffer_copy(big_v.tiling)
    assert d.weightGradMm.baseK * d.weightGradMm.stepKa <= 1024 and d.inputGradMm.baseM <= 1024
    assert _cann_tiling.flce_tiling(4, 64, (1 << 20) + 1, bf16=True, mode=mode).ok == (mode == 0)


def test_the_tiling_func_refuses_label_smoothing():
    result = _cann_tiling.flce_tiling(16, 64, 300, bf16=True, mode=0, label_smoothing=0.1)
    assert not result.ok and result.refusal.startswith("label_smoothing must be 0.0"), result.log


# --- Malformed calls through the generated aclnn API: the TilingFunc is the only shape check
# between them and the kernel, which would read out of bounds. Each input's wrong shape is
# refused by name, with what was expected and what came.
BT, H, V = 37, 24, 300
OPTIONS = 8 | 16 | 32 | 64 | 128  # bias, class_weight, alpha, beta, gamma
FLCE_MALFORMED = {  # input -> (mode, a wrong shape, what the refusal says)
    "grad": (0, (BT + 1,), f"grad must be [BT] = [{BT}], got [{BT + 1}]"),
    "input": (0, (BT, H, 1), f"input must be 2-D [BT, H], got [{BT}, {H}, 1]"),
    "weight": (0, (V, H + 1), f"weight must be 2-D [V, H] with H = input.size(1) = {H}, got [{V}, {H + 1}]"),
    "target_mask": (0, (4,), f"target_mask must be bit-packed uint8 [n] with n >= ceil(BT / 8) = 5, got [4]"),
    "masked_target": (0, (BT, 1), f"masked_target must be [BT] = [{BT}], got [{BT}, 1]"),
    "logits_max": (0, (BT - 1,), f"logits_max must be [BT] = [{BT}], got [{BT - 1}]"),
    "sum_exp_logits": (0, (1, BT), f"sum_exp_logits must be [BT] = [{BT}], got [1, {BT}]"),
    "softmax": (1, (BT, V - 1), f"softmax must be [BT, V] = [{BT}, {V}], got [{BT}, {V - 1}]"),
    "bias": (0, (V - 1,), f"bias must be [V] = [{V}], got [{V - 1}]"),
    "class_weight": (1, (V, 1), f"class_weight must be [V] = [{V}], got [{V}, 1]"),
    "alpha": (0, (BT + 8,), f"alpha must be [BT] = [{BT}], got [{BT + 8}]"),
    "beta": (1, (), f"beta must be [BT] = [{BT}], got []"),
    "gamma": (0, (V,), f"gamma must be [BT] = [{BT}], got [{V}]"),
}


@pytest.mark.parametrize("name", FLCE_MALFORMED)
def test_the_flce_tiling_func_refuses_each_input_s_wrong_shape_by_name(name):
    mode, wrong, words = FLCE_MALFORMED[name]
    assert _cann_tiling.flce_tiling(BT, H, V, bf16=True, mode=mode, options=OPTIONS).ok  # the same call, well formed
    result = _cann_tiling.flce_tiling(BT, H, V, bf16=True, mode=mode, options=OPTIONS, shapes={name: wrong})
    assert not result.ok and result.refusal == words, result.log
    assert result.block_dim == 0 and result.tiling == b""  # nothing set for a launch


def test_a_target_mask_longer_than_needed_is_taken():
    # SPEC §1: at least ceil(BT / 8) bytes (the adapter may pass a padded mask).
    assert _cann_tiling.flce_tiling(BT, H, V, bf16=True, mode=0, shapes={"target_mask": (64,)}).ok


def test_impl_sim_raises_the_tiling_func_s_refusal_as_a_value_error():
    # impl="sim" runs the TilingFunc: its refusal reaches the caller by name (here a shape
    # the kernel cannot take, the only refusal a validated call can meet).
    with pytest.raises(ValueError, match=r"the op package refuses BT=4 H=65536 V=300: H \(input.size\(1\)\) = 65536"):
        _sim.flce_tiling_func(4, 65536, 300, torch.bfloat16, True, False)


BN_MALFORMED = {  # input -> (a wrong shape, what the refusal says); input is [6, 5, 7]
    "input": ((6,), "input must be [N, C, *] (at least 2-D), got [6]"),
    "grad_out": ((6, 5, 8), "grad_out must have input's shape [6, 5, 7], got [6, 5, 8]"),
    "mean": ((4,), "mean must be [C] = [5] (input.size(1)), got [4]"),
    "invstd": ((5, 1), "invstd must be [C] = [5] (input.size(1)), got [5, 1]"),
    "weight": ((6,), "weight must be [C] = [5] (input.size(1)), got [6]"),
}


@pytest.mark.parametrize("name", BN_MALFORMED)
def test_the_bn_tiling_func_refuses_each_input_s_wrong_shape_by_name(name):
    wrong, words = BN_MALFORMED[name]
    shapes = {name: wrong}
    if name == "input":  # grad_out follows input: the rank is what is wrong
        shapes["grad_out"] = wrong
    result = _cann_tiling.bn_tiling((6, 5, 7), shapes=shapes)
    assert not result.ok and result.refusal == words, result.log


@pytest.mark.parametrize("dtype,stat_dtype", [(0, 0), (1, 1), (2, 0), (1, 2)])
@pytest.mark.parametrize("shape", [(6, 5, 7), (3, 300), (2, 4, 0, 3), (0, 8, 2), (4, 3, 2, 2, 2)])
def test_the_bn_tiling_func_sets_the_plain_tiling_s_answer(shape, dtype, stat_dtype):
    # Well formed (weight given or not): the TilingFunc sets what the plain tiling gives for
    # the UB and cores PlatformAscendC reports (196352 bytes: 256 short of 192 KiB).
    import math

    for weight in ((shape[1],), None):
        result = _cann_tiling.bn_tiling(shape, dtype=dtype, stat_dtype=stat_dtype, shapes={"weight": weight})
        assert result.ok, result.log
        platform = _sim.platform_910b()
        platform.ubBytes = 196352
        plain = _sim.BnTiling()
        _sim.library().asim_batch_norm_reduce_backward_tiling(
            ctypes.c_uint64(shape[0]), ctypes.c_uint64(shape[1]), ctypes.c_uint64(math.prod(shape[2:])),
            ctypes.c_uint32(dtype), ctypes.c_uint32(stat_dtype), ctypes.byref(platform), ctypes.byref(plain))
        assert result.tiling == bytes(plain.data) and result.tiling_key == plain.tiling_key
        assert result.block_dim == plain.block_dim >= 1 and result.schedule_mode == 1
        assert result.workspace_bytes == SYS_WORKSPACE + plain.workspace_bytes



def test_an_unknown_soc_is_named():
    with pytest.raises(ValueError, match="unknown SoC 'Ascend310P'"):
        _cann_tiling.flce_tiling(16, 64, 300, bf16=True, mode=0, soc="Ascend310P")


def test_the_plain_tiling_leaves_the_matmul_tilings_to_the_tiling_func():
    # TileFusedLinearCrossEntropyLossGrad (what the TilingFunc starts from) has no port of
    # the library: its three TCubeTilings are zero until the TilingFunc fills them.
    plain = _sim.FlceTiling()
    _sim.library().asim_fused_linear_cross_entropy_loss_grad_tiling(
        ctypes.c_uint64(100), ctypes.c_uint64(64), ctypes.c_uint64(300), ctypes.c_uint32(2), ctypes.c_uint32(0),
        ctypes.c_int(1), ctypes.c_int(0), ctypes.byref(_sim.platform_910b()), ctypes.byref(plain))
    assert not plain.error
    for name in ("logitsMm", "inputGradMm", "weightGradMm"):
        assert set(_fields(getattr(plain.data, name)).values()) == {0}
    shipped = _sim.FlceTilingData.from_buffer_copy(_tiling_func(100, 64, 300, True, 0).tiling)
    for field, _ in _sim.FlceTilingData._fields_:  # everything else is the plain tiling's
        if not field.endswith("Mm"):
            assert getattr(shipped, field) == getattr(plain.data, field), field


def _sim_run(inputs, tiling):
    """The simulator's FLCE launch with a given TilingFunc result (raw tiling bytes)."""
    from conftest import clone_inputs

    x = clone_inputs(inputs)
    bt, h = x["input"].shape
    v = x["weight"].shape[0]
    ig, wg = torch.empty(bt, h, dtype=x["input"].dtype), torch.empty(v, h, dtype=x["input"].dtype)
    p = _sim._ptr
    args = _sim._FlceArgs(p(x["grad"]), p(x["input"]), p(x["weight"]), p(x["target_mask"]),
                          x["target_mask"].numel(), p(x["masked_target"]), p(x.get("logits_max")),
                          p(x.get("sum_exp_logits")), p(x.get("softmax")), p(ig), p(wg), bt, h, v,
                          2, x["target_mask"].dtype == torch.uint8, x["masked_target"].dtype == torch.int64, 0, 0,
                          _sim.NEW_SEED_PER_LAUNCH)
    data = _sim.FlceTilingData.from_buffer_copy(tiling.tiling)
    workspace = torch.empty(tiling.workspace_bytes, dtype=torch.uint8)
    status = _sim.library().asim_fused_linear_cross_entropy_loss_grad(
        ctypes.byref(args), ctypes.byref(data), tiling.tiling_key, tiling.block_dim, tiling.workspace_bytes,
        p(workspace), tiling.workspace_bytes)
    return None if status == 0 else _sim.library().asim_last_error().decode()


def test_the_simulator_runs_the_tiling_func_s_tiling():
    inputs = testing.flce_inputs(testing.FlceCase(40, 24, 300, torch.bfloat16, testing.MEMORY_SAVING, seed=5))
    tiling = _sim.flce_tiling_func(40, 24, 300, torch.bfloat16, True, True)
    assert _sim_run(inputs, tiling) is None
    # The same launch with one field of the shipped Matmul tiling broken: the simulator reads it.
    broken = bytearray(tiling.tiling)
    data = _sim.FlceTilingData.from_buffer(broken)
    data.inputGradMm.baseN = 24  # not a multiple of the 16-row fractal
    error = _sim_run(inputs, _cann_tiling.TilingFuncResult(**{**tiling.__dict__, "tiling": bytes(broken)}))
    assert error is not None and "baseN 24 not a multiple of the 16-row fractal" in error, error
    # A tiling for another shape is refused before the launch.
    other = _sim.flce_tiling_func(41, 24, 300, torch.bfloat16, True, True)
    error = _sim_run(inputs, other)
    assert error is not None and "the TilingFunc's tiling does not fit this call" in error, error

"""The host tiling functions of the Ascend C kernels (ascendc_kernels/*/op_host/*_tiling.h),
called through the simulator library with chosen platform facts."""

import ctypes
import pathlib
import re

import pytest

from ascend_ops.sim import simulator as _sim

pytestmark = pytest.mark.skipif(_sim.load_error is not None, reason=str(_sim.load_error))

u32, u64 = ctypes.c_uint32, ctypes.c_uint64
BnTiling, FlceTiling = _sim.BnTiling, _sim.FlceTiling


def Platform(ub_bytes, block_bytes, repeat_bytes, vector_cores, ai_cores) -> _sim.PlatformFacts:
    """The 910B description (common/platform.h, read from the library) with chosen core facts."""
    facts = _sim.platform_910b()
    facts.ubBytes, facts.blockBytes, facts.repeatBytes = ub_bytes, block_bytes, repeat_bytes
    facts.vectorCores, facts.aiCores = vector_cores, ai_cores
    return facts


A2 = _sim.platform_910b() if _sim.load_error is None else None


def test_the_910b_description_is_the_documented_one():
    a2 = _sim.platform_910b()
    assert (a2.ubBytes, a2.blockBytes, a2.repeatBytes, a2.vectorCores, a2.aiCores) == (192 * 1024, 32, 256, 48, 24)
    assert a2.l2Bytes == 192 * 1024 * 1024
    assert (a2.l1Bytes, a2.l0aBytes, a2.l0bBytes, a2.l0cBytes) == (512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024)


def bn_tiling(n, c, s, dtype=0, stat_dtype=0, platform=A2) -> BnTiling:
    out = BnTiling()
    _sim.library().asim_batch_norm_reduce_backward_tiling(
        u64(n), u64(c), u64(s), u32(dtype), u32(stat_dtype), ctypes.byref(platform), ctypes.byref(out))
    return out


def flce_tiling(bt, h, v, dtype=1, mode=0, packed=True, target64=False, platform=A2) -> FlceTiling:
    out = FlceTiling()
    _sim.library().asim_fused_linear_cross_entropy_loss_grad_tiling(
        u64(bt), u64(h), u64(v), u32(dtype), u32(mode), ctypes.c_int(packed), ctypes.c_int(target64),
        ctypes.byref(platform), ctypes.byref(out))
    return out


@pytest.mark.parametrize("dtype,elem", [(0, 4), (1, 2), (2, 2)])
@pytest.mark.parametrize("ub_kib", [192, 64])
def test_bn_tile_fills_but_fits_the_ub(dtype, elem, ub_kib):
    platform = Platform(ub_kib * 1024, 32, 256, 48, 24)
    t = bn_tiling(64, 8, 100_000, dtype, platform=platform)
    d = t.data
    used = t.fixed_ub_bytes + t.ub_bytes_per_element * d.accElems
    assert used <= platform.ubBytes
    assert used > 0.9 * platform.ubBytes  # a tile takes what UB gives
    assert d.accElems % 64 == 0  # whole 256-byte repeats of fp32
    assert d.tileRows == 1 and d.colTiles == -(-100_000 // d.tileCols)  # rows cut into column tiles


@pytest.mark.parametrize("dtype,elem", [(0, 4), (1, 2)])
def test_bn_long_rows_one_channel_per_tile_with_32_byte_pitch(dtype, elem):
    t = bn_tiling(5000, 4, 333, dtype).data
    assert t.channelsPerTile == 1 and t.tileCols == 333
    assert (t.tilePitch * elem) % 32 == 0 and 333 <= t.tilePitch < 333 + 32 // elem
    assert 1 < t.tileRows <= 4095  # DataCopyPad's blockCount limit
    assert t.rowTiles == -(-5000 // t.tileRows)


@pytest.mark.parametrize("dtype,elem", [(0, 4), (1, 2)])
@pytest.mark.parametrize("c,s", [(600, 3), (256, 1), (5, 7), (1000, 49)])
def test_bn_short_rows_group_channels_into_long_bursts(dtype, elem, c, s):
    t = bn_tiling(5000, c, s, dtype).data
    k = t.channelsPerTile
    assert k == min(c, -(-512 // (s * elem)), 256)  # bursts of >= 512 bytes where C allows
    assert t.tileCols == k * s and t.channelBlocks == -(-c // k) and t.colTiles == 1
    assert t.tileRows <= 4095


def test_bn_many_channels_one_segment_each_on_every_core():
    t = bn_tiling(8, 1000, 490)
    assert t.data.segments == 1 and t.data.usedCores == 48 and t.block_dim == 48
    assert t.workspace_bytes == 0  # no cross-core reduction needed


@pytest.mark.parametrize("c", [1, 2, 5, 47])
def test_bn_few_channels_are_split_across_cores_through_the_workspace(c):
    t = bn_tiling(256, c, 4096)
    d = t.data
    assert d.segments > 1 and d.tasks == c * d.segments and d.usedCores == min(48, d.tasks)
    assert d.segments <= d.rowTiles * d.colTiles
    assert t.workspace_bytes == d.segments * c * 2 * 4


def test_bn_core_count_comes_from_the_platform():
    t = bn_tiling(256, 3, 4096, platform=Platform(192 * 1024, 32, 256, 8, 4))
    assert t.block_dim <= 8 and t.data.segments == 3


@pytest.mark.parametrize("n,s", [(0, 10), (4, 0)])
def test_bn_empty_input_still_writes_every_channel(n, s):
    t = bn_tiling(n, 6, s)
    d = t.data
    assert d.rowTiles == 0 and d.segments == 1 and t.error == b""
    assert d.tasks == d.channelBlocks and d.channelBlocks * d.channelsPerTile >= 6
    assert t.block_dim >= 1  # the TilingFunc never calls SetBlockDim(0)


def test_bn_tiling_keys_and_rejections():
    assert bn_tiling(2, 3, 4, 0).tiling_key == 0
    assert bn_tiling(2, 3, 4, 2).tiling_key == 2
    assert bn_tiling(2, 3, 4, 1, stat_dtype=1).tiling_key == 4  # float16 sums
    assert bn_tiling(2, 3, 4, 2, stat_dtype=2).tiling_key == 8
    assert b"C must be" in bn_tiling(2, 0, 4).error
    assert b"32-bit" in bn_tiling(2, 1 << 20, 1 << 12).error


def test_flce_tasks_cover_bt_by_v_over_the_cube_cores():
    t = flce_tiling(300, 64, 611)  # 3 x 3 tasks of 128 rows x 256 columns, the last ones shorter
    d = t.data
    assert (d.rowBlock, d.colBlock, d.rowBlocks, d.colBlocks, d.tasks) == (128, 256, 3, 3, 9)
    assert t.block_dim == d.cubeCores == 9  # fewer tasks than the 24 cube cores
    big = flce_tiling(4096, 64, 32_000)
    assert big.data.tasks == 32 * 125 and big.block_dim == 24
    few = flce_tiling(4096, 64, 32_000, platform=Platform(192 * 1024, 32, 256, 10, 5))
    assert few.block_dim == 5


def test_flce_workspace_is_a_bounded_ring_plus_the_accumulators():
    for mode, slot in ((0, 128 * 256 * (4 + 2)), (1, 128 * 256 * 2)):
        small, big = flce_tiling(300, 64, 611, mode=mode), flce_tiling(100_000, 64, 150_000, mode=mode)
        for t in (small, big):
            d = t.data
            assert d.ringBytes == 2 * slot  # two slots, whatever BT and V
            assert d.accOffset == d.cubeCores * d.ringBytes
            assert d.userWorkspaceBytes == d.accOffset + (d.bt + d.v) * d.h * 4  # fp32 [BT + V, H]
            assert t.workspace_bytes == t.sys_workspace_bytes + d.userWorkspaceBytes
        assert big.data.accOffset == 24 * 2 * slot  # no [BT, V] buffer in either mode
    assert flce_tiling(300, 64, 611, mode=1).data.logitsSlotBytes == 0  # softmax is read directly


# The three Matmul tilings come from CANN's own library through the TilingFunc, not from
# this plain tiling (which leaves them zero): tests/test_cann_tiling.py checks them.


def test_flce_vector_tiles_fit_ub():
    for h in (1, 24, 2048, 5000):
        d = flce_tiling(10, h, 300).data
        g_tile = 2 * d.gTileRows * d.colBlock * (4 + 2)
        pitch32, pitch16 = -(-d.castCols // 8) * 8, -(-d.castCols // 16) * 16
        cast = d.castRows * (2 * pitch32 * 4 + 2 * pitch16 * 2 + pitch32 * 4)
        assert g_tile + cast <= 192 * 1024
        assert d.castCols == min(h, 2048) and d.castRows >= 1


KERNELS = pathlib.Path(__file__).resolve().parents[1] / "ascendc_kernels"


def _kernel_keys(op, case_macro):
    source = (KERNELS / op / "op_kernel" / f"{op}.cpp").read_text()
    return sorted(int(k) for k in re.findall(rf"^\s*{case_macro}\((\d+),", source, re.M))


def test_every_tiling_key_a_kernel_compiles_is_one_its_tiling_can_produce():
    # CANN compiles one binary per key: a key no tiling produces is dead code on the device.
    flce = {flce_tiling(4, 4, 4, dtype=d, mode=m, target64=t).tiling_key
            for d in (1, 2) for m in (0, 1) for t in (False, True)}
    assert sorted(flce) == _kernel_keys("fused_linear_cross_entropy_loss_grad", "FLCE_CASE") == list(range(8))
    bn = {bn_tiling(2, 3, 4, d, stat_dtype=sd).tiling_key for d in (0, 1, 2) for sd in (0, 1, 2)}
    assert sorted(bn) == _kernel_keys("batch_norm_reduce_backward", "BN_CASE") == list(range(9))


def test_flce_tiling_keys_and_rejections():
    assert flce_tiling(4, 4, 4, dtype=1, mode=0, target64=False).tiling_key == 0
    assert flce_tiling(4, 4, 4, dtype=2, mode=1, target64=True).tiling_key == 7
    assert b"bit-packed" in flce_tiling(4, 4, 4, packed=False).error  # the op takes the packed mask only
    assert b"float16 or bfloat16" in flce_tiling(4, 4, 4, dtype=0).error
    assert b"V must be" in flce_tiling(4, 4, 0).error
    for bt, h in ((0, 4), (4, 0)):  # BT = 0 or H = 0: nothing to launch (never a launch of blockDim 0)
        empty = flce_tiling(bt, h, 4)
        assert empty.block_dim == 0 and empty.workspace_bytes == 0 and empty.error == b""

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


def Platform910B(**changes) -> _sim.PlatformFacts:
    facts = _sim.platform_910b()
    for name, value in changes.items():
        setattr(facts, name, value)
    return facts


def _window_bytes(d, elem):
    """What a window keeps in L2 (FlceWindowBlocks): x and fp32 input_grad rows, w and fp32
    weight_grad rows, the two window G buffers."""
    return (d.windowRowBlocks * 128 + d.windowColBlocks * 256) * d.h * (elem + 4) + \
        2 * d.windowRowBlocks * 128 * d.windowColBlocks * 256 * elem


@pytest.mark.parametrize("h,window", [(4096, (8, 8)), (8192, (7, 4)), (5120, (8, 7)), (256, (8, 8))])
def test_flce_windows_are_the_most_tasks_that_stay_in_half_the_l2(h, window):
    t = flce_tiling(65536, h, 152064, dtype=2)
    d = t.data
    assert (d.rowBlock, d.colBlock, d.rowBlocks, d.colBlocks) == (128, 256, 512, 594)
    assert (d.windowRowBlocks, d.windowColBlocks) == window
    assert (d.windowRows, d.windowCols, d.windows) == (-(-512 // window[0]), -(-594 // window[1]),
                                                     -(-512 // window[0]) * -(-594 // window[1]))
    assert _window_bytes(d, 2) <= A2.l2Bytes // 2
    # One more task row or column would not fit (or the 8 x 8 cap holds).
    for grow in ((1, 0), (0, 1)):
        r, c = window[0] + grow[0], window[1] + grow[1]
        bigger = (r * 128 + c * 256) * h * 6 + 2 * r * 128 * c * 256 * 2
        assert r * c <= window[0] * window[1] or max(r, c) > 8 or bigger > A2.l2Bytes // 2


def test_flce_windows_follow_the_l2_and_not_the_core_count():
    base = flce_tiling(8192, 4096, 32000, dtype=2).data
    half_l2 = flce_tiling(8192, 4096, 32000, dtype=2, platform=Platform910B(l2Bytes=A2.l2Bytes // 2)).data
    assert (half_l2.windowRowBlocks * half_l2.windowColBlocks) < (base.windowRowBlocks * base.windowColBlocks)
    assert _window_bytes(half_l2, 2) <= A2.l2Bytes // 4
    few = flce_tiling(8192, 4096, 32000, dtype=2, platform=Platform910B(aiCores=5, vectorCores=10))
    assert (few.data.windowRowBlocks, few.data.windowColBlocks) == (base.windowRowBlocks, base.windowColBlocks)
    assert few.block_dim == 5 and base.cubeCores == 24


def test_flce_cube_cores_are_the_chip_s_or_the_items_of_a_step():
    small = flce_tiling(1, 16, 10)  # one task, then one tile of each GEMM: 2 cores are all a step uses
    assert small.block_dim == small.data.cubeCores == 2
    assert flce_tiling(1, 16, 10, mode=1).block_dim == 2  # one tile of each GEMM
    assert flce_tiling(300, 64, 611).block_dim == 9  # 3 x 3 tasks; 3 + 5 tiles
    assert flce_tiling(8192, 4096, 32000).block_dim == 24


def test_flce_workspace_rings_g_windows_accumulators_and_the_report():
    for bt, h, v in ((300, 64, 611), (100_000, 64, 150_000), (8192, 4096, 32000)):
        ms = flce_tiling(bt, h, v, dtype=2, mode=0)
        d = ms.data
        assert d.logitsSlotBytes == 128 * 256 * 4 and d.ringBytes == 2 * d.logitsSlotBytes  # whatever BT and V
        assert d.gOffset == d.cubeCores * d.ringBytes
        assert d.gWindowBytes == d.windowRowBlocks * 128 * d.windowColBlocks * 256 * 2
        assert d.accOffset == d.gOffset + 2 * d.gWindowBytes
        assert d.reportOffset == d.accOffset + -(-(bt + v) * h * 4 // 512) * 512  # fp32 [BT + V, H]
        assert d.userWorkspaceBytes == d.reportOffset + 512  # an int64 per vector core
        assert ms.workspace_bytes == ms.sys_workspace_bytes + d.userWorkspaceBytes
        hp = flce_tiling(bt, h, v, dtype=2, mode=1)  # G goes over the softmax: only the report
        assert hp.data.userWorkspaceBytes == 512 and hp.data.reportOffset == 0


def test_flce_window_g_stays_within_cann_s_per_core_partials():
    # Tiny H: CANN's kernel keeps 2 x cores x 384 x H fp32 of partials; our two window G
    # buffers stay within that, down to one task per window.
    for h, cores in ((8, 24), (100, 24), (40, 4)):
        d = flce_tiling(65536, h, 152064, platform=Platform910B(aiCores=cores, vectorCores=2 * cores)).data
        assert 2 * d.gWindowBytes <= max(2 * cores * 384 * h * 4, 2 * 128 * 256 * 2)
    assert (flce_tiling(65536, 1, 152064).data.windowRowBlocks, flce_tiling(65536, 1, 152064).data.windowColBlocks) == (1, 1)


# The three Matmul tilings come from CANN's own library through the TilingFunc, not from
# this plain tiling (which leaves them zero): tests/test_cann_tiling.py checks them.


def test_flce_vector_tiles_fit_ub():
    for h in (1, 24, 2048, 5000):
        d = flce_tiling(10, h, 300).data  # memory-saving: logits G tiles, accumulator casts, the report
        g_tile = 2 * d.gTileRows * d.colBlock * (4 + 2)
        pitch32, pitch16 = -(-d.castCols // 8) * 8, -(-d.castCols // 16) * 16
        cast = d.castRows * (2 * pitch32 * 4 + 2 * pitch16 * 2)
        assert g_tile + cast + 32 <= 192 * 1024
        assert d.castCols == min(h, 2048) and d.castRows >= 1
    for v in (1, 300, 32000, 152064):
        for dtype in (1, 2):
            d = flce_tiling(10, 16, v, dtype=dtype, mode=1).data  # high-performance: softmax row chunks
            assert d.chunkCols % 16 == 0 and d.chunkCols >= min(v, 64)
            assert 2 * d.chunkCols * (4 + 2) + 32 <= 192 * 1024


KERNELS = pathlib.Path(__file__).resolve().parents[1] / "ascendc_kernels"


def _kernel_keys(op, case_macro):
    source = (KERNELS / op / "op_kernel" / f"{op}.cpp").read_text()
    return sorted(int(k) for k in re.findall(rf"^\s*{case_macro}\((\d+),", source, re.M))


def test_every_tiling_key_a_kernel_compiles_is_one_its_tiling_can_produce():
    # CANN compiles one binary per key: a key no tiling produces is dead code on the device.
    flce = {flce_tiling(4, 4, 4, dtype=d, mode=m, target64=t).tiling_key
            for d in (1, 2) for m in (0, 1) for t in (False, True)}
    # The loss options (key bit 8) through the TilingFunc, which reads their inputs.
    import torch

    from ascend_ops.sim.cann_tiling import unavailable

    if unavailable is None:
        o = _sim.FlceOptions(torch.ones(4), torch.ones(4), torch.zeros(4))
        flce |= {_sim.flce_tiling_func(4, 4, 4, dt, ms, t, options=o).tiling_key
                 for dt in (torch.float16, torch.bfloat16) for ms in (True, False) for t in (False, True)}
    assert _kernel_keys("fused_linear_cross_entropy_loss_grad", "FLCE_CASE") == list(range(16))
    assert sorted(flce) == list(range(16 if unavailable is None else 8))
    bn = {bn_tiling(2, 3, 4, d, stat_dtype=sd).tiling_key for d in (0, 1, 2) for sd in (0, 1, 2)}
    assert sorted(bn) == _kernel_keys("batch_norm_reduce_backward", "BN_CASE") == list(range(9))


def test_flce_tiling_keys_and_rejections():
    assert flce_tiling(4, 4, 4, dtype=1, mode=0, target64=False).tiling_key == 0
    assert flce_tiling(4, 4, 4, dtype=2, mode=1, target64=True).tiling_key == 7
    assert b"bit-packed" in flce_tiling(4, 4, 4, packed=False).error  # the op takes the packed mask only
    assert b"float16 or bfloat16" in flce_tiling(4, 4, 4, dtype=0).error
    assert b"V must be" in flce_tiling(4, 4, 0).error
    # What the kernel's copies can take (the Matmul's ND->NZ srcDValue is 16 bits on A2).
    assert flce_tiling(4, 65535, 300).error == b"" and flce_tiling(4, 65535, 300, mode=1).error == b""
    for mode in (0, 1):
        assert flce_tiling(4, 65536, 300, mode=mode).error.startswith(b"H (input.size(1)) = 65536 is above 65535")
    assert flce_tiling(4, 8, 1 << 20, mode=1).error == b""
    assert flce_tiling(4, 8, (1 << 20) + 1, mode=1).error.startswith(
        b"V (weight.size(0)) = 1048577 is above 1048576 in high-performance mode")
    assert flce_tiling(4, 8, (1 << 20) + 1, mode=0).error == b""  # memory-saving: pitch is a window's columns
    assert flce_tiling(4, 8, (1 << 30) + 1).error.startswith(b"BT (input.size(0)) and V (weight.size(0)) must")
    for bt, h in ((0, 4), (4, 0)):  # BT = 0 or H = 0: nothing to launch (never a launch of blockDim 0)
        empty = flce_tiling(bt, h, 4)
        assert empty.block_dim == 0 and empty.workspace_bytes == 0 and empty.error == b""

"""The CPU kernels' GEMM layer, engine by engine: tails of every blocking level, transposed
operands, exact against an fp64 product of the same half values; the engine switch."""

import json
import os
import subprocess
import sys

import pytest
import torch

import ascend_ops
import peak_memory
from ascend_ops import _C, testing

ENGINES = list(_C.cpu_gemm_engines())

# (m, n, k): single elements, odd K (a half-filled last pair), tails of the AVX512 GEMM's
# 12-row and 32-column micro-tiles and of its cache blocks (on a 32 KiB L1 / 1 MiB L2 CPU: K
# blocks of 1024, two of 1026 and 1025 at k = 2051; 96-row A blocks; B panels as wide as
# a thread's columns), of the AVX2 GEMM's 6 x 16 micro-tiles, 192-row / 512-K blocks and
# 4096-column tiles, products split by rows across threads (n within one 16-column panel),
# and K = 0.
SHAPES = [(1, 1, 1), (13, 33, 7), (12, 32, 2), (197, 65, 513), (29, 70, 2051), (25, 4100, 31),
          (1000, 9, 700), (7, 9, 0), (301, 530, 1100)]
OWN_GEMMS = [e for e in ("amx", "avx512bf16", "avx2") if e in ENGINES]


def operands(shape, dtype, transpose_a, transpose_b):
    m, n, k = shape
    gen = torch.Generator().manual_seed(m * 131 + n * 7 + k)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    a_in = a.T.contiguous().T if transpose_a else a  # same values, other strides
    b_in = b.T.contiguous().T if transpose_b else b
    return a, b, a_in, b_in


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_fp64_product(shape, transpose_a, transpose_b, engine):
    a, b, a_in, b_in = operands(shape, torch.bfloat16, transpose_a, transpose_b)
    ours = _C.cpu_gemm(a_in, b_in, engine)
    exact = a.double() @ b.double()
    assert ours.dtype == torch.float32
    # fp32 accumulation of exact bf16 products: error ~ k * eps32 * sum |a||b|. A bf16
    # rounding of any product or of the result would exceed it.
    k = shape[2]
    bound = (a.double().abs() @ b.double().abs()) * (k + 1) * 2.0**-24 + 1e-30
    assert torch.all((ours.double() - exact).abs() <= bound)
    assert torch.equal(ours, _C.cpu_gemm(a_in, b_in, engine))  # bitwise reproducible


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_accumulate_into_adds_the_product(shape, engine):
    a, b, a_in, b_in = operands(shape, torch.bfloat16, False, True)
    start = torch.randn(shape[0], shape[1])
    c = start.clone()
    assert _C.cpu_gemm(a_in, b_in, engine, c) is not None
    exact = start.double() + a.double() @ b.double()
    bound = ((a.double().abs() @ b.double().abs()) + start.double().abs()) * (shape[2] + 2) * 2.0**-24
    assert torch.all((c.double() - exact).abs() <= bound + 1e-30)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rounded_is_the_fp32_product_rounded_once(shape, engine):
    """gemm_rounded: on the own GEMM bit for bit bf16(fp32 sums); on oneDNN's bf16 GEMM
    and on portable within one bf16 rounding of the exact product."""
    a, b, a_in, b_in = operands(shape, torch.bfloat16, False, False)
    ours = _C.cpu_gemm(a_in, b_in, engine, rounded=True)
    assert ours.dtype == torch.bfloat16 and ours.shape == (shape[0], shape[1])
    if engine in OWN_GEMMS:
        assert torch.equal(ours, _C.cpu_gemm(a_in, b_in, engine).bfloat16())
    exact = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (shape[2] + 1) * 2.0**-24 + exact.abs() * 2.0**-8
    assert torch.all((ours.double() - exact).abs() <= bound + 1e-30)
    with pytest.raises(ValueError, match="'rounded' and 'accumulate_into' exclude each other"):
        _C.cpu_gemm(a_in, b_in, engine, torch.zeros(shape[0], shape[1]), True)


@pytest.mark.parametrize("transpose_a", [False, True])
def test_portable_rounded_sums_k_blocks_and_row_blocks(transpose_a):
    """Portable gemm_rounded bounds its scratch: a B whose fp32 copy passes 16 MiB is taken
    in K blocks (here 16 MiB / (64 * 4 B) = 65536 + 4464 deep) and the rows of A in blocks
    (32 MiB / ((64 + 65536) * 4 B) = 127 + 73); the block sums are fp32, rounded once, so the
    result stays within one rounding of the exact product. A narrow B reaches both blocks
    with 0.9 G multiply-adds (was 8.1 at (1800, 1100, 4100): 400 s in CI's emulated aarch64 run)."""
    shape = (200, 64, 70_000)
    a, b, a_in, b_in = operands(shape, torch.bfloat16, transpose_a, True)
    ours = _C.cpu_gemm(a_in, b_in, "portable", rounded=True)
    exact = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (shape[2] + 1) * 2.0**-24 + exact.abs() * 2.0**-8
    assert torch.all((ours.double() - exact).abs() <= bound + 1e-30)
    assert torch.equal(ours, _C.cpu_gemm(a_in, b_in, "portable", rounded=True))


# The own GEMMs on bf16_gemm.cpp's loop nest: the AVX512-BF16 micro-kernel and AMX tiles.
NEST_GEMMS = [e for e in ("amx", "avx512bf16") if e in ENGINES]


@pytest.mark.skipif(not NEST_GEMMS, reason="this CPU lacks AVX512-BF16")
@pytest.mark.parametrize("engine", NEST_GEMMS or ["avx512bf16"])
@pytest.mark.parametrize("rounded", [False, True])
def test_own_gemm_gives_the_same_bits_on_any_thread_count(threads, rounded, engine):
    """The nest's K blocks depend on K and the L1 size only: at 64 threads (B panels of L3 /
    128, threads splitting rows) and at 1 thread the sums and their order are the same."""
    a, b, a_in, b_in = operands((37, 300, 5000), torch.bfloat16, False, True)
    torch.set_num_threads(1)
    one_pass = _C.cpu_gemm(a_in, b_in, engine, rounded=rounded)
    torch.set_num_threads(64)
    assert torch.equal(_C.cpu_gemm(a_in, b_in, engine, rounded=rounded), one_pass)


def rounded_tile_cols(k):
    """Columns of bf16_gemm_rounded's widest tile of B at depth k (bf16_gemm.cpp)."""
    budget = _C.cpu_gemm_blocking()["rounded_tile_bytes"]
    return budget // ((k + k % 2) * 2) // 32 * 32


@pytest.mark.skipif("avx512bf16" not in ENGINES, reason="this CPU lacks AVX512-BF16")
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("tiles", [1, 4, 5], ids=lambda t: f"{t}-tiles")
def test_own_rounded_gemm_in_column_tiles_and_in_row_blocks(threads, tiles, transpose_a):
    """bf16_gemm_rounded packs B once per column tile where at most 4 tiles hold it (1 and
    4 here, the last one a tail), else rounds 16 MiB blocks of rows (5): either way bit for
    bit the fp32 product rounded once, on 1 thread and on several. (amx always takes the
    row blocks: test_rounded_is_the_fp32_product_rounded_once.)"""
    k = 601  # an odd K: a half-filled last pair
    n = (tiles - 1) * rounded_tile_cols(k) + 37 if tiles > 1 else 70
    a, b, a_in, b_in = operands((29, n, k), torch.bfloat16, transpose_a, False)
    sums = _C.cpu_gemm(a_in, b_in, "avx512bf16")
    exact = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (k + 1) * 2.0**-24
    assert torch.all((sums.double() - exact).abs() <= bound + 1e-30)
    ours = _C.cpu_gemm(a_in, b_in, "avx512bf16", rounded=True)
    assert torch.equal(ours, sums.bfloat16())
    torch.set_num_threads(1)
    assert torch.equal(_C.cpu_gemm(a_in, b_in, "avx512bf16", rounded=True), ours)


@pytest.mark.skipif("avx512bf16" not in ENGINES, reason="this CPU lacks AVX512-BF16")
def test_packing_buffers_are_kept_reused_and_bounded():
    """The own GEMM's packing buffers stay with their thread between calls
    (packing_buffers.h): a larger product grows them, a smaller one after it packs over the
    larger one's values and gives the bits it gave first, and a request above 16 MiB (a
    column tile's fp32 sums, mc x n) is met for the call only. In a fresh process, one thread,
    the engine forced (no first-use measurement, which runs the own GEMM too)."""
    script = """
import torch
from ascend_ops import _C
torch.set_num_threads(1)
def operands(m, n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=gen).bfloat16(), torch.randn(k, n, generator=gen).bfloat16()
def both(a, b):
    return _C.cpu_gemm(a, b, "avx512bf16"), _C.cpu_gemm(a, b, "avx512bf16", rounded=True)
assert _C.cpu_kept_packing_bytes() == 0
small = operands(29, 70, 601, 1)  # tails of the 12 x 32 micro-tile, a half-filled last pair
first = both(*small)
kept_small = _C.cpu_kept_packing_bytes()
assert kept_small > 0
both(*operands(301, 530, 2051, 2))
kept_large = _C.cpu_kept_packing_bytes()
assert kept_large > kept_small, (kept_large, kept_small)
again = both(*small)
assert torch.equal(again[0], first[0]) and torch.equal(again[1], first[1])
a, b = operands(100, (16 << 20) // (_C.cpu_gemm_blocking()["mc"] * 4) + 64, 8, 3)
sums, rounded = both(a, b)
assert torch.equal(rounded, sums.bfloat16())
assert _C.cpu_kept_packing_bytes() - kept_large < (16 << 20), _C.cpu_kept_packing_bytes()
assert _C.cpu_kept_packing_bytes() <= 4 * (16 << 20)
print(1)
"""
    assert peak_memory.fresh_python_number(script, set_env={"ASCEND_OPS_CPU_GEMM": "avx512bf16"}) == 1


@pytest.mark.skipif(not hasattr(_C, "cpu_gemm_blocking"), reason="no x86 GEMM kernels in this build")
def test_blocking_follows_the_cache_sizes():
    """The own GEMMs' blocking is derived from the caches read at run time (sysfs here),
    within the bounds the kernels assume."""
    caches = _C.cpu_caches()
    assert caches["source"] in ("sysfs", "sysconf", "default")
    assert caches["l1d"] >= 4096 and caches["l2"] >= caches["l1d"]
    blocking = _C.cpu_gemm_blocking()
    # kc: the 12-row A panel within 3/4 of L1; mc: the A block within a quarter of L2.
    assert blocking["kc"] % 64 == 0 and 128 <= blocking["kc"] <= 4096
    assert 12 * blocking["kc"] * 2 <= max(caches["l1d"] * 3 // 4, 12 * 128 * 2)
    assert blocking["mc"] % 12 == 0 and blocking["mc"] * blocking["kc"] * 2 <= max(caches["l2"] // 4, 12 * blocking["kc"] * 2)
    # the rounded GEMM's B tile: a quarter of L3 (of 4 x L2 where L3 is unknown)
    assert blocking["rounded_tile_bytes"] == (caches["l3"] or caches["l2"] * 4) // 4


@pytest.mark.skipif("avx2" not in ENGINES, reason="this CPU lacks AVX2 and FMA")
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("shape", [(1000, 300, 1100), (1000, 9, 700), (40, 4500, 600)], ids=str)
def test_avx2_gemm_gives_the_same_bits_on_any_thread_count(threads, shape, transpose_a):
    """The AVX2 GEMM splits columns (and, for narrow products, rows) across threads, but
    sums every element over the same K blocks in the same order."""
    a, b, a_in, b_in = operands(shape, torch.bfloat16, transpose_a, True)
    torch.set_num_threads(1)
    one_thread = _C.cpu_gemm(a_in, b_in, "avx2")
    for count in (2, 3, 64):
        torch.set_num_threads(count)
        assert torch.equal(_C.cpu_gemm(a_in, b_in, "avx2"), one_thread)


@pytest.mark.skipif("avx2" not in ENGINES, reason="this CPU lacks AVX2 and FMA")
def test_avx2_rounded_takes_row_blocks_of_sums():
    """AVX2 gemm_rounded sums 16 MiB of rows at a time (here 1023 + 77 of 4100 columns),
    each row rounded once from the same fp32 sums as the fp32-out product."""
    a, b, a_in, b_in = operands((1100, 4100, 40), torch.bfloat16, True, False)
    ours = _C.cpu_gemm(a_in, b_in, "avx2", rounded=True)
    assert torch.equal(ours, _C.cpu_gemm(a_in, b_in, "avx2").bfloat16())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_float16_runs_on_portable(shape):
    a, b, a_in, b_in = operands(shape, torch.float16, True, False)
    ours = _C.cpu_gemm(a_in, b_in, "portable")
    bound = (a.double().abs() @ b.double().abs()) * (shape[2] + 1) * 2.0**-24 + 1e-30
    assert torch.all((ours.double() - a.double() @ b.double()).abs() <= bound)
    for engine in ("avx512bf16", "avx2"):
        with pytest.raises(ValueError, match="cannot multiply"):
            _C.cpu_gemm(a_in, b_in, engine)


def test_user_matmul_precision_is_restored():
    before = torch.backends.mkldnn.matmul.fp32_precision
    for engine in ENGINES:
        _C.cpu_gemm(torch.ones(4, 3).bfloat16(), torch.ones(3, 2).bfloat16(), engine)
    assert torch.backends.mkldnn.matmul.fp32_precision == before


KINDS = ("fp32_out", "rounded")
KIND_VARIABLES = {"fp32_out": "ASCEND_OPS_CPU_GEMM_FP32_OUT", "rounded": "ASCEND_OPS_CPU_GEMM_ROUNDED"}
ALL_SWITCHES = ("ASCEND_OPS_CPU_GEMM", "ASCEND_OPS_CPU_PORTABLE", *KIND_VARIABLES.values())


def clear_switches(monkeypatch):
    for name in ALL_SWITCHES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("kind", KINDS)
def test_engines_are_timed_and_the_fastest_is_chosen(monkeypatch, kind):
    clear_switches(monkeypatch)
    timings = dict(_C.cpu_gemm_timings(kind))
    assert set(timings) == set(ENGINES) and all(t > 0 for t in timings.values())
    chosen = _C.cpu_gemm_engine(kind)
    assert chosen == _C.cpu_gemm_choice(kind, ENGINES, list(timings.items()))
    assert timings[chosen] >= max(timings.values()) * 0.90  # within the tie band of the fastest
    assert dict(_C.cpu_gemm_timings(kind)) == timings  # decided once per process


def test_engines_within_ten_percent_are_a_tie_broken_by_a_fixed_preference(monkeypatch):
    """Measurement noise between two engines of one speed must not flip the choice from one
    process to the next: within 10 % of the fastest, the own engines come first."""
    clear_switches(monkeypatch)
    everything = ["onednn", "mkl", "avx512bf16", "avx2", "portable"]
    for kind in KINDS:
        assert _C.cpu_gemm_choice(kind, everything, [("onednn", 1.00), ("avx512bf16", 0.91)]) == "avx512bf16"
        assert _C.cpu_gemm_choice(kind, everything, [("onednn", 0.91), ("avx512bf16", 1.00)]) == "avx512bf16"
        assert _C.cpu_gemm_choice(kind, everything, [("onednn", 1.00), ("avx512bf16", 0.89)]) == "onednn"
        assert _C.cpu_gemm_choice(kind, everything, [("mkl", 1.00), ("onednn", 0.92), ("portable", 0.99)]) == "onednn"
        assert _C.cpu_gemm_choice(kind, everything, [("mkl", 1.00), ("onednn", 0.89), ("portable", 0.99)]) == "mkl"
        assert _C.cpu_gemm_choice(kind, everything, [("avx2", 0.50), ("portable", 0.54)]) == "avx2"
        # a quiet table and the same table under a load that slowed every engine alike
        quiet = [("onednn", 0.303), ("mkl", 0.143), ("avx512bf16", 0.268), ("avx2", 0.188)]
        loaded = [(e, t * 0.4) for e, t in quiet]
        assert _C.cpu_gemm_choice(kind, everything, quiet) == _C.cpu_gemm_choice(kind, everything, loaded) == "onednn"


def fresh_choices(env: dict) -> dict:
    """(engine, taken from the cache file) per kind, in a fresh Python with `env` added."""
    script = ("from ascend_ops import _C\n"
              "import json\n"
              "print(json.dumps({k: [_C.cpu_gemm_engine(k), _C.cpu_gemm_from_cache(k)] "
              "for k in ('fp32_out', 'rounded')}))\n")
    full = {k: v for k, v in os.environ.items() if k not in ALL_SWITCHES}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, env={**full, **env})
    assert result.returncode == 0, result.stderr
    return {k: tuple(v) for k, v in json.loads(result.stdout.splitlines()[-1]).items()}


def test_engine_cache_file_keeps_the_choice_per_cpu(tmp_path):
    """The first process measures and writes the file; the next reads it (same engines, so
    the same bits); an engine edited into the file is used; an unknown one is ignored, and so
    is a choice that did not time every engine offered; off writes nothing."""
    path = tmp_path / "sub" / "engines.tsv"
    first = fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": str(path)})
    assert all(not from_cache for _, from_cache in first.values())
    lines = [l for l in path.read_text().splitlines() if not l.startswith("#")]
    assert [l.split("\t")[1:3] for l in lines] == [["fp32_out", first["fp32_out"][0]],
                                                   ["rounded", first["rounded"][0]]]
    assert lines[0].split("\t")[0] == _C.cpu_gemm_cache_key()
    second = fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": str(path)})
    assert second == {k: (e, True) for k, (e, _) in first.items()}
    edited = [l.split("\t") for l in lines]
    edited[1][2] = "portable"
    edited[0][2] = "no-such-engine"
    path.write_text("# edited\n" + "".join("\t".join(f) + "\n" for f in edited))
    third = fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": str(path)})
    assert third["rounded"] == ("portable", True) and third["fp32_out"][1] is False
    # A choice whose timings leave out an engine this build offers (written before the engine
    # existed) is measured again.
    lines = [l.split("\t") for l in path.read_text().splitlines() if not l.startswith("#")]
    rounded = next(l for l in lines if l[1] == "rounded")
    assert rounded[2] == "portable" and len(rounded[3].split()) == len(_C.cpu_gemm_engines())
    rounded[3] = " ".join(rounded[3].split()[1:])
    path.write_text("".join("\t".join(f) + "\n" for f in lines))
    fourth = fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": str(path)})
    assert fourth["rounded"][1] is False and fourth["fp32_out"][1] is True
    off = tmp_path / "off"
    assert all(not c for _, c in fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": "off",
                                                  "XDG_CACHE_HOME": str(off)}).values())
    assert not off.exists()


def test_a_fresh_process_takes_this_process_s_choices_from_the_cache_file(monkeypatch):
    """The run's cache file (conftest.py), written by this process's decision, serves a fresh
    process: the same engines, read from the file, nothing measured again. (The aarch64 run
    under emulation reaches the cache file by this test: a measurement there takes minutes.)"""
    clear_switches(monkeypatch)
    if not _C.cpu_gemm_cache_path():
        pytest.skip("ASCEND_OPS_CPU_GEMM_CACHE turns the cache file off for this run")
    here = {kind: _C.cpu_gemm_engine(kind) for kind in KINDS}  # decided (and kept) by now
    fresh = fresh_choices({"ASCEND_OPS_CPU_GEMM_CACHE": _C.cpu_gemm_cache_path()})
    assert fresh == {kind: (engine, True) for kind, engine in here.items()}


def test_cache_file_follows_xdg(monkeypatch, tmp_path):
    env = {"ASCEND_OPS_CPU_GEMM_CACHE": "", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    fresh_choices(env)
    assert (tmp_path / "xdg" / "ascend_ops" / "cpu_gemm_engines.tsv").exists()


def busy_processes(count: int) -> list:
    """`count` processes multiplying fp32 matrices in a loop on one thread each: load on the
    cores and their vector units, as other jobs on a shared machine."""
    loop = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(512, 512)\n"
            "while True:\n    a = (a @ a).clamp_(-1, 1)\n")
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def test_choice_is_the_same_from_a_quiet_and_a_loaded_start(monkeypatch):
    """A fresh measurement under a load started here (two processes per core's worth of
    threads) chooses what one without it chooses: the engines are timed on one thread in
    that thread's CPU time, the load's share of the machine does not count."""
    clear_switches(monkeypatch)
    def choices():
        return {kind: _C.cpu_gemm_choice(kind, ENGINES, _C.cpu_gemm_measure(kind)) for kind in KINDS}
    quiet = choices()
    load = busy_processes(2 * torch.get_num_threads())
    try:
        loaded = choices()
    finally:
        for process in load:
            process.kill()
            process.wait()
    assert loaded == quiet


# What an Intel Xeon with AMX measured (docs/cpu_kernels.md; the first-use probe's figures
# for onednn, avx512bf16, avx2 and portable, the (M, N, K) products' for mkl and onednn):
# mkl is the fastest fp32-out engine (no fp32 copies), onednn the fastest rounded one.
AMX_ENGINES = ["onednn", "mkl", "avx512bf16", "avx2", "portable"]
AMX_TIMINGS = {
    "fp32_out": [("onednn", 0.71), ("mkl", 1.06), ("avx512bf16", 0.18), ("avx2", 0.20),
                 ("portable", 0.26)],
    "rounded": [("onednn", 1.57), ("mkl", 1.02), ("avx512bf16", 0.18), ("avx2", 0.20),
                ("portable", 0.26)],
}


def test_amx_like_timings_choose_mkl_for_fp32_out_and_onednn_for_rounded(monkeypatch):
    clear_switches(monkeypatch)
    choice = {kind: _C.cpu_gemm_choice(kind, AMX_ENGINES, AMX_TIMINGS[kind]) for kind in KINDS}
    assert choice == {"fp32_out": "mkl", "rounded": "onednn"}
    # A CPU without mkl or onednn gets the fastest of what it has, whatever else was timed.
    assert _C.cpu_gemm_choice("fp32_out", ["onednn", "avx2", "portable"],
                              AMX_TIMINGS["fp32_out"]) == "onednn"
    assert _C.cpu_gemm_choice("rounded", ["avx2", "portable"], AMX_TIMINGS["rounded"]) == "portable"


# Measured on an Intel Xeon with AMX on 2026-12-05, with the own amx engine (TFLOP/s).
AMX_OWN_ENGINES = ["onednn", "mkl", "amx", "avx512bf16", "avx2", "portable"]
AMX_OWN_TIMINGS = {
    "fp32_out": [("onednn", 0.79), ("mkl", 1.21), ("amx", 1.36), ("avx512bf16", 0.19),
                 ("avx2", 0.17), ("portable", 0.29)],
    "rounded": [("onednn", 1.48), ("mkl", 1.12), ("amx", 1.41), ("avx512bf16", 0.19),
                ("avx2", 0.17), ("portable", 0.26)],
}


def test_amx_engine_is_chosen_where_fastest_and_ranks_after_onednn_in_a_tie(monkeypatch):
    """fp32_out: amx 12 % ahead of mkl, chosen. rounded: amx 5 % behind onednn, a tie the
    preference gives to onednn (engine_choice.cpp: it ran the step's rounded products faster); amx
    ahead by 5 % is a tie too, and amx 12 % ahead wins."""
    clear_switches(monkeypatch)
    choice = {kind: _C.cpu_gemm_choice(kind, AMX_OWN_ENGINES, AMX_OWN_TIMINGS[kind]) for kind in KINDS}
    assert choice == {"fp32_out": "amx", "rounded": "onednn"}
    ahead = [(e, 1.55 if e == "amx" else t) for e, t in AMX_OWN_TIMINGS["rounded"]]
    assert _C.cpu_gemm_choice("rounded", AMX_OWN_ENGINES, ahead) == "onednn"
    well_ahead = [(e, 1.66 if e == "amx" else t) for e, t in AMX_OWN_TIMINGS["rounded"]]
    assert _C.cpu_gemm_choice("rounded", AMX_OWN_ENGINES, well_ahead) == "amx"


def test_forcing_beats_timings_per_kind(monkeypatch):
    clear_switches(monkeypatch)
    pick = {kind: (lambda k=kind: _C.cpu_gemm_choice(k, AMX_ENGINES, AMX_TIMINGS[k])) for kind in KINDS}
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "avx2")  # both kinds
    assert (pick["fp32_out"](), pick["rounded"]()) == ("avx2", "avx2")
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM_ROUNDED", "portable")  # the per-kind form wins
    assert (pick["fp32_out"](), pick["rounded"]()) == ("avx2", "portable")
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM_ROUNDED", "auto")  # measured, whatever the other says
    assert (pick["fp32_out"](), pick["rounded"]()) == ("avx2", "onednn")
    monkeypatch.delenv("ASCEND_OPS_CPU_GEMM")
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM_FP32_OUT", "onednn")
    assert (pick["fp32_out"](), pick["rounded"]()) == ("onednn", "onednn")
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM_FP32_OUT", "")  # empty: unset
    assert pick["fp32_out"]() == "mkl"


@pytest.mark.parametrize("kind", KINDS)
def test_forcing_an_engine_this_cpu_lacks_names_the_variable(monkeypatch, kind):
    clear_switches(monkeypatch)
    monkeypatch.setenv(KIND_VARIABLES[kind], "mkl")
    with pytest.raises(ValueError, match=rf"{KIND_VARIABLES[kind]}='mkl' is not available on this "
                                         r"CPU \(available: avx2, portable\)"):
        _C.cpu_gemm_choice(kind, ["avx2", "portable"], AMX_TIMINGS[kind])
    monkeypatch.delenv(KIND_VARIABLES[kind])
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "onednn")
    with pytest.raises(ValueError, match=r"ASCEND_OPS_CPU_GEMM='onednn' is not available"):
        _C.cpu_gemm_choice(kind, ["avx2", "portable"], AMX_TIMINGS[kind])


def test_environment_forces_an_engine(monkeypatch):
    clear_switches(monkeypatch)
    for engine in ENGINES:
        monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", engine)
        assert _C.cpu_gemm_engine("fp32_out") == _C.cpu_gemm_engine("rounded") == engine
        for kind in KINDS:
            other = "portable" if engine != "portable" else ENGINES[0]
            monkeypatch.setenv(KIND_VARIABLES[kind], other)
            assert _C.cpu_gemm_engine(kind) == other
            monkeypatch.delenv(KIND_VARIABLES[kind])
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "auto")
    assert _C.cpu_gemm_engine() in ENGINES
    monkeypatch.delenv("ASCEND_OPS_CPU_GEMM")
    monkeypatch.setenv("ASCEND_OPS_CPU_PORTABLE", "1")  # the alias
    assert _C.cpu_gemm_engine("fp32_out") == _C.cpu_gemm_engine("rounded") == "portable"


def test_engine_report_gives_both_choices_and_every_speed(monkeypatch):
    from ascend_ops.cpu_info import gemm_engine_report

    clear_switches(monkeypatch)
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM_ROUNDED", "portable")
    report = gemm_engine_report()
    assert report.engines == {"fp32_out": _C.cpu_gemm_engine("fp32_out"), "rounded": "portable"}
    assert report.forced == {"fp32_out": False, "rounded": True}
    assert all(set(report.tflops[kind]) == set(ENGINES) for kind in KINDS)
    assert report.engine == f"fp32_out={report.engines['fp32_out']} rounded=portable"
    text = report.describe()
    assert "fp32_out: " in text and "rounded: portable (forced by the environment)" in text


@pytest.mark.parametrize("env, message", [
    ({"ASCEND_OPS_CPU_GEMM": "fastest"},
     "ASCEND_OPS_CPU_GEMM must be one of auto, onednn, mkl, amx, avx512bf16, avx2, portable; "
     "got 'fastest'"),
    ({"ASCEND_OPS_CPU_GEMM_FP32_OUT": "MKL"},
     "ASCEND_OPS_CPU_GEMM_FP32_OUT must be one of auto, onednn, mkl, amx, avx512bf16, avx2, "
     "portable; got 'MKL'"),
    ({"ASCEND_OPS_CPU_GEMM_ROUNDED": "onednn,mkl"},
     "ASCEND_OPS_CPU_GEMM_ROUNDED must be one of auto, onednn, mkl, amx, avx512bf16, avx2, "
     "portable; got 'onednn,mkl'"),
    ({"ASCEND_OPS_CPU_PORTABLE": "yes"}, "ASCEND_OPS_CPU_PORTABLE must be 1 or 0"),
    ({"ASCEND_OPS_CPU_PORTABLE": "1", "ASCEND_OPS_CPU_GEMM": "avx512bf16"},
     "asks for the portable path but ASCEND_OPS_CPU_GEMM='avx512bf16'"),
])
def test_bad_switch_is_a_clear_error_in_every_kernel(monkeypatch, env, message):
    clear_switches(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    inputs = testing.flce_inputs(testing.FlceCase(8, 4, 16))
    with pytest.raises(ValueError, match=message):
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="cpu")
    with pytest.raises(ValueError, match=message):  # float16 too, though it always runs portable
        half = {k: v.half() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v
                for k, v in inputs.items()}
        ascend_ops.fused_linear_cross_entropy_loss_grad(**half, impl="cpu")
    with pytest.raises(ValueError, match=message):
        ascend_ops.fused_linear_online_max_sum(inputs["input"], inputs["weight"],
                                               torch.zeros(8, dtype=torch.long), 0, 16, impl="cpu")
    with pytest.raises(ValueError, match=message):
        ascend_ops.batch_norm_reduce_backward(torch.randn(2, 3, 4), torch.randn(2, 3, 4),
                                              torch.zeros(3), torch.ones(3), torch.ones(3), True, True, True,
                                              impl="cpu")


def test_rejects_bad_operands():
    with pytest.raises(ValueError, match=r"expected \[m, k\] @ \[k, n\]"):
        _C.cpu_gemm(torch.ones(2, 3).bfloat16(), torch.ones(4, 2).bfloat16())
    with pytest.raises(TypeError, match="bfloat16 or two float16"):
        _C.cpu_gemm(torch.ones(2, 3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="'engine' must be onednn, mkl, amx, avx512bf16, avx2 or portable"):
        _C.cpu_gemm(torch.ones(2, 3).bfloat16(), torch.ones(3, 2).bfloat16(), "fastest")
    with pytest.raises(ValueError, match="'kind' must be fp32_out or rounded, got 'fp32'"):
        _C.cpu_gemm_engine("fp32")


@pytest.mark.skipif("mkl" not in ENGINES, reason="libtorch_cpu exports no MKL bf16 GEMM here")
def test_first_use_measurement_leaves_no_mkl_buffers_resident():
    # MKL keeps the buffers of its first bf16 GEMM; the measurement hands them back (on AMD
    # EPYC AVX2 its products had left 32 MiB resident, now under 4 MiB), in a fresh process
    # whose resident memory follows its live memory. The own GEMMs' packing buffers stay
    # by design (packing_buffers.h; 12.6 MiB on AMD EPYC Zen 4, every word of them written)
    # and are not counted.
    resident_mib = peak_memory.fresh_python_number(
        "from worker_processes import status_kb\n"
        "from ascend_ops import _C\n"
        "before = status_kb('VmRSS')\n"
        "_C.cpu_gemm_timings('fp32_out'); _C.cpu_gemm_timings('rounded')\n"
        "assert not _C.cpu_gemm_from_cache('fp32_out') and not _C.cpu_gemm_from_cache('rounded')\n"
        "print((status_kb('VmRSS') - before) / 1024 - _C.cpu_kept_packing_bytes() / 2**20)\n",
        set_env={"ASCEND_OPS_CPU_GEMM_CACHE": "off"})
    assert resident_mib < 12, f"the first-use measurement left {resident_mib:.1f} MiB resident"

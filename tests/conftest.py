import os

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ascend_ops import testing

# Every test (and every process a test starts: they inherit the environment) runs with the
# GEMM operand contract checked and the kernels' scratch poisoned with NaN, so a NaN or Inf
# outside an operand's logical region that an engine could read fails the suite on any CPU,
# not only on one whose oneDNN reads it (docs/cpu_kernels.md, "The operand contract").
os.environ.setdefault("ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS", "1")
os.environ.setdefault("ASCEND_OPS_CPU_POISON_SCRATCH", "1")
# The GEMM engine choices of this run go to a cache file of its own (engine_cache.h), not the
# user's ~/.cache: the first process measures, the others (the tests' child processes) read.
if "ASCEND_OPS_CPU_GEMM_CACHE" not in os.environ:
    import tempfile

    os.environ["ASCEND_OPS_CPU_GEMM_CACHE"] = os.path.join(
        tempfile.mkdtemp(prefix="ascend_ops_gemm_cache_"), "cpu_gemm_engines.tsv")


def clone_inputs(inputs: dict) -> dict:
    """A copy of the tensors of a sample, so a run that may write one leaves the sample intact."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def call_on_fake_tensors(op, inputs):
    """Run `op` as torch.compile traces it: on fake tensors (meta ones stay as they are)."""
    with FakeTensorMode(allow_non_fake_inputs=True) as fake_mode:
        fake = {k: fake_mode.from_tensor(v) if isinstance(v, torch.Tensor) and v.device.type != "meta"
                else v for k, v in inputs.items()}
        return op(**fake)


def assert_matches(ours, oracle, naive=None, what=""):
    """Every output within SPEC §4 of the float64 oracle (and no worse than naive torch)."""
    for i, (o, r) in enumerate(zip(ours, oracle)):
        if r is None:
            assert o is None, f"{what} output {i}: expected None, got a tensor"
            continue
        low = None if naive is None else naive[i]
        result = testing.compare(o, r, low)
        assert result.passed, f"{what} output {i}: {result.message}"


def _gemm_engines() -> list[str]:
    from ascend_ops import _C

    return list(_C.cpu_gemm_engines())


GEMM_KIND_VARIABLES = ("ASCEND_OPS_CPU_GEMM_FP32_OUT", "ASCEND_OPS_CPU_GEMM_ROUNDED")


@pytest.fixture(params=_gemm_engines())
def gemm_engine(request, monkeypatch):
    """Runs a test on each GEMM engine this CPU offers for bfloat16 (onednn, mkl, amx, avx512bf16,
    avx2, portable), forced for both kinds of product with ASCEND_OPS_CPU_GEMM; float16 runs
    on portable whatever is set."""
    monkeypatch.delenv("ASCEND_OPS_CPU_PORTABLE", raising=False)
    for variable in GEMM_KIND_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", request.param)
    return request.param


def _mixed_engine_pairs() -> list[tuple[str, str]]:
    engines = _gemm_engines()
    return [(f, r) for f in engines for r in engines if f != r]


@pytest.fixture(params=_mixed_engine_pairs(), ids=lambda p: f"fp32_out={p[0]}-rounded={p[1]}")
def gemm_engine_pair(request, monkeypatch):
    """Runs a test on each pair of different engines for the two kinds of product (fp32-out,
    rounded), forced with ASCEND_OPS_CPU_GEMM_FP32_OUT and ASCEND_OPS_CPU_GEMM_ROUNDED."""
    monkeypatch.delenv("ASCEND_OPS_CPU_PORTABLE", raising=False)
    monkeypatch.delenv("ASCEND_OPS_CPU_GEMM", raising=False)
    for variable, engine in zip(GEMM_KIND_VARIABLES, request.param):
        monkeypatch.setenv(variable, engine)
    return request.param


@pytest.fixture(params=["avx512", "avx2", "portable"])
def cpu_path(request, monkeypatch):
    """Runs a test on each build of the batch-norm loops (avx512, avx2, portable), forced with
    ASCEND_OPS_CPU_BN_LOOPS; a build this CPU cannot run is skipped, the portable one runs
    everywhere."""
    from ascend_ops import _C

    for variable in ("ASCEND_OPS_CPU_PORTABLE", "ASCEND_OPS_CPU_GEMM", "ASCEND_OPS_CPU_BN_LOOPS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ASCEND_OPS_CPU_BN_LOOPS", request.param)
    try:
        engine = _C.cpu_batch_norm_engine()
    except ValueError as error:
        assert "cannot run" in str(error)
        pytest.skip(f"this CPU cannot run the {request.param} build: {error}")
    assert engine == request.param
    return request.param


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def cann_tiling_required() -> bool:
    """Whether a missing CANN Matmul tiling tool fails the run instead of skipping: .ci/run
    sets ASCEND_OPS_REQUIRE_CANN_TILING=1 (CI has ../shared beside the clone)."""
    return os.environ.get("ASCEND_OPS_REQUIRE_CANN_TILING") == "1"


def skip_without_cann_tiling() -> None:
    """Skips (naming why) when the FLCE TilingFunc library was not built; fails under CI."""
    from ascend_ops.sim import cann_tiling as _cann_tiling

    if _cann_tiling.unavailable is not None:
        if cann_tiling_required():
            pytest.fail(f"ASCEND_OPS_REQUIRE_CANN_TILING=1 but {_cann_tiling.unavailable}")
        pytest.skip(_cann_tiling.unavailable)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that reaches impl='sim' FLCE without the TilingFunc library (CannTilingUnavailable)
    is reported as skipped with the reason, unless ASCEND_OPS_REQUIRE_CANN_TILING=1."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or cann_tiling_required():
        return
    from ascend_ops.sim import cann_tiling as _cann_tiling

    if call.excinfo.errisinstance(_cann_tiling.CannTilingUnavailable):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: CannTilingUnavailable: {call.excinfo.value}")

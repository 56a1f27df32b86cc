"""The registered operators: schemas from the yaml, opcheck, torch.compile, impl choice,
tolerant loading and the `python -m ascend_ops` main job."""

import csv
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import BnCase, FlceCase

from conftest import clone_inputs

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "op_plugin"))
import gen_registration  # noqa: E402


def test_registered_schemas_are_the_yaml_ones():
    namespace, ops = gen_registration.load_ops()
    assert namespace == "ascend_ops"
    assert len(ops) == 4
    for op in ops:
        name = op["func"].split("(")[0]
        registered = getattr(torch.ops.ascend_ops, name).default._schema
        assert str(registered) == str(torch._C.parse_schema(f"ascend_ops::{op['func']}"))


def test_softmax_is_declared_writable():
    schema = torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad.default._schema
    softmax = next(a for a in schema.arguments if a.name == "softmax")
    assert softmax.alias_info is not None and softmax.alias_info.is_write


OPCHECK_FLCE = [FlceCase(19, 12, 40, torch.bfloat16, testing.MEMORY_SAVING),
                FlceCase(8, 5, 33, torch.float16, testing.HIGH_PERFORMANCE, "bool", torch.int32)]
OPCHECK_BN = [BnCase((3, 4, 5, 2)), BnCase((6, 2), torch.float16, torch.float16)]


@pytest.mark.parametrize("case", OPCHECK_FLCE, ids=lambda c: c.name)
def test_opcheck_flce(case):
    inputs = testing.flce_inputs(case)
    torch.library.opcheck(torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad.default,
                          (), clone_inputs(inputs))


@pytest.mark.parametrize("flags", [(True, True, True), (False, True, False)])
@pytest.mark.parametrize("case", OPCHECK_BN, ids=lambda c: c.name)
def test_opcheck_bn(case, flags):
    inputs = testing.bn_inputs(case)
    inputs.update(input_g=flags[0], weight_g=flags[1], bias_g=flags[2])
    torch.library.opcheck(torch.ops.ascend_ops.batch_norm_reduce_backward.default, (), inputs)


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_compile_fullgraph_flce(mode):
    torch._dynamo.reset()
    inputs = testing.flce_inputs(FlceCase(24, 16, 50, mode=mode))

    @torch.compile(fullgraph=True)
    def step(inputs):
        input_grad, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
        return input_grad * 2, weight_grad.sum()

    compiled = step(clone_inputs(inputs))
    input_grad, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs))
    assert torch.equal(compiled[0], input_grad * 2)
    assert torch.equal(compiled[1], weight_grad.sum())


def test_compile_fullgraph_bn_with_dynamic_shapes():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, dynamic=True)
    def sums(inputs):
        sum_dy, sum_dy_xmu, grad_weight, grad_bias = ascend_ops.batch_norm_reduce_backward(**inputs)
        assert grad_weight is None
        return sum_dy + 1, sum_dy_xmu, grad_bias

    for shape in [(4, 3, 5), (7, 3, 9)]:
        inputs = dict(testing.bn_inputs(BnCase(shape)), weight_g=False)
        eager = ascend_ops.batch_norm_reduce_backward(**inputs)
        compiled = sums(inputs)
        assert torch.equal(compiled[0], eager[0] + 1)
        assert torch.equal(compiled[1], eager[1]) and torch.equal(compiled[2], eager[3])


def test_available_impls_reports_each_known_impl():
    status = ascend_ops.available_impls()
    assert set(status) == {"cpu", "npu", "npu_custom", "reference", "sim"}
    for name in ("cpu", "reference", "sim"):
        assert status[name].available and status[name].reason is None
    # Where the NPU adapter cannot run, the reason names the first thing missing.
    npu = status["npu"]
    assert npu.available == (npu.reason is None)
    if not npu.available:
        assert npu.reason.startswith(("torch_npu is not installed", "torch_npu not importable",
                                      "the NPU adapter ascend_ops._npu was not built",
                                      "ascend_ops._npu", "no NPU device visible")), npu.reason


def test_unbuilt_simulator_gives_a_reason(tmp_path):
    from ascend_ops.sim import simulator as _sim

    library, reason = _sim._load(tmp_path)
    assert library is None
    assert "ascend_ops._ascendc_sim is not built" in reason


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


# Simulates a library that fails to load: `import ascend_ops._C` raises ImportError.
FAILED_LOAD = "import sys; sys.modules['ascend_ops._C'] = None\n"

WITHOUT_NATIVE = """
import torch, ascend_ops
from ascend_ops import testing
from ascend_ops.parity import parity_rows
s = ascend_ops.available_impls()
assert s['reference'].available and s['sim'].available, s
assert not s['cpu'].available and not s['npu'].available, s
print('cpu:', s['cpu'].reason)
print('npu:', s['npu'].reason)
rows = parity_rows(['reference'])
assert len(rows) == 10 and all(r.passed for r in rows), [r.worst for r in rows if not r.passed]
print('reference rows pass:', len(rows))
bad = dict(testing.bn_inputs(testing.BnCase((4, 3, 5))), mean=torch.zeros(4))
try:
    ascend_ops.batch_norm_reduce_backward(**bad, impl='reference')
except ValueError as e:
    print('raised:', e)
try:
    ascend_ops.batch_norm_reduce_backward(**testing.bn_inputs(testing.BnCase((4, 3, 5))))
except RuntimeError as e:
    print('auto raised:', e)
"""


@pytest.mark.parametrize("how", ["failed-load", "skipped"])
def test_without_the_native_library_the_reference_runs_and_the_others_say_why(how):
    if how == "failed-load":
        result = run_python(FAILED_LOAD + WITHOUT_NATIVE)
        why = "ascend_ops._C failed to load: import of ascend_ops._C halted"
    else:
        result = run_python(WITHOUT_NATIVE, ASCEND_OPS_SKIP_NATIVE="1")
        why = "ascend_ops._C not loaded: ASCEND_OPS_SKIP_NATIVE=1"
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"cpu: needs the native library: {why}" in out, out
    assert f"npu: needs the native library: {why}" in out, out
    assert "reference rows pass: 10" in out, out
    assert ("raised: batch_norm_reduce_backward: 'mean' must have length C (input.size(1)) = 3, "
            "got 4") in out, out
    assert "auto raised: impl='auto': no implementation of batch_norm_reduce_backward" in out, out


def test_main_job_prints_a_passing_parity_table():
    # unforced (a suite run with ASCEND_OPS_CPU_GEMM set must not leak into it): measured
    env = {k: v for k, v in os.environ.items()
           if k not in ("ASCEND_OPS_CPU_GEMM", "ASCEND_OPS_CPU_PORTABLE",
                        "ASCEND_OPS_CPU_GEMM_FP32_OUT", "ASCEND_OPS_CPU_GEMM_ROUNDED")}
    # a run under emulation (the aarch64 tool, ~1 min of CPU) stretches the limit with the scale
    timeout = 600 * float(os.environ.get("ASCEND_OPS_TEST_TIMEOUT_SCALE", "1"))
    result = subprocess.run([sys.executable, "-m", "ascend_ops"], capture_output=True, text=True,
                            timeout=timeout, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    # nothing buries the report: on aarch64 without BF16, torch's warning that it ran the naive
    # baseline's bfloat16 matmul with BLAS came with a C++ backtrace (testing.py)
    assert "Warning" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    out = result.stdout
    from ascend_ops import _C

    from ascend_ops.cpu_info import cpu_info

    assert f"CPU: {cpu_info().describe()}\n" in out  # x86 or aarch64 (test_cpu_info.py)
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CPU GEMM engines"))
    # one line per kind of product; the subprocess measured for itself or read the engine cache
    # file an earlier process of the run wrote: any engine this CPU offers may have won there,
    # and every engine's speed is shown
    for kind, engine_line in zip(("fp32_out", "rounded"), lines[header + 1:header + 3]):
        assert engine_line.strip().startswith(f"{kind}: "), engine_line
        assert any(f": {e} (fastest measured)" in engine_line or f": {e} (from the engine cache file)" in engine_line
                   for e in _C.cpu_gemm_engines()), engine_line
        assert all(f"{e} " in engine_line.split("TFLOP/s:")[1] for e in _C.cpu_gemm_engines())
    # where the choices are kept, and what the file holds (docs/cpu_kernels.md)
    cache = next(line for line in lines if line.startswith("CPU GEMM engine cache: "))
    assert _C.cpu_gemm_cache_path() in cache
    assert "cpu        available" in out and "reference  available" in out
    assert "sim        available" in out
    for op, impls in (("fused_linear_cross_entropy_loss_grad", ("cpu", "reference", "sim")),
                      ("batch_norm_reduce_backward", ("cpu", "reference", "sim")),
                      ("fused_linear_online_max_sum", ("cpu", "reference")),
                      ("fused_cross_entropy_loss_with_max_sum", ("cpu", "reference"))):
        for impl in impls:
            assert any(line.startswith(op) and f" {impl} " in line and line.rstrip().endswith("pass")
                       for line in out.splitlines()), out
    assert "FAIL" not in out
    assert "\nNPU first-run acceptance: not run (npu unavailable: torch_npu is not installed" in out


# That a failing row, or an op that raises, makes the main job exit 1 with the acceptance
# check still run is shown on the emulated NPU, where the whole path runs
# (tests/test_npu_emulation.py, test_one_failing_aclnn_op_fails_its_rows_and_never_the_run).


def test_main_job_help_describes_its_options_and_runs_nothing():
    result = subprocess.run([sys.executable, "-m", "ascend_ops", "--help"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith("usage: python -m ascend_ops"), out
    for option in ("--impl IMPL", "--op OP", "--json", "Exit status"):
        assert option in out, out
    assert "Parity" not in out and "Implementations:" not in out, out


def test_main_job_narrows_its_rows_and_reports_them_as_json(capsys):
    from ascend_ops.__main__ import main

    assert main(["--impl", "reference", "--op", "batch_norm_reduce_backward", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exit_status"] == 0
    assert report["machine"]["cpu"] and report["implementations"]["reference"]["available"]
    rows = report["parity"]
    assert [(r["op"], r["impl"], r["dtype"]) for r in rows] == [
        ("batch_norm_reduce_backward", "reference", dtype) for dtype in ("float32", "float16", "bfloat16")]
    assert all(r["passed"] and r["cases"] == 7 and r["documented"] == "-" for r in rows), rows
    assert "acceptance" not in report  # no NPU implementation asked for


def test_main_job_refuses_a_bad_argument_and_an_implementation_that_cannot_run(capsys):
    from ascend_ops.__main__ import main

    with pytest.raises(SystemExit) as exit:
        main(["--impl", "gpu"])
    assert exit.value.code == 2
    assert "argument --impl: invalid choice: 'gpu'" in capsys.readouterr().err
    assert main(["--impl", "npu"]) == 2  # no torch_npu here
    assert capsys.readouterr().err.startswith("npu: unavailable: torch_npu is not installed")


def test_parity_script_writes_csv(tmp_path):
    out = tmp_path / "parity.csv"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "parity.py"), "--impl", "cpu",
                             "--csv", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("machine,torch,op,impl,dtype")
    assert len(lines) == 1 + 10  # FLCE: 2 dtypes, BN: 3, online max-sum: 2, loss: 3
    rows = list(csv.DictReader(lines))
    assert all(row["passed"] == "True" and row["worst"] == "" for row in rows)
    assert all(0.0 <= float(row["max_norm_error"]) < 1e-2 for row in rows)


def test_the_simulator_library_loads_when_it_is_built():
    # A library whose structs differ from sim/simulator.py's ctypes copies refuses to load (with
    # the differences named), which would otherwise only show as skipped sim tests.
    import importlib.machinery
    from ascend_ops.sim import simulator as _sim
    here = pathlib.Path(_sim.__file__).parent
    if any((here / f"_ascendc_sim{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        assert _sim.load_error is None, _sim.load_error

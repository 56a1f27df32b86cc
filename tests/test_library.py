"""The registered operators: schemas from the yaml, opcheck, torch.compile, impl choice,
tolerant loading and the `python -m ascend_ops` main job."""

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
    assert set(status) == {"cpu", "npu", "reference", "sim"}
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
    from ascend_ops import _sim

    library, reason = _sim._load(tmp_path)
    assert library is None
    assert "ascend_ops._ascendc_sim is not built" in reason


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_without_the_native_library_every_impl_says_why():
    code = (
        "import ascend_ops, torch\n"
        "s = ascend_ops.available_impls()\n"
        "assert not any(x.available for x in s.values()), s\n"
        "print(s['cpu'].reason)\n"
        "try:\n"
        "    ascend_ops.batch_norm_reduce_backward(torch.ones(2, 1), torch.ones(2, 1), torch.zeros(1),\n"
        "        torch.ones(1), None, True, True, True, impl='reference')\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e)\n"
    )
    result = run_python(code, ASCEND_OPS_SKIP_NATIVE="1")
    assert result.returncode == 0, result.stderr
    assert "ASCEND_OPS_SKIP_NATIVE=1" in result.stdout
    assert "raised: impl='reference' is not available: ascend_ops._C not loaded" in result.stdout


def test_main_job_prints_a_passing_parity_table():
    result = subprocess.run([sys.executable, "-m", "ascend_ops"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    from ascend_ops import _C

    assert "CPU: " in out and "amx_bf16 " in out and "avx512_bf16 " in out
    engine_line = next(line for line in out.splitlines() if line.startswith("CPU GEMM engine"))
    # the subprocess measured for itself: any engine this CPU offers may have won there
    assert any(f": {e} (fastest measured)" in engine_line for e in _C.cpu_gemm_engines())
    assert all(f"{e} " in engine_line.split("TFLOP/s:")[1] for e in _C.cpu_gemm_engines())
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


def test_main_job_fails_on_a_failing_row(monkeypatch):
    from ascend_ops import __main__ as main_module
    from ascend_ops.parity import ParityRow

    bad = ParityRow("batch_norm_reduce_backward", "cpu", "float32", 1, 1.0, 1.0, False, "case: worst")
    monkeypatch.setattr(main_module, "parity_rows", lambda: [bad])
    assert main_module.main() == 1


def test_parity_script_writes_csv(tmp_path):
    out = tmp_path / "parity.csv"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "parity.py"), "--impl", "cpu",
                             "--csv", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("machine,torch,op,impl,dtype")
    assert len(lines) == 1 + 10  # FLCE: 2 dtypes, BN: 3, online max-sum: 2, loss: 3
    assert all(line.endswith(",True,") for line in lines[1:])

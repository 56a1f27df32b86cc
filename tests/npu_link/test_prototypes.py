"""The aclnn prototypes (op_plugin/csrc/npu/aclnn_prototypes.h) and the type-checked call
the adapter makes through them: a call with the declared arguments compiles; a missing,
extra or mistyped argument does not. Needs only a C++ compiler (the header is
self-contained), so it runs in the CPU suite as well as in CI's NPU link step.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.npu_link

ROOT = pathlib.Path(__file__).resolve().parents[2]
NPU_SRC = ROOT / "op_plugin" / "csrc" / "npu"
COMPILER = shutil.which("c++") or shutil.which("g++")

PRELUDE = """
#include "aclnn_prototypes.h"
using namespace ascend_ops::npu;
void probe(void* fn, aclTensor* t, const aclTensor* ct, uint64_t* ws, aclOpExecutor** ex) {
  float smoothing = 0.0f;
  double smoothing_f64 = 0.0;
  bool yes = true;
  int64_t start = 0, end = 128;
  (void)smoothing; (void)smoothing_f64; (void)yes; (void)start; (void)end; (void)ct;
"""

# The calls the adapter makes, argument for argument (FLCE memory-saving, BN, forwards).
GOOD = {
    "flce_grad": "typed_call<FlceGradPhase1>(fn, t, t, t, t, t, smoothing, t, t, nullptr, t, t, ws, ex);",
    # our package's: CANN's inputs, the loss options' five (null for SPEC §1's op), then
    # label_smoothing, logit_scale, softcap as doubles
    "flce_grad_custom": "typed_call<FlceGradCustomPhase1>(fn, t, t, t, t, t, t, t, nullptr, nullptr, nullptr, nullptr, "
                        "nullptr, nullptr, smoothing_f64, smoothing_f64, smoothing_f64, t, t, ws, ex);",
    "flce_grad_options_custom": "typed_call<FlceGradCustomPhase1>(fn, t, t, t, t, t, t, t, nullptr, t, t, t, t, t, "
                                "smoothing_f64, smoothing_f64, smoothing_f64, t, t, ws, ex);",
    "bn_reduce": "typed_call<BnReducePhase1>(fn, t, t, t, t, nullptr, yes, yes, yes, t, t, t, t, ws, ex);",
    "online_max_sum": "typed_call<OnlineMaxSumPhase1>(fn, t, t, t, start, end, t, t, t, t, t, nullptr, ws, ex);",
    "loss_with_max_sum": "typed_call<LossWithMaxSumPhase1>(fn, t, t, t, smoothing, nullptr, nullptr, t, t, t, ws, ex);",
}

# Each a plausible slip; the compiler must refuse every one.
BAD = {
    "missing_argument": "typed_call<FlceGradPhase1>(fn, t, t, t, t, t, smoothing, t, t, t, t, ws, ex);",
    "extra_argument": "typed_call<BnReducePhase1>(fn, t, t, t, t, nullptr, yes, yes, yes, t, t, t, t, t, ws, ex);",
    "double_for_float": "typed_call<FlceGradPhase1>(fn, t, t, t, t, t, smoothing_f64, t, t, nullptr, t, t, ws, ex);",
    "float_and_tensor_swapped": "typed_call<FlceGradPhase1>(fn, t, t, t, t, smoothing, t, t, t, nullptr, t, t, ws, ex);",
    # our package's generated API takes the attribute after the inputs, as a double
    "custom_flce_in_builtin_order": "typed_call<FlceGradCustomPhase1>(fn, t, t, t, t, t, smoothing_f64, t, t, nullptr, t, t, ws, ex);",
    # the package's prototype before the loss options: their inputs and attributes missing
    "custom_flce_without_the_options": "typed_call<FlceGradCustomPhase1>(fn, t, t, t, t, t, t, t, nullptr, smoothing_f64, t, t, ws, ex);",
    "custom_flce_float_attribute": "typed_call<FlceGradCustomPhase1>(fn, t, t, t, t, t, t, t, nullptr, nullptr, nullptr, "
                                   "nullptr, nullptr, nullptr, smoothing_f64, smoothing, smoothing_f64, t, t, ws, ex);",
    "float_for_bool": "typed_call<BnReducePhase1>(fn, t, t, t, t, nullptr, smoothing, yes, yes, t, t, t, t, ws, ex);",
    "bool_for_int64": "typed_call<OnlineMaxSumPhase1>(fn, t, t, t, yes, end, t, t, t, t, t, nullptr, ws, ex);",
    "const_tensor_as_output": "typed_call<FlceGradPhase1>(fn, t, t, t, t, t, smoothing, t, t, nullptr, ct, t, ws, ex);",
    "executor_for_workspace_size": "typed_call<LossWithMaxSumPhase1>(fn, t, t, t, smoothing, nullptr, nullptr, t, t, t, ex, ws);",
}


def compile_call(tmp_path: pathlib.Path, name: str, call: str) -> subprocess.CompletedProcess:
    source = tmp_path / f"{name}.cpp"
    source.write_text(PRELUDE + "  " + call + "\n}\n")
    return subprocess.run([COMPILER, "-std=c++17", "-fsyntax-only", f"-I{NPU_SRC}", str(source)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")
def test_the_declared_calls_compile(tmp_path):
    done = compile_call(tmp_path, "good", "\n  ".join(GOOD.values()))
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")
@pytest.mark.parametrize("slip", sorted(BAD))
def test_a_wrong_argument_fails_to_compile(tmp_path, slip):
    done = compile_call(tmp_path, slip, BAD[slip])
    assert done.returncode != 0, f"{slip} compiled: {BAD[slip]}"
    assert "aclnn call:" in done.stderr, done.stderr[-2000:]  # our static_assert, not a typo


def test_every_kernel_calls_aclnn_through_a_declared_prototype():
    kernels = sorted(NPU_SRC.glob("*KernelNpuOpApi.cpp"))
    assert len(kernels) == 4
    declared = set(re.findall(r"using (\w+Phase1) =", (NPU_SRC / "aclnn_prototypes.h").read_text()))
    for kernel in kernels:
        calls = re.findall(r"run_aclnn<(\w+)>", kernel.read_text())
        assert calls and set(calls) <= declared, (kernel.name, calls)
    # The call site itself goes through typed_call, never a cast of its own.
    call_header = (NPU_SRC / "aclnn_call.h").read_text()
    assert "typed_call<Phase1>(entry.get_workspace_size" in call_header
    assert "ConvertToOpApiFunc" not in call_header

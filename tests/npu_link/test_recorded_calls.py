"""The NPU adapter's kernels run against recording test doubles of torch_npu and CANN
(tests/npu_link/stub_torch_npu): every step around an aclnn call and every argument
phase 1 receives is recorded and checked against CANN's and torch_npu's conventions:

- `aclnnFusedLinearOnlineMaxSum` gets the vocabulary range as it is, end exclusive
  (CANN's kernel masks `target >= vocabEndIndex`), and an empty range without rewriting
  the targets;
- `aclnnFusedLinearCrossEntropyLossGrad` gets a bool mask as it is and strided views
  uncopied (CANN's phase 1 takes DT_BOOL and makes inputs contiguous itself);
- the lifecycle is torch_npu 2.13.0's EXEC_NPU_CMD_V1_EXT: InitExecCommonCtx, stream,
  deterministic level, the PTA cache reset of EXEC_NPU_CMD_SYNC, conversion, phase 1,
  workspace, the launch, the aclTensors destroyed BEFORE ReleaseExecCommonCtx, and the
  same order when phase 1 refuses.

Only a C++ compiler and torch are needed (no torch_npu), so this runs in the CPU suite too.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch
from torch.utils import cpp_extension

pytestmark = pytest.mark.npu_link

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUB = pathlib.Path(__file__).resolve().parent / "stub_torch_npu"
COMPILER = shutil.which("c++") or shutil.which("g++")
KERNELS = ("FusedLinearOnlineMaxSumKernelNpuOpApi.cpp", "FusedLinearCrossEntropyLossGradKernelNpuOpApi.cpp",
           "aclnn_call.cpp", "npu_tensors.cpp", "builtin_limits.cpp")


def build_and_run(out: pathlib.Path, csrc: pathlib.Path = ROOT / "op_plugin" / "csrc") -> dict:
    """Compiles the adapter sources under `csrc` with the test doubles, runs the driver
    and returns {scenario: [events]}."""
    sys.path.insert(0, str(ROOT / "op_plugin"))
    import gen_registration

    generated = out / "generated"
    gen_registration.generate_npu(generated, (2, 13))
    sources = ([csrc / "npu" / name for name in KERNELS]
               + [csrc / "validation.cpp", csrc / "target_mask.cpp", STUB / "recorder.cpp",
                  STUB / "driver.cpp"])
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    flags = ["-std=c++17", "-O0", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             f"-I{STUB / 'include'}", f"-I{STUB}", f"-I{csrc / 'npu'}", f"-I{generated}"]
    flags += [f"-I{p}" for p in cpp_extension.include_paths()]
    jobs, objects = [], []
    for source in sources:
        obj = out / (source.stem + ".o")
        objects.append(obj)
        jobs.append(subprocess.Popen([COMPILER, *flags, "-c", str(source), "-o", str(obj)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        if len(jobs) >= (os.cpu_count() or 2):
            _wait(jobs.pop(0))
    for job in jobs:
        _wait(job)
    lib = cpp_extension.library_paths()[0]
    driver = out / "driver"
    subprocess.run([COMPILER, *map(str, objects), "-o", str(driver), f"-L{lib}", "-lc10",
                    "-ltorch_cpu", f"-Wl,-rpath,{lib}"], check=True)
    lines = subprocess.run([str(driver)], capture_output=True, text=True, check=True).stdout
    scenarios: dict[str, list[str]] = {}
    current = None
    for line in lines.splitlines():
        if line.startswith("scenario "):
            current = scenarios.setdefault(line.removeprefix("scenario "), [])
        elif current is not None:
            current.append(line)
    return scenarios


def _wait(job: subprocess.Popen) -> None:
    output, _ = job.communicate()
    assert job.returncode == 0, output


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    return build_and_run(tmp_path_factory.mktemp("recorded_calls"))


def phase1(events: list[str], op: str) -> dict[str, str]:
    """The arguments phase 1 of `op` recorded, as {name: value}."""
    [line] = [e for e in events if e.startswith(f"phase1 {op} ")]
    return dict(field.split("=", 1) for field in line.split()[2:])


def position(events: list[str], event: str) -> int:
    assert event in events, f"{event!r} not in {events}"
    return events.index(event)


def test_online_max_sum_gets_the_range_end_exclusive(recorded):
    args = phase1(recorded["online_max_sum"], "aclnnFusedLinearOnlineMaxSum")
    assert (args["vocabStartIndex"], args["vocabEndIndex"]) == ("100", "150"), args  # start + V
    assert args["target"].endswith(":Long:[11]:contiguous")
    assert args["targetMaskOut"].endswith(":Byte:[2]:contiguous")
    assert args["logits"] == "null"  # memory-saving: no logits output


def test_an_empty_range_goes_as_it_is(recorded):
    # CANN accepts vocabEndIndex == vocabStartIndex and then masks every row.
    args = phase1(recorded["online_max_sum_empty_range"], "aclnnFusedLinearOnlineMaxSum")
    assert (args["vocabStartIndex"], args["vocabEndIndex"]) == ("100", "100"), args
    assert args["target_values"] == ",".join(str(t) for t in range(95, 161, 6)), args


def test_flce_grad_gets_a_bool_mask_and_strided_views_as_they_are(recorded):
    args = phase1(recorded["flce_grad_bool_mask_strided_input"],
                  "aclnnFusedLinearCrossEntropyLossGrad")
    assert args["targetMask"].endswith(":Bool:[11]:contiguous"), args
    assert args["input"].endswith(":BFloat16:[11,8]:strided"), args
    assert args["softmax"] == "null" and args["logitsMax"] != "null"  # memory-saving mode


# torch_npu 2.13.0's EXEC_NPU_CMD_V1_EXT order, with EXEC_NPU_CMD_SYNC's cache reset where
# the macro consults its cache.
LIFECYCLE = ["InitExecCommonCtx", "GetAclStream", "GetDeterministicLevel",
             "ApplyDeterministicLevel", "InitPTACacheThreadLocal", "SetPTAHashKey 0",
             "SetPTACacheHashKey null 0"]


@pytest.mark.parametrize("scenario, op", [
    ("online_max_sum", "aclnnFusedLinearOnlineMaxSum"),
    ("flce_grad_bool_mask_strided_input", "aclnnFusedLinearCrossEntropyLossGrad"),
])
def test_lifecycle_is_torch_npus(recorded, scenario, op):
    events = recorded[scenario]
    steps = [position(events, e) for e in LIFECYCLE]
    assert steps == sorted(steps), events
    created = [e.split()[1] for e in events if e.startswith("create ")]
    destroyed = [e.split()[1] for e in events if e.startswith("destroy ")]
    assert created and sorted(created) == sorted(destroyed), events
    first_create = min(events.index(f"create {t}") for t in created)
    call = next(i for i, e in enumerate(events) if e.startswith(f"phase1 {op} "))
    assert steps[-1] < first_create < call, events
    order = [call, position(events, "GetWorkSpaceAddr 64"), position(events, f"RunAclCall {op}"),
             position(events, "InitExecSubTheadCtx"), position(events, "ExecuteApiFunc")]
    assert order == sorted(order), events
    last_destroy = max(events.index(f"destroy {t}") for t in destroyed)
    release = position(events, "ReleaseExecCommonCtx")
    assert order[-1] < last_destroy < release, "the aclTensors must go before the pool context"
    assert release < position(events, "UnInitPTACacheThreadLocal") < position(events, "UnInitExecCommonCtx")
    assert events[-1] == "UnInitExecCommonCtx"


def test_a_refused_phase1_destroys_the_tensors_before_releasing_the_context(recorded):
    events = recorded["flce_grad_phase1_refused"]
    assert events[-1] == "error 161002"
    assert "GetWorkSpaceAddr 64" not in events and "RunAclCall aclnnFusedLinearCrossEntropyLossGrad" not in events
    destroyed = [i for i, e in enumerate(events) if e.startswith("destroy ")]
    created = [e for e in events if e.startswith("create ")]
    assert len(destroyed) == len(created) > 0, events
    release = position(events, "ReleaseExecCommonCtx")
    assert max(destroyed) < release < position(events, "UnInitExecCommonCtx"), events

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
  same order when phase 1 refuses;
- CANN's limits (builtin_limits.cpp) refuse V = limit + 1 and BT = limit + 1 in
  high-performance mode before phase 1 and pass the limits themselves;
- an out-of-range masked_target never reaches a kernel that trusts it: folded into the mask
  on the way to CANN's high-performance kernel and our package;
- an NC tensor is cast to ND, as torch_npu's base-format list (ND/NCHW/NHWC/NCDHW) says;
- the npu_custom entry points (module.cpp, built here into a Python extension) launch
  without the GIL.

Only a C++ compiler and torch are needed (no torch_npu), so this runs in the CPU suite too.
NPU_LINK_CSRC=<another tree's op_plugin/csrc> builds that tree's adapter instead (with
these test doubles), so each check can be seen to fail on an adapter that breaks its rule.
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
CSRC = pathlib.Path(os.environ.get("NPU_LINK_CSRC", ROOT / "op_plugin" / "csrc"))

# CANN's high-performance limits, read from their one home (builtin_limits.cpp, through
# ascend_ops._C) and checked against the tiling formula restated here from
# fused_linear_cross_entropy_loss_grad_tiling.cpp:175 with PlatformAscendC's UB on A2/A3:
# ((196608 - 256 - 32) / 2) / (V rounded up to 16 * 4) rows must be >= 1.
UB_BYTES = 196608 - 256


def _high_perf_rows(v: int) -> int:
    return ((UB_BYTES - 32) // 2) // (-(-v // 16) * 16 * 4)


def _limits() -> dict:
    from ascend_ops.npu.limits import builtin_limits

    return builtin_limits()


def generated_headers(out: pathlib.Path) -> pathlib.Path:
    sys.path.insert(0, str(ROOT / "op_plugin"))
    import gen_registration

    generated = out / "generated"
    gen_registration.generate_npu(generated, (2, 13))
    return generated


def build_and_run(out: pathlib.Path, csrc: pathlib.Path = CSRC, env: dict | None = None) -> dict:
    """Compiles the adapter sources under `csrc` with the test doubles, runs the driver
    (with `env` added to its environment) and returns {scenario: [events]}."""
    generated = generated_headers(out)
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
    lines = subprocess.run([str(driver)], capture_output=True, text=True, check=True,
                           env=dict(os.environ, **(env or {}))).stdout
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
    limits = _limits()
    v, bt = limits["flce_grad_high_perf_max_vocab"], limits["flce_grad_high_perf_max_rows"]
    shapes = f"2:{v},2:{v + 1},2:127,2:128,{bt}:128,{bt + 1}:128"
    return build_and_run(tmp_path_factory.mktemp("recorded_calls"),
                         env={"NPU_LINK_HIGH_PERF_SHAPES": shapes})


def phase1_called(events: list[str], op: str) -> bool:
    return any(e.startswith(f"phase1 {op} ") for e in events)


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


def test_the_derived_limits_are_canns_formula():
    limits = _limits()
    v = limits["flce_grad_high_perf_max_vocab"]
    assert limits["ub_bytes"] == UB_BYTES
    assert (_high_perf_rows(v), _high_perf_rows(v + 1)) == (1, 0)
    assert v == 24528  # what CANN's tiling UT (V = 32768 refused) bounds from above
    assert limits["flce_grad_high_perf_min_vocab"] == 128  # tiling.cpp:215, V * 4 >= 512 bytes
    assert limits["flce_grad_high_perf_max_rows"] == 65536  # tiling.cpp:210


def test_high_perf_v_limit_is_refused_before_phase1(recorded):
    """V at the derived limit reaches phase 1; one more is refused up front, naming the
    argument, the limit and memory-saving mode (today's 65280 let it through to die in
    CANN's tiling with a 561xxx)."""
    limits = _limits()
    v, bt = limits["flce_grad_high_perf_max_vocab"], limits["flce_grad_high_perf_max_rows"]
    op = "aclnnFusedLinearCrossEntropyLossGrad"
    for accepted in (f"2x{v}", "2x128", f"{bt}x128"):
        events = recorded[f"flce_grad_high_perf_{accepted}"]
        assert phase1_called(events, op), (accepted, events)
    for refused, needs in ((f"2x{v + 1}", f"needs 128 <= V = weight.size(0) <= {v}"),
                           ("2x127", f"needs 128 <= V = weight.size(0) <= {v}"),
                           (f"{bt + 1}x128", f"needs BT = input.size(0) <= {bt}")):
        events = recorded[f"flce_grad_high_perf_{refused}"]
        assert not phase1_called(events, op), (refused, events)
        [message] = [e for e in events if e.startswith("refused ")] or [f"no refusal in {events}"]
        assert needs in message and "memory-saving mode (softmax=None" in message, message


@pytest.mark.parametrize("scenario, op", [
    ("online_max_sum_float32_refused", "aclnnFusedLinearOnlineMaxSum"),
    ("flce_grad_float32_refused", "aclnnFusedLinearCrossEntropyLossGrad"),
])
def test_a_float32_head_is_refused_before_any_aclnn_call(recorded, scenario, op):
    """CANN's ops take half types only: float32 input and weight are refused up front,
    naming the argument (what the Hugging Face integration's float32 refusal on NPU,
    docs/npu.md, rests on), with no phase 1 and no launch."""
    events = recorded[scenario]
    assert not phase1_called(events, op), events
    assert not any(e.startswith(("RunAclCall", "ExecuteApiFunc")) for e in events), events
    [message] = [e for e in events if e.startswith("refused ")] or [f"no refusal in {events}"]
    assert "'input' must be torch.float16 or torch.bfloat16, got torch.float32" in message, message


def _ints(field: str) -> list[int]:
    return [int(x) for x in field.split(",")]


WILD = [3, -1, 7, 0, 200, 199, 2, 1, 8, 257, 4]  # driver.cpp: V = 200, rows 1, 4, 9 outside
OUTSIDE = [1, 4, 9]


def test_out_of_range_targets_are_folded_into_the_bool_mask(recorded):
    args = phase1(recorded["flce_grad_high_perf_out_of_range_bool_mask"],
                  "aclnnFusedLinearCrossEntropyLossGrad")
    mask = _ints(args["targetMask_values"])
    assert mask == [int(i == 0 or i in OUTSIDE) for i in range(11)], args
    targets = _ints(args["maskedTarget_values"])
    assert all(0 <= t < 200 for t in targets), args
    assert [t for i, t in enumerate(targets) if i not in OUTSIDE] == \
        [t for i, t in enumerate(WILD) if i not in OUTSIDE]


def test_out_of_range_targets_are_folded_into_the_packed_mask(recorded):
    args = phase1(recorded["flce_grad_custom_out_of_range_packed_mask"],
                  "aclnnAscendOpsFusedLinearCrossEntropyLossGrad")
    low, high = _ints(args["targetMask_values"])
    bits = [(low >> i) & 1 for i in range(8)] + [(high >> i) & 1 for i in range(8)]
    assert bits[:11] == [int(i == 0 or i in OUTSIDE) for i in range(11)], bits
    assert bits[11:] == [1] * 5, "the padding bits are the caller's"
    assert all(0 <= t < 200 for t in _ints(args["maskedTarget_values"])), args


def test_the_options_entry_passes_them_to_our_package(recorded):
    # SPEC §7 in the generated API's order: alpha for grad and as alphaOptional, the bias
    # and class weights, scale and cap as attributes; memory-saving mode; the bool mask
    # packed and out-of-range targets folded as for the plain op.
    args = phase1(recorded["flce_grad_options_custom"], "aclnnAscendOpsFusedLinearCrossEntropyLossGrad")
    for name, shape in (("alpha", 11), ("beta", 11), ("gamma", 11), ("bias", 200), ("classWeight", 200),
                        ("grad", 11), ("logitsMax", 11)):
        assert args[name].endswith(f":Float:[{shape}]:contiguous"), (name, args)
    assert args["softmax"] == "null"
    assert (float(args["logitScale"]), float(args["softcap"]), float(args["labelSmoothing"])) == (0.5, 30.0, 0.0)
    low, high = _ints(args["targetMask_values"])
    bits = [(low >> i) & 1 for i in range(8)] + [(high >> i) & 1 for i in range(8)]
    assert bits[:11] == [int(i == 0 or i in OUTSIDE) for i in range(11)], bits
    assert all(0 <= t < 200 for t in _ints(args["maskedTarget_values"])), args


def test_the_plain_custom_call_passes_no_option(recorded):
    args = phase1(recorded["flce_grad_custom_out_of_range_packed_mask"],
                  "aclnnAscendOpsFusedLinearCrossEntropyLossGrad")
    assert all(args[n] == "null" for n in ("bias", "classWeight", "alpha", "beta", "gamma")), args
    assert (float(args["logitScale"]), float(args["softcap"])) == (1.0, 0.0)


def test_the_options_entry_refuses_a_bad_coefficient_naming_it(recorded):
    [refusal] = [e for e in recorded["flce_grad_options_custom_bad_beta"] if e.startswith("refused ")]
    assert "beta must be float32 of shape [11]" in refusal, refusal
    assert not phase1_called(recorded["flce_grad_options_custom_bad_beta"],
                             "aclnnAscendOpsFusedLinearCrossEntropyLossGrad")


def test_memory_saving_targets_go_to_cann_as_they_are(recorded):
    # CANN's memory-saving kernel bounds each target to its block (mem_friendly.h:695):
    # nothing to fold, no extra work.
    args = phase1(recorded["flce_grad_memory_saving_out_of_range_bool_mask"],
                  "aclnnFusedLinearCrossEntropyLossGrad")
    assert _ints(args["maskedTarget_values"]) == WILD
    assert _ints(args["targetMask_values"]) == [int(i == 0) for i in range(11)]


def test_an_nc_tensor_is_cast_to_nd(recorded):
    events = recorded["flce_grad_nc_format"]
    assert "npu_format_cast 2" in events, events  # 2-D: ND (torch_npu's base formats)


# ascend_ops._npu's Python entry points (module.cpp), built with the test doubles.
MODULE_SOURCES = KERNELS + ("BatchNormReduceBackwardKernelNpuOpApi.cpp", "module.cpp")


@pytest.fixture(scope="module")
def module_events(tmp_path_factory):
    """The events of one impl="npu_custom" FLCE backward called from Python through
    module.cpp's binding."""
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    out = tmp_path_factory.mktemp("npu_module")
    generated = generated_headers(out)
    sources = ([str(CSRC / "npu" / name) for name in MODULE_SOURCES]
               + [str(CSRC / "validation.cpp"), str(CSRC / "target_mask.cpp"),
                  str(STUB / "recorder.cpp")])
    cpp_extension.load("npu_link_module", sources, build_directory=str(out),
                       extra_cflags=["-O0", "-DASCEND_OPS_TORCH_NPU_VERSION=2.13"],
                       extra_include_paths=[str(STUB / "include"), str(STUB), str(CSRC / "npu"),
                                            str(generated)],
                       is_python_module=True, verbose=False)
    record = out / "events.txt"
    code = ("import sys, torch\n"
            f"sys.path.insert(0, {str(out)!r})\n"
            "import npu_link_module as m\n"
            "x, w = torch.randn(11, 8).bfloat16(), torch.randn(50, 8).bfloat16()\n"
            "s = torch.zeros(11)\n"
            "m.fused_linear_cross_entropy_loss_grad_custom(torch.rand(11), x, w,\n"
            "    torch.zeros(11, dtype=torch.bool), torch.zeros(11, dtype=torch.long), 0.0,\n"
            "    s, s + 1, None)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300,
                   env=dict(os.environ, NPU_LINK_RECORD=str(record)))
    return record.read_text().splitlines()


def test_npu_custom_launches_without_the_gil(module_events):
    launch = position(module_events, "RunAclCall aclnnAscendOpsFusedLinearCrossEntropyLossGrad")
    assert module_events[launch + 1] == "GIL released", module_events

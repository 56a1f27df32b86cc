"""The NPU branch of every user-facing entry point, on an emulated Atlas A2 (tests/npu_emulation).

No NPU here: each test runs a child process with the stand-in torch_npu on PYTHONPATH, so
ascend_ops' own code takes its NPU branches as on hardware (npu/adapter.py loads
torch_npu and `ascend_ops._npu`, `_impls` sees tensors on device "npu", SyncBatchNorm
hands its tensors to aten's sync-BN operators on the device), and every aclnn-level call
(torch_npu's kernels and our adapter's) ends in a stand-in that enforces CANN v9.0.0's
phase-1 rules for its op and computes with the reference (tests/npu_emulation/cann.py).

- `python -m ascend_ops` runs its npu and npu_custom parity rows on device copies, reports
  CANN's documented refusal (V < 128 in high-performance mode) and known difference (the
  batch-norm reduction at |mean| = 1000) as such, and reaches the first-run acceptance
  check, SyncBatchNorm in float16 and bfloat16 included; an injected fault in one aclnn op
  fails its own rows and the acceptance rows that use it, never the run.
- nn.SyncBatchNorm (float32, float16, bfloat16; 1 and 2 ranks), linear_cross_entropy
  (both modes, both half dtypes; 1 and 2 ranks, vocab-parallel on uneven shards; every
  option route on 1, 2 and 3 ranks), torch's F.linear_cross_entropy after enable() and a
  Hugging Face model patched by aot.apply for one training step agree with the CPU path,
  with the host synchronisations docs/npu.md states; on more than one rank over the
  emulated ProcessGroupHCCL (npu_emulation/hccl.py).
- each rule of that ProcessGroupHCCL refuses what torch_npu's refuses, with its message;
  the defects those rules and the sync count were added for (a float64 all-reduce,
  collectives that follow a rank's chunk count, blocking host-to-device copies, nonzero,
  an asynchronous assert torch_npu has no kernel for) fail the emulation, put back.
- a SyncBatchNorm that hands CANN torch's dtypes (grad_output in the layer's dtype beside
  a float32 centred input; bfloat16 statistics) fails under CANN's rules with 161002,
  naming the rule's source line: the hand-overs docs/npu.md states are what CANN admits.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import ascend_ops
from ascend_ops import acceptance as npu_acceptance
from conftest import skip_without_cann_tiling
from npu_emulation import SITE, TESTS
from rank_processes import cpu_rank_environment, run_ranks

WORKER = TESTS / "npu_emulation_worker.py"
pytestmark = pytest.mark.skipif(ascend_ops.available_impls()["cpu"].available is False,
                                reason="the emulated NPU compares with the CPU kernels: "
                                       "ascend_ops._C did not load")


def emulated_environment(tmp_path: pathlib.Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a process on the emulated NPU: the stand-in torch_npu first on
    the path; with `tmp_path`, our op package "installed" where torch_npu looks for it
    (a libcust_opapi.so of the ascend_ops vendor on ASCEND_CUSTOM_OPP_PATH)."""
    env = cpu_rank_environment(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), str(TESTS), env["PYTHONPATH"]])
    env.pop("ASCEND_CUSTOM_OPP_PATH", None)
    env.pop("ASCEND_OPP_PATH", None)
    if tmp_path is not None:
        vendor = tmp_path / "vendors" / "ascend_ops"
        library = vendor / "op_api" / "lib" / "libcust_opapi.so"
        library.parent.mkdir(parents=True, exist_ok=True)
        library.write_bytes(b"")
        write_ops_info(vendor)
        env["ASCEND_CUSTOM_OPP_PATH"] = str(vendor)
    return env


def write_ops_info(vendor: pathlib.Path) -> None:
    """The op information msopgen installs with the package, made from
    ascendc_kernels/ascend_ops.json (inputN / outputN names, attr.list): what
    npu/options_support.declared_names reads to know the package takes the loss options."""
    import json

    spec = json.loads((TESTS.parent / "ascendc_kernels" / "ascend_ops.json").read_text())
    infos = {}
    for op in spec:
        info = {f"input{i}": {"name": d["name"]} for i, d in enumerate(op["input_desc"])}
        info.update({f"output{i}": {"name": d["name"]} for i, d in enumerate(op["output_desc"])})
        if op.get("attr"):
            info["attr"] = {"list": ",".join(a["name"] for a in op["attr"])}
        infos[op["op"]] = info
    config = vendor / "op_impl" / "ai_core" / "tbe" / "config" / "ascend910b"
    config.mkdir(parents=True, exist_ok=True)
    (config / "aic-ascend910b-ops-info.json").write_text(json.dumps(infos))


def run_emulated(args: list[str], env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def lines_starting(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


# --- python -m ascend_ops ---


def test_the_main_job_reaches_its_acceptance_check_on_an_npu(tmp_path):
    skip_without_cann_tiling()  # our package's FLCE kernel runs on the simulator here
    result = run_emulated(["-m", "ascend_ops", "--impl", "npu", "--impl", "npu_custom"],
                          emulated_environment(tmp_path))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "npu        available" in out and "npu_custom available" in out, out
    # every operator on CANN's built-ins, the two backward ones on our package (simulated)
    for op in ("fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
               "fused_linear_online_max_sum", "fused_cross_entropy_loss_with_max_sum"):
        assert any(" npu " in line and line.rstrip().endswith("pass") for line in lines_starting(out, op)), out
    for op in ("fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward"):
        assert any(" npu_custom " in line and line.rstrip().endswith("pass")
                   for line in lines_starting(out, op)), out
    assert "FAIL" not in out, out
    # CANN's documented refusal: high-performance mode with V = 7 < 128, refused up front
    # by the adapter, in both half dtypes; on our package it runs
    refused = [line for line in lines_starting(out, "note fused_linear_cross_entropy_loss_grad [npu,")
               if "bt9-h33-v7" in line and "refused as documented" in line]
    assert len(refused) == 2 and all("NotImplementedError: fused_linear_cross_entropy_loss_grad: "
                                     "CANN's built-in" in line for line in refused), out
    assert not any("refused" in line for line in lines_starting(out, "note fused_linear_cross_entropy_loss_grad [npu_custom,")), out
    # CANN's known difference: its batch-norm reduction at |mean| = 1000, on the built-in
    # only (our kernel sums dy·(x − mean) directly)
    differs = [line for line in lines_starting(out, "note batch_norm_reduce_backward [npu,")
               if "mean1000" in line and "differs as documented" in line]
    assert len(differs) == 3, out  # float32, float16, bfloat16 inputs
    assert not lines_starting(out, "note batch_norm_reduce_backward [npu_custom,"), out
    # ... then the acceptance check, every row run and passing
    section = out[out.index("NPU first-run acceptance"):]
    rows = [line.split()[0] for line in section.splitlines()[1:] if line.startswith("  ")]
    assert rows == ["pass"] * len(npu_acceptance.acceptance_cases()), section
    for name in ("SyncBatchNorm npu fp32", "SyncBatchNorm npu fp16", "SyncBatchNorm npu bf16",
                 "FLCE grad npu_custom", "batch_norm_reduce_backward npu_custom"):
        assert name in section, section
    assert "acceptance: every row that ran agrees" in section, section


def test_failing_aclnn_ops_fail_their_rows_and_never_the_run():
    # Two faults at once: the built-in batch-norm reduction computing 5 % off, the forward
    # companion raising. Their parity rows fail (the raising one naming the error), the
    # other two operators' rows pass, and the acceptance check still runs: every row over
    # a faulty op fails (SyncBatchNorm's backward reaches the reduction), the others pass.
    faults = "aclnnBatchNormReduceBackward=scale,aclnnFusedLinearOnlineMaxSum=raise"
    result = run_emulated(["-m", "ascend_ops", "--impl", "npu"],
                          emulated_environment(NPU_EMULATION_FAULT=faults))
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    rows = {(line.split()[0], line.split()[2]): line.split()[-1]
            for line in out.splitlines() if " npu " in line and line.split()[-1] in ("pass", "FAIL")}
    faulty = ("batch_norm_reduce_backward", "fused_linear_online_max_sum")
    assert rows and all((result == "FAIL") == (op in faulty) for (op, _), result in rows.items()), rows
    assert ("FAIL fused_linear_online_max_sum [npu, float16]: bt37-h65-v203-start203-float16 raised "
            "RuntimeError: aclnnFusedLinearOnlineMaxSum: an emulated device fault") in out, out
    section = out[out.index("NPU first-run acceptance"):]
    failing = {line.split(" (")[0].split(None, 1)[1] for line in section.splitlines()
               if line.startswith("  FAIL")}
    assert failing == {"batch_norm_reduce_backward npu fp32 [32, 64, 14, 14]",
                       "SyncBatchNorm npu fp32 |mean| = 1000",
                       "SyncBatchNorm npu fp16", "SyncBatchNorm npu bf16",
                       "online max-sum npu int64 bf16 V=32000 BT=2048",
                       "training step npu memory-saving bf16 V=32000 BT=2048"}, section
    assert sum(line.startswith("  pass") for line in section.splitlines()) == 5, section
    assert "acceptance: DON'T TRAIN YET" in section, section


# --- the training API and the Hugging Face patch ---


#: The CANN ops linear_cross_entropy's NPU path calls (through our adapter).
LCE_ACLNN_OPS = {"aclnnFusedLinearOnlineMaxSum", "aclnnFusedCrossEntropyLossWithMaxSum",
                 "aclnnFusedLinearCrossEntropyLossGrad"}


def _agree(npu, cpu, what: str) -> None:
    """The NPU run against the CPU kernels' on the same inputs, within twice SPEC §4's
    tolerance (both are held to it against float64), as the first-run check compares."""
    problem = npu_acceptance._disagreement(tuple(npu), tuple(cpu))
    assert problem is None, f"{what}: {problem}"


@pytest.mark.parametrize("world", [1, 2])
def test_sync_batch_norm_trains_on_the_npu_in_every_dtype(tmp_path, world):
    ranks = run_ranks(WORKER, world, tmp_path, env=emulated_environment(), timeout=600,
                      script_args=("sync_batch_norm",))
    for rank, results in enumerate(ranks):
        calls = results.pop("aclnn calls")
        assert set(calls) == {"aclnnBatchNormStats", "aclnnBatchNormGatherStatsWithCounts",
                              "aclnnBatchNormElemt", "aclnnBatchNormReduceBackward",
                              "aclnnBatchNormElemtBackward"}, calls
        assert set(results) == {"float32", "float16", "bfloat16"}
        for dtype, runs in results.items():
            _agree(runs["npu"], runs["cpu"], f"rank {rank} {dtype}")
            # y and x.grad in the layer's dtype, as torch_npu allocates them
            assert runs["npu"][0].dtype == runs["npu"][1].dtype == getattr(torch, dtype)
            # one host read per forward to drop empty ranks (docs/npu.md), none in one process
            assert runs["syncs"] == (0 if world == 1 else 1), (dtype, runs["syncs"])


@pytest.mark.parametrize("world", [1, 2])
def test_linear_cross_entropy_trains_on_the_npu_without_host_reads(tmp_path, world):
    ranks = run_ranks(WORKER, world, tmp_path, env=emulated_environment(), timeout=600,
                      script_args=("linear_cross_entropy",))
    for rank, results in enumerate(ranks):
        assert set(results.pop("aclnn calls")) == LCE_ACLNN_OPS
        assert len(results) == 4  # bfloat16 / float16 x memory-saving / high-performance
        for name, runs in results.items():
            _agree(runs["npu"], runs["cpu"], f"rank {rank} {name}")
            assert runs["syncs"] == 0, (name, runs["syncs"])  # docs/npu.md: none on the NPU


#: The aclnn ops each option set's NPU route reaches (docs/npu.md "Loss options on the NPU").
CANN_FORWARD, CANN_BACKWARD = "aclnnFusedLinearOnlineMaxSum", "aclnnFusedLinearCrossEntropyLossGrad"
OURS = "aclnnAscendOpsFusedLinearCrossEntropyLossGrad"
OPTION_ROUTES = {"weights-lse-zloss": {CANN_FORWARD, CANN_BACKWARD},   # npu-operators
                 "weights-accuracy": {CANN_BACKWARD},                  # npu-composition+operators
                 "softcap-zloss": {OURS}, "bias-scale": {OURS},       # npu-composition+custom
                 "smoothing-weights": {OURS}}


@pytest.mark.parametrize("world", [1, 2, 3])
def test_vocab_parallel_options_train_over_hccl_without_host_reads(tmp_path, world):
    # Every NPU route with its option sets, the vocabulary in uneven shards (300, 170, 233
    # ids) whose row chunks differ in number between the ranks; the collectives through
    # the emulated ProcessGroupHCCL, the backward of the options CANN cannot express on
    # our package's kernel (the simulator behind the emulated aclnn call, its package
    # "installed" with the ops-info ascend_ops.json makes).
    ranks = run_ranks(WORKER, world, tmp_path, env=emulated_environment(tmp_path), timeout=900,
                      script_args=("linear_cross_entropy_options",))
    for rank, results in enumerate(ranks):
        results.pop("aclnn calls")
        assert set(results) == set(OPTION_ROUTES)
        for name, runs in results.items():
            assert set(runs["aclnn"]) == OPTION_ROUTES[name], (name, runs["aclnn"])
            _agree(runs["npu"], runs["cpu"], f"rank {rank} {name}")
            assert runs["syncs"] == 0, (name, runs["syncs"])


@pytest.mark.parametrize("world, package", [(1, False), (2, True)], ids=["1rank", "2ranks-package"])
def test_torchs_linear_cross_entropy_runs_our_kernels_on_the_npu(tmp_path, world, package):
    # F.linear_cross_entropy with torch's default LinearCrossEntropyOptions() after
    # enable(): on an NPU torch asks for acc_dtype = the input's dtype, which our kernels
    # serve (in float32); data parallel over hccl on 2 ranks. A bias needs our op package
    # in the backward: without one, torch's body runs, with a warning saying why.
    env = emulated_environment(tmp_path if package else None)
    ranks = run_ranks(WORKER, world, tmp_path, env=env, timeout=600,
                      script_args=("torch_linear_cross_entropy",))
    for rank, results in enumerate(ranks):
        results.pop("aclnn calls")
        for name, runs in results.items():
            ours = package or "bias" not in name
            served = 2 if name.endswith("none") else 1  # "none": its backward is a call too
            assert runs["cpu calls"] == {"ours": served, "torch": 0}, (name, runs["cpu calls"])
            assert runs["cpu warnings"] == [], runs["cpu warnings"]
            if ours:
                assert runs["npu calls"] == {"ours": served, "torch": 0}, (name, runs["npu calls"])
                assert runs["npu warnings"] == [], runs["npu warnings"]
                _agree(runs["npu"], runs["cpu"], f"rank {rank} {name}")
                assert runs["npu"][0].dtype == torch.bfloat16  # torch's: the input's dtype
                assert runs["syncs"] == 0, (name, runs["syncs"])
            else:
                assert runs["npu calls"]["ours"] == 0 and runs["npu calls"]["torch"] >= 1
    if not package:  # warned once for the reason, in the first call declined
        [first] = [runs["npu warnings"] for name, runs in ranks[0].items()
                   if name != "aclnn calls" and runs["npu warnings"]]
        assert len(first) == 1 and "runs its own body, not our kernels" in first[0] \
            and "'linear_bias' needs our op package" in first[0], first


def test_a_hugging_face_model_patched_by_apply_takes_a_step_on_the_npu(tmp_path):
    [runs] = run_ranks(WORKER, 1, tmp_path, env=emulated_environment(), timeout=600,
                       script_args=("hugging_face",))
    assert set(runs.pop("aclnn calls")) == LCE_ACLNN_OPS  # the patched loss ran on the NPU path
    npu, cpu = runs["npu"], runs["cpu"]
    assert npu[0].dtype == torch.float32 and torch.isfinite(npu[0])
    _agree(npu[:1], cpu[:1], "loss")
    for index, what in ((1, "lm_head grad"), (2, "embedding grad"), (3, "lm_head after a step")):
        ascend_ops.testing.assert_half_grad_close(npu[index], cpu[index], what)


# --- the hand-overs CANN refuses, caught by its rules ---

OLD_SYNC_BATCH_NORM = r'''
import torch, torch_npu
import ascend_ops
from ascend_ops.training.nn import sync_batch_norm

def old_backward_reduce(grad_output, input, mean, invstd, weight, input_g, weight_g, bias_g):
    # _backward_reduce with torch's dtypes: the input centred in float32, grad_output left
    # in the layer's dtype
    shape = [1] * input.dim()
    shape[1] = input.size(1)
    input = input.float() - mean.float().view(shape)
    mean = torch.zeros_like(mean, dtype=torch.float32)
    return torch.batch_norm_backward_reduce(grad_output, input, mean, invstd.float(), weight,
                                            input_g, weight_g, bias_g)

def step(dtype):
    bn = ascend_ops.nn.SyncBatchNorm(4).to(device="npu", dtype=dtype)
    x = torch.randn(6, 4, 3).to(dtype).to("npu").requires_grad_()
    bn(x).sum().backward()

fixed_backward_reduce = sync_batch_norm._backward_reduce
for fixed in (True, False):
    sync_batch_norm._backward_reduce = fixed_backward_reduce if fixed else old_backward_reduce
    for dtype in (torch.float32, torch.float16):
        try:
            step(dtype)
            print(fixed, dtype, "ok")
        except RuntimeError as error:
            print(fixed, dtype, "error", str(error).replace("\n", " | "))
# the forward's statistics of a bfloat16 input, handed over as it is
try:
    torch.batch_norm_stats(torch.randn(6, 4, 3).bfloat16().to("npu"), 1e-5)
except RuntimeError as error:
    print("stats bfloat16 error", str(error).replace("\n", " | "))
sync_batch_norm._backward_reduce = fixed_backward_reduce
step(torch.bfloat16)
print("fixed bfloat16 ok")
'''


def test_the_old_sync_batch_norm_fails_under_canns_rules_and_the_fix_passes():
    result = run_emulated(["-c", OLD_SYNC_BATCH_NORM], emulated_environment(), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "True torch.float32 ok" in lines and "True torch.float16 ok" in lines, lines
    assert "False torch.float32 ok" in lines, lines  # one dtype: nothing to mismatch
    [old_half] = [line for line in lines if line.startswith("False torch.float16 error")]
    assert ("call aclnnBatchNormReduceBackward failed, error code is 161002" in old_half
            and "gradOut dtype DT_FLOAT16 should be the same as input's DT_FLOAT" in old_half
            and "aclnn_batch_norm_backward_reduce.cpp:142-144" in old_half), old_half
    [stats] = [line for line in lines if line.startswith("stats bfloat16 error")]
    assert ("call aclnnBatchNormStats failed, error code is 161002" in stats
            and "input not implemented for DT_BF16" in stats
            and "aclnn_batch_norm_stats.cpp:72-79, :84" in stats), stats
    assert "fixed bfloat16 ok" in lines, lines


# --- the collectives over HCCL, and the defects its rules and the sync count catch ---


def test_each_hccl_rule_refuses_what_torch_npus_process_group_refuses(tmp_path):
    ranks = run_ranks(WORKER, 2, tmp_path, env=emulated_environment(), timeout=300,
                      script_args=("hccl_rules",))
    for rank, results in enumerate(ranks):
        assert results["errors"] == {
            # checkSupportedDataType (ProcessGroupHCCL.cpp:173-186): no FP64 / UINT64 on an A2
            "float64 all_reduce": "RuntimeError: HCCL allreduce: Unsupported data type at::kDouble",
            "uint64 all_reduce": "RuntimeError: HCCL allreduce: Unsupported data type "
                                 "at::ScalarType::UInt64",
            "float64 reduce_scatter": "RuntimeError: HCCL reduce_scatter: Unsupported data type "
                                      "at::kDouble",
            "BAND": "RuntimeError: Cannot use ReduceOp.BAND with HCCL",            # :162-165
            "a transposed view": "RuntimeError: Tensors must be contiguous",       # :3161-3163
            "a CPU tensor": "RuntimeError: No backend type associated with device type cpu",
            "CPU outputs of all_gather": "RuntimeError: Tensors must be NPU and dense",  # :3184
            "unpaired shapes": "RuntimeError: emulated HCCL: the ranks' collectives do not pair "
                               "(HCCL would pair them anyway, hanging or reducing unrelated "
                               "buffers): rank 0 allreduce SUM float32[2]; rank 1 allreduce SUM "
                               "float32[3]",
            "unpaired ops": "RuntimeError: emulated HCCL: the ranks' collectives do not pair "
                            "(HCCL would pair them anyway, hanging or reducing unrelated "
                            "buffers): rank 0 allreduce MIN float32[2]; rank 1 allreduce MAX "
                            "float32[2]",
            "all_to_all": "NotImplementedError: emulated ProcessGroupHCCL: "
                          "c10d.alltoall_base_.default is not emulated (tests/npu_emulation/"
                          "hccl.py lists what is)",
        }, (rank, results["errors"])
        accepted = results["accepted"]
        assert accepted["int64 sum"].tolist() == [3, 3, 3]
        assert accepted["bfloat16 max"].tolist() == [2.0, 2.0, 2.0]
        assert accepted["float32 avg"].tolist() == [1.5, 1.5, 1.5]    # summed, then divided
        assert accepted["uint8 sum"].tolist() == [3, 3, 3]            # as int32 (:4734-4737)
        assert accepted["bool sum"].tolist() == [True, True, True]    # rank 0's True, OR-ed
        assert accepted["float64 all_gather"].tolist() == [[1.0, 1.0], [2.0, 2.0]]  # no type check


def test_the_defects_of_before_fail_the_emulation_and_the_fixes_pass(tmp_path):
    # Put back one at a time on the NPU, 2 ranks, uneven shards: row_targets' float64
    # all-reduce (and its torch.tensor(..., device=) scalars, two blocking copies), the
    # composition forward's per-chunk collectives, bias_gradient's nonzero, and the
    # asynchronous assert in a compiled graph where torch_npu has no kernel for it.
    ranks = run_ranks(WORKER, 2, tmp_path, env=emulated_environment(tmp_path), timeout=600,
                      script_args=("old_defects",))
    for rank, results in enumerate(ranks):
        results.pop("aclnn calls")
        fixed = {name: outcome for name, outcome in results.items() if name.endswith(" fixed")}
        assert fixed == {"float64 collective fixed": ("ok", 0), "per-chunk collectives fixed": ("ok", 0),
                         "host copies fixed": ("ok", 0), "nonzero fixed": ("ok", 0),
                         "assert in a graph fixed": ("ok", None)}, (rank, fixed)
        assert results["float64 collective old"] == (
            "RuntimeError: HCCL allreduce: Unsupported data type at::kDouble", None)
        assert results["per-chunk collectives old"][0].startswith(
            "RuntimeError: emulated HCCL: the ranks' collectives do not pair"), results
        assert "rank 0 allreduce MAX float32[8]; rank 1 allreduce MAX float32[14]" \
            in results["per-chunk collectives old"][0], results  # 8-row chunks at V = 300, 14 at 170
        assert results["host copies old"] == ("ok", 2)  # two torch.tensor(..., device=) copies
        assert results["nonzero old"] == ("ok", 3)      # one per row chunk of the bias gradient
        assert results["assert in a graph old"][0] == (
            "NotImplementedError: Could not run 'aten::_assert_async.msg' with arguments from the "
            "'PrivateUse1' backend (the emulated torch_npu 2.13.0 registers no kernel for it)")


STAND_IN_RULES = r'''
import torch, torch_npu
from npu_emulation import cann
from npu_emulation.device import empty, NpuTensor, FORMAT_NC1HWC0

def npu(t):
    return t.to("npu")

def refusal(call):
    try:
        call()
    except cann.AclnnRefusal as r:
        return f"{r.status} {r.source.split(':', 1)[1]}"
    return "accepted"

x = npu(torch.randn(4, 3, 5))
x4 = npu(torch.randn(2, 3, 4, 5))
c = lambda dtype=torch.float32: empty([3], dtype)
checks = {
    "stats f32": lambda: cann.batch_norm_stats(x, 1e-5, c(), c()),
    "stats bf16": lambda: cann.batch_norm_stats(x.bfloat16(), 1e-5, c(), c()),
    "stats f16 out": lambda: cann.batch_norm_stats(x, 1e-5, c(torch.float16), c()),
    "stats 1-d": lambda: cann.batch_norm_stats(npu(torch.randn(4)), 1e-5, c(), c()),
    "stats 9-d": lambda: cann.batch_norm_stats(npu(torch.randn(1, 3, *[1] * 7)), 1e-5, c(), c()),
    "stats 5HD": lambda: cann.batch_norm_stats(torch_npu.npu_format_cast(x, FORMAT_NC1HWC0), 1e-5, c(), c()),
    "gather int counts": lambda: cann.batch_norm_gather_stats_with_counts(
        x, npu(torch.rand(2, 3)), npu(torch.rand(2, 3)), None, None, 0.1, 1e-5,
        npu(torch.tensor([4, 4], dtype=torch.int32)), c(), c()),
    "gather f32 counts": lambda: cann.batch_norm_gather_stats_with_counts(
        x, npu(torch.rand(2, 3)), npu(torch.rand(2, 3)), None, None, 0.1, 1e-5,
        npu(torch.tensor([4.0, 4.0])), c(), c()),
    "gather counts of 3 ranks": lambda: cann.batch_norm_gather_stats_with_counts(
        x, npu(torch.rand(2, 3)), npu(torch.rand(2, 3)), None, None, 0.1, 1e-5,
        npu(torch.ones(3)), c(), c()),
    "reduce mixed": lambda: cann.batch_norm_reduce_backward(
        x.half(), x, c(), c(), None, True, False, False, c(), c(), None, None),
    "reduce no sum_dy": lambda: cann.batch_norm_reduce_backward(
        x, x, c(), c(), None, True, False, False, None, c(), None, None),
    "reduce bf16": lambda: cann.batch_norm_reduce_backward(
        x.bfloat16(), x.bfloat16(), c(), c(), None, True, True, True, c(), c(), c(), c()),
    "elemt f64 weight": lambda: cann.batch_norm_elemt(x, c(torch.float64), None, c(), c(), 1e-5, empty([4, 3, 5], torch.float32)),
    "elemt_backward int64 counter": lambda: cann.batch_norm_elemt_backward(
        x, x, c(), c(), None, c(), c(), npu(torch.tensor([20])), empty([4, 3, 5], torch.float32)),
    "elemt_backward int32 counter": lambda: cann.batch_norm_elemt_backward(
        x, x, c(), c(), None, c(), c(), npu(torch.tensor([20], dtype=torch.int32)), empty([4, 3, 5], torch.float32)),
    "flce v 7 high-perf": lambda: cann.fused_linear_cross_entropy_loss_grad(
        npu(torch.ones(2)), npu(torch.randn(2, 4)).bfloat16(), npu(torch.randn(7, 4)).bfloat16(),
        npu(torch.zeros(2, dtype=torch.bool)), npu(torch.zeros(2, dtype=torch.int64)), 0.0, None, None,
        npu(torch.rand(2, 7)), empty([2, 4], torch.bfloat16), empty([7, 4], torch.bfloat16)),
    "flce float32 input": lambda: cann.fused_linear_cross_entropy_loss_grad(
        npu(torch.ones(2)), npu(torch.randn(2, 4)), npu(torch.randn(7, 4)),
        npu(torch.zeros(2, dtype=torch.bool)), npu(torch.zeros(2, dtype=torch.int64)), 0.0,
        npu(torch.zeros(2)), npu(torch.ones(2)), None, empty([2, 4], torch.float32), empty([7, 4], torch.float32)),
    "online v 0": lambda: cann.fused_linear_online_max_sum(
        npu(torch.randn(2, 4)).half(), npu(torch.randn(0, 4)).half(), npu(torch.zeros(2, dtype=torch.int64)),
        0, 0, c(), c(), c(), empty([1], torch.uint8), empty([2], torch.int64), None),
    "loss smoothing": lambda: cann.fused_cross_entropy_loss_with_max_sum(
        npu(torch.zeros(2)), npu(torch.ones(2)), npu(torch.zeros(2)), 0.1, None, None, None,
        empty([2], torch.float32), None),
    # ConvertType gives a 3-D tensor NCL: CANN's ND-only op refuses it as not ND
    "flce 3-d input": lambda: cann.fused_linear_cross_entropy_loss_grad(
        npu(torch.ones(2)), npu(torch.randn(2, 1, 4)).bfloat16(), npu(torch.randn(7, 4)).bfloat16(),
        npu(torch.zeros(2, dtype=torch.bool)), npu(torch.zeros(2, dtype=torch.int64)), 0.0,
        npu(torch.zeros(2)), npu(torch.ones(2)), None, empty([2, 4], torch.bfloat16), empty([7, 4], torch.bfloat16)),
    # ... while our package's OpDef declares ND under FormatMatchMode DEFAULT: NCHW becomes ND
    "custom bn NCHW": lambda: cann.custom_batch_norm_reduce_backward(
        x4, x4, c(), c(), None, True, False, False, c(), c(), None, None),
    "custom bn 5HD": lambda: cann.custom_batch_norm_reduce_backward(
        torch_npu.npu_format_cast(x4, FORMAT_NC1HWC0), x4, c(), c(), None, True, False, False,
        c(), c(), None, None),
}
for name, call in checks.items():
    print(f"{name}: {refusal(call)}")
host = torch.randn(3)
copies = {  # a blocking copy between host and device waits for the stream; non_blocking does not
    "tensor on the device": lambda: torch.tensor(1.0, device="npu"),
    "to the device": lambda: host.to("npu"),
    "to the device, non_blocking": lambda: host.to("npu", non_blocking=True),
    "copy_ into the device": lambda: x.view(-1)[:3].copy_(host),
    "to the host": lambda: x.cpu(),
    "full on the device": lambda: torch.full((3,), 2.0, device="npu"),
}
for name, call in copies.items():
    before = torch_npu.host_syncs()
    call()
    print(f"syncs of {name}: {torch_npu.host_syncs() - before}")
'''


def test_each_stand_in_refuses_what_canns_phase_1_refuses():
    result = run_emulated(["-c", STAND_IN_RULES], emulated_environment(), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    got = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert got == {
        "stats f32": "accepted",
        "stats bf16": "161002 72-79, :84",          # no bfloat16 on A2/A3
        "stats f16 out": "161002 85-86",            # mean and invstd are float32
        "stats 1-d": "161002 117-118",
        "stats 9-d": "161002 117-118",
        "stats 5HD": "161002 98-113",                # a private format
        "gather int counts": "161002 96-107",        # counts are float32/16 or bfloat16
        "gather f32 counts": "accepted",
        "gather counts of 3 ranks": "161002 129-137",
        "reduce mixed": "161002 142-144",            # gradOut and input of two dtypes
        "reduce no sum_dy": "161001 99-116, :264",   # asked for, so not null
        "reduce bf16": "accepted",
        "elemt f64 weight": "161002 47-68",
        "elemt_backward int64 counter": "161002 45-46, :102",
        "elemt_backward int32 counter": "accepted",
        "flce v 7 high-perf": "161002 177-180",      # the refusal the adapter makes up front
        "flce float32 input": "161002 99-100",
        "online v 0": "161002 120-123",
        "loss smoothing": "161002 111-114",
        "flce 3-d input": "161002 116-133, :37-41",  # NCL, not ND
        "custom bn NCHW": "accepted",
        "custom bn 5HD": "161002 105-110",
        "syncs of tensor on the device": "1",
        "syncs of to the device": "1",
        "syncs of to the device, non_blocking": "0",
        "syncs of copy_ into the device": "1",
        "syncs of to the host": "1",
        "syncs of full on the device": "0",
    }, got

"""Real processes (gloo on 127.0.0.1, 2 and 3 ranks) against one process on the whole
problem: vocab-parallel linear_cross_entropy and SyncBatchNorm with uneven batches."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import testing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bn_accuracy  # noqa: E402
import distributed_worker as worker  # noqa: E402
from rank_processes import cpu_rank_environment, run_ranks  # noqa: E402

# ASCEND_OPS_TEST_TIMEOUT_SCALE stretches it where every process is emulated (.ci/run's aarch64
# run under qemu: three ranks each import torch 10-30x slower).
TIMEOUT_S = 180 * float(os.environ.get("ASCEND_OPS_TEST_TIMEOUT_SCALE", "1"))


def launch(world: int, out: pathlib.Path, engine: str | None = None) -> list[dict]:
    """Run `world` ranks of distributed_worker.py (on the GEMM `engine` forced, else the
    measured one); their saved results, rank by rank."""
    forced = {"ASCEND_OPS_CPU_GEMM": engine} if engine else {}
    return run_ranks(worker.__file__, world, out, env=cpu_rank_environment(**forced),
                     timeout=TIMEOUT_S)


# Two ranks on each engine the gradient cache runs on (forced), three on the measured one;
# where portable is the only engine (an aarch64 CPU without BF16), two ranks on it as well:
# the smallest run with more than one rank, which .ci/run's emulated aarch64 sample takes.
_ENGINES = ascend_ops._C.cpu_gemm_engines()
RANK_RUNS = [(2, e) for e in _ENGINES if e != "portable" or _ENGINES == ["portable"]] + [(3, None)]


@pytest.fixture(scope="module", params=RANK_RUNS, ids=lambda r: f"{r[0]}ranks-{r[1] or 'auto'}")
def ranks(request, tmp_path_factory):
    world, engine = request.param
    return world, launch(world, tmp_path_factory.mktemp(f"dist{world}"), engine)


def f64_cross_entropy(input, weight, target, reduction, grad=None):
    """Loss and gradients of plain F.cross_entropy in float64 (the ground truth)."""
    x = input.double().requires_grad_()
    w = weight.double().requires_grad_()
    loss = F.cross_entropy((x @ w.T).flatten(0, -2), target.flatten(), reduction=reduction)
    if reduction == "none":
        loss = loss.view(target.shape)
    loss.backward(grad.double() if grad is not None else None)
    return loss.detach(), x.grad, w.grad


def assert_half_close(ours, truth, what):
    testing.assert_half_grad_close(ours, truth, what)


@pytest.mark.parametrize("run", worker.LCE_RUNS, ids="-".join)
def test_linear_cross_entropy_ranks_match_one_process(ranks, run):
    world, results = ranks
    mode, reduction, rows = run
    p = worker.lce_problem(world)
    # every rank took the same decision: gather the kept rows or run them all
    assert [r["lce"][run][3] for r in results] == [rows == "kept-rows"] * world
    loss = [r["lce"][run][0] for r in results]
    input_grad = sum(r["lce"][run][1].double() for r in results)
    weight_grad = torch.cat([r["lce"][run][2] for r in results])
    grad = p["grad_none"] if reduction == "none" else None

    # One process on the whole vocabulary, same operators.
    x = p["input"].clone().requires_grad_()
    w = p["weight"].clone().requires_grad_()
    single = ascend_ops.linear_cross_entropy(x, w, p["target"], reduction=reduction, mode=mode)
    single.backward(grad)
    for rank_loss in loss:  # every rank holds the global loss
        torch.testing.assert_close(rank_loss, single.detach(), rtol=1e-5, atol=1e-5)
    assert_half_close(input_grad, x.grad.double(), "input grad vs one process")
    assert_half_close(weight_grad, w.grad, "weight grad vs one process")

    truth = f64_cross_entropy(p["input"], p["weight"], p["target"], reduction, grad)
    torch.testing.assert_close(loss[0].double(), truth[0], rtol=1e-5, atol=1e-5)
    assert_half_close(input_grad, truth[1], "input grad vs float64 autograd")
    assert_half_close(weight_grad, truth[2], "weight grad vs float64 autograd")


@pytest.mark.parametrize("case", ["uneven", "uneven_chunked", "uneven_some_over_budget"])
def test_linear_cross_entropy_uneven_shards(ranks, case):
    world, results = ranks
    p = worker.lce_problem(world)
    truth = f64_cross_entropy(p["input"], p["uneven_weight"], p["uneven_target"], "mean")
    for r in results:
        torch.testing.assert_close(r["lce"][case][0].double(), truth[0], rtol=1e-5, atol=1e-5)
    assert_half_close(sum(r["lce"][case][1].double() for r in results), truth[1], "input grad")
    assert_half_close(torch.cat([r["lce"][case][2] for r in results]), truth[2], "weight grad")


def test_linear_cross_entropy_ranks_agree_on_the_gradient_cache(ranks):
    """Per-rank chunk sizes differ: every rank caches, in the smallest one's chunks; one
    rank over its budget: every rank recomputes."""
    _, results = ranks
    cache_runs = bool(ascend_ops._C.lce_cache_engine(torch.bfloat16))
    assert [r["lce"]["uneven_paths"] for r in results] == [
        {"chunked": cache_runs, "some_over_budget": False}] * len(results)


# (output, input grad, parameter grads and running stats) tolerances per dtype: each
# rejects a 5 % error in one element.
BN_TOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2}


def check_bn_case(world, results, name):
    p = worker.bn_problem(world)
    key, momentum, dtype, channels_last, empty = worker.BN_CASES[name]
    c = p[key].size(1)
    bn = (torch.nn.BatchNorm1d if key == "x2" else torch.nn.BatchNorm2d)(c, momentum=momentum, dtype=dtype)
    tol = BN_TOL[dtype]
    for step in range(2):
        x, g = worker.bn_case_batch(p, name, step)
        x = x.clone().requires_grad_()
        y = bn(x)
        y.backward(g)
        ours_y = torch.cat([r["bn"][name]["outputs"][step][0] for r in results])
        ours_dx = torch.cat([r["bn"][name]["outputs"][step][1] for r in results])
        assert ours_y.dtype == dtype and ours_dx.dtype == dtype
        if channels_last:
            assert all(r["bn"][name]["outputs"][step][0].is_contiguous(memory_format=torch.channels_last)
                       for r in results if r["bn"][name]["outputs"][step][0].numel())
        torch.testing.assert_close(ours_y, y.detach(), rtol=tol, atol=tol)
        torch.testing.assert_close(ours_dx, x.grad, rtol=tol, atol=tol * 5)
    # Per-rank parameter gradients summed = the whole batch's (each step accumulates);
    # with every rank empty both are zeros.
    for param in ("weight", "bias"):
        theirs = getattr(bn, param).grad
        ours = sum(r["bn"][name][param + "_grad"] for r in results)
        torch.testing.assert_close(ours, theirs, rtol=tol * 5, atol=tol * 5)
    for r in results:  # every rank, even one with no rows, tracks the global statistics
        torch.testing.assert_close(r["bn"][name]["running_mean"], bn.running_mean, rtol=tol, atol=tol)
        torch.testing.assert_close(r["bn"][name]["running_var"], bn.running_var, rtol=tol, atol=tol)
        assert int(r["bn"][name]["num_batches_tracked"]) == 2


@pytest.mark.parametrize("name", list(worker.BN_CASES))
def test_sync_batch_norm_ranks_match_batch_norm_on_the_whole_batch(ranks, name):
    check_bn_case(*ranks, name)


@pytest.mark.parametrize("dtype", bn_accuracy.DTYPES, ids=str)
def test_sync_batch_norm_ranks_as_accurate_as_batch_norm2d(ranks, dtype):
    # Against float64, every output of SyncBatchNorm on real ranks is within 1.5x the
    # error of nn.BatchNorm2d in the same dtype on the whole batch (bn_accuracy.py): apex's
    # different batch sizes on 2 ranks, |mean| >> std and uneven rows on 3.
    world, results = ranks
    names = [name for name, w in bn_accuracy.CASE_WORLD.items() if w == world]
    assert names
    for name in names:
        p = bn_accuracy.problem(name, dtype)
        got = [r["bn_accuracy"][(name, dtype)] for r in results]
        ours = dict(y=torch.cat([g["y"] for g in got]), dx=torch.cat([g["dx"] for g in got]),
                    # data parallelism adds the per-rank parameter gradients
                    weight_grad=sum(g["weight_grad"].double() for g in got),
                    bias_grad=sum(g["bias_grad"].double() for g in got))
        for g in got:  # every rank holds the same running statistics
            assert torch.equal(g["running_mean"], got[0]["running_mean"])
            assert torch.equal(g["running_var"], got[0]["running_var"])
        ours.update(running_mean=got[0]["running_mean"], running_var=got[0]["running_var"])
        assert all(v.dtype == dtype for k, v in ours.items() if k not in ("weight_grad", "bias_grad"))
        bn_accuracy.check(ours, bn_accuracy.truth(p), bn_accuracy.batch_norm2d(p, dtype), dtype,
                          bn_accuracy.OUTPUTS)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return 1, launch(1, tmp_path_factory.mktemp("dist1"))


@pytest.mark.parametrize("name", list(worker.BN_CASES))
def test_sync_batch_norm_one_gloo_rank_matches_batch_norm(one_rank, name):
    check_bn_case(*one_rank, name)

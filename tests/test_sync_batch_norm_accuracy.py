"""The sync-BN steps are as accurate as nn.BatchNorm2d: on NVIDIA apex's different-batch-size
case, a |mean| ≫ std case and uneven ranks, every output's error against float64 is at
most 1.5× BatchNorm2d's in the same dtype (bn_accuracy.py). Here the ranks are played in
one process, in the steps and dtypes SyncBatchNorm uses on CPU (float64 statistics
gathered, Σ dy sums all-reduced in float64), on both builds of the batch-norm loops;
test_distributed.py checks the same on real gloo ranks. The two reducing aten ops alone
must round their double sums once: within about half an ulp of float64."""

import pytest
import torch

import ascend_ops  # noqa: F401  (registers the kernels)
import bn_accuracy as acc
from ascend_ops._extension import native


def five_ops(p: dict) -> dict:
    """SyncBatchNorm's forward and backward over the ranks of `p` on CPU, collectives as
    sums: batch_norm_stats before its rounding, then four aten ops."""
    xs, dys, params = p["xs"], p["dys"], p["params"]
    weight, bias = params["weight"], params["bias"]
    running_mean, running_var = params["running_mean"].clone(), params["running_var"].clone()
    stats = [native().batch_norm_stats_float64(x, acc.EPS) for x in xs]
    mean_all = torch.stack([m for m, _ in stats])  # the all_gather, in float64
    invstd_all = torch.stack([i for _, i in stats])
    counts = torch.tensor([x.numel() // x.size(1) for x in xs], dtype=torch.float64)
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        xs[0], mean_all, invstd_all, running_mean, running_var, acc.MOMENTUM, acc.EPS, counts)
    ys = [torch.batch_norm_elemt(x, weight, bias, mean, invstd, acc.EPS) for x in xs]
    reduced = [torch.batch_norm_backward_reduce(dy, x, mean, invstd, weight, True, True, True)
               for dy, x in zip(dys, xs)]
    sum_dy = sum(r[0].double() for r in reduced)  # the all_reduce, in float64
    sum_dy_xmu = sum(r[1].double() for r in reduced)
    dxs = [torch.batch_norm_backward_elemt(dy, x, mean, invstd, weight.double(), sum_dy,
                                           sum_dy_xmu, counts.int())
           for dy, x in zip(dys, xs)]
    # Data parallelism adds the per-rank parameter gradients (each in the parameter's dtype).
    weight_grad = sum(r[2].to(weight.dtype).double() for r in reduced)
    bias_grad = sum(r[3].to(weight.dtype).double() for r in reduced)
    return dict(y=torch.cat(ys), dx=torch.cat(dxs), weight_grad=weight_grad, bias_grad=bias_grad,
                running_mean=running_mean, running_var=running_var, mean=mean, invstd=invstd)


@pytest.mark.parametrize("name", list(acc.CASES))
@pytest.mark.parametrize("dtype", acc.DTYPES, ids=str)
def test_five_ops_as_accurate_as_batch_norm2d(name, dtype, cpu_path):
    p = acc.problem(name, dtype)
    exact = acc.truth(p)
    ours = five_ops(p)
    acc.check(ours, exact, acc.batch_norm2d(p, dtype), dtype, acc.OUTPUTS + ["mean", "invstd"])


@pytest.mark.parametrize("layout", ["channels_last", "rows"])
def test_reductions_accurate_in_other_layouts(layout, cpu_path):
    # The rows loops (channels innermost, or [N, C]) sum in double as the run loops do.
    p = acc.problem("apex_different_batch", torch.float32)
    if layout == "channels_last":
        p["xs"] = [x.contiguous(memory_format=torch.channels_last) for x in p["xs"]]
        p["dys"] = [d.contiguous(memory_format=torch.channels_last) for d in p["dys"]]
    else:  # [N·H·W, C]: each position a row, as BatchNorm1d sees it
        p["xs"] = [x.permute(0, 2, 3, 1).reshape(-1, x.size(1)) for x in p["xs"]]
        p["dys"] = [d.permute(0, 2, 3, 1).reshape(-1, d.size(1)) for d in p["dys"]]
    ours = five_ops(p)
    same = p
    if layout == "rows":  # the truth and BatchNorm2d on the same values as [rows, C, 1, 1]
        as_4d = lambda ts: [t[..., None, None] for t in ts]  # noqa: E731
        same = dict(p, xs=as_4d(p["xs"]), dys=as_4d(p["dys"]))
        ours["y"], ours["dx"] = as_4d([ours["y"], ours["dx"]])
    exact, theirs = acc.truth(same), acc.batch_norm2d(same, torch.float32)
    acc.check(ours, exact, theirs, torch.float32, acc.OUTPUTS)


def ulp_error(ours: torch.Tensor, exact: torch.Tensor) -> float:
    """The largest error in units of the last place of ours' dtype at each true value."""
    spacing = torch.finfo(ours.dtype).eps * exact.abs().clamp_min(torch.finfo(ours.dtype).tiny)
    spacing = 2.0 ** torch.floor(torch.log2(spacing))  # the ulp of the binade
    return ((ours.double() - exact).abs() / spacing).max().item()


@pytest.mark.parametrize("name", list(acc.CASES))
def test_reducing_aten_ops_round_their_double_sums_once(name, cpu_path):
    # batch_norm_stats' float32 mean and invstd and batch_norm_backward_reduce's float32
    # sums are the float64 values rounded once (within 0.5 ulp, and a little for invstd's
    # square root and the double sums): float32 lanes were 154 ulps off on a mean here.
    p = acc.problem(name, torch.float32)
    for x, dy in zip(p["xs"], p["dys"]):
        x64, dy64 = x.double(), dy.double()
        dims = [0, 2, 3]
        mean, invstd = torch.batch_norm_stats(x, acc.EPS)
        exact_mean = x64.mean(dims)
        exact_invstd = (x64.var(dims, unbiased=False) + acc.EPS).rsqrt()
        assert mean.dtype == invstd.dtype == torch.float32
        assert (e := ulp_error(mean, exact_mean)) <= 0.51, f"mean: {e:.2f} ulp"
        assert (e := ulp_error(invstd, exact_invstd)) <= 0.51, f"invstd: {e:.2f} ulp"
        sum_dy, sum_dy_xmu, grad_weight, grad_bias = torch.batch_norm_backward_reduce(
            dy, x, mean, invstd, p["params"]["weight"], True, True, True)
        exact_dy = dy64.sum(dims)
        exact_dy_xmu = (dy64 * (x64 - mean.double()[:, None, None])).sum(dims)
        assert (e := ulp_error(sum_dy, exact_dy)) <= 0.51, f"sum_dy: {e:.2f} ulp"
        assert (e := ulp_error(sum_dy_xmu, exact_dy_xmu)) <= 0.51, f"sum_dy_xmu: {e:.2f} ulp"
        e = ulp_error(grad_weight, exact_dy_xmu * invstd.double())
        assert e <= 0.51, f"grad_weight: {e:.2f} ulp"
        assert torch.equal(grad_bias, sum_dy)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_reductions_over_long_runs(dtype, cpu_path):
    # Runs of 4087 elements: the portable build sums half inputs in float blocks (16 terms
    # a lane) flushed into double, the AVX512 build in double. Measured here: mean and
    # invstd within 1.7 float32 ulps; each backward sum within 2^-28.7 of Σ|its terms|
    # besides its own rounding to float32, 0.06-0.13 of the bound below, which a lost
    # block, a 5 % error (3e4 times the bound) or a float64 mean's offset from its float
    # value left out of Σ dy·(x − mean) (100-1000 times, with Σ dy this large) exceed.
    gen = torch.Generator().manual_seed(0)
    offset = acc.LARGE_MEAN[dtype]
    x = (torch.randn(4, 8, 67, 61, generator=gen) + offset).to(dtype)
    dy = (torch.randn(4, 8, 67, 61, generator=gen) + 1.0).to(dtype)
    x64, dy64, dims = x.double(), dy.double(), [0, 2, 3]
    mean, invstd = torch.batch_norm_stats(x, acc.EPS)
    assert (e := ulp_error(mean, x64.mean(dims))) <= 4, f"mean: {e:.2f} ulp"
    exact_invstd = (x64.var(dims, unbiased=False) + acc.EPS).rsqrt()
    assert (e := ulp_error(invstd, exact_invstd)) <= 4, f"invstd: {e:.2f} ulp"
    for mean_given in (mean, x64.mean(dims)):  # float32, and float64 (not a float value)
        sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(
            dy, x, mean_given, invstd, None, True, False, False)
        terms = dy64 * (x64 - mean_given.double()[:, None, None])
        for ours, exact, magnitude in [(sum_dy, dy64.sum(dims), dy64.abs().sum(dims)),
                                       (sum_dy_xmu, terms.sum(dims), terms.abs().sum(dims))]:
            # 2^-26 of Σ|terms| for the sums, and half a float32 ulp for the result's rounding
            bound = 2.0**-26 * magnitude + 2.0**-24 * exact.abs()
            excess = ((ours.double() - exact).abs() / bound).max().item()
            assert excess <= 1, f"{excess:.3g} times the bound"



def ulp_of_largest(ours: torch.Tensor, exact: torch.Tensor) -> float:
    """The largest error in float32 ulps at the output's largest true value."""
    scale = torch.finfo(ours.dtype).eps * exact.abs().max().clamp_min(torch.finfo(ours.dtype).tiny)
    return ((ours.double() - exact).abs().max() / scale).item()


@pytest.mark.parametrize("name", list(acc.CASES))
def test_every_float32_output_within_an_ulp_of_the_op_in_float64(name, cpu_path):
    # Each sync-BN op (and batch_norm_reduce_backward) on float32 inputs against the same op
    # on the same values in float64 (every input converted exactly): the reductions' float32
    # outputs, element by element, within 1 ulp of their float64 twins (their double sums
    # are the float64 ones rounded once; float32 lane sums would be 2+ ulps off). The
    # element-wise ops compute in float32 (batch_norm_loops.inc), so an output near 0 after
    # cancellation (y = (x - mean)·scale + bias ≈ 0) has no per-element ulp bound: they are
    # held to 1 ulp of the output's largest value.
    p = acc.problem(name, torch.float32)
    w = p["params"]["weight"]
    b = p["params"]["bias"]
    errors = {}

    def record(key, value):
        errors[key] = max(errors.get(key, 0.0), value)

    means, invstds = [], []
    for x, dy in zip(p["xs"], p["dys"]):
        x64, dy64 = x.double(), dy.double()
        mean, invstd = torch.batch_norm_stats(x, acc.EPS)
        exact = torch.batch_norm_stats(x64, acc.EPS)
        record("stats.mean", ulp_error(mean, exact[0]))
        record("stats.invstd", ulp_error(invstd, exact[1]))
        means.append(mean)
        invstds.append(invstd)
        y = torch.batch_norm_elemt(x, w, b, mean, invstd, acc.EPS)
        y64 = torch.batch_norm_elemt(x64, w.double(), b.double(), mean.double(), invstd.double(), acc.EPS)
        record("elemt", ulp_of_largest(y, y64))
        args = (mean, invstd, w)
        ours = torch.batch_norm_backward_reduce(dy, x, *args, True, True, True)
        op = torch.ops.ascend_ops.batch_norm_reduce_backward(dy, x, *args, True, True, True)
        exact = torch.batch_norm_backward_reduce(dy64, x64, *(a.double() for a in args), True, True, True)
        for k in range(4):
            record(f"backward_reduce[{k}]", ulp_error(ours[k], exact[k]))
            record(f"batch_norm_reduce_backward[{k}]", ulp_error(op[k], exact[k]))
        counts = torch.tensor([x.numel() // x.size(1)], dtype=torch.int32)
        dx = torch.batch_norm_backward_elemt(dy, x, mean, invstd, w, ours[0], ours[1], counts)
        dx64 = torch.batch_norm_backward_elemt(dy64, x64, mean.double(), invstd.double(), w.double(),
                                               ours[0].double(), ours[1].double(), counts)
        record("backward_elemt", ulp_of_largest(dx, dx64))
    # gather_stats_with_counts on float32 per-rank statistics, against its float64 twin
    counts = torch.tensor([x.numel() // x.size(1) for x in p["xs"]], dtype=torch.float32)
    running = [p["params"]["running_mean"], p["params"]["running_var"]]
    mean_all, invstd_all = torch.stack(means), torch.stack(invstds)
    ours = torch.batch_norm_gather_stats_with_counts(
        p["xs"][0], mean_all, invstd_all, *(r.clone() for r in running), acc.MOMENTUM, acc.EPS, counts)
    exact = torch.batch_norm_gather_stats_with_counts(
        p["xs"][0].double(), mean_all.double(), invstd_all.double(), *(r.double() for r in running),
        acc.MOMENTUM, acc.EPS, counts.double())
    record("gather.mean", ulp_error(ours[0], exact[0]))
    record("gather.invstd", ulp_error(ours[1], exact[1]))
    worst = max(errors, key=errors.get)
    assert errors[worst] <= 1.0, f"{name}: {worst} {errors[worst]:.2f} ulp (all: {errors})"

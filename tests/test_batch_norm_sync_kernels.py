"""The sync-BN CPU kernels under aten's ops (batch_norm_stats, _gather_stats_with_counts,
_elemt, _backward_elemt, and float64 for _backward_reduce) against float64 oracles in plain
torch, across dtypes, layouts, odd shapes, large means and empty tensors; the oracles
themselves against autograd of F.batch_norm."""

import pytest
import torch
import torch.nn.functional as F

import ascend_ops  # noqa: F401  (registers the kernels)
from ascend_ops import _aten

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# Element-wise results: at most about one rounding of the dtype off the float64 value.
# Each rejects a 5 % error in one element.
TOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 1.5e-3, torch.bfloat16: 1.2e-2}
SHAPES = [(2, 3), (7, 5), (3, 4, 17), (2, 3, 5, 7), (4, 33, 3, 5), (2, 3, 2, 3, 4),
          (3, 300, 2, 3), (40, 2, 41, 41)]  # ..., channel blocks of 256, several tasks per channel
LAYOUTS = ["contiguous", "channels_last", "strided"]


def make(shape, dtype, layout, gen, scale=1.0, offset=0.0):
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale + offset).to(dtype)
    if layout == "channels_last" and x.dim() in (4, 5):
        return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if layout == "strided":  # neither layout: read through a copy
        return torch.cat([x, x], dim=-1)[..., ::2]
    return x


def dims(x):
    return [d for d in range(x.dim()) if d != 1]


def view(t, x):
    return t.view([1, -1] + [1] * (x.dim() - 2))


def oracle_stats(x, eps):
    x64 = x.double()
    return x64.mean(dims(x)), (x64.var(dims(x), unbiased=False) + eps).rsqrt()


def assert_close(ours, expected, tol, what):
    err = (ours.double() - expected).abs()
    bound = tol * (1 + expected.abs())
    worst = (err - bound).flatten().argmax()
    assert bool((err <= bound).all()), (
        f"{what}: element {worst.item()} ours {ours.flatten()[worst].item()} expected "
        f"{expected.flatten()[worst].item()} (tol {tol})")


def test_all_five_registered():
    assert _aten.register()
    for op in _aten.OPS:
        assert f"aten::{op} on CPU: registered" in _aten.status()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_stats(dtype, shape, layout, cpu_path):
    x = make(shape, dtype, layout, torch.Generator().manual_seed(len(shape)), 2.0, 0.5)
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    assert mean.dtype == invstd.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    expected_mean, expected_invstd = oracle_stats(x, 1e-5)
    # The sums are doubles, mean and invstd rounded once (test_sync_batch_norm_accuracy.py
    # holds float32 to 0.5 ulp).
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    assert_close(mean, expected_mean, tol, "mean")
    assert_close(invstd, expected_invstd, tol, "invstd")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_stats_large_mean_does_not_cancel(dtype, cpu_path):
    # mean 1e4, std 1: Σx² − (Σx)²/n would lose every digit of the variance in float32.
    x = make((16, 3, 30, 30), dtype, "contiguous", torch.Generator().manual_seed(1), 1.0, 1e4)
    for layout_x in (x, x.contiguous(memory_format=torch.channels_last)):
        mean, invstd = torch.batch_norm_stats(layout_x, 1e-5)
        expected_mean, expected_invstd = oracle_stats(x, 1e-5)
        assert_close(mean, expected_mean, 1e-12 if dtype == torch.float64 else 1e-7, "mean")
        assert_close(invstd, expected_invstd, 1e-11 if dtype == torch.float64 else 1e-5, "invstd")


def test_stats_empty_input():
    mean, invstd = torch.batch_norm_stats(torch.empty(0, 3, 4), 1e-5)
    assert torch.equal(mean, torch.zeros(3)) and invstd.isnan().all()  # no values: as CUDA


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("threads_n", [1, 2])
def test_stats_deterministic_for_any_thread_count(threads_n, layout, threads):
    x = make((64, 300, 7, 9), torch.float32, layout, torch.Generator().manual_seed(2))
    torch.set_num_threads(1)
    one = torch.batch_norm_stats(x, 1e-5)
    torch.set_num_threads(threads_n)
    again = torch.batch_norm_stats(x, 1e-5)
    assert all(torch.equal(a, b) for a, b in zip(one, again))


def split_batch(x, rows):
    return list(torch.split(x, rows))


@pytest.mark.parametrize("rows", [[5], [3, 6], [4, 0, 7], [0, 0, 9, 1], [1, 1]], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gather_matches_the_whole_batch(rows, dtype):
    gen = torch.Generator().manual_seed(sum(rows))
    x = make((sum(rows), 4, 3, 5), dtype, "contiguous", gen, 3.0, -2.0)
    eps, momentum = 1e-5, 0.3
    stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    means, invstds = [], []
    for part in split_batch(x, rows):
        if part.numel():
            m, i = torch.batch_norm_stats(part, eps)
        else:  # an empty rank sends zeros
            m, i = torch.zeros(4, dtype=stats_dtype), torch.zeros(4, dtype=stats_dtype)
        means.append(m)
        invstds.append(i)
    counts = torch.tensor([r * 15 for r in rows], dtype=stats_dtype)
    running_mean, running_var = torch.randn(4, generator=gen).to(dtype), torch.rand(4, generator=gen).to(dtype)
    rm, rv = running_mean.clone(), running_var.clone()
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        x, torch.stack(means), torch.stack(invstds), rm, rv, momentum, eps, counts)
    expected_mean, expected_invstd = oracle_stats(x, eps)
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    assert mean.dtype == invstd.dtype == stats_dtype
    assert_close(mean, expected_mean, tol, "mean")
    assert_close(invstd, expected_invstd, tol, "invstd")
    unbiased = x.double().var(dims(x), unbiased=True)
    assert_close(rm, (1 - momentum) * running_mean.double() + momentum * expected_mean, tol, "running_mean")
    assert_close(rv, (1 - momentum) * running_var.double() + momentum * unbiased, tol, "running_var")


def test_gather_with_no_rows_leaves_running_stats_alone():
    rm, rv = torch.randn(3), torch.rand(3)
    before = rm.clone(), rv.clone()
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        torch.empty(0, 3), torch.empty(0, 3), torch.empty(0, 3), rm, rv, 0.1, 1e-5, torch.empty(0))
    assert torch.equal(mean, torch.zeros(3)) and invstd.isnan().all()
    assert torch.equal(rm, before[0]) and torch.equal(rv, before[1])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_elemt(dtype, shape, layout, cpu_path):
    gen = torch.Generator().manual_seed(3 + len(shape))
    x = make(shape, dtype, layout, gen, 2.0, 1.0)
    c = shape[1]
    mean, invstd = oracle_stats(x, 1e-5)
    stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    mean, invstd = mean.to(stats_dtype), invstd.to(stats_dtype)
    weight, bias = torch.randn(c, generator=gen).to(dtype), torch.randn(c, generator=gen).to(dtype)
    y = torch.batch_norm_elemt(x, weight, bias, mean, invstd, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    if layout == "channels_last" and x.dim() in (4, 5):
        assert y.stride() == x.stride()  # the layout is kept
    expected = (x.double() - view(mean.double(), x)) * view(invstd.double() * weight.double(), x) \
        + view(bias.double(), x)
    assert_close(y, expected, TOL[dtype], "y")
    y_plain = torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-5)
    assert_close(y_plain, (x.double() - view(mean.double(), x)) * view(invstd.double(), x), TOL[dtype], "y")


def test_elemt_large_mean():
    x = make((8, 3, 20, 20), torch.float32, "contiguous", torch.Generator().manual_seed(4), 1.0, 1e4)
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    y = torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-5)
    m, i = oracle_stats(x, 1e-5)
    # x − mean in float32 is exact-ish: only mean's rounding to float32 (≤ 5e-4 at 1e4) shows.
    assert_close(y, (x.double() - view(m, x)) * view(i, x), 1e-3, "y")


def test_elemt_mixed_dtypes_as_cuda_accepts_them():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3, 5, generator=gen).half()
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    y = torch.batch_norm_elemt(x, torch.ones(3), torch.zeros(3, dtype=torch.half), mean, invstd, 1e-5)
    assert y.dtype == torch.half
    assert_close(y, (x.double() - view(mean.double(), x)) * view(invstd.double(), x), TOL[torch.half], "y")


def oracle_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, n):
    xmu = x.double() - view(mean.double(), x)
    inv = invstd.double()
    scale = inv * (weight.double() if weight is not None else 1)
    return (dy.double() - view(sum_dy.double() / n, x) - xmu * view(inv * inv * sum_dy_xmu.double() / n, x)) \
        * view(scale, x)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_elemt(dtype, shape, layout, cpu_path):
    gen = torch.Generator().manual_seed(6 + len(shape))
    x = make(shape, dtype, layout, gen, 2.0, 1.0)
    dy = make(shape, dtype, "contiguous", gen)  # grad_out in another layout than input
    c = shape[1]
    stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    mean, invstd = (t.to(stats_dtype) for t in oracle_stats(x, 1e-5))
    weight = torch.randn(c, generator=gen, dtype=stats_dtype)
    sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(dy, x, mean, invstd, weight, True, False, False)
    count = torch.tensor([x.numel() // c], dtype=torch.int32)
    dx = torch.batch_norm_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count)
    assert dx.dtype == dtype and dx.shape == x.shape
    expected = oracle_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, x.numel() // c)
    # Scaled by the largest gradient: dx is a difference of terms of that size.
    tol = TOL[dtype] * max(1.0, expected.abs().max().item())
    assert_close(dx, expected, tol, "dx")


def assert_same_specials_and_close(ours, expected, tol, what):
    """NaN where `expected` is NaN, the same infinities, and finite values within `tol`."""
    o = ours.double()
    assert torch.equal(o.isnan(), expected.isnan()), f"{what}: ours {o.tolist()}, expected {expected.tolist()}"
    infinite = expected.isinf()
    assert torch.equal(o[infinite], expected[infinite]), f"{what}: ours {o.tolist()}, expected {expected.tolist()}"
    finite = expected.isfinite()
    if finite.any():
        assert_close(o[finite], expected[finite], tol, what)


@pytest.mark.parametrize("mean_dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 5, 10), (3, 5, 40), (2, 5, 300)], ids=str)  # tails, steps, rows
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_backward_reduce_infinities_are_the_double_sums(dtype, shape, mean_dtype, cpu_path):
    # An Inf in grad_out gives aten's double sums ±Inf or NaN by the signs of its x − mean.
    # The portable and AVX2 half loops' float blocks alone would make every channel with an
    # Inf NaN (the correction d·Σ dy is 0·Inf with a float mean; with a float64 mean an
    # element with x = float(mean) is Inf·0): such channels are summed again in double.
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    dy = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    mean = (x.double().mean(dims(x)) + 1e-3).to(mean_dtype)  # not a value of x's dtype
    inf = float("inf")
    x[0, 0, 3], dy[0, 0, 3] = mean[0].item() + 1, inf  # +Inf
    x[-1, 1, 5], dy[-1, 1, 5] = mean[1].item() - 1, inf  # −Inf
    x[0, 2, 1], dy[0, 2, 1] = mean[2].item() + 1, inf  # +Inf and −Inf: NaN
    x[-1, 2, 6], dy[-1, 2, 6] = mean[2].item() - 1, inf
    x[0, 3, 2], dy[0, 3, 2] = mean[3].item(), -inf  # x next to mean: ±Inf, or NaN if x = mean
    x[0, 4, 9] = inf  # an Inf in x: ±Inf by dy's sign
    sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(dy, x, mean, torch.ones_like(mean), None,
                                                                True, False, False)
    x64, dy64 = x.double(), dy.double()
    expected_xmu = (dy64 * (x64 - view(mean.double(), x))).sum(dims(x))
    assert expected_xmu[:2].isinf().all() and expected_xmu[2].isnan()  # the cases above hold
    assert_same_specials_and_close(sum_dy, dy64.sum(dims(x)), 1e-5, "sum_dy")
    assert_same_specials_and_close(sum_dy_xmu, expected_xmu, 1e-5, "sum_dy_xmu")


def test_bfloat16_products_past_float_range_cancel_as_in_double(cpu_path):
    # bfloat16 reaches 3.4e38: dy·(x − mean) = ±1e50 overflows a float sum, not a double one.
    # The portable and AVX2 float blocks gave Inf − Inf = NaN for sum_dy_xmu, and Inf for
    # Σ (x − shift)² (invstd 0 instead of 1e-20). Channel 0: two such terms that cancel
    # exactly in double (x − 0.25 rounds to ±x there) and zeros; channel 1: N(0, 1).
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(4, 2, 40, generator=gen).to(torch.bfloat16)
    dy = torch.randn(4, 2, 40, generator=gen).to(torch.bfloat16)
    dy[:, 0] = 0
    x[1, 0, 4], x[1, 0, 5], dy[1, 0, 4], dy[1, 0, 5] = 1e20, -1e20, 1e30, 1e30
    mean = torch.full((2,), 0.25)
    sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(dy, x, mean, torch.ones(2), None,
                                                                True, False, False)
    x64, dy64 = x.double(), dy.double()
    expected_xmu = (dy64 * (x64 - 0.25)).sum([0, 2])
    assert expected_xmu[0] == 0 and expected_xmu.isfinite().all()
    assert_close(sum_dy_xmu, expected_xmu, 1e-6, "sum_dy_xmu")
    assert_close(sum_dy, dy64.sum([0, 2]), 1e-6, "sum_dy")
    spread = torch.randn(4, 2, 40, generator=gen).mul(1e20).to(torch.bfloat16)
    mean, invstd = torch.batch_norm_stats(spread, 1e-5)
    expected_mean, expected_invstd = oracle_stats(spread, 1e-5)
    assert_close(mean, expected_mean, 2e-6, "mean")
    assert_close(invstd, expected_invstd, 2e-6, "invstd")  # about 1e-20, not 0


@pytest.mark.parametrize("shape", [(6, 3), (5, 4, 7), (3, 5, 4, 6), (2, 3, 2, 3, 4)], ids=str)
@pytest.mark.parametrize("channels_last", [False, True])
def test_float64_family_equals_autograd_of_batch_norm(shape, channels_last):
    """stats → gather (one rank) → elemt → backward_reduce → backward_elemt in float64 is
    F.batch_norm and its autograd, to float64 rounding; the oracles above agree with it."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 3 + 1e3
    if channels_last and x.dim() in (4, 5):
        x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    dy = torch.randn(shape, generator=gen, dtype=torch.float64)
    c = shape[1]
    w = torch.randn(c, generator=gen, dtype=torch.float64)
    b = torch.randn(c, generator=gen, dtype=torch.float64)
    n = x.numel() // c
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        x, mean[None], invstd[None], None, None, 0.1, 1e-5, torch.tensor([float(n)], dtype=torch.float64))
    y = torch.batch_norm_elemt(x, w, b, mean, invstd, 1e-5)
    sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(dy, x, mean, invstd, w, True, True, True)
    dx = torch.batch_norm_backward_elemt(dy, x, mean, invstd, w, sum_dy, sum_dy_xmu,
                                         torch.tensor([n], dtype=torch.int32))
    xa, wa, ba = (t.clone().requires_grad_() for t in (x, w, b))
    ya = F.batch_norm(xa, None, None, wa, ba, True, 0.0, 1e-5)
    ya.backward(dy)
    for ours, truth, what in ((y, ya, "y"), (dx, xa.grad, "dx"), (gw, wa.grad, "grad_weight"),
                              (gb, ba.grad, "grad_bias")):
        assert ours.dtype == torch.float64
        assert_close(ours, truth.detach(), 1e-10, what)
    assert_close(dx, oracle_backward_elemt(dy, x, mean, invstd, w, sum_dy, sum_dy_xmu, n), 1e-12, "oracle")


def test_empty_inputs():
    x = torch.empty(0, 3, 4)
    stats = torch.zeros(3), torch.ones(3)
    assert torch.batch_norm_elemt(x, None, None, *stats, 1e-5).shape == (0, 3, 4)
    dx = torch.batch_norm_backward_elemt(x, x, *stats, None, torch.zeros(3), torch.zeros(3),
                                         torch.tensor([5], dtype=torch.int32))
    assert dx.shape == (0, 3, 4)
    sums = torch.batch_norm_backward_reduce(x.double(), x.double(), *(s.double() for s in stats), None,
                                            True, True, True)
    assert all(torch.equal(s, torch.zeros(3, dtype=torch.float64)) for s in sums)


BAD = [
    (lambda: torch.batch_norm_stats(torch.randn(3), 1e-5), ValueError, "'input' must have at least 2 dims"),
    (lambda: torch.batch_norm_stats(torch.randn(2, 0, 3), 1e-5), ValueError, "at least one channel"),
    (lambda: torch.batch_norm_stats(torch.ones(2, 3, dtype=torch.int32), 1e-5), TypeError,
     "'input' must be torch.float32, torch.float64"),
    (lambda: torch.batch_norm_stats(torch.randn(2, 3), -1.0), ValueError, "'eps' must be >= 0"),
    (lambda: torch.batch_norm_elemt(torch.randn(2, 3), None, None, torch.zeros(4), torch.ones(3), 1e-5),
     ValueError, "'mean' must have length C"),
    (lambda: torch.batch_norm_elemt(torch.randn(2, 3), torch.ones(3, 1), None, torch.zeros(3), torch.ones(3), 1e-5),
     ValueError, "'weight' must be 1-D"),
    (lambda: torch.batch_norm_gather_stats_with_counts(torch.randn(2, 3), torch.zeros(2, 3), torch.ones(2, 3),
                                                       None, None, 0.1, 1e-5, torch.ones(3)),
     ValueError, "'counts' must be 1-D with one count per row of 'mean'"),
    (lambda: torch.batch_norm_gather_stats_with_counts(torch.randn(2, 3), torch.zeros(2, 3), torch.ones(2, 4),
                                                       None, None, 0.1, 1e-5, torch.ones(2)),
     ValueError, "'invstd' must be \\[world, C\\]"),
    (lambda: torch.batch_norm_gather_stats_with_counts(torch.randn(2, 3), torch.zeros(2, 3), torch.ones(2, 3),
                                                       None, None, 0.1, 1e-5, torch.tensor([1.0, -1.0])),
     ValueError, "'counts' must be finite and >= 0"),
    (lambda: torch.batch_norm_backward_elemt(torch.randn(2, 3).double(), torch.randn(2, 3), torch.zeros(3),
                                             torch.ones(3), None, torch.zeros(3), torch.zeros(3),
                                             torch.tensor([2], dtype=torch.int32)),
     TypeError, "'grad_out' must have the dtype of 'input'"),
    (lambda: torch.batch_norm_backward_elemt(torch.randn(2, 3), torch.randn(2, 3), torch.zeros(3),
                                             torch.ones(3), None, torch.zeros(3), torch.zeros(3),
                                             torch.tensor([0], dtype=torch.int32)),
     ValueError, "'count' must sum to the rows"),
    (lambda: torch.batch_norm_backward_reduce(torch.randn(2, 3).double(), torch.randn(2, 3).double(),
                                              torch.zeros(2), torch.ones(3), None, True, True, True),
     ValueError, "batch_norm_backward_reduce: 'mean' must have length C"),
]


@pytest.mark.parametrize("call, error, message", BAD, ids=[b[2] for b in BAD])
def test_bad_input_is_rejected_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_aten_backward_reduce_takes_more_than_8_dims():
    gen = torch.Generator().manual_seed(9)
    x, dy = (torch.randn(3, 2, 1, 2, 1, 1, 2, 1, 2, generator=gen) for _ in range(2))
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(dy, x, mean, invstd, None, True, False, False)
    assert_close(sum_dy, dy.double().sum(dims(x)), 1e-6, "sum_dy")
    assert_close(sum_dy_xmu, (dy.double() * (x.double() - view(mean.double(), x))).sum(dims(x)), 1e-6, "sum_dy_xmu")


def test_op_keeps_its_dtypes_float64_is_aten_only():
    x = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match="batch_norm_reduce_backward: 'input' must be torch.float32, "
                                        "torch.float16 or torch.bfloat16"):
        ascend_ops.batch_norm_reduce_backward(x, x, torch.zeros(3), torch.ones(3), None, True, True, True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tolerances_reject_a_five_percent_error(dtype):
    expected = torch.randn(50, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    ours = expected.to(dtype)
    assert_close(ours, expected, TOL[dtype], "exact")
    wrong = ours.clone()
    wrong[7] = wrong[7] * 1.05 + 0.05  # 5 % off in one element (and off zero)
    with pytest.raises(AssertionError, match="element 7"):
        assert_close(wrong, expected, TOL[dtype], "wrong")

"""ascend_ops.nn.SyncBatchNorm in one process against torch's batch norm modules, and the
aten::batch_norm_backward_reduce CPU kernel (multi-rank runs: test_distributed.py)."""

import subprocess
import sys

import pytest
import torch

import ascend_ops
from ascend_ops import _aten
from ascend_ops.nn import SyncBatchNorm

BATCH_NORMS = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
               5: torch.nn.BatchNorm3d}
SHAPES = [(7, 4), (5, 3, 6), (3, 4, 5, 2), (2, 3, 2, 3, 4)]


def compare_steps(ours, theirs, shape, steps=3, dtype=torch.float32, tol=1e-5):
    gen = torch.Generator().manual_seed(len(shape))
    for step in range(steps):
        x = (torch.randn(shape, generator=gen) * (step + 1) + step).to(dtype)
        dy = torch.randn(shape, generator=gen).to(dtype)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = ours(xa), theirs(xb)
        torch.testing.assert_close(ya, yb, rtol=tol, atol=tol)
        ya.backward(dy)
        yb.backward(dy)
        torch.testing.assert_close(xa.grad, xb.grad, rtol=tol * 10, atol=tol * 10)
    for name in ("weight", "bias"):
        a, b = getattr(ours, name), getattr(theirs, name)
        if b is not None:
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-4)
    if theirs.running_mean is not None:
        torch.testing.assert_close(ours.running_mean, theirs.running_mean)
        torch.testing.assert_close(ours.running_var, theirs.running_var)
        assert torch.equal(ours.num_batches_tracked, theirs.num_batches_tracked)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{len(s)}d")
def test_training_matches_batch_norm(shape, momentum):
    c = shape[1]
    compare_steps(SyncBatchNorm(c, momentum=momentum), BATCH_NORMS[len(shape)](c, momentum=momentum),
                  shape)


@pytest.mark.parametrize("affine, track", [(False, True), (True, False), (False, False)])
def test_affine_and_running_stats_options(affine, track):
    shape = (6, 3, 5)
    compare_steps(SyncBatchNorm(3, affine=affine, track_running_stats=track),
                  torch.nn.BatchNorm1d(3, affine=affine, track_running_stats=track), shape)


def test_eval_mode_uses_running_statistics():
    ours, theirs = SyncBatchNorm(4), torch.nn.BatchNorm2d(4)
    compare_steps(ours, theirs, (3, 4, 5, 2), steps=2)
    ours.eval()
    theirs.eval()
    compare_steps(ours, theirs, (3, 4, 5, 2), steps=1)


def test_half_input_with_float_parameters():
    compare_steps(SyncBatchNorm(3), torch.nn.BatchNorm1d(3), (8, 3, 4), steps=1)
    x = torch.randn(8, 3, 4).bfloat16().requires_grad_()
    y = SyncBatchNorm(3)(x)
    assert y.dtype == torch.bfloat16
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16


def test_convert_sync_batchnorm_keeps_state():
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 1), torch.nn.BatchNorm2d(3),
                                torch.nn.Sequential(torch.nn.BatchNorm1d(5, momentum=None)))
    model[1].running_mean.fill_(0.5)
    model.eval()
    converted = SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], SyncBatchNorm) and isinstance(converted[2][0], SyncBatchNorm)
    assert converted[2][0].momentum is None and not converted[1].training
    assert converted[1].weight is model[1].weight
    assert torch.equal(converted[1].running_mean, torch.full((3,), 0.5))


def test_bad_input():
    # torch.nn.SyncBatchNorm's checks and messages
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        SyncBatchNorm(3)(torch.randn(3))
    with pytest.raises(ValueError, match="SyncBatchNorm number of input channels should be non-zero"):
        SyncBatchNorm(0)(torch.randn(4, 0))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training, got input size 1"):
        SyncBatchNorm(3)(torch.randn(1, 3))
    # a channel count other than num_features: the kernels name the argument
    with pytest.raises(ValueError, match="'running_mean' must have length C"):
        SyncBatchNorm(3)(torch.randn(4, 2))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-13), (torch.bfloat16, 2e-2), (torch.float16, 3e-3)],
                         ids=str)
@pytest.mark.parametrize("channels_last", [False, True])
def test_dtypes_and_channels_last_match_batch_norm(dtype, tol, channels_last):
    """float64 to float64 rounding (the float32 statistics of old drifted by ~2e-7)."""
    gen = torch.Generator().manual_seed(9)
    ours, theirs = SyncBatchNorm(5, dtype=dtype), torch.nn.BatchNorm2d(5, dtype=dtype)
    for step in range(2):
        x = (torch.randn(6, 5, 7, 3, generator=gen, dtype=torch.float64) * 2 + step).to(dtype)
        dy = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(dtype)
        if channels_last:
            x, dy = (t.contiguous(memory_format=torch.channels_last) for t in (x, dy))
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = ours(xa), theirs(xb)
        assert ya.dtype == dtype and ya.is_contiguous(memory_format=torch.channels_last) == channels_last
        ya.backward(dy)
        yb.backward(dy)
        torch.testing.assert_close(ya, yb, rtol=tol, atol=tol)
        torch.testing.assert_close(xa.grad, xb.grad, rtol=tol, atol=tol * 5)
    for a, b in ((ours.weight.grad, theirs.weight.grad), (ours.bias.grad, theirs.bias.grad),
                 (ours.running_mean, theirs.running_mean), (ours.running_var, theirs.running_var)):
        torch.testing.assert_close(a, b, rtol=tol * 5, atol=tol * 5)


def test_empty_input_behaves_as_batch_norm():
    ours, theirs = SyncBatchNorm(3), torch.nn.BatchNorm2d(3)
    x = torch.empty(0, 3, 4, 5)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    assert ya.shape == yb.shape == (0, 3, 4, 5)
    ya.sum().backward()
    yb.sum().backward()
    assert xa.grad.shape == (0, 3, 4, 5)
    assert torch.equal(ours.weight.grad, torch.zeros(3)) and torch.equal(ours.bias.grad, torch.zeros(3))
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad)
    assert torch.equal(ours.running_mean, theirs.running_mean)  # left alone: no data
    assert torch.equal(ours.running_var, theirs.running_var)


def test_runs_aten_sync_ops_without_a_float64_copy_of_the_input():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.f64_numels = [], []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.ops.append(func.overloadpacket.__name__)
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                    self.f64_numels.append(t.numel())
            return out

    bn = SyncBatchNorm(4)
    x = torch.randn(8, 4, 6, 6, requires_grad=True)
    with Log() as log:
        bn(x).sum().backward()
    # On CPU the statistics come from our batch_norm_stats kernel before its rounding
    # (ascend_ops._C.batch_norm_stats_float64, not through the dispatcher); the other
    # four steps are aten's ops.
    assert "batch_norm_stats" not in log.ops
    for op in set(_aten.OPS) - {"batch_norm_stats"}:
        assert op in log.ops, f"{op} not called: {log.ops}"
    assert max(log.f64_numels, default=0) < x.numel(), "a float64 tensor the size of the input"


def test_gathers_unrounded_statistics_on_cpu(monkeypatch):
    # |mean| >> std: a float32 mean (steps of 1e-3 at 1e4) would put the variance 6e-5 off.
    from ascend_ops.training.nn import sync_batch_norm

    x = torch.randn(6, 3, 5, 5, generator=torch.Generator().manual_seed(3)) + 1e4
    mean, invstd = sync_batch_norm._batch_norm_stats(x, 1e-5)
    assert mean.dtype == invstd.dtype == torch.float64
    torch.testing.assert_close(mean, x.double().mean((0, 2, 3)), rtol=1e-13, atol=0)
    torch.testing.assert_close(invstd, (x.double().var((0, 2, 3), unbiased=False) + 1e-5).rsqrt(),
                               rtol=1e-10, atol=0)
    # Where our kernel does not serve aten::batch_norm_stats, torch's op (and its dtype).
    monkeypatch.setattr(_aten, "serves", lambda op: False)
    mean32, _ = sync_batch_norm._batch_norm_stats(x, 1e-5)
    assert mean32.dtype == torch.float32


def test_aten_batch_norm_backward_reduce_runs_on_cpu():
    assert "registered: ascend_ops" in _aten.status()
    gen = torch.Generator().manual_seed(0)
    x, dy = torch.randn(6, 3, 5, generator=gen), torch.randn(6, 3, 5, generator=gen)
    mean, invstd = x.mean((0, 2)), (x.var((0, 2), unbiased=False) + 1e-5).rsqrt()
    sum_dy, sum_dy_xmu, grad_weight, grad_bias = torch.batch_norm_backward_reduce(
        dy, x, mean, invstd, None, True, False, True)
    expected = ascend_ops.reference.batch_norm_reduce_backward(
        dy, x, mean, invstd, None, True, True, True, compute_dtype=torch.float64)
    torch.testing.assert_close(sum_dy.double(), expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sum_dy_xmu.double(), expected[1], rtol=1e-5, atol=1e-5)
    assert grad_weight is None  # not asked for: an undefined tensor in aten's schema
    torch.testing.assert_close(grad_bias.double(), expected[3], rtol=1e-5, atol=1e-5)


def test_aten_kernel_is_left_alone_when_one_exists():
    # In a fresh process, register a CPU kernel first: importing ascend_ops must keep it.
    code = (
        "import torch\n"
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "lib.impl('batch_norm_backward_reduce', lambda *a: (None,) * 4, 'CPU')\n"
        "import ascend_ops\n"
        "from ascend_ops import _aten\n"
        "print(_aten.status())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "not registered: a CPU kernel is already registered" in result.stdout


def test_float64_on_npu_is_refused_before_any_step(monkeypatch):
    """CANN's batch-norm kernels have no float64: on NPU tensors the module says so up front
    instead of letting aten's first step reach aclnn and fail there (161002). Meta tensors
    stand in for NPU ones; a float64 CPU input still trains (ours take float64)."""
    from ascend_ops.npu import adapter as _npu_adapter

    monkeypatch.setattr(_npu_adapter, "NPU_DEVICE_TYPES", ("npu", "privateuseone", "meta"))
    bn = SyncBatchNorm(3, device="meta", dtype=torch.float64)
    with pytest.raises(TypeError, match=r"SyncBatchNorm: on NPU tensors 'input' must be "
                                        r"torch.float32, torch.float16 or torch.bfloat16 .*"
                                        r"got torch.float64"):
        bn(torch.randn(4, 3, 2, dtype=torch.float64, device="meta"))
    cpu = SyncBatchNorm(3, dtype=torch.float64)
    x = torch.randn(4, 3, 2, dtype=torch.float64)
    torch.testing.assert_close(cpu(x), torch.nn.functional.batch_norm(x, None, None, training=True))

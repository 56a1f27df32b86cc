"""The GEMM operand contract (op_plugin/csrc/cpu/gemm/operands/gemm_operands.h): no engine ever multiplies
a NaN or Inf that lies outside an operand's logical region. oneDNN's AMX kernels read an
operand's padding up to its leading dimension; on a CPU without AMX that reading cannot be
seen in results, so the suite runs with ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS=1 (every operand
handed to oneDNN / ATen must be dense or zero-padded) and ASCEND_OPS_CPU_POISON_SCRATCH=1
(the kernels' scratch starts as NaN), set in conftest.py. The tests below also hand every
op user inputs that are views of larger buffers whose other elements are NaN and Inf, on
every engine, and check the results against the same op on dense copies and float64."""

import pytest
import torch

import ascend_ops
from ascend_ops import _C, testing
from ascend_ops.training.lce import grad_cache as _grad_cache
from ascend_ops.training.lce import HIGH_PERFORMANCE, MEMORY_SAVING
from test_linear_cross_entropy import problem as lce_problem, truth

NAN, INF = float("nan"), float("inf")


def poisoned_view(t: torch.Tensor, pad: int = 11, transposed: bool = False) -> torch.Tensor:
    """`t`'s values as a view of a larger buffer whose other elements are NaN, +Inf and
    -Inf: the last dimension padded by `pad` (a row stride > the row), or, with
    `transposed`, a column-major view whose columns are padded."""
    src = t.mT if transposed else t
    big = torch.empty(*src.shape[:-1], src.shape[-1] + pad, dtype=t.dtype)
    big[..., src.shape[-1]:] = torch.tensor([NAN, INF, -INF]).repeat(pad)[:pad].to(t.dtype)
    big[..., :src.shape[-1]] = src
    view = big[..., :src.shape[-1]]
    return view.mT if transposed else view


def test_poisoned_view_holds_the_values_and_poison_around_them():
    t = torch.randn(5, 7).bfloat16()
    for transposed in (False, True):
        v = poisoned_view(t, transposed=transposed)
        assert torch.equal(v, t) and not v.is_contiguous()
        assert v.untyped_storage().nbytes() > t.numel() * 2
    assert poisoned_view(t)._base.isnan().any() and poisoned_view(t)._base.isinf().any()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_operand_ready_only_when_dense_or_zero_padded(dtype):
    dense = torch.randn(6, 21).to(dtype)
    assert _C.cpu_gemm_operand_ready(dense) and _C.cpu_gemm_operand_ready(dense.T)
    zero_padded = torch.zeros(6, 32, dtype=dtype)
    zero_padded[:, :21] = dense
    assert _C.cpu_gemm_operand_ready(zero_padded[:, :21])
    assert _C.cpu_gemm_operand_ready(zero_padded[:, :21].T)  # column-major, padded columns
    negative_zero = zero_padded.clone()
    negative_zero[:, 21:] = -0.0
    assert _C.cpu_gemm_operand_ready(negative_zero[:, :21])
    for bad in (NAN, INF, 1e-30):
        poisoned = zero_padded.clone()
        poisoned[5, 31] = bad  # the last element of the last row's padding
        assert not _C.cpu_gemm_operand_ready(poisoned[:, :21]), bad
    # One row of a padded buffer: an engine reading to the row stride would see the poison.
    assert not _C.cpu_gemm_operand_ready(poisoned_view(dense.bfloat16())[2:3])
    # The last row's padding outside the storage: not ours to read, so not "ready".
    flat = torch.zeros(6 * 32 - 11, dtype=dtype)
    assert not _C.cpu_gemm_operand_ready(flat.as_strided((6, 21), (32, 1)))
    # Neither stride 1: no BLAS layout.
    assert not _C.cpu_gemm_operand_ready(torch.zeros(6, 42, dtype=dtype)[:, ::2])


def test_checking_mode_names_the_bad_operand(monkeypatch):
    a = poisoned_view(torch.randn(7, 21).bfloat16())
    monkeypatch.setenv("ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS", "1")
    with pytest.raises(RuntimeError, match=r"GEMM operand A \[7, 21\] with strides \[32, 1\] "
                                           r"handed to the onednn engine is neither dense nor "
                                           r"zero-padded"):
        _C.cpu_check_gemm_operand(a, "A")
    _C.cpu_check_gemm_operand(a.contiguous(), "A")
    monkeypatch.setenv("ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS", "0")
    _C.cpu_check_gemm_operand(a, "A")  # checking off: nothing is read


@pytest.mark.parametrize("value", ["2", "yes"])
def test_debug_switches_refuse_other_values(monkeypatch, value):
    monkeypatch.setenv("ASCEND_OPS_CPU_POISON_SCRATCH", value)
    with pytest.raises(ValueError, match=f"ASCEND_OPS_CPU_POISON_SCRATCH must be 1 or 0; got '{value}'"):
        _C.cpu_scratch_empty([2, 3], torch.float32)
    monkeypatch.setenv("ASCEND_OPS_CPU_POISON_SCRATCH", "1")
    monkeypatch.setenv("ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS", value)
    with pytest.raises(ValueError, match="ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS must be 1 or 0"):
        _C.cpu_gemm(torch.ones(2, 3).bfloat16(), torch.ones(3, 2).bfloat16(), "portable")


def test_poison_switch_fills_scratch_with_nan(monkeypatch):
    monkeypatch.setenv("ASCEND_OPS_CPU_POISON_SCRATCH", "1")
    assert _C.cpu_scratch_empty([3, 4], torch.bfloat16).isnan().all()
    monkeypatch.setenv("ASCEND_OPS_CPU_POISON_SCRATCH", "0")
    assert _C.cpu_scratch_empty([3, 4], torch.float32).shape == (3, 4)


# (m, n, k): odd K, K above 32 and not a multiple of it (oneDNN's AMX K-tail), one row.
GEMM_SHAPES = [(74, 24, 21), (13, 40, 33), (1, 9, 7), (40, 70, 64)]


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("transposed_b", [False, True])
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=str)
def test_gemm_layer_ignores_what_lies_outside_its_operands(gemm_engine, shape, transposed_b,
                                                           rounded):
    m, n, k = shape
    gen = torch.Generator().manual_seed(m + n + k)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    ours = _C.cpu_gemm(poisoned_view(a), poisoned_view(b, 5, transposed_b), gemm_engine,
                       rounded=rounded)
    assert torch.equal(ours, _C.cpu_gemm(a, b, gemm_engine, rounded=rounded))
    exact = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (k + 1) * 2.0**-24
    if rounded:
        bound += exact.abs() * 2.0**-8
    assert torch.all((ours.double() - exact).abs() <= bound + 1e-30)


def flce_case(bt=45, h=33, v=70, seed=3):
    """fused_linear_cross_entropy_loss_grad's inputs for both modes, rows 2 and 3 masked."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(bt, h, generator=gen) / 2).bfloat16()
    w = torch.randn(v, h, generator=gen).bfloat16()
    columns = torch.randint(0, v, (bt,), generator=gen)
    columns[2:4] = -1
    logits = x.double() @ w.double().T
    return dict(
        grad=torch.rand(bt, generator=gen), input=x, weight=w,
        target_mask=ascend_ops.pack_target_mask(columns < 0), masked_target=columns.clamp_min(0),
        logits_max=logits.max(1).values.float(),
        sum_exp_logits=(logits - logits.max(1, keepdim=True).values).exp().sum(1).float(),
        softmax=torch.softmax(logits, 1).float(), columns=columns)


def flce_f64(c, high_performance):
    """float64 gradients from the same G as SPEC §1 (P from the softmax or the statistics)."""
    p = c["softmax"].double() if high_performance else torch.softmax(
        c["input"].double() @ c["weight"].double().T, 1)
    onehot = torch.zeros_like(p)
    owned = c["columns"] >= 0
    onehot[owned, c["columns"][owned]] = 1.0
    g = (p - onehot) * c["grad"].double()[:, None]
    return g @ c["weight"].double(), g.T @ c["input"].double()


@pytest.mark.parametrize("high_performance", [False, True], ids=["memory_saving", "high_performance"])
def test_flce_ignores_what_lies_outside_its_inputs(gemm_engine, high_performance):
    c = flce_case()
    stats = {"softmax": c["softmax"]} if high_performance else {
        "logits_max": c["logits_max"], "sum_exp_logits": c["sum_exp_logits"]}
    poisoned = {k: poisoned_view(t) if t.dim() == 2 else t for k, t in stats.items()}

    def flce(x, w, **s):
        return ascend_ops.fused_linear_cross_entropy_loss_grad(
            c["grad"], x, w, c["target_mask"], c["masked_target"], 0.0,
            s.get("logits_max"), s.get("sum_exp_logits"), s.get("softmax"), impl="cpu",
            scratch_bytes=1 << 14)  # vocabulary chunks of 32 columns, the last of 6

    ours = flce(poisoned_view(c["input"]), poisoned_view(c["weight"], 3), **poisoned)
    # A copy of the softmax: high-performance mode may use it as scratch (the onednn engine
    # writes G over it), and flce_f64 reads c["softmax"] below.
    dense = flce(c["input"], c["weight"], **{k: t.clone() for k, t in stats.items()})
    for o, d, t, what in zip(ours, dense, flce_f64(c, high_performance), ("input", "weight")):
        assert torch.equal(o, d), f"{what} grad differs from the dense inputs' run"
        testing.assert_half_grad_close(o, t, f"{what} grad")


def test_forward_companion_ignores_what_lies_outside_its_inputs(gemm_engine):
    c = flce_case(seed=4)
    target = torch.where(c["columns"] < 0, 999, c["columns"])
    ours = ascend_ops.fused_linear_online_max_sum(
        poisoned_view(c["input"]), poisoned_view(c["weight"]), target, 0, 70, True, impl="cpu")
    dense = ascend_ops.fused_linear_online_max_sum(c["input"], c["weight"], target, 0, 70, True,
                                                   impl="cpu")
    for o, d in zip(ours, dense):
        assert torch.equal(o, d)
    torch.testing.assert_close(ours[0].double(), c["logits_max"].double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours[1].double(), c["sum_exp_logits"].double(), rtol=1e-5, atol=0)


@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
@pytest.mark.parametrize("grad", [None, 0.37], ids=["grad1", "grad0.37"])
def test_linear_cross_entropy_ignores_what_lies_outside_its_inputs(gemm_engine, monkeypatch,
                                                                   mode, grad):
    """Through the gradient cache where the engine runs it (onednn, avx512bf16), several
    forward chunks; a 3-D input that is a slice of a wider hidden-state buffer."""
    monkeypatch.delenv(_grad_cache.GRAD_CACHE_ENV, raising=False)
    monkeypatch.setattr(_grad_cache, "CHUNK_LOGITS_BYTES", 8 * 70 * 4)
    input, weight, target = lce_problem(lead=(5, 9), h=33, v=70, seed=6)
    grad = None if grad is None else torch.tensor(grad)

    def run(x, w):
        x = x.detach().requires_grad_()
        w = w.detach().requires_grad_()
        loss = ascend_ops.linear_cross_entropy(x, w, target, mode=mode)
        cached = loss.grad_fn.saved.grad_cached
        loss.backward(grad)
        return loss.detach(), x.grad, w.grad, cached

    ours = run(poisoned_view(input), poisoned_view(weight, 5))
    dense = run(input, weight)
    assert ours[3] == dense[3] == bool(_C.lce_cache_engine(torch.bfloat16))
    for o, d in zip(ours[:3], dense[:3]):
        assert torch.equal(o, d)
    expected = truth(input, weight, target, "mean", grad=grad)
    torch.testing.assert_close(ours[0].double(), expected[0], rtol=1e-5, atol=1e-5)
    testing.assert_half_grad_close(ours[1], expected[1], "input grad")
    testing.assert_half_grad_close(ours[2], expected[2], "weight grad")


def test_the_gradient_cache_reaches_onednn_in_place():
    """The cache's row padding is written as zeros, so the layer hands it to oneDNN as it
    is (no copy of BT x V): the cost of the contract there is a write of BT x 32 at most."""
    if not _C.lce_cache_engine(torch.bfloat16):
        pytest.skip("this CPU runs bf16 GEMMs on portable only: no cache")
    input, weight, target = lce_problem(lead=(37,), h=19, v=53, seed=1)
    columns = torch.where(target < 0, -1, target).long()
    grad_cache = _grad_cache.forward(input, weight, columns, (columns >= 0).float(),
                                     torch.ones(37), 8, lambda m, s, p, o: (m, s, p, o))[0]
    assert grad_cache.shape[1] > 53  # padded rows
    assert _C.cpu_gemm_operand_ready(grad_cache[:, :53])
    assert not grad_cache[:, 53:].any()


def test_size_one_dimensions_are_dense_whatever_their_stride():
    """A size-1 dimension's stride is not a leading dimension: [1, n] with strides (1, 1)
    (the transpose of an [n, 1] weight, H = 1) is dense; one row of a padded buffer is not."""
    column = torch.randn(129, 1)
    assert column.T.stride() == (1, 1) and _C.cpu_gemm_operand_ready(column.T)
    assert _C.cpu_gemm_operand_ready(column.bfloat16())
    assert not _C.cpu_gemm_operand_ready(torch.randn(3, 1).expand(3, 5))  # overlapping rows

"""linear_cross_entropy's logits-gradient cache (python/ascend_ops/training/lce/grad_cache.py,
op_plugin/csrc/cpu/cross_entropy/lce_grad_cache.cpp): when it is taken, that it gives SPEC §1's gradients
(bit for bit against fused_linear_cross_entropy_loss_grad on the own GEMM), and against
float64 autograd of plain torch on every engine that runs it. Multi-rank runs are in
test_distributed.py."""

import pytest
import torch

import ascend_ops
from ascend_ops import _C, testing
from ascend_ops.training.lce import grad_cache as _grad_cache
from ascend_ops.training.lce import HIGH_PERFORMANCE, MEMORY_SAVING
from test_linear_cross_entropy import problem as lce_problem, truth

CACHE_ENGINES = list(_C.cpu_gemm_engines())


@pytest.fixture(params=CACHE_ENGINES)
def cache_engine(request, monkeypatch):
    """Each engine the cache runs on here (onednn, avx512bf16, avx2, portable), forced."""
    monkeypatch.delenv("ASCEND_OPS_CPU_PORTABLE", raising=False)
    monkeypatch.delenv(_grad_cache.GRAD_CACHE_ENV, raising=False)
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", request.param)
    return request.param


def problem(bt=37, h=19, v=53, dtype=torch.bfloat16, seed=0):
    """test_linear_cross_entropy's problem with `bt` rows (rows 1 and 2 ignored)."""
    return lce_problem(lead=(bt,), h=h, v=v, dtype=dtype, seed=seed)


def run(input, weight, target, grad=None, **options):
    x = input.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, w, target, **options)
    cached = loss.grad_fn.saved.grad_cached
    loss.backward(grad)
    return loss.detach(), x.grad, w.grad, cached


@pytest.mark.parametrize("shape", [(37, 19, 53), (64, 96, 300), (5, 1, 1)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
def test_cached_path_matches_float64_autograd(cache_engine, monkeypatch, mode, reduction, shape):
    bt, h, v = shape
    # chunks of 8 rows: several chunks and a tail
    monkeypatch.setattr(_grad_cache, "CHUNK_LOGITS_BYTES", 8 * v * 4)
    input, weight, target = problem(bt, h, v)
    grad = torch.rand(bt) if reduction == "none" else None
    loss, input_grad, weight_grad, cached = run(input, weight, target, grad, reduction=reduction,
                                                mode=mode)
    assert cached
    expected = truth(input, weight, target, reduction, grad=grad)
    torch.testing.assert_close(loss.double(), expected[0], rtol=1e-5, atol=1e-5)
    testing.assert_half_grad_close(input_grad, expected[1], "input grad")
    testing.assert_half_grad_close(weight_grad, expected[2], "weight grad")
    assert not input_grad[1:3].any()  # ignored rows


@pytest.mark.parametrize("grad", [0.37, 4.0, -1.0])
def test_upstream_gradient_other_than_one(cache_engine, grad):
    input, weight, target = problem(seed=2)
    loss, input_grad, weight_grad, cached = run(input, weight, target, torch.tensor(grad))
    assert cached
    expected = truth(input, weight, target, "mean", grad=torch.tensor(grad))
    testing.assert_half_grad_close(input_grad, expected[1], "input grad")
    testing.assert_half_grad_close(weight_grad, expected[2], "weight grad")


# The forward's `combine`: None (one shard: G from the exps the statistics pass leaves), or
# a combine that happens to change nothing (G from the logits, exp taken again).
COMBINES = {"one shard": None, "combined": lambda m, s, p, o: (m, s, p, o)}


def spec_gradients(input, weight, target, row_scale, grad_rows, combine=COMBINES["combined"]):
    """The cached forward's G and statistics, then both backwards from them: ours from the
    cache, and fused_linear_cross_entropy_loss_grad (memory-saving) recomputing G from the
    same global statistics."""
    columns = torch.where(target < 0, -1, target).long()
    owned = (columns >= 0).float()
    grad_cache, logits_max, sum_exp, _, _ = _grad_cache.forward(
        input, weight, columns, owned, row_scale, 8, combine)
    upstream = torch.where(row_scale == 0, 1.0, grad_rows / row_scale)  # as the backward passes it
    ours = _grad_cache.backward(grad_cache, upstream, input, weight)
    mask = ascend_ops.pack_target_mask(columns < 0)
    spec = ascend_ops.fused_linear_cross_entropy_loss_grad(
        grad_rows, input, weight, mask, columns.clamp_min(0), 0.0, logits_max, sum_exp, None,
        impl="cpu")
    return ours, spec


@pytest.mark.parametrize("combine", list(COMBINES))
@pytest.mark.parametrize("engine", ["amx", "avx512bf16", "avx2"])
def test_cached_gradients_are_spec_bit_for_bit_on_the_own_gemm(monkeypatch, engine, combine):
    """Upstream gradient 1: G is §1's G bit for bit, and on the own GEMMs each gradient is
    summed in the same order as the FLCE kernel's (one vocabulary chunk here)."""
    if engine not in CACHE_ENGINES:
        pytest.skip(f"this CPU cannot run the {engine} engine")
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", engine)
    input, weight, target = problem(bt=45, h=40, v=70, seed=5)
    row_scale = torch.where(target < 0, 0.0, 1.0 / 43)
    ours, spec = spec_gradients(input, weight, target, row_scale, row_scale, COMBINES[combine])
    assert torch.equal(ours[0], spec[0]) and torch.equal(ours[1], spec[1])


def test_gradient_from_the_kept_exps_is_the_recomputed_one_bit_for_bit(cache_engine):
    """One shard: the statistics pass leaves exp(logits - max) in the chunk and writes each
    row's G from it as soon as the row is summed, with no second exp. Every element of G,
    with extreme logits (rows with one dominant logit, whose sum is 1 exactly, and far below
    the max), several chunks and a tail, equals G recomputed from the logits, and the rows'
    padding is zero in both (the cache is NaN-filled when handed out under the poison
    switch)."""
    input, weight, target = problem(bt=67, h=24, v=333, seed=12)
    input[3] *= 400.0  # one logit dominates: the row's sum is 1 and the exps underflow
    input[5] *= 60.0
    columns = torch.where(target < 0, -1, target).long()
    row_scale = torch.where(target < 0, 0.0, 1.0 / 65)
    caches = [_grad_cache.forward(input, weight, columns, (columns >= 0).float(), row_scale, 16,
                                  combine)
              for combine in COMBINES.values()]
    (g_one, *stats_one), (g_combined, *stats_combined) = caches
    assert torch.equal(g_one[:, :333].view(torch.int16), g_combined[:, :333].view(torch.int16))
    assert all(torch.equal(a, b) for a, b in zip(stats_one, stats_combined))
    assert (g_one[3, :333] == 0).sum() > 100  # the underflowing row took effect
    for g in (g_one, g_combined):
        assert g.size(1) > 333 and torch.equal(g[:, 333:], torch.zeros_like(g[:, 333:]))


def test_cached_gradients_match_spec_on_every_engine(cache_engine):
    input, weight, target = problem(bt=45, h=40, v=70, seed=6)
    row_scale = torch.where(target < 0, 0.0, 1.0)
    grad_rows = torch.rand(45) * row_scale  # per-row upstream gradients: G' = bf16(G * g)
    ours, spec = spec_gradients(input, weight, target, row_scale, grad_rows)
    for o, s in zip(ours, spec):
        testing.assert_half_grad_close(o, s.double(), "cached vs recomputed")


def test_backward_twice_with_retain_graph(cache_engine):
    input, weight, target = problem(seed=7)
    x = input.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, w, target)
    loss.backward(torch.tensor(0.3), retain_graph=True)  # scaled: the cache must stay intact
    first = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    loss.backward(torch.tensor(0.3))
    assert torch.equal(first[0], x.grad) and torch.equal(first[1], w.grad)


@pytest.mark.parametrize("frozen", ["weight", "input"])
def test_a_frozen_input_gets_no_gradient_computed(cache_engine, monkeypatch, frozen):
    calls = []
    backward = _grad_cache.backward
    monkeypatch.setattr(_grad_cache, "backward", lambda *a: calls.append(a[4:]) or backward(*a))
    input, weight, target = problem(seed=9)
    x = input.clone().requires_grad_(frozen != "input")
    w = weight.clone().requires_grad_(frozen != "weight")
    ascend_ops.linear_cross_entropy(x, w, target).backward()
    assert calls == [(frozen != "input", frozen != "weight")]
    expected = truth(input, weight, target, "mean")
    if frozen == "weight":
        assert w.grad is None
        testing.assert_half_grad_close(x.grad, expected[1], "input grad")
    else:
        assert x.grad is None
        testing.assert_half_grad_close(w.grad, expected[2], "weight grad")


@pytest.mark.parametrize("shape", [(8, 64, 1100), (3, 128, 700)])
def test_input_gradient_summed_in_the_weight_gradients_storage(monkeypatch, shape):
    """On portable with both gradients wanted, input_grad's fp32 sums and its widened K
    blocks live in weight_grad's storage (NaN-poisoned scratch) before weight_grad is
    written: K blocks of 481 and 339 columns, each with a tail."""
    bt, h, v = shape
    depth = _C.lce_input_grad_room_depth(bt, h, v)
    assert depth == {(8, 64, 1100): 481, (3, 128, 700): 339}[shape]
    assert _C.lce_input_grad_room_depth(37, 19, 53) == 0  # too small: row and K blocks
    monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "portable")
    input, weight, target = problem(bt, h, v, seed=11)
    loss, input_grad, weight_grad, cached = run(input, weight, target)
    assert cached
    expected = truth(input, weight, target, "mean")
    testing.assert_half_grad_close(input_grad, expected[1], "input grad")
    testing.assert_half_grad_close(weight_grad, expected[2], "weight grad")
    # the same input gradient as the path in scratch (a frozen weight lends no storage),
    # up to the order of the fp32 sums
    x = input.clone().requires_grad_()
    ascend_ops.linear_cross_entropy(x, weight, target).backward()
    testing.assert_half_grad_close(input_grad, x.grad.double(), "room vs scratch")


def test_memory_saving_keeps_the_bf16_gradient_within_the_budget(cache_engine, monkeypatch):
    input, weight, target = problem(bt=64, v=500)
    x = input.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, weight.clone().requires_grad_(), target)
    assert loss.grad_fn.saved.grad_cached and loss.grad_fn.once_softmax is None
    big = [t for t in loss.grad_fn.saved_tensors if t.numel() > weight.numel()]
    assert [(t.dtype, t.shape[0], t.shape[1] >= 500) for t in big] == [(torch.bfloat16, 64, True)]
    # over the budget: row statistics only, as on the NPU
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "0")
    loss = ascend_ops.linear_cross_entropy(x, weight.clone().requires_grad_(), target)
    assert not loss.grad_fn.saved.grad_cached
    assert max(t.numel() for t in loss.grad_fn.saved_tensors) == weight.numel()


def test_budget_decides_by_the_gradient_size(cache_engine, monkeypatch):
    input, weight, target = problem(bt=1024, h=8, v=600)  # G: 1024 x 608 bf16 = 1.19 MiB
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "1")
    assert not run(input, weight, target)[3]
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "2")
    assert run(input, weight, target)[3]
    assert run(input, weight, target, mode=HIGH_PERFORMANCE)[3]  # no budget there
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "1")
    assert run(input, weight, target, mode=HIGH_PERFORMANCE)[3]


@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_bad_budget_is_refused(monkeypatch, value):
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, value)
    with pytest.raises(ValueError, match=f"ASCEND_OPS_LCE_GRAD_CACHE_MIB must be a "
                                         f"non-negative integer \\(MiB\\), got '{value}'"):
        _grad_cache.grad_cache_budget()


def test_recomputing_and_caching_agree(cache_engine, monkeypatch):
    input, weight, target = problem(bt=50, h=33, v=129, seed=8)
    cached = run(input, weight, target)
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "0")
    recomputed = run(input, weight, target)
    assert cached[3] and not recomputed[3]
    torch.testing.assert_close(cached[0], recomputed[0], rtol=1e-6, atol=1e-6)
    for a, b in zip(cached[1:3], recomputed[1:3]):
        testing.assert_half_grad_close(a, b.double(), "cached vs recomputed")


def test_not_taken_where_it_does_not_run():
    input, weight, target = problem()
    assert not run(input.half(), weight.half(), target)[3]  # float16
    assert not run(input[:0], weight, target[:0], reduction="sum")[3]  # no rows


def test_not_formed_without_gradients(cache_engine, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the gradient was formed though no input needs it")

    monkeypatch.setattr(_grad_cache, "forward", refuse)
    input, weight, target = problem()
    with torch.no_grad():
        ascend_ops.linear_cross_entropy(input.requires_grad_(), weight, target)
    loss = ascend_ops.linear_cross_entropy(input.detach(), weight, target)
    assert loss.grad_fn is None


def test_a_target_in_no_shard_is_refused(cache_engine):
    input, weight, target = problem(bt=9)
    target[4] = 53
    with pytest.raises(ValueError, match=r"target\[4\] = 53 held by 0 shards"):
        run(input, weight, target)

"""One regression test per finding of the bad-input fuzz (tests/test_fuzz.py), each failing on
code that has the defect it names: the reproducers raise the documented error with nothing written, or give the
reference's result."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import reference
from ascend_ops.sim import simulator as _sim

from conftest import assert_matches

needs_sim = pytest.mark.skipif(_sim.load_error is not None, reason=str(_sim.load_error))


# 1. impl="sim" batch_norm_reduce_backward, float16 input and mean, float32 invstd: the
#    kernel wrote float32 sums into float16 buffers of length C (heap corruption).
@needs_sim
def test_sim_batch_norm_reduce_backward_mixed_stat_dtypes_matches_reference_without_corruption():
    # In a child process: a heap corruption would abort the interpreter (SIGABRT).
    code = textwrap.dedent("""
        import torch, ascend_ops
        from ascend_ops import reference
        g = torch.Generator().manual_seed(0)
        x = torch.randn(4, 16, generator=g).half(); dy = torch.randn(4, 16, generator=g).half()
        mean, invstd = (torch.randn(16, generator=g) * .1).half(), torch.rand(16, generator=g) + .5
        want = reference.batch_norm_reduce_backward(dy, x, mean, invstd, None, True, True, True)
        for _ in range(200):
            got = ascend_ops.batch_norm_reduce_backward(dy, x, mean, invstd, None, True, True, True,
                                                        impl="sim")
            for o, r in zip(got, want):
                assert o.dtype == torch.float16 == r.dtype, (o.dtype, r.dtype)
                torch.testing.assert_close(o, r, atol=2e-2, rtol=1e-2)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


# 2. batch_norm_gather_stats_with_counts wrote running_mean, then failed on running_var.
@pytest.mark.parametrize("which", ["expanded-running-var", "shared-memory"])
def test_gather_stats_refuses_an_unwritable_running_stat_before_writing_either(which):
    g = torch.Generator().manual_seed(1)
    running_mean = torch.zeros(3)
    running_var = torch.ones(1).expand(3) if which == "expanded-running-var" else running_mean
    before = running_mean.clone()
    with pytest.raises(ValueError, match="running_"):
        torch.batch_norm_gather_stats_with_counts(
            torch.randn(4, 3, 5, generator=g), torch.randn(2, 3, generator=g),
            torch.rand(2, 3, generator=g) + .5, running_mean, running_var, 0.1, 1e-5,
            torch.tensor([5, 7]))
    assert torch.equal(running_mean, before), "running_mean was written before the error"


# 3. linear_cross_entropy on the bfloat16 CPU cached path skipped validation.
def _lce_args(**change):
    g = torch.Generator().manual_seed(2)
    args = dict(input=torch.randn(5, 8, generator=g).bfloat16().requires_grad_(),
                weight=torch.randn(6, 8, generator=g).bfloat16().requires_grad_(),
                target=torch.tensor([1, 0, 2, 5, 3]))
    args.update(change)
    return args


LCE_BAD = [
    ("float-target", dict(target=torch.tensor([1.7, .2, 2.9, 1., 0.])), {}, TypeError, "target"),
    ("bool-target", dict(target=torch.ones(5, dtype=torch.bool)), {}, TypeError, "target"),
    ("uint8-target", dict(target=torch.ones(5, dtype=torch.uint8)), {}, TypeError, "target"),
    ("int16-target", dict(target=torch.ones(5, dtype=torch.int16)), {}, TypeError, "target"),
    ("3d-weight", dict(weight=torch.randn(2, 6, 8).bfloat16()), {}, ValueError, "weight"),
    ("1d-weight", dict(weight=torch.randn(8).bfloat16()), {}, ValueError, "weight"),
    ("0d-weight", dict(weight=torch.tensor(1.).bfloat16()), {}, ValueError, "weight"),
    ("float32-weight", dict(weight=torch.randn(6, 8)), {}, TypeError, "weight"),
    ("complex-weight", dict(weight=torch.randn(6, 8, dtype=torch.complex64)), {}, TypeError, "weight"),
    ("negative-start", {}, dict(vocab_start_index=-1), ValueError, "vocab_start_index"),
    ("bool-ignore-index", {}, dict(ignore_index=True), TypeError, "ignore_index"),
    # int32 ids against a start past 2**31: no shard holds them (as with int64), not a wrap to 0.
    ("int32-start-2**40", dict(target=torch.tensor([1, 0, 2, 5, 3], dtype=torch.int32)),
     dict(vocab_start_index=2**40), ValueError, "target"),
    ("none-input", dict(input=None), {}, TypeError, "input"),
]


@pytest.mark.parametrize("engine", ["default", "portable"])
@pytest.mark.parametrize("tensors, options, error, name", [c[1:] for c in LCE_BAD],
                         ids=[c[0] for c in LCE_BAD])
def test_linear_cross_entropy_refuses_bad_arguments_on_every_path(
        tensors, options, error, name, engine, monkeypatch):
    if engine == "portable":
        monkeypatch.setenv("ASCEND_OPS_CPU_GEMM", "portable")
    args = _lce_args(**tensors)
    with pytest.raises(error, match=f"'{name}'"):
        ascend_ops.linear_cross_entropy(**args, **options)
    if "start" in str(options):  # the int64 twin raises the same
        with pytest.raises(error, match=f"'{name}'"):
            ascend_ops.linear_cross_entropy(**_lce_args(), **options)


def test_linear_cross_entropy_loss_module_refuses_a_bad_option_when_built():
    with pytest.raises(ValueError, match="'reduction'"):
        ascend_ops.nn.LinearCrossEntropyLoss(reduction="avg")
    with pytest.raises(TypeError, match="'ignore_index'"):
        ascend_ops.nn.LinearCrossEntropyLoss(ignore_index=1.5)


# 4. None for a tensor argument raised AttributeError, not a TypeError naming it.
def _online(**change):
    g = torch.Generator().manual_seed(3)
    args = dict(input=torch.randn(4, 8, generator=g).half(), weight=torch.randn(6, 8, generator=g).half(),
                target=torch.tensor([0, 1, 7, 2]), vocab_start_index=0, vocab_end_index=6)
    args.update(change)
    return args


NONE_CASES = [
    (ascend_ops.fused_linear_online_max_sum, _online, name) for name in ("input", "weight", "target")
] + [
    (ascend_ops.batch_norm_reduce_backward,
     lambda **c: {**dict(grad_out=torch.randn(2, 3), input=torch.randn(2, 3), mean=torch.zeros(3),
                         invstd=torch.ones(3), weight=None, input_g=True, weight_g=True, bias_g=True), **c},
     name) for name in ("grad_out", "input", "mean", "invstd")
] + [
    (ascend_ops.fused_cross_entropy_loss_with_max_sum,
     lambda **c: {**dict(logits_max=torch.zeros(3), sum_exp_logits=torch.ones(3),
                         predicted_logits=torch.zeros(3)), **c},
     name) for name in ("logits_max", "sum_exp_logits", "predicted_logits")
] + [
    (ascend_ops.fused_linear_cross_entropy_loss_grad,
     lambda **c: {**dict(grad=torch.ones(4), input=torch.randn(4, 8).half(), weight=torch.randn(6, 8).half(),
                         target_mask=torch.zeros(1, dtype=torch.uint8), masked_target=torch.zeros(4, dtype=torch.int64),
                         logits_max=torch.zeros(4), sum_exp_logits=torch.ones(4)), **c},
     name) for name in ("grad", "input", "weight", "target_mask", "masked_target")
]


@pytest.mark.parametrize("impl", ["auto", "reference"])
@pytest.mark.parametrize("op, make, name", NONE_CASES,
                         ids=[f"{op.__name__}-{name}" for op, _, name in NONE_CASES])
def test_none_for_a_tensor_is_a_type_error_naming_it(op, make, name, impl):
    with pytest.raises(TypeError, match=f"'{name}' must be a torch.Tensor, got None"):
        op(**make(**{name: None}), impl=impl)


def test_sync_batch_norm_none_input_is_a_type_error():
    with pytest.raises(TypeError, match="'input' must be a torch.Tensor, got None"):
        ascend_ops.nn.SyncBatchNorm(3)(None)


# 5. NaN in, NaN out: batch_norm_stats and fused_linear_online_max_sum kept NaN from view.
def test_batch_norm_stats_gives_nan_invstd_for_a_channel_holding_nan():
    x = torch.tensor([[1., float("nan")], [2., 3.]])
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    assert torch.isnan(mean[1]) and torch.isnan(invstd[1]), (mean, invstd)
    torch.testing.assert_close(mean[0], torch.tensor(1.5))
    torch.testing.assert_close(invstd[0], 1 / torch.sqrt(torch.tensor(0.25 + 1e-5)))


# Found by tests/test_fuzz.py after the fixes: a channel whose first value is inf was
# shifted by inf (inf - inf = NaN), giving a NaN mean where torch's is inf.
def test_batch_norm_stats_mean_of_a_channel_starting_with_inf_is_inf():
    x = torch.tensor([[float("inf"), 1.], [2., 3.]])
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    assert mean[0] == float("inf") and torch.isnan(invstd[0]), (mean, invstd)
    torch.testing.assert_close(mean[1], torch.tensor(2.))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", [6, 40, 3000])  # one block, vector tails, several blocks
def test_fused_linear_online_max_sum_propagates_nan_like_the_reference(vocab, dtype, gemm_engine):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 8, generator=g).to(dtype)
    w = torch.randn(vocab, 8, generator=g).to(dtype)
    w[vocab // 2, 3] = float("nan")  # every row's logit at column vocab // 2 is NaN
    x[2] = float("nan")
    target = torch.tensor([0, 1, vocab // 2, vocab - 1, vocab + 3])
    ours = ascend_ops.fused_linear_online_max_sum(x, w, target, 0, vocab, impl="cpu")
    oracle = reference.fused_linear_online_max_sum(x, w, target, 0, vocab)
    for o, r, what in zip(ours[:3], oracle[:3], ("logits_max", "sum_exp_logits", "predicted_logits")):
        assert torch.equal(torch.isnan(o), torch.isnan(r)), f"{what}: {o} vs reference {r}"
    assert torch.isnan(ours[0]).all()  # NaN in every row (the NaN column)


# A guard, not a regression test (a NaN row max alone would give NaN too): the loss of a row with a
# NaN logit stays NaN on every engine, now that the row max is NaN as well.
def test_linear_cross_entropy_row_with_nan_gives_nan_loss_like_torch(gemm_engine):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 8, generator=g).bfloat16()
    w = torch.randn(300, 8, generator=g).bfloat16()
    x[1, 0] = float("nan")
    target = torch.tensor([3, 4, 5, 6])
    ours = ascend_ops.linear_cross_entropy(x.requires_grad_(), w, target, reduction="none")
    want = F.cross_entropy(x.float() @ w.float().T, target, reduction="none")
    assert torch.equal(torch.isnan(ours), torch.isnan(want)), (ours, want)


# 6. The reference wrapped int32 targets against a start >= 2**31, and took "0" as True.
def test_reference_compares_int32_targets_with_a_large_start_as_integers():
    target = torch.tensor([0, 1, 2, 3, 2**31 - 1, 5, 6, 7], dtype=torch.int32)
    x, w = torch.randn(8, 4).half(), torch.randn(3, 4).half()
    start = 2**32 + 1
    ref = ascend_ops.fused_linear_online_max_sum(x, w, target, start, start + 3, impl="reference")
    cpu = ascend_ops.fused_linear_online_max_sum(x, w, target, start, start + 3, impl="cpu")
    assert ref[3].tolist() == [255] == cpu[3].tolist()  # every row masked
    assert torch.equal(ref[4], cpu[4]) and not ref[4].any()


@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_return_logits_must_be_a_bool(impl):
    with pytest.raises(TypeError, match="'return_logits' must be a bool"):
        ascend_ops.fused_linear_online_max_sum(**_online(), return_logits="0", impl=impl)


# 7. impl="sim" refused V = 0 in the backward where cpu and the reference return results.
@needs_sim
@pytest.mark.parametrize("mode", ["memory-saving", "high-performance"])
def test_sim_backward_on_an_empty_shard_matches_the_reference(mode):
    g = torch.Generator().manual_seed(6)
    bt, h = 5, 8
    args = dict(grad=torch.rand(bt, generator=g), input=torch.randn(bt, h, generator=g).bfloat16(),
                weight=torch.empty(0, h).bfloat16(), target_mask=torch.ones(bt, dtype=torch.bool),
                masked_target=torch.zeros(bt, dtype=torch.int64))
    if mode == "memory-saving":
        args.update(logits_max=torch.full((bt,), -torch.inf), sum_exp_logits=torch.ones(bt))
    else:
        args.update(softmax=torch.empty(bt, 0))
    want = ascend_ops.fused_linear_cross_entropy_loss_grad(**args, impl="reference")
    got = ascend_ops.fused_linear_cross_entropy_loss_grad(**args, impl="sim")
    for o, r in zip(got, want):
        assert o.shape == r.shape and o.dtype == r.dtype and torch.equal(o, r), (o, r)

"""linear_cross_entropy's loss options (SPEC §7) on CPU in one process, against float64
autograd of the plain formula with the same options (lce_options_oracle.py); the 2-rank
runs are in test_distributed.py."""

from __future__ import annotations

import math

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.training.lce import route_cpu_options as options_cpu

from lce_options_oracle import STRONG, oracle, problem, torch_semantics

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
REDUCTIONS = ["mean", "sum", "none"]

#: Each option alone, and the combinations users run (Gemma: soft-cap + z-loss; Trainer:
#: smoothing + class weights; everything at once).
OPTION_SETS = {
    "linear_bias": ("linear_bias",),
    "ce_weight": ("ce_weight",),
    "label_smoothing": ("label_smoothing",),
    "logit_scale": ("logit_scale",),
    "softcap": ("softcap",),
    "lse_square_scale": ("lse_square_scale",),
    "softcap+z-loss": ("softcap", "lse_square_scale"),
    "smoothing+weights": ("label_smoothing", "ce_weight"),
    "bias+scale": ("linear_bias", "logit_scale"),
    "all": tuple(STRONG),
}

#: float32 gradients: the kernels' fp32 sums against float64 (relative to the norm).
FLOAT32_GRAD_NORM = 1e-4


def options_of(names):
    """The keyword options of an option set (tensors made by problem())."""
    return {name: STRONG[name] for name in names if name not in ("linear_bias", "ce_weight")}


def make(names, dtype, seed=0, **kw):
    x, w, t, b, cw = problem(dtype=dtype, seed=seed, bias="linear_bias" in names,
                             ce_weight="ce_weight" in names, **kw)
    return x, w, t, b, cw


def ours(x, w, t, b, cw, grad=None, **options):
    options.pop("linear_bias", None)
    options.pop("ce_weight", None)
    xr = x.clone().requires_grad_()
    wr = w.clone().requires_grad_()
    br = b.clone().requires_grad_() if b is not None else None
    out = ascend_ops.linear_cross_entropy(
        xr, wr, t, linear_bias=br, ce_weight=cw, return_z_loss=True, return_lse=True,
        return_token_accuracy=True, **options)
    out.loss.backward(grad)
    grads = {"input": xr.grad, "weight": wr.grad}
    if br is not None:
        grads["linear_bias"] = br.grad
    return out, grads


def grads_close(got: dict, want: dict, dtype) -> list[str]:
    """The names of the gradients outside the dtype's bound (empty when all pass)."""
    bad = []
    for name, truth in want.items():
        mine = got[name]
        assert mine.dtype == dtype, (name, mine.dtype)
        if dtype == torch.float32:
            error = float(torch.linalg.vector_norm(mine.double() - truth))
            if not error <= FLOAT32_GRAD_NORM * float(torch.linalg.vector_norm(truth)):
                bad.append(name)
        else:
            try:
                testing.assert_half_grad_close(mine, truth, name)
            except AssertionError:
                bad.append(name)
    return bad


def loss_close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return bool(torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5, equal_nan=True))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("names", list(OPTION_SETS.values()), ids=list(OPTION_SETS))
def test_the_written_out_oracle_is_torchs_cross_entropy(names, reduction):
    x, w, t, b, cw = make(names, torch.float32)
    kwargs = dict(linear_bias=b, ce_weight=cw, reduction=reduction, **options_of(names))
    written, _ = oracle(x, w, t, want_grads=False, **kwargs)
    torch.testing.assert_close(written["loss"], torch_semantics(x, w, t, **kwargs),
                               rtol=1e-12, atol=1e-12)


#: bfloat16 runs with the logits-gradient cache (default) and without (the recomputing
#: backward, in vocabulary chunks of 32 columns with a tail); the others always recompute.
DTYPE_PATHS = [(torch.float32, "default"), (torch.bfloat16, "default"), (torch.bfloat16, "off"),
               (torch.float16, "default")]


@pytest.mark.parametrize("dtype, cache", DTYPE_PATHS, ids=lambda p: str(p).replace("torch.", ""))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("names", list(OPTION_SETS.values()), ids=list(OPTION_SETS))
def test_options_match_float64_autograd(names, reduction, dtype, cache, monkeypatch):
    if cache == "off":  # the recomputing backward, in vocabulary chunks with a tail
        monkeypatch.setenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", "0")
        monkeypatch.setattr(options_cpu, "BACKWARD_CHUNK_COLUMNS", 32)
    x, w, t, b, cw = make(names, dtype)
    grad = torch.rand(t.shape) + 0.5 if reduction == "none" else None
    kwargs = dict(linear_bias=b, ce_weight=cw, reduction=reduction, **options_of(names))
    got, got_grads = ours(x, w, t, b, cw, grad, **kwargs)
    want, want_grads = oracle(x, w, t, grad=grad, **kwargs)
    assert got.loss.dtype == torch.float32
    assert loss_close(got.loss, want["loss"]), (got.loss, want["loss"])
    assert loss_close(got.z_loss, want["z_loss"])
    torch.testing.assert_close(got.lse.double(), want["lse"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.token_accuracy.double(), want["token_accuracy"])
    assert grads_close(got_grads, want_grads, dtype) == []


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("option", [n for n in STRONG])
def test_a_5_percent_error_in_one_options_term_fails(option, dtype):
    """The bounds above reject a 5 % error in any one option's term: every option on at
    once, the oracle with one term 5 % off. In float32 both the loss and every gradient the
    term reaches must fail; in half precision the loss (float32 from fp32 logits)."""
    names = tuple(STRONG)
    x, w, t, b, cw = make(names, dtype, seed=1)
    kwargs = dict(linear_bias=b, ce_weight=cw, **options_of(names))
    got, got_grads = ours(x, w, t, b, cw, **kwargs)
    want, want_grads = oracle(x, w, t, **kwargs)
    assert loss_close(got.loss, want["loss"]) and grads_close(got_grads, want_grads, dtype) == []
    off, off_grads = oracle(x, w, t, mutate=option, **kwargs)
    assert not loss_close(got.loss, off["loss"]), option
    if dtype == torch.float32:
        reached = ["input", "weight"] + (["linear_bias"] if b is not None else [])
        assert grads_close(got_grads, off_grads, dtype) == reached, option


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_row_ignored(reduction, dtype):
    names = tuple(STRONG)
    x, w, t, b, cw = make(names, dtype)
    t[:] = -100
    kwargs = dict(linear_bias=b, ce_weight=cw, reduction=reduction, **options_of(names))
    got, got_grads = ours(x, w, t, b, cw, torch.ones(t.shape) if reduction == "none" else None,
                          **kwargs)
    want, _ = oracle(x, w, t, want_grads=False, **kwargs)
    if reduction == "mean":  # 0 / 0, as torch's F.cross_entropy
        assert math.isnan(got.loss.item()) and math.isnan(want["loss"].item())
    else:
        assert torch.equal(got.loss, torch.zeros_like(got.loss))
    for name, g in got_grads.items():  # nothing flows back from ignored rows
        assert torch.equal(g, torch.zeros_like(g)), name


@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_ignore_index_may_be_a_vocabulary_id(ignore_index):
    names = ("label_smoothing", "ce_weight", "softcap")
    x, w, t, b, cw = make(names, torch.float32, ignore_index=ignore_index)
    kwargs = dict(ce_weight=cw, ignore_index=ignore_index, **options_of(names))
    got, got_grads = ours(x, w, t, b, cw, **kwargs)
    want, want_grads = oracle(x, w, t, **kwargs)
    assert loss_close(got.loss, want["loss"])
    assert grads_close(got_grads, want_grads, torch.float32) == []


def test_high_performance_mode_and_several_row_chunks(monkeypatch):
    from ascend_ops.training.lce import grad_cache

    names = tuple(STRONG)
    x, w, t, b, cw = make(names, torch.bfloat16, bt=61)
    kwargs = dict(linear_bias=b, ce_weight=cw, **options_of(names))
    want, want_grads = oracle(x, w, t, **kwargs)
    monkeypatch.setattr(grad_cache, "CHUNK_LOGITS_BYTES", 67 * 4 * 16)  # 16 rows a chunk
    for mode in ("memory-saving", "high-performance"):
        got, got_grads = ours(x, w, t, b, cw, mode=mode, **kwargs)
        assert loss_close(got.loss, want["loss"]), mode
        assert grads_close(got_grads, want_grads, torch.bfloat16) == [], mode


def test_plain_options_take_the_operators_path_and_return_a_tensor():
    x, w, t, _, _ = problem()
    loss = ascend_ops.linear_cross_entropy(x, w, t)
    assert isinstance(loss, torch.Tensor)
    out = ascend_ops.linear_cross_entropy(x, w, t, return_lse=True)
    assert isinstance(out, ascend_ops.LinearCrossEntropyOutput)
    assert out.z_loss is None and out.token_accuracy is None
    torch.testing.assert_close(out.loss, loss)


def test_extra_outputs_are_not_differentiable():
    x, w, t, _, _ = problem(dtype=torch.float32)
    out = ascend_ops.linear_cross_entropy(x.requires_grad_(), w, t, return_z_loss=True,
                                          return_lse=True, return_token_accuracy=True)
    assert out.loss.requires_grad
    assert not (out.z_loss.requires_grad or out.lse.requires_grad
                or out.token_accuracy.requires_grad)


BAD = [
    (dict(softcap=0.0), ValueError, "'softcap' must be a finite number > 0"),
    (dict(softcap=-3.0), ValueError, "'softcap' must be a finite number > 0"),
    (dict(softcap=math.inf), ValueError, "'softcap' must be a finite number > 0"),
    (dict(label_smoothing=-0.1), ValueError, r"'label_smoothing' must lie in \[0, 1\]"),
    (dict(label_smoothing=1.5), ValueError, r"'label_smoothing' must lie in \[0, 1\]"),
    (dict(label_smoothing="0.1"), TypeError, "'label_smoothing' must be a float"),
    (dict(logit_scale=0.0), ValueError, "'logit_scale' must be a finite number > 0"),
    (dict(lse_square_scale=-1e-4), ValueError, "'lse_square_scale' must be a finite number >= 0"),
    (dict(lse_square_scale=math.nan), ValueError, "'lse_square_scale' must be a finite number >= 0"),
    (dict(return_z_loss=1), TypeError, "'return_z_loss' must be a bool"),
    (dict(ce_weight=torch.ones(5)), ValueError, r"'ce_weight' must be \[V\] = \[67\]"),
    (dict(ce_weight=torch.ones(67, dtype=torch.int64)), TypeError, "'ce_weight' must be a floating dtype"),
    (dict(ce_weight=[1.0] * 67), TypeError, "'ce_weight' must be a torch.Tensor or None"),
    (dict(linear_bias=torch.zeros(66, dtype=torch.bfloat16)), ValueError, r"'linear_bias' must be \[V\] = \[67\]"),
    (dict(linear_bias=torch.zeros(67)), TypeError, "'linear_bias' must have the dtype of 'input'"),
]


@pytest.mark.parametrize("options, error, message", BAD)
def test_bad_option_values_are_refused(options, error, message):
    x, w, t, _, _ = problem()
    with pytest.raises(error, match=message):
        ascend_ops.linear_cross_entropy(x, w, t, **options)


def test_float32_on_another_device_is_refused():
    x, w, t, _, _ = problem(dtype=torch.float32)
    with pytest.raises(TypeError, match="'input' must be torch.float16 or torch.bfloat16 on meta"):
        ascend_ops.linear_cross_entropy(x.to("meta"), w.to("meta"), t.to("meta"))


def test_the_module_takes_the_options():
    names = tuple(STRONG)
    x, w, t, b, cw = make(names, torch.bfloat16)
    module = ascend_ops.nn.LinearCrossEntropyLoss(ce_weight=cw, **options_of(names))
    assert "softcap=2.5" in repr(module)
    xr = x.clone().requires_grad_()
    loss = module(xr, w, t, linear_bias=b)
    loss.backward()
    want, want_grads = oracle(x, w, t, linear_bias=b, ce_weight=cw, **options_of(names))
    assert loss_close(loss, want["loss"])
    testing.assert_half_grad_close(xr.grad, want_grads["input"], "input grad")
    with pytest.raises(ValueError, match="'softcap' must be a finite number > 0"):
        ascend_ops.nn.LinearCrossEntropyLoss(softcap=0.0)  # at construction


def test_under_torch_compile_an_option_set_runs_eagerly():
    torch._dynamo.reset()
    names = ("softcap", "label_smoothing")
    x, w, t, _, _ = make(names, torch.bfloat16)

    def step(x, w, t):
        return ascend_ops.linear_cross_entropy(x, w, t, **options_of(names)) * 2

    xr = x.clone().requires_grad_()
    loss = torch.compile(step)(xr, w, t)
    loss.backward()
    want, want_grads = oracle(x, w, t, grad=torch.tensor(2.0), **options_of(names))
    assert loss_close(loss / 2, want["loss"])
    testing.assert_half_grad_close(xr.grad, want_grads["input"], "input grad")

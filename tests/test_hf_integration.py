"""ascend_ops.integrations.transformers against Transformers itself: tiny randomly
initialised causal LMs (built here, nothing downloaded), the same weights run unpatched and
patched; the loss and every parameter's gradient must agree.

Tolerances (norm-relative per tensor: ‖ours − theirs‖ / ‖theirs‖). The two runs differ only
in the head. In bfloat16 Transformers rounds the logits to bfloat16 before its float32
loss; linear_cross_entropy keeps them in float32 but returns the gradient of the hidden
states and of the head's weight in bfloat16. Each is one bfloat16 rounding, unit roundoff
2^-8 = 0.39 %, carried through two layers: the worst gradient seen over every family here
is 0.77 % off (bf16 GPT-2), the worst loss 1.5e-5. GRAD_TOL = 2 % leaves room for other
seeds and still rejects a 5 % error in any one gradient, LOSS_TOL = 1e-3 a 5 % error in
the loss (test_the_tolerances_reject_a_5_percent_error). A float32 model without autocast
runs its head in float32 (fp32 products, only the order of sums differs), so it is held
to FP32_LOSS_TOL = 1e-5 and FP32_GRAD_TOL = 1e-4: the bfloat16 head it had before is 4.5e-5
off in the loss (Llama, V = 128256) and ~3e-3 in the gradients, and fails them.
"""

from __future__ import annotations

import copy
import os
import pathlib
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip(
    "transformers", reason="the Hugging Face integration's tests need the test extra "
    "(README: Set-up installs transformers and accelerate)")

import ascend_ops.integrations.transformers as aot  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hf_tiny_models import CONFIGS, H, V, decoder_config, batch, tiny_model  # noqa: E402
from rank_processes import cpu_rank_environment, run_ranks  # noqa: E402

LOSS_TOL = 1e-3
GRAD_TOL = 2e-2
FP32_LOSS_TOL = 1e-5
FP32_GRAD_TOL = 1e-4


def rel_err(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    theirs = theirs.double()
    return ((ours.double() - theirs).norm() / theirs.norm().clamp_min(1e-30)).item()


def worst_grad_err(ours: torch.nn.Module, theirs: torch.nn.Module) -> tuple[float, str]:
    """The largest norm-relative gradient difference over every parameter, and its name."""
    theirs_params = dict(theirs.named_parameters())
    errs = {}
    for name, p in ours.named_parameters():
        q = theirs_params[name]
        assert (p.grad is None) == (q.grad is None), f"{name}: a gradient on one side only"
        if p.grad is not None:
            errs[name] = rel_err(p.grad, q.grad)
    assert errs, "no parameter received a gradient"
    name = max(errs, key=errs.get)
    return errs[name], name


def losses_and_grads(family, dtype, call):
    """Runs `call(model)` → loss on the model unpatched and on a patched copy; backward both."""
    theirs = tiny_model(family, dtype)
    ours = aot.apply(copy.deepcopy(theirs))
    loss_theirs, loss_ours = call(theirs), call(ours)
    loss_theirs.backward()
    loss_ours.backward()
    return theirs, ours, loss_theirs, loss_ours


def assert_same_training_signal(theirs, ours, loss_theirs, loss_ours, what,
                                loss_tol=LOSS_TOL, grad_tol=GRAD_TOL):
    loss_err = abs(loss_ours.item() - loss_theirs.item()) / abs(loss_theirs.item())
    assert loss_err <= loss_tol, \
        f"{what}: loss {loss_ours.item()} vs Transformers' {loss_theirs.item()} ({loss_err:.2e})"
    err, name = worst_grad_err(ours, theirs)
    assert err <= grad_tol, f"{what}: gradient of {name} off by {err:.2e} > {grad_tol}"


def tolerances(dtype):
    return dict(loss_tol=FP32_LOSS_TOL, grad_tol=FP32_GRAD_TOL) if dtype == torch.float32 \
        else dict(loss_tol=LOSS_TOL, grad_tol=GRAD_TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_loss_and_every_gradient_match_transformers(family, dtype):
    ids, labels = batch()
    theirs, ours, lt, lo = losses_and_grads(
        family, dtype, lambda m: m(input_ids=ids, labels=labels).loss)
    assert lo.dtype == torch.float32 and lt.dtype == torch.float32
    assert_same_training_signal(theirs, ours, lt, lo, f"{family} {dtype}", **tolerances(dtype))


@pytest.mark.parametrize("family", ["mixtral", "qwen2-moe", "qwen3-moe"])
def test_moe_models_keep_their_auxiliary_loss(family):
    """The router's load-balancing loss is returned and added to the loss as unpatched
    (router_aux_loss_coef = 0.1, so a missing term would move the loss by ~0.2)."""
    ids, labels = batch()
    theirs = tiny_model(family, torch.bfloat16)
    ours = aot.apply(copy.deepcopy(theirs))
    a, b = theirs(input_ids=ids, labels=labels), ours(input_ids=ids, labels=labels)
    assert b.aux_loss is not None and torch.equal(a.aux_loss, b.aux_loss)
    assert abs(b.loss.item() - a.loss.item()) <= LOSS_TOL * a.loss.item()
    without_aux = b.loss - theirs.router_aux_loss_coef * b.aux_loss
    assert abs(without_aux.item() - a.loss.item()) > 0.1


def test_the_head_weight_is_shared_when_tied():
    model = aot.apply(tiny_model("llama-tied"))
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_the_tolerances_reject_a_5_percent_error():
    ids, labels = batch()
    theirs, ours, lt, lo = losses_and_grads(
        "llama", torch.bfloat16, lambda m: m(input_ids=ids, labels=labels).loss)
    assert_same_training_signal(theirs, ours, lt, lo, "unperturbed")
    for name, p in ours.named_parameters():
        saved = p.grad.clone()
        p.grad.mul_(1.05)
        with pytest.raises(AssertionError, match="gradient of"):
            assert_same_training_signal(theirs, ours, lt, lo, f"{name} x 1.05")
        p.grad.copy_(saved)
    with pytest.raises(AssertionError, match="loss"):
        assert_same_training_signal(theirs, ours, lt, lo * 1.05, "loss x 1.05")


def test_outputs_are_shaped_as_transformers_and_eval_keeps_the_logits():
    """Training: no logits (None, also in the tuple's second place, as `loss, logits =
    out[:2]` expects). Eval: the unpatched output, logits included; eval_logits=False:
    the patched loss and no logits."""
    ids, labels = batch()
    theirs = tiny_model("llama")
    ours = aot.apply(copy.deepcopy(theirs))
    out = ours(input_ids=ids, labels=labels)
    assert out.logits is None and "logits" not in out
    expected = theirs(input_ids=ids, labels=labels, return_dict=False)
    as_tuple = ours(input_ids=ids, labels=labels, return_dict=False)
    assert len(as_tuple) == len(expected)
    assert torch.equal(as_tuple[0], out.loss) and as_tuple[1] is None
    for got, want in zip(as_tuple[2:], expected[2:]):
        assert type(got) is type(want)
    theirs.eval(), ours.eval()
    with torch.no_grad():
        want = theirs(input_ids=ids, labels=labels)
        got = ours(input_ids=ids, labels=labels)
        assert torch.equal(got.logits, want.logits) and torch.equal(got.loss, want.loss)
        got_tuple = ours(input_ids=ids, labels=labels, return_dict=False)
        assert torch.equal(got_tuple[1], want.logits)
        aot.apply(ours, eval_logits=False)
        lean = ours(input_ids=ids, labels=labels)
        assert lean.logits is None
        assert abs(lean.loss.item() - want.loss.item()) <= FP32_LOSS_TOL * want.loss.item()


def test_rows_all_ignored_and_a_sequence_with_none_left():
    ids, labels = batch()
    labels[2, :] = -100  # one whole sequence ignored
    theirs, ours, lt, lo = losses_and_grads(
        "qwen3", torch.bfloat16, lambda m: m(input_ids=ids, labels=labels).loss)
    assert_same_training_signal(theirs, ours, lt, lo, "qwen3, one sequence ignored")


def test_another_ignore_index_passed_to_the_forward():
    ids, labels = batch()
    labels[labels == -100] = -1
    theirs, ours, lt, lo = losses_and_grads(
        "qwen2", torch.bfloat16,
        lambda m: m(input_ids=ids, labels=labels, ignore_index=-1).loss)
    assert_same_training_signal(theirs, ours, lt, lo, "ignore_index=-1")


def test_the_last_label_of_each_sequence_predicts_nothing():
    """The shift: changing the first label (never a target) changes nothing; changing the
    last one (the target of position T-2) changes the loss."""
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", torch.bfloat16))
    base = model(input_ids=ids, labels=labels).loss
    first = labels.clone()
    first[1, 0] = (first[1, 0] + 1) % V
    assert torch.equal(model(input_ids=ids, labels=first).loss, base)
    last = labels.clone()
    last[0, -1] = (last[0, -1] + 1) % V
    assert not torch.equal(model(input_ids=ids, labels=last).loss, base)


def test_num_items_in_batch_divides_the_sum_as_transformers_does():
    ids, labels = batch()
    items = torch.tensor(37)  # e.g. the tokens of all accumulated micro-batches
    theirs, ours, lt, lo = losses_and_grads(
        "mistral", torch.bfloat16,
        lambda m: m(input_ids=ids, labels=labels, num_items_in_batch=items).loss)
    assert_same_training_signal(theirs, ours, lt, lo, "num_items_in_batch")
    mean = tiny_model("mistral", torch.bfloat16)(input_ids=ids, labels=labels).loss
    assert abs(lo.item() - mean.item()) > 0.1 * mean.item()  # really a different divisor


def test_shift_labels_given_are_used_as_they_are():
    """Transformers' pre-shifted labels (sequence parallelism): used unshifted, with labels
    only saying that a loss is wanted. Here they are the labels themselves, unshifted."""
    ids, labels = batch()
    theirs, ours, lt, lo = losses_and_grads(
        "llama", torch.bfloat16,
        lambda m: m(input_ids=ids, labels=labels, shift_labels=labels).loss)
    assert_same_training_signal(theirs, ours, lt, lo, "shift_labels")
    shifted_by_us = tiny_model("llama", torch.bfloat16)(input_ids=ids, labels=labels).loss
    assert abs(lo.item() - shifted_by_us.item()) > 1e-3


def test_without_labels_the_forward_and_generation_are_unchanged():
    ids, _ = batch()
    theirs = tiny_model("llama", torch.bfloat16)
    ours = aot.apply(copy.deepcopy(theirs))
    assert torch.equal(ours(input_ids=ids).logits, theirs(input_ids=ids).logits)
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(ours.generate(ids[:, :5], **kwargs), theirs.generate(ids[:, :5], **kwargs))


def test_under_autocast_the_head_runs_in_autocasts_dtype():
    ids, labels = batch()

    def call(m):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return m(input_ids=ids, labels=labels).loss

    theirs, ours, lt, lo = losses_and_grads("llama", torch.float32, call)
    assert_same_training_signal(theirs, ours, lt, lo, "fp32 model, bf16 autocast")


def spy_on_the_loss(monkeypatch) -> list:
    """Records (input dtype, weight dtype) of every head computed by the patch, half
    (linear_cross_entropy) or float32 (linear_cross_entropy_float32)."""
    from ascend_ops.training.integrations import _hf_loss

    seen = []
    for name in ("linear_cross_entropy", "linear_cross_entropy_float32"):
        real = getattr(_hf_loss, name)

        def spy(input, weight, *args, _real=real, **kwargs):
            seen.append((input.dtype, weight.dtype))
            return _real(input, weight, *args, **kwargs)

        monkeypatch.setattr(_hf_loss, name, spy)
    return seen


@pytest.mark.parametrize("model_dtype, autocast, compute_dtype, expected", [
    (torch.bfloat16, None, None, torch.bfloat16),  # a half head runs in its dtype
    (torch.float16, None, None, torch.float16),
    (torch.float32, None, None, torch.float32),  # a float32 head in float32 (CPU)
    (torch.float32, torch.float16, None, torch.float16),  # autocast's dtype, as Transformers'
    (torch.bfloat16, None, torch.float16, torch.float16),  # compute_dtype wins
    (torch.float32, None, torch.bfloat16, torch.bfloat16),
], ids=["bf16", "fp16", "fp32", "fp32-autocast-fp16", "compute_dtype", "fp32-as-bf16"])
def test_the_dtype_the_head_runs_in(monkeypatch, model_dtype, autocast, compute_dtype, expected):
    seen = spy_on_the_loss(monkeypatch)
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", model_dtype), compute_dtype=compute_dtype)
    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    assert seen == [(expected, expected)]
    assert model.lm_head.weight.grad.dtype == model_dtype


def test_a_float32_head_off_cpu_is_refused_not_rounded():
    """The NPU kernels (like CANN's, whose adapter refuses float32: op_plugin/csrc/
    validation.cpp, exercised by tests/npu_link) take half types: a float32 head there is
    an error naming the way out, and compute_dtype or autocast chooses the half type."""
    from ascend_ops.training.integrations._hf_loss import head_dtype

    npu = "privateuseone"  # torch_npu's device type before it renames it "npu"
    with pytest.raises(TypeError, match=r"a float32 head on privateuseone: the fused kernels "
                                        r"there take float16 or bfloat16 only; pass apply\(model, "
                                        r"compute_dtype=torch.bfloat16\)"):
        head_dtype(npu, torch.float32, None)
    with pytest.raises(TypeError, match="a float32 head on privateuseone"):
        head_dtype(npu, torch.bfloat16, torch.float32)
    assert head_dtype(npu, torch.float32, torch.bfloat16) == torch.bfloat16
    assert head_dtype(npu, torch.float16, None) == torch.float16
    assert head_dtype("cpu", torch.float32, None) == torch.float32


def test_the_float32_loss_is_float32_cross_entropy():
    """linear_cross_entropy_float32 against F.cross_entropy of float32 logits, with
    ignored rows, every reduction, both gradients; odd sizes and several row chunks."""
    from ascend_ops.training.lce import float32 as _lce_float32

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(37, 24, generator=gen, requires_grad=True)
    w = torch.randn(1001, 24, generator=gen, requires_grad=True)
    t = torch.randint(0, 1001, (37,), generator=gen)
    t[[0, 5, 36]] = -100
    old = _lce_float32.CHUNK_LOGITS_BYTES
    _lce_float32.CHUNK_LOGITS_BYTES = 8 * 4 * 1001  # 8 rows a chunk: 5 chunks
    try:
        for reduction in ("mean", "sum", "none"):
            ours = _lce_float32.linear_cross_entropy_float32(x, w, t, reduction=reduction)
            ref = torch.nn.functional.cross_entropy(x @ w.T, t, reduction=reduction)
            up = torch.rand(ref.shape, generator=gen)
            gx, gw = torch.autograd.grad((ours * up).sum(), (x, w))
            rx, rw = torch.autograd.grad((ref * up).sum(), (x, w))
            for a, b, what in ((ours, ref, "loss"), (gx, rx, "input grad"), (gw, rw, "weight grad")):
                err = rel_err(a, b)
                assert err <= 1e-6, f"{reduction} {what}: {err:.2e}"
    finally:
        _lce_float32.CHUNK_LOGITS_BYTES = old

def test_restore_and_the_visible_marker():
    model = tiny_model("gpt2")
    class_forward = type(model).forward
    aot.apply(model)
    assert "forward" in model.lm_head.__dict__
    assert aot.is_patched(model)
    # the line docs/integrations.md names: the second, right under the class name
    assert repr(model).splitlines()[1].strip().startswith(
        "ascend_ops: loss from linear_cross_entropy (memory-saving)"), repr(model)
    aot.apply(model, mode="high-performance")  # again: new settings, one patch
    assert "(high-performance)" in repr(model) and "(memory-saving)" not in repr(model)
    aot.restore(model)
    assert not aot.is_patched(model) and "ascend_ops" not in repr(model)
    assert model.forward.__func__ is class_forward
    assert "forward" not in model.lm_head.__dict__ and "forward" not in model.__dict__
    ids, labels = batch()
    assert model(input_ids=ids, labels=labels).logits is not None
    with pytest.raises(ValueError, match="restore: this GPT2LMHeadModel is not patched"):
        aot.restore(model)


def test_a_deep_copy_of_a_patched_model_runs_its_own_weights():
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", torch.bfloat16))
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2)
    assert aot.is_patched(twin)
    assert not torch.equal(twin(input_ids=ids, labels=labels).loss,
                           model(input_ids=ids, labels=labels).loss)


def test_unsupported_models_are_refused_naming_the_class():
    bert = transformers.BertLMHeadModel(transformers.BertConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, is_decoder=True))
    with pytest.raises(ValueError, match="BertLMHeadModel cannot be patched: BertLMHeadModel's "
                                         "head is cls.predictions.decoder, inside a module"):
        aot.apply(bert)

    class MyLlama(transformers.LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    with pytest.raises(ValueError, match=r"MyLlama cannot be patched \(MyLlama overrides the "
                                         r"forward of LlamaForCausalLM\): MyLlama.forward does "
                                         r"not call its head self.lm_head"):
        aot.apply(MyLlama(CONFIGS["llama"]()))


@pytest.mark.parametrize("family, option", [("gemma2", "softcap"), ("gemma3", "softcap"),
                                            ("phi", "bias"), ("gptj", "bias"),
                                            ("codegen", "bias"), ("granite", "scale"),
                                            ("cohere", "scale")])
def test_soft_capped_biased_and_scaled_heads_are_patched_with_the_options(family, option):
    """Gemma 2/3's final_logit_softcapping, a head's bias and a logit scale reach
    linear_cross_entropy as its options: the float32 patched loss is the model's to 1e-5,
    while dropping the option moves it by far more (the option is not lost on the way)."""
    from ascend_ops.training.integrations import _hf_loss

    ids, labels = batch()
    model = tiny_model(family)
    expected = model(input_ids=ids, labels=labels).loss
    patched = aot.apply(copy.deepcopy(model))
    assert abs(patched(input_ids=ids, labels=labels).loss.item() - expected.item()) <= \
        FP32_LOSS_TOL * expected.item()
    real = _hf_loss.linear_cross_entropy
    drop = {"softcap": dict(softcap=None), "bias": dict(linear_bias=None),
            "scale": dict(logit_scale=1.0)}[option]
    try:
        _hf_loss.linear_cross_entropy = lambda *a, **k: real(*a, **{**k, **drop})
        without = patched(input_ids=ids, labels=labels).loss
    finally:
        _hf_loss.linear_cross_entropy = real
    assert abs(without.item() - expected.item()) > 10 * FP32_LOSS_TOL * expected.item()


def test_bad_arguments_and_heads_are_refused():
    model = tiny_model("llama")
    with pytest.raises(ValueError, match="'mode' must be 'memory-saving' or 'high-performance', "
                                         "got 'fast'"):
        aot.apply(model, mode="fast")
    with pytest.raises(TypeError, match="'compute_dtype' must be None, torch.float16, "
                                        "torch.bfloat16 or torch.float32, got torch.float64"):
        aot.apply(model, compute_dtype=torch.float64)
    with pytest.raises(TypeError, match="'eval_logits' must be a bool, got 'no'"):
        aot.apply(model, eval_logits="no")
    model.loss_function = lambda *a, **k: None
    with pytest.raises(ValueError, match="the patch reproduces ForCausalLMLoss only"):
        aot.apply(model)


def test_labels_that_do_not_fit_the_positions_are_refused():
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", torch.bfloat16))
    with pytest.raises(ValueError, match=r"'labels' must have the shape of the positions the "
                                         r"head sees \(3, 1\), got \(3, 11\) \(Transformers: "
                                         r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(33\)"):
        model(input_ids=ids, labels=labels, logits_to_keep=1)
    with pytest.raises(ValueError, match=r"head sees \(3, 11\), got \(3, 5\)"):
        model(input_ids=ids, labels=labels[:, :5])


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("bad", ["float", "bool", "int32"])
def test_labels_of_another_dtype_are_refused_as_transformers_refuses_them(bad, grad):
    """Transformers' loss raises 'expected target dtype to be Long' (a RuntimeError) for
    these; so does the patch, with or without gradients and with eval_logits=False, before
    anything is computed (a float label is not truncated into a class id)."""
    ids, labels = batch()
    wrong = {"float": labels.float() + 0.7, "bool": labels > 0, "int32": labels.int()}[bad]
    theirs = tiny_model("llama")
    ours = aot.apply(copy.deepcopy(theirs))
    with torch.set_grad_enabled(grad):
        with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
            theirs(input_ids=ids, labels=wrong)
        for model in (ours, aot.apply(copy.deepcopy(theirs).eval(), eval_logits=False)):
            with pytest.raises(TypeError, match=f"'labels' must be torch.int64 \\(expected "
                                                f"target dtype to be Long.*got {wrong.dtype}"):
                model(input_ids=ids, labels=wrong)
            with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
                model(input_ids=ids, labels=labels, shift_labels=wrong)


def _trainer_losses(model, tmp_path, mixed_bf16: bool, **extra) -> list[float]:
    """Per-step training losses of a short Trainer run: 4 steps of 2 accumulated
    micro-batches of 2 sequences whose label counts differ (so num_items_in_batch, not a
    mean per micro-batch, decides each step's loss)."""
    gen = torch.Generator().manual_seed(7)
    samples = []
    for i in range(16):
        ids = torch.randint(0, V, (13,), generator=gen)
        labels = ids.clone()
        labels[: i % 9] = -100
        samples.append({"input_ids": ids, "labels": labels})
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, max_steps=4, per_device_train_batch_size=2,
        gradient_accumulation_steps=2, learning_rate=3e-3, logging_steps=1, report_to="none",
        save_strategy="no", seed=0, disable_tqdm=True, dataloader_num_workers=0,
        bf16=mixed_bf16, **extra)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=samples)
    trainer.train()
    return [row["loss"] for row in trainer.state.log_history if "loss" in row]


@pytest.mark.parametrize("family, mixed_bf16", [
    ("llama", False), ("llama", True), ("mixtral", False), ("qwen3-moe", True), ("olmo", False),
], ids=["llama-fp32", "llama-bf16-autocast", "mixtral-fp32", "qwen3-moe-bf16-autocast",
        "olmo-fp32"])
def test_a_trainer_run_matches_transformers_step_by_step(tmp_path, monkeypatch, family,
                                                         mixed_bf16):
    """float32 weights, without (the head in float32: FP32_LOSS_TOL) and with Trainer's
    bf16 mixed precision (accelerate wraps the patched forward in autocast)."""
    calls = spy_on_the_loss(monkeypatch)
    theirs = tiny_model(family)
    ours = aot.apply(copy.deepcopy(theirs))
    expected = _trainer_losses(theirs, tmp_path / "theirs", mixed_bf16)
    assert calls == []
    got = _trainer_losses(ours, tmp_path / "ours", mixed_bf16)
    dtype = torch.bfloat16 if mixed_bf16 else torch.float32
    assert calls == [(dtype, dtype)] * 8  # every micro-batch's loss came from the patch
    assert len(got) == len(expected) == 4
    tol = LOSS_TOL if mixed_bf16 else FP32_LOSS_TOL
    for step, (a, b) in enumerate(zip(got, expected)):
        assert abs(a - b) <= tol * abs(b), f"step {step}: loss {a} vs Transformers' {b}"


@pytest.mark.parametrize("family, mixed_bf16", [("llama", False), ("gemma2", True)],
                         ids=["llama-fp32", "gemma2-bf16-autocast"])
def test_trainers_label_smoothing_is_patched_and_matches_transformers(tmp_path, monkeypatch,
                                                                      family, mixed_bf16):
    """Trainer's label_smoothing_factor takes the labels out of the batch and smooths the
    model's logits (LabelSmoother); the patch computes that loss itself with
    linear_cross_entropy(label_smoothing=...) and hands it to the Trainer, no logits made."""
    calls = spy_on_the_loss(monkeypatch)
    theirs = tiny_model(family)
    ours = aot.apply(copy.deepcopy(theirs))
    expected = _trainer_losses(theirs, tmp_path / "theirs", mixed_bf16, label_smoothing_factor=0.2)
    assert calls == []
    got = _trainer_losses(ours, tmp_path / "ours", mixed_bf16, label_smoothing_factor=0.2)
    assert len(calls) == 8  # every micro-batch's loss came from the patch
    plain = _trainer_losses(tiny_model(family), tmp_path / "plain", mixed_bf16)
    tol = LOSS_TOL if mixed_bf16 else FP32_LOSS_TOL
    for step, (a, b, c) in enumerate(zip(got, expected, plain)):
        assert abs(a - b) <= tol * abs(b), f"step {step}: loss {a} vs Transformers' {b}"
        # near-uniform tiny models: smoothing moves the loss by ~1e-3, seen at float32's bound
        assert abs(c - b) > 10 * FP32_LOSS_TOL * abs(b), "the smoothing must show in the loss"


def test_a_trainer_computing_its_own_loss_from_the_logits_is_refused(tmp_path):
    """A compute_loss_func needs the logits: the patch would do nothing, so the first step
    raises, naming the setting."""
    model = aot.apply(tiny_model("llama"))
    samples = [{"input_ids": torch.arange(8), "labels": torch.arange(8)}] * 4
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, max_steps=1, per_device_train_batch_size=2,
        report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=samples,
        compute_loss_func=lambda outputs, labels, num_items_in_batch=None: outputs.logits.sum())
    with pytest.raises(ValueError, match="Trainer's compute_loss_func"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_restore_after_accelerate_keeps_accelerates_autocast():
    """apply, then Accelerate's prepare (bf16) wraps the forward in autocast; restore takes
    out the patch only: the wrapper stays and the model still runs in bf16 autocast."""
    import accelerate
    from accelerate.state import AcceleratorState

    ids, labels = batch()
    reference = tiny_model("llama")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = reference(input_ids=ids).logits
    model = aot.apply(tiny_model("llama"))
    # Accelerate's state is process-wide: a Trainer run earlier fixed it to "no" mixed
    # precision; start afresh, as Accelerate's own test cases do, and leave it afresh.
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        model = accelerate.Accelerator(mixed_precision="bf16", cpu=True).prepare(model)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    wrapped = model.forward
    aot.restore(model)
    assert not aot.is_patched(model) and model.forward is wrapped
    assert torch.equal(model(input_ids=ids).logits, expected.float())
    out = model(input_ids=ids, labels=labels)
    assert out.logits is not None  # the model's own forward: no patch left
    assert "forward" not in model.lm_head.__dict__


@pytest.mark.parametrize("how", ["torch.save", "pickle", "deepcopy"])
def test_a_saved_patched_model_loads_patched_and_save_pretrained_is_unchanged(tmp_path, how):
    import io
    import pickle

    ids, labels = batch()
    theirs = tiny_model("llama")
    model = aot.apply(copy.deepcopy(theirs))
    if how == "torch.save":
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
    elif how == "pickle":
        loaded = pickle.loads(pickle.dumps(model))
    else:
        loaded = copy.deepcopy(model)
    assert aot.is_patched(loaded) and "ascend_ops" in repr(loaded)
    out = loaded(input_ids=ids, labels=labels)
    assert out.logits is None  # really the patched forward, on the loaded model's weights
    assert loaded.forward.model is loaded and loaded.lm_head.forward.head is loaded.lm_head
    want = theirs(input_ids=ids, labels=labels).loss
    assert abs(out.loss.item() - want.item()) <= FP32_LOSS_TOL * want.item()
    aot.restore(loaded)
    assert loaded(input_ids=ids, labels=labels).logits is not None


def test_save_pretrained_writes_the_unpatched_files(tmp_path):
    theirs = tiny_model("llama")
    ours = aot.apply(copy.deepcopy(theirs))
    theirs.save_pretrained(tmp_path / "theirs")
    ours.save_pretrained(tmp_path / "ours")
    names = sorted(p.name for p in (tmp_path / "theirs").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "ours").iterdir())
    for name in names:
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes()


@pytest.mark.parametrize("dtype, fullgraph", [
    (torch.bfloat16, False), (torch.bfloat16, True), (torch.float32, True),
], ids=["bf16", "bf16-fullgraph", "fp32-fullgraph"])
def test_torch_compile_gives_the_eager_patched_loss_and_gradients(dtype, fullgraph):
    """torch.compile(model) of a patched model: the whole forward is traced (fullgraph
    too), and the loss and every gradient equal the eager patched model's up to the order
    of sums (compiled, the half path recomputes the logits instead of caching their
    gradient: docs/integrations.md)."""
    torch._dynamo.reset()
    ids, labels = batch()
    eager = aot.apply(tiny_model("llama", dtype))
    compiled_model = aot.apply(tiny_model("llama", dtype))
    compiled = torch.compile(compiled_model, fullgraph=fullgraph)
    loss_eager = eager(input_ids=ids, labels=labels).loss
    loss_compiled = compiled(input_ids=ids, labels=labels).loss
    loss_eager.backward()
    loss_compiled.backward()
    assert_same_training_signal(eager, compiled_model, loss_eager, loss_compiled,
                                f"compiled {dtype}", **tolerances(dtype))
    assert compiled(input_ids=ids, labels=labels).logits is None


def test_trainer_with_torch_compile_matches_the_eager_run(tmp_path):
    torch._dynamo.reset()
    theirs = tiny_model("llama")
    expected = _trainer_losses(aot.apply(copy.deepcopy(theirs)), tmp_path / "eager", False)
    got = _trainer_losses(aot.apply(copy.deepcopy(theirs)), tmp_path / "compiled", False,
                          torch_compile=True)
    for step, (a, b) in enumerate(zip(got, expected)):
        assert abs(a - b) <= FP32_LOSS_TOL * abs(b), f"step {step}: compiled {a} vs eager {b}"


def test_a_vocab_parallel_head_over_two_ranks_matches_one_unsplit_model(tmp_path):
    """lm_head split by rows over 2 gloo ranks: every rank's loss and every gradient of the
    layers below equal the unpatched model's; each rank's head gradient is its rows of it."""
    import hf_vocab_parallel_worker as worker

    ranks = run_ranks(worker.__file__, 2, tmp_path, env=cpu_rank_environment())
    ids, labels = batch()
    theirs = tiny_model("llama", torch.bfloat16)
    loss = theirs(input_ids=ids, labels=labels).loss
    loss.backward()
    for rank, got in enumerate(ranks):
        err = abs(got["loss"].item() - loss.item()) / loss.item()
        assert err <= LOSS_TOL, f"rank {rank}: loss {got['loss'].item()} vs {loss.item()}"
        for name, p in theirs.named_parameters():
            expected = p.grad[got["start"]:got["end"]] if name == "lm_head.weight" else p.grad
            err = rel_err(got["grads"][name], expected)
            assert err <= GRAD_TOL, f"rank {rank}: gradient of {name} off by {err:.2e}"


def test_the_quick_benchmark_runs_every_kind_of_row(tmp_path):
    """scripts/benchmark_hf_integration.py --quick end to end (no timing is asserted):
    unpatched, patched and patched-compiled rows, for a bfloat16 and a float32 model."""
    import csv
    import subprocess

    out = tmp_path / "hf.csv"
    script = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "benchmark_hf_integration.py"
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(aot.__file__).parents[2])}
    providers = ["transformers", "ascend_ops", "ascend_ops-compiled"]
    result = subprocess.run([sys.executable, str(script), "--quick", "--csv", str(out),
                             "--providers", *providers, "--dtypes", "bfloat16", "float32"],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader(out.open()))
    assert [(r["op"], r["provider"], r["dtype"], r["size"]) for r in rows] == [
        ("hf_llama_train_step", p, d, "2x16x64x300") for d in ("bfloat16", "float32")
        for p in providers]
    assert all(float(r["median_s"]) > 0 for r in rows)

"""ascend_ops.integrations.transformers against Transformers itself: tiny randomly
initialised causal LMs (built here, nothing downloaded), the same weights run unpatched and
patched; the loss and every parameter's gradient must agree.

Tolerances (norm-relative per tensor: ‖ours − theirs‖ / ‖theirs‖). The two runs differ only
in the head: Transformers rounds the logits to the model's dtype before its float32 loss;
linear_cross_entropy keeps them in float32 but returns the gradient of the hidden states
and of the head's weight in bfloat16 (also for a float32 model, whose head it computes in
bfloat16). Each is one bfloat16 rounding, unit roundoff 2^-8 = 0.39 %, carried through
two layers: the worst gradient seen over every family here is 0.77 % off (bf16 GPT-2),
the worst loss 1.5e-5. GRAD_TOL = 2 % leaves room for other seeds and still rejects a 5 %
error in any one gradient, LOSS_TOL = 1e-3 a 5 % error in the loss
(test_the_tolerances_reject_a_5_percent_error).
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


def assert_same_training_signal(theirs, ours, loss_theirs, loss_ours, what):
    loss_err = abs(loss_ours.item() - loss_theirs.item()) / abs(loss_theirs.item())
    assert loss_err <= LOSS_TOL, \
        f"{what}: loss {loss_ours.item()} vs Transformers' {loss_theirs.item()} ({loss_err:.2e})"
    err, name = worst_grad_err(ours, theirs)
    assert err <= GRAD_TOL, f"{what}: gradient of {name} off by {err:.2e} > {GRAD_TOL}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_loss_and_every_gradient_match_transformers(family, dtype):
    ids, labels = batch()
    theirs, ours, lt, lo = losses_and_grads(
        family, dtype, lambda m: m(input_ids=ids, labels=labels).loss)
    assert lo.dtype == torch.float32 and lt.dtype == torch.float32
    assert_same_training_signal(theirs, ours, lt, lo, f"{family} {dtype}")


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


def test_no_logits_are_returned_with_labels_and_outputs_keep_their_order():
    ids, labels = batch()
    model = aot.apply(tiny_model("llama"))
    out = model(input_ids=ids, labels=labels)
    assert out.logits is None and "logits" not in out
    as_tuple = model(input_ids=ids, labels=labels, return_dict=False)
    assert torch.equal(as_tuple[0], out.loss)  # loss first, as Transformers' own tuple


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


@pytest.mark.parametrize("model_dtype, autocast, compute_dtype, expected", [
    (torch.bfloat16, None, None, torch.bfloat16),  # a half head runs in its dtype
    (torch.float16, None, None, torch.float16),
    (torch.float32, None, None, torch.bfloat16),  # a float32 head is rounded to bf16
    (torch.float32, torch.float16, None, torch.float16),  # autocast's dtype, as Transformers'
    (torch.bfloat16, None, torch.float16, torch.float16),  # compute_dtype wins
], ids=["bf16", "fp16", "fp32", "fp32-autocast-fp16", "compute_dtype"])
def test_the_dtype_the_head_runs_in(monkeypatch, model_dtype, autocast, compute_dtype, expected):
    from ascend_ops.integrations import _hf_loss

    seen = []

    def spy(input, weight, *args, **kwargs):
        seen.append((input.dtype, weight.dtype))
        return real(input, weight, *args, **kwargs)

    real = _hf_loss.linear_cross_entropy
    monkeypatch.setattr(_hf_loss, "linear_cross_entropy", spy)
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", model_dtype), compute_dtype=compute_dtype)
    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    assert seen == [(expected, expected)]
    assert model.lm_head.weight.grad.dtype == model_dtype


def test_restore_and_the_visible_marker():
    model = tiny_model("gpt2")
    class_forward = type(model).forward
    aot.apply(model)
    assert aot.is_patched(model)
    assert "ascend_ops: loss from linear_cross_entropy (memory-saving)" in repr(model)
    aot.apply(model, mode="high-performance")  # again: new settings, one patch
    assert "(high-performance)" in repr(model) and "(memory-saving)" not in repr(model)
    aot.restore(model)
    assert not aot.is_patched(model) and "ascend_ops" not in repr(model)
    assert model.forward.__func__ is class_forward
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
    with pytest.raises(ValueError, match="BertLMHeadModel is not a supported causal LM"):
        aot.apply(bert)

    class MyLlama(transformers.LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    with pytest.raises(ValueError, match="MyLlama overrides the forward of LlamaForCausalLM"):
        aot.apply(MyLlama(CONFIGS["llama"]()))


def test_soft_capping_is_refused_not_approximated():
    config = decoder_config(transformers.Gemma2Config, head_dim=8, final_logit_softcapping=30.0)
    model = transformers.Gemma2ForCausalLM(config)
    with pytest.raises(ValueError, match=r"Gemma2ForCausalLM soft-caps its logits "
                                         r"\(config.final_logit_softcapping = 30.0\)"):
        aot.apply(model)
    assert not aot.is_patched(model)


def test_bad_arguments_and_heads_are_refused():
    model = tiny_model("llama")
    with pytest.raises(ValueError, match="'mode' must be 'memory-saving' or 'high-performance', "
                                         "got 'fast'"):
        aot.apply(model, mode="fast")
    with pytest.raises(TypeError, match="'compute_dtype' must be None, torch.float16 or "
                                        "torch.bfloat16, got torch.float32"):
        aot.apply(model, compute_dtype=torch.float32)
    model.loss_function = lambda *a, **k: None
    with pytest.raises(ValueError, match="the patch reproduces ForCausalLMLoss only"):
        aot.apply(model)
    biased = tiny_model("llama")
    biased.lm_head = torch.nn.Linear(H, V, bias=True)
    with pytest.raises(ValueError, match="LlamaForCausalLM's lm_head has a bias"):
        aot.apply(biased)


def test_labels_that_do_not_fit_the_positions_are_refused():
    ids, labels = batch()
    model = aot.apply(tiny_model("llama", torch.bfloat16))
    with pytest.raises(ValueError, match=r"'labels' must have the shape of the positions the "
                                         r"head sees \(3, 1\), got \(3, 11\)"):
        model(input_ids=ids, labels=labels, logits_to_keep=1)


def _trainer_losses(model, tmp_path, mixed_bf16: bool) -> list[float]:
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
        bf16=mixed_bf16)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=samples)
    trainer.train()
    return [row["loss"] for row in trainer.state.log_history if "loss" in row]


@pytest.mark.parametrize("mixed_bf16", [False, True], ids=["fp32", "bf16-autocast"])
def test_a_trainer_run_matches_transformers_step_by_step(tmp_path, monkeypatch, mixed_bf16):
    """float32 weights, without and with Trainer's bf16 mixed precision (accelerate wraps
    the patched forward in autocast)."""
    from ascend_ops.integrations import _hf_loss

    calls = []
    real = _hf_loss.linear_cross_entropy
    monkeypatch.setattr(_hf_loss, "linear_cross_entropy",
                        lambda *a, **k: calls.append(a[0].dtype) or real(*a, **k))
    theirs = tiny_model("llama")
    ours = aot.apply(copy.deepcopy(theirs))
    expected = _trainer_losses(theirs, tmp_path / "theirs", mixed_bf16)
    assert calls == []
    got = _trainer_losses(ours, tmp_path / "ours", mixed_bf16)
    assert calls == [torch.bfloat16] * 8  # every micro-batch's loss came from the patch
    assert len(got) == len(expected) == 4
    for step, (a, b) in enumerate(zip(got, expected)):
        assert abs(a - b) <= LOSS_TOL * abs(b), f"step {step}: loss {a} vs Transformers' {b}"


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


def test_the_quick_benchmark_runs_both_sides(tmp_path):
    """scripts/benchmark_hf_integration.py --quick end to end (no timing is asserted)."""
    import subprocess

    out = tmp_path / "hf.csv"
    script = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "benchmark_hf_integration.py"
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(aot.__file__).parents[2])}
    result = subprocess.run([sys.executable, str(script), "--quick", "--csv", str(out),
                             "--providers", "transformers", "ascend_ops"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[1].startswith("hf_llama_train_step,transformers,")
    assert lines[2].startswith("hf_llama_train_step,ascend_ops,forward+backward,bfloat16,2x16x64x300,")

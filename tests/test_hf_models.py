"""Which Transformers models ascend_ops.integrations.transformers takes, and why: the checker
(training/integrations/_hf_check.py) on a sample of classes (every family Liger-Kernel
patches that Transformers 5.24.0 has, text and multimodal, and DeepSeek V2/V3/V4, GLM-4V),
the verdicts shipped by scripts/sweep_hf_models.py, the reading of forwards
(_hf_heads.py) on forwards it must refuse, the verdict gate of `apply` and the command line.

Each sampled class is built tiny from its own configuration class, run unpatched and
patched in float32 and bfloat16 and against a finer reference (the checker's bounds, see
Agreement); the same run's verdict must be exact and its code key the shipped one (the
shipped file is this Transformers' sweep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip(
    "transformers", reason="the Hugging Face integration's tests need the test extra "
    "(README: Set-up installs transformers and accelerate)")

import ascend_ops.integrations.transformers as aot  # noqa: E402
from ascend_ops.training.integrations import _hf_check as check  # noqa: E402
from ascend_ops.training.integrations import _hf_forward, _hf_verdicts  # noqa: E402
from transformers.modeling_outputs import CausalLMOutputWithPast  # noqa: E402


@pytest.fixture(autouse=True)
def own_verdicts_file(tmp_path, monkeypatch):
    """--check records into a file of the test's own, never the user's cache."""
    path = tmp_path / "verdicts.json"
    monkeypatch.setenv(_hf_verdicts.ENV_PATH, str(path))
    return path


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread (as the sweep runs them)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def mapped(name: str) -> tuple[type, dict]:
    return getattr(transformers, name), check.mapped_classes()[name]


@pytest.mark.parametrize("name", check.SAMPLE)
def test_the_sample_is_exact_as_the_shipped_sweep_found(name):
    cls, info = mapped(name)
    verdict = check.check_class(cls, info["model_type"], mappings=tuple(info["mappings"]))
    assert verdict.verdict == "exact", check.format_verdict(verdict)
    shipped = _hf_verdicts.shipped()[name]
    assert shipped["verdict"] == "exact"
    assert shipped["code_key"] == verdict.code_key, "hf_verdicts.json is stale: rerun the sweep"


def test_the_shipped_sweep_covers_both_mappings_and_verifies_at_least_100_classes():
    shipped = _hf_verdicts.shipped_file()
    assert shipped["transformers"] == transformers.__version__
    assert set(shipped["classes"]) == set(check.mapped_classes())
    assert len(aot.SUPPORTED_CLASSES) >= 100
    assert set(check.SAMPLE) <= set(aot.SUPPORTED_CLASSES)
    for name, verdict in shipped["classes"].items():
        assert verdict["verdict"] in ("exact", "differs", "refused", "not run"), name
        assert verdict["verdict"] == "exact" or verdict["reason"], f"{name}: no reason recorded"


def tiny(name: str, dtype=torch.float32):
    cls, _ = mapped(name)
    return check.tiny_model(cls, check.tiny_config(cls.config_class), dtype)


# class → words of the reason apply gives (the statement of its forward it cannot take)
REFUSED = {
    "BartForCausalLM": "computes its loss without self.loss_function: `labels = labels.to",
    "BertLMHeadModel": "head is cls.predictions.decoder, inside a module whose forward",
    "DoryForCausalLM": "head DoryLMHead is a torch.nn.Linear with a forward of its own",
    "xLSTMForCausalLM": "does to its logits what the patch cannot reproduce: `logits = "
                        "soft_cap(logits",
    "Inkling2ForCausalLM": "does to its logits what the patch cannot reproduce: `logits = "
                           "self.logit_softcap(logits)`",
    "T5Gemma2ForConditionalGeneration": "loss_function is ForMaskedLMLoss",
    "PPFormulaNetForConditionalGeneration": "passes its own shift_labels to its loss",
    "Gemma4ForConditionalGeneration": "hands the labels to self.model, whose forward",
    "ProphetNetForCausalLM": "uses the logits for more than the loss",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_forwards_the_patch_cannot_reproduce_are_refused_by_name(name):
    model = tiny(name)
    with pytest.raises(ValueError, match=f"apply: {name} cannot be patched.*"
                                         f"{_escape(REFUSED[name])}"):
        aot.apply(model)
    assert not aot.is_patched(model)
    assert _hf_verdicts.shipped()[name]["verdict"] == "refused"


def _escape(words: str) -> str:
    import re

    return re.escape(words)


# -- forwards of one's own: the reading, the verdict gate, --check ------------------------------


class ScaledLlama(transformers.LlamaForCausalLM):
    """A forward of its own: the decoder, the head, a scale from the configuration, the loss."""

    def forward(self, input_ids=None, labels=None, return_dict=None, **kwargs):
        outputs = self.model(input_ids=input_ids, **kwargs)
        hidden_states = outputs.last_hidden_state
        logits = self.lm_head(hidden_states)
        logits = logits * self.config.output_scale
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


class CappedThenScaled(transformers.LlamaForCausalLM):
    def forward(self, input_ids=None, labels=None, return_dict=None, **kwargs):
        hidden_states = self.model(input_ids=input_ids, **kwargs).last_hidden_state
        logits = self.lm_head(hidden_states)
        logits = torch.tanh(logits / self.config.cap) * self.config.cap
        logits = logits * 2.0
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


class LearnedScale(transformers.LlamaForCausalLM):
    def __init__(self, config):
        super().__init__(config)
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, input_ids=None, labels=None, return_dict=None, **kwargs):
        hidden_states = self.model(input_ids=input_ids, **kwargs).last_hidden_state
        logits = self.lm_head(hidden_states) * self.scale
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


class ZLoss(transformers.LlamaForCausalLM):
    def forward(self, input_ids=None, labels=None, return_dict=None, **kwargs):
        hidden_states = self.model(input_ids=input_ids, **kwargs).last_hidden_state
        logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config.vocab_size, **kwargs)
            if self.config.z_loss > 0:
                loss = loss + self.config.z_loss * logits.logsumexp(-1).pow(2).mean()
        return CausalLMOutputWithPast(loss=loss, logits=logits)


def own_model(cls, **config_extra):
    config = check.tiny_config(transformers.LlamaConfig)
    for key, value in config_extra.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return cls(config).train()


@pytest.mark.parametrize("cls, extra, words", [
    (CappedThenScaled, dict(cap=0.5), "scales its logits after soft-capping them"),
    (LearnedScale, {}, "uses the tensor self.scale as a logit scale (a learned or computed "
                       "value; the patch takes a number from the configuration): `logits = "
                       "self.lm_head(hidden_states) * self.scale`"),
    (ZLoss, dict(z_loss=1e-4), "uses the logits for more than the loss"),
], ids=["scale-after-cap", "learned-scale", "z-loss-on"])
def test_a_forward_of_ones_own_is_read_and_refused_naming_the_statement(cls, extra, words):
    with pytest.raises(ValueError, match=f"{cls.__name__} cannot be patched \\({cls.__name__} "
                                         f"overrides the forward of LlamaForCausalLM\\): "
                                         f"{cls.__name__}.forward {_escape(words)}"):
        aot.apply(own_model(cls, **extra))


def test_a_branch_its_configuration_does_not_take_is_not_read():
    """ZLoss with z_loss = 0: the z-loss is never computed, so only the verdict is missing."""
    with pytest.raises(ValueError, match="ZLoss is not verified: no check of it is recorded; "
                                         "`python -m ascend_ops.integrations.transformers "
                                         "--check test_hf_models:ZLoss`"):
        aot.apply(own_model(ZLoss, z_loss=0.0))


def test_an_unverified_class_is_taken_once_checked(own_verdicts_file):
    """apply refuses a forward of one's own until --check found it exact (recorded in the
    user's file); then it takes it, and the patched loss is the model's."""
    model = own_model(ScaledLlama, output_scale=0.5)
    with pytest.raises(ValueError, match=r"ScaledLlama is not verified.*--check "
                                         r"test_hf_models:ScaledLlama` checks it in seconds"):
        aot.apply(model)
    assert check.main(["--check", "test_hf_models:ScaledLlama"]) == 1  # its config lacks the scale
    recorded = json.loads(own_verdicts_file.read_text())["ScaledLlama"][-1]
    assert recorded["verdict"] == "refused"
    assert recorded["reason"].endswith("(self.config has no output_scale)")
    transformers.LlamaConfig.output_scale = 0.5  # a field every LlamaConfig has, for the check
    try:
        assert check.main(["--check", "test_hf_models:ScaledLlama"]) == 0
        recorded = json.loads(own_verdicts_file.read_text())["ScaledLlama"][-1]
        assert recorded["verdict"] == "exact" and recorded["rule"] == "logit_scale=0.5"
        ours = aot.apply(own_model(ScaledLlama))
        theirs = own_model(ScaledLlama)
        ids, labels = check.text_batch(theirs.config)
        expected = theirs(input_ids=ids, labels=labels).loss
        got = ours(input_ids=ids, labels=labels)
        assert got.logits is None
        assert abs(got.loss.item() - expected.item()) <= 1e-5 * expected.item()
    finally:
        del transformers.LlamaConfig.output_scale


def test_a_verdict_for_other_code_or_a_failed_one_is_refused(monkeypatch, own_verdicts_file):
    model = tiny("LlamaForCausalLM")
    aot.apply(model)  # the shipped verdict
    aot.restore(model)
    shipped = dict(_hf_verdicts.shipped())
    shipped["LlamaForCausalLM"] = {**shipped["LlamaForCausalLM"], "code_key": "0" * 16}
    monkeypatch.setattr(_hf_verdicts, "shipped", lambda: shipped)
    with pytest.raises(ValueError, match=r"LlamaForCausalLM is not verified: its forward differs "
                                         r"from the one checked with Transformers 5\.24\.0"):
        aot.apply(model)
    key = aot._rule(model).key
    own_verdicts_file.write_text(json.dumps({"LlamaForCausalLM": [
        {"verdict": "differs", "code_key": key, "reason": "fp32: the loss uses 3 of its bound"}]}))
    with pytest.raises(ValueError, match="LlamaForCausalLM: the checker found the patched loss "
                                         "differs from the model's own \\(fp32: the loss uses 3"):
        aot.apply(model)
    assert not aot.is_patched(model)


# -- the checker's bounds ------------------------------------------------------------------------


class ScaledGrad(torch.autograd.Function):
    """Identity forward; the gradient times `factor`."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


@pytest.mark.parametrize("where", ["loss", "head input", "head weight"])
def test_the_checker_finds_a_5_percent_error(monkeypatch, where):
    """The patched loss, the gradient it sends into the decoder or the head weight's
    gradient 5 % off: the checker's verdict is "differs", naming what is off."""
    real = _hf_forward.causal_lm_loss

    def off(hidden, weight, *args, **kwargs):
        if where == "head input":
            hidden = ScaledGrad.apply(hidden, 1.05)
        if where == "head weight":
            weight = ScaledGrad.apply(weight, 1.05)
        loss = real(hidden, weight, *args, **kwargs)
        return loss * 1.05 if where == "loss" else loss

    monkeypatch.setattr(_hf_forward, "causal_lm_loss", off)
    cls, info = mapped("Qwen3ForCausalLM")
    verdict = check.check_class(cls, info["model_type"])
    assert verdict.verdict == "differs", check.format_verdict(verdict)
    if where == "loss":
        assert verdict.reason.startswith("fp32: the loss uses ")
        assert verdict.errors["fp32"][0] > 1
    else:
        assert verdict.errors["fp32"][1] > 1  # every gradient below the head, or the head's


def test_the_checker_finds_a_dropped_soft_cap(monkeypatch):
    """A rule that forgets Gemma 2's soft-cap (the tiny configuration's 0.25 bends the logits)."""
    from ascend_ops.training.integrations import _hf_heads

    real = _hf_heads.head_rule
    monkeypatch.setattr(check, "head_rule",
                        lambda model: dataclasses_replace(real(model), softcap=None))
    cls, info = mapped("Gemma2ForCausalLM")
    verdict = check.check_class(cls, info["model_type"])
    assert verdict.verdict == "differs" and verdict.errors["fp32"][0] > 100


def dataclasses_replace(rule, **changes):
    import dataclasses

    return dataclasses.replace(rule, **changes)


# -- the command line ----------------------------------------------------------------------------


def test_the_command_line_checks_a_model_type(own_verdicts_file):
    """`python -m ascend_ops.integrations.transformers --check`, end to end (one process)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "ascend_ops.integrations.transformers",
                             "--check", "gemma2", "--no-record"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Gemma2ForCausalLM (gemma2): exact" in result.stdout
    assert "between head and loss: softcap=0.25" in result.stdout
    assert "(the shipped sweep found Gemma2ForCausalLM exact)" in result.stdout
    assert not own_verdicts_file.exists()


def test_the_command_line_checks_a_model_directory_with_its_own_configuration(
        tmp_path, own_verdicts_file, capsys):
    """A directory's configuration as it is (its soft-cap off), shrunk; the verdict recorded."""
    config = transformers.Gemma2Config(final_logit_softcapping=None, num_hidden_layers=3)
    config.architectures = ["Gemma2ForCausalLM"]
    config.save_pretrained(tmp_path / "model")
    assert check.main(["--check", str(tmp_path / "model")]) == 0
    out = capsys.readouterr().out
    assert "Gemma2ForCausalLM (gemma2): exact" in out and "between head and loss: plain" in out
    recorded = json.loads(own_verdicts_file.read_text())
    assert recorded["Gemma2ForCausalLM"][-1]["verdict"] == "exact"


def test_the_command_line_says_why_a_class_is_refused(capsys):
    assert check.main(["--check", "BartForCausalLM", "--no-record"]) == 1
    assert "BartForCausalLM (bart): refused: BartForCausalLM.forward computes its loss " \
           "without self.loss_function" in capsys.readouterr().out
    with pytest.raises(ValueError, match="'no_such_model' is neither a model type nor a class"):
        check.main(["--check", "no_such_model", "--no-record"])


def test_the_sweep_script_runs_on_a_few_classes(capsys, monkeypatch):
    import runpy

    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "sweep_hf_models.py")
    monkeypatch.setattr(sys, "argv", [script, "--only", "llama", "BartForCausalLM"])
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit) as exit_:
            runpy.run_path(script, run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("refused  BartForCausalLM")
    assert lines[1].startswith("exact    LlamaForCausalLM")
    assert lines[2].startswith("{'refused': 1, 'exact': 1}")


def test_own_classes_are_read_from_this_file():
    """The reading uses inspect.getsource: a class defined in a test module is readable."""
    import inspect

    assert "logits * self.config.output_scale" in textwrap.dedent(
        inspect.getsource(ScaledLlama.forward))


def test_the_docs_table_is_the_shipped_verdicts():
    """docs/hf_models.csv and hf_verdicts.json are written together by the sweep: the same
    classes with the same verdicts."""
    import csv
    import json
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    shipped = json.loads((root / "python" / "ascend_ops" / "training" / "integrations"
                          / "hf_verdicts.json").read_text())["classes"]
    with open(root / "docs" / "hf_models.csv", newline="") as f:
        table = {row["class"]: row["verdict"] for row in csv.DictReader(f)}
    assert table == {name: v["verdict"] for name, v in shipped.items()}

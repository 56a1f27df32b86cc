"""ascend_ops.integrations.megatron against megatron-core itself: a 2-layer GPTModel over 2
gloo ranks on CPU (tensor parallel 2), one training step unpatched and one patched from the
same weights (megatron_worker.py); every rank's per-token loss and every gradient (its
shards) must agree. Shared and separate output weights, sequence parallel on and off,
float32 and bfloat16, label smoothing against the whole vocabulary's logits; and the peak
memory of a step at a real vocabulary, patched against unpatched.

These need megatron-core (0.19.2) and triton in the environment: .ci/run makes one for them
(megatron-core declares Python >= 3.12 and installs on 3.11 with --ignore-requires-python
--no-deps); elsewhere they skip.

Tolerances (norm-relative per tensor, the Hugging Face tests' and their reasons): float32
loss 1e-5 and gradients 1e-4 (only the order of sums differs); bfloat16 loss 1e-3 and
gradients 2e-2 (Megatron rounds its logits to bfloat16 before its float32 loss,
linear_cross_entropy keeps them in float32 and returns the input and weight gradients in
bfloat16). Each rejects a 5 % error in the loss or in any one gradient.
"""

from __future__ import annotations

import os
import pathlib
import sys

import pytest
import torch

pytest.importorskip("megatron.core", reason="needs megatron-core and triton (.ci/run's "
                    "Megatron environment)")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from rank_processes import cpu_rank_environment, run_ranks  # noqa: E402

WORKER = HERE / "megatron_worker.py"
TOLERANCES = {"fp32": (1e-5, 1e-4), "bf16": (1e-3, 2e-2)}


def rel_err(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    theirs = theirs.double()
    return ((ours.double() - theirs).norm() / theirs.norm().clamp_min(1e-30)).item()


def ranks(case: str, tmp_path, **env: str) -> list[dict]:
    return run_ranks(WORKER, 2, tmp_path, env=cpu_rank_environment(**env), script_args=(case,),
                     timeout=300)


CASES = ["tied-nosp-fp32", "untied-nosp-fp32", "tied-sp-fp32", "untied-sp-fp32",
         "tied-nosp-bf16", "untied-sp-bf16", "tied-nosp-fp32-smooth", "untied-sp-fp32-smooth"]


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> list[dict]:
    """Every case's step on both ranks, in one pair of processes (each pays the imports)."""
    return ranks(",".join(CASES), tmp_path_factory.mktemp("megatron"))


@pytest.mark.parametrize("case", CASES)
def test_a_training_step_matches_megatron(case, steps):
    loss_tol, grad_tol = TOLERANCES["bf16" if "bf16" in case else "fp32"]
    for rank, results in enumerate(steps):
        got = results[case]
        assert got["sequence_parallel"] == ("-sp" in case)
        assert got["tied"] == case.startswith("tied")
        assert got["weight_dtype"] == (torch.bfloat16 if "bf16" in case else torch.float32)
        theirs, ours = got["loss_theirs"], got["loss_ours"]
        assert ours.dtype == torch.float32 and ours.shape == theirs.shape == (3, 12)
        err = rel_err(ours, theirs)
        assert err <= loss_tol, f"rank {rank}: per-token loss off by {err:.2e}"
        assert got["grads_ours"].keys() == got["grads_theirs"].keys()
        for name, g in got["grads_ours"].items():
            err = rel_err(g, got["grads_theirs"][name])
            assert err <= grad_tol, f"rank {rank}: gradient of {name} off by {err:.2e}"


def test_the_tolerances_reject_a_5_percent_error(steps):
    got = steps[0]["tied-nosp-bf16"]
    loss_tol, grad_tol = TOLERANCES["bf16"]
    assert rel_err(got["loss_ours"] * 1.05, got["loss_theirs"]) > loss_tol
    for name, g in got["grads_ours"].items():
        assert rel_err(g * 1.05, got["grads_theirs"][name]) > grad_tol, name


def test_one_step_needs_a_fraction_of_megatrons_memory(tmp_path):
    """At V = 65536 (32768 a rank), s = 1024, bf16 (megatron_worker.MEMORY_SIZE): Megatron's
    step holds the [s, b, V/tp] logits (64 MiB a rank), their float32 copy and softmax; the
    patched one its row statistics, a chunk at a time, and on CPU the bf16 logits' gradient
    (64 MiB a rank: the CPU path's cache, ASCEND_OPS_LCE_GRAD_CACHE_MIB)."""
    peaks = {}
    for provider in ("megatron", "ours"):
        out = tmp_path / provider
        out.mkdir()
        # large blocks mapped and returned at once, so that the peak is what the step holds
        peaks[provider] = [r["peak_extra_mib"] for r in ranks(
            f"memory-{provider}", out, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")]
    print(f"peak extra MiB per rank: {peaks}")
    for rank in range(2):
        assert peaks["ours"][rank] < 0.5 * peaks["megatron"][rank], peaks


def test_bad_options_are_refused():
    import ascend_ops.integrations.megatron as aom

    with pytest.raises(ValueError, match=r"'label_smoothing' must be a number in \[0, 1\) "
                                         r"\(Megatron's range\), got 1.0"):
        aom.Options(label_smoothing=1.0)
    with pytest.raises(ValueError, match="'mode' must be 'memory-saving' or 'high-performance', "
                                         "got 'fast'"):
        aom.apply(torch.nn.Linear(2, 2), mode="fast")
    with pytest.raises(TypeError, match="Linear.forward takes no output_processor"):
        aom.apply(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="'output_processor_context' must be an "
                                        "ascend_ops.integrations.megatron.Options or None, got "
                                        "dict"):
        aom.output_processor(hidden_states=None, output_layer=None, output_weight=None,
                             labels=None, config=None, context={})

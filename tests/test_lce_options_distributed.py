"""linear_cross_entropy's loss options over 1 and 2 real processes (gloo on 127.0.0.1),
vocabulary split across the ranks, against float64 autograd of the whole problem
(lce_options_oracle.py): the CPU kernels (with and without the logits-gradient cache) and
the NPU routes' device-agnostic code run on CPU tensors."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

from ascend_ops import testing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import lce_options_worker as worker  # noqa: E402
from lce_options_oracle import oracle  # noqa: E402
from rank_processes import cpu_rank_environment, run_ranks  # noqa: E402


@pytest.fixture(scope="module", params=[1, 2], ids=lambda w: f"{w}ranks")
def ranks(request, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"options{world}")
    return world, run_ranks(worker.__file__, world, out, env=cpu_rank_environment(), timeout=300)


@pytest.mark.parametrize("run", worker.RUNS, ids=lambda r: f"{r[0]}-{r[1]}-{str(r[2])[6:]}-{r[3]}")
def test_options_over_ranks_match_float64_autograd(ranks, run):
    world, results = ranks
    name, reduction, dtype, route = run
    names = worker.SETS[name]
    x, w, t, b, cw, grad = worker.global_problem(world, dtype, names)
    want, want_grads = oracle(x, w, t, linear_bias=b,
                              ce_weight=cw if "ce_weight" in names else None,
                              reduction=reduction, grad=grad if reduction == "none" else None,
                              **worker.options_of(names))
    got = [r[run] for r in results]
    for g in got:  # every rank holds the global loss and extra outputs
        torch.testing.assert_close(g["loss"].double(), want["loss"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g["lse"].double(), want["lse"], rtol=1e-5, atol=1e-5)
        if route != "npu-operators":  # that route is chosen only without token accuracy
            torch.testing.assert_close(g["token_accuracy"].double(), want["token_accuracy"])
        if g["z_loss"] is not None:
            torch.testing.assert_close(g["z_loss"].double(), want["z_loss"], rtol=1e-5, atol=1e-5)
    input_grad = sum(g["input"].double() for g in got)
    weight_grad = torch.cat([g["weight"] for g in got])
    check = (testing.assert_half_grad_close if dtype != torch.float32 else
             lambda ours, truth, what: torch.testing.assert_close(ours.double(), truth,
                                                                  rtol=1e-4, atol=1e-5))
    check(input_grad, want_grads["input"], "input grad")
    check(weight_grad, want_grads["weight"], "weight grad")
    if "linear_bias" in want_grads:
        check(torch.cat([g["linear_bias"] for g in got]), want_grads["linear_bias"], "bias grad")

"""The NPU implementations (op_plugin/csrc/npu through torch_npu): "npu" on CANN's
built-in aclnn ops, "npu_custom" on our Ascend C op package.

Tests marked `npu` run the adapter on an Ascend device against the float64 oracle, the
shared validation table and a whole training step (forward companions, backward,
nn.LinearCrossEntropyLoss and nn.SyncBatchNorm, 2 ranks over hccl when 2 NPUs are
visible); without a device (torch_npu, CANN or the adapter missing) they skip, naming
what is missing. The unmarked tests check how "npu" and "npu_custom" are offered and
refused where they cannot run. Building and linking the adapter is checked separately,
without hardware, by tests/npu_link (CI's torch_npu environment).
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import testing
from ascend_ops.npu import adapter as _npu_adapter
from ascend_ops.npu import limits as npu_limits

from conftest import assert_matches, clone_inputs
from rank_processes import run_ranks
from test_validation import BN_BAD, FLCE_BAD, VALUE_RULES, bn_base, check_message, flce_bad_inputs

NPU = ascend_ops.available_impls()["npu"]
on_npu = pytest.mark.skipif(not NPU.available, reason=f"npu unavailable: {NPU.reason}")
CUSTOM = ascend_ops.available_impls()["npu_custom"]
on_custom = pytest.mark.skipif(not CUSTOM.available, reason=f"npu_custom unavailable: {CUSTOM.reason}")
FLCE = "fused_linear_cross_entropy_loss_grad"

# What the adapter's error says when CANN's built-in refuses a shape (builtin_limits.h).
BUILTIN_LIMITS = "CANN's built-in aclnnFusedLinearCrossEntropyLossGrad"


def test_custom_package_is_looked_for_in_the_vendor_directory(tmp_path):
    vendor = tmp_path / "vendors" / "ascend_ops"
    other = tmp_path / "vendors" / "someone_else"
    for root in (vendor, other):
        (root / "op_api" / "lib").mkdir(parents=True)
    assert _npu_adapter.find_custom_package(None) is None
    assert _npu_adapter.find_custom_package(f"{vendor}") is None  # no library yet
    (other / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"")
    assert _npu_adapter.find_custom_package(f"{other}") is None  # another vendor's package
    (vendor / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"")
    assert _npu_adapter.find_custom_package(f"{other}{os.pathsep}{vendor}") == vendor
    assert _npu_adapter.find_custom_package(f"{os.pathsep}{vendor}{os.pathsep}") == vendor


@pytest.mark.parametrize("uid, owner, loads", [(1000, 1000, True), (1000, 0, True),
                                                (1000, 1001, False), (0, 1000, False), (0, 0, True)])
def test_custom_package_owner_is_checked_as_torch_npu_checks_it(tmp_path, monkeypatch, uid, owner, loads):
    """torch_npu skips a libcust_opapi.so not owned by the current user, or by root for a
    non-root user (op_api_common.cpp:36-54): "found" must mean "torch_npu loads it", and
    the reason must say why not, not "rebuild it"."""
    vendor = tmp_path / "vendors" / "ascend_ops"
    (vendor / "op_api" / "lib").mkdir(parents=True)
    (vendor / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"")
    monkeypatch.setattr(_npu_adapter, "_current_uid", lambda: uid)
    monkeypatch.setattr(_npu_adapter, "_owner_uid", lambda path: owner)
    assert (_npu_adapter.find_custom_package(str(vendor)) == vendor) is loads
    refusal = _npu_adapter.owner_refusal(vendor / "op_api" / "lib" / "libcust_opapi.so")
    assert (refusal is None) is loads
    if not loads:
        assert f"belongs to uid {owner} and this process runs as uid {uid}" in refusal
        assert "torch_npu skips" in refusal and "rebuild" not in refusal


CANN_MATMUL_TILING = pathlib.Path(__file__).resolve().parents[1] / ".." / "shared" / "tools" / \
    "cann-matmul-tiling" / "cann-matmul-tiling"


@pytest.mark.skipif(not CANN_MATMUL_TILING.exists(), reason="CANN's tiling library tool (../shared/tools) is not here")
def test_the_ub_the_limits_are_derived_with_is_what_platform_ascendc_reports():
    """builtin_limits.cpp derives the high-performance V limit from the UB a tiling sees;
    asc-devkit's PlatformAscendC, compiled unmodified by the cann-matmul-tiling tool,
    reports it for Atlas A2 and A3 (Ascend910_93 maps to ASCEND910B)."""
    import json

    ub = npu_limits.builtin_limits()["ub_bytes"]
    for soc in ("Ascend910B", "Ascend910_93"):
        done = subprocess.run([str(CANN_MATMUL_TILING), "128", "128", "128", "dtype=bf16", f"soc={soc}"],
                              capture_output=True, text=True, timeout=600, check=True)
        platform = json.loads(done.stdout.splitlines()[0])["platform"]
        assert platform["UB"] == ub, (soc, platform)


def test_counts_travel_in_float32_at_least_on_npu():
    """torch's SyncBatchNorm casts the counts to running_mean's dtype: float16 running
    statistics would make a count above 65504 rows inf, and torch_npu 2.13's op_api kernel
    passes them on as they come (only its acl_op kernel cast them to float32), so on NPU
    they never go narrower."""
    from ascend_ops.training.nn.sync_batch_norm import _counts_dtype

    for dtype in (torch.float16, torch.bfloat16):
        assert _counts_dtype("npu", dtype) == torch.float32
        assert _counts_dtype("cuda", dtype) == dtype  # its kernel reads them as running_mean's
    assert _counts_dtype("npu", torch.float32) == torch.float32
    assert _counts_dtype("npu", torch.float64) == torch.float64


def test_custom_package_is_looked_for_in_the_default_vendors_config(tmp_path):
    """torch_npu also searches $ASCEND_OPP_PATH/vendors/<name> for each name of the
    load_priority line of vendors/config.ini (a default install), after
    ASCEND_CUSTOM_OPP_PATH's entries."""
    vendors = tmp_path / "opp" / "vendors"
    ours, first = vendors / "ascend_ops", tmp_path / "elsewhere" / "ascend_ops"
    for root in (ours, first):
        (root / "op_api" / "lib").mkdir(parents=True)
        (root / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"")
    opp = str(tmp_path / "opp")
    assert _npu_adapter.find_custom_package(None, opp) is None  # no config.ini
    (vendors / "config.ini").write_text("[vendor]\nload_priority=customize\n")
    assert _npu_adapter.find_custom_package(None, opp) is None  # not on the list
    (vendors / "config.ini").write_text("load_priority=customize, ascend_ops\n")
    assert _npu_adapter.find_custom_package(None, opp) == ours
    assert _npu_adapter.custom_package_dirs(str(first), opp) == [
        first, vendors / "customize", ours]
    assert _npu_adapter.find_custom_package(str(first), opp) == first  # the variable first


def test_the_package_search_is_read_once(monkeypatch):
    """As torch_npu reads ASCEND_CUSTOM_OPP_PATH and ASCEND_OPP_PATH once, when it loads,
    a value set later changes nothing (it would claim a package torch_npu never loads)."""
    before = _npu_adapter.package_search_environment()
    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", "/set/after/loading/vendors/ascend_ops")
    monkeypatch.setenv("ASCEND_OPP_PATH", "/set/after/loading")
    assert _npu_adapter.package_search_environment() == before


def test_available_impls_per_op():
    forward = ascend_ops.available_impls("fused_linear_online_max_sum")
    assert forward["npu_custom"].reason == \
        "npu_custom does not implement fused_linear_online_max_sum"
    assert not forward["sim"].available
    assert forward["cpu"].available and forward["reference"].available
    backward = ascend_ops.available_impls(FLCE)
    for name in ("npu", "npu_custom"):
        assert backward[name].available == (backward[name].reason is None)
    with pytest.raises(ValueError, match="op must be one of"):
        ascend_ops.available_impls("no_such_op")


@pytest.mark.skipif(CUSTOM.available, reason="the custom op package can run here")
def test_impl_npu_custom_raises_why_it_cannot_run():
    reason = ascend_ops.available_impls("batch_norm_reduce_backward")["npu_custom"].reason
    with pytest.raises(RuntimeError, match=re.escape(f"impl='npu_custom' is not available: {reason}")):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="npu_custom")


def to_npu(inputs: dict) -> dict:
    """CPU tensors moved to the NPU; others (e.g. a rule's meta tensor) left where they are."""
    return {k: v.to("npu") if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v
            for k, v in inputs.items()}


def to_cpu(outputs):
    return tuple(None if o is None else o.cpu() for o in outputs)


@pytest.mark.skipif(NPU.available, reason="the NPU adapter can run here")
def test_impl_npu_raises_why_it_cannot_run():
    with pytest.raises(RuntimeError, match=re.escape(f"impl='npu' is not available: {NPU.reason}")):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="npu")


@on_npu
def test_impl_npu_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="impl='npu' needs NPU tensors"):
        ascend_ops.batch_norm_reduce_backward(**bn_base(), impl="npu")


def run_flce_or_skip_builtin_limit(case, inputs):
    high_performance = case.mode == testing.HIGH_PERFORMANCE
    refusal = npu_limits.builtin_flce_grad_refusal(case.bt, case.h, case.v, high_performance)
    try:
        ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(clone_inputs(inputs)))
    except NotImplementedError as error:
        # Only the derived shape limits of the built-in (builtin_limits.cpp) may refuse.
        assert BUILTIN_LIMITS in str(error), str(error)
        assert refusal is not None, f"{case.name} is within the built-in's limits: {error}"
        pytest.skip(f"{case.name}: CANN's built-in refuses it (impl='npu_custom' takes it)")
    assert refusal is None, f"{case.name} ran although builtin_limits refuses it: {refusal}"
    return ours


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.flce_cases(), ids=lambda c: c.name)
def test_flce_npu_matches_oracle(case):
    inputs = testing.flce_inputs(case)
    ours = run_flce_or_skip_builtin_limit(case, inputs)  # impl="auto" picks npu
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs),
                   what=f"npu {case.name}")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.bn_cases(), ids=lambda c: c.name)
def test_bn_npu_matches_canns_composite(case):
    """CANN's built-in forms Σ dy·(x − mean) as Σ dy·x − mean·Σ dy in float32 (cancelling
    when |mean| >> std): impl="npu" is held to that computation (tests/cann_golden.py's
    emulation, within its reduction-order bound), not to SPEC §4 (which impl="npu_custom"
    meets); tests/test_cann_golden.py shows where the two part."""
    import cann_golden

    inputs = testing.bn_inputs(case)
    ours = to_cpu(ascend_ops.batch_norm_reduce_backward(**to_npu(inputs), impl="npu"))
    dtype = torch.float16 if inputs["input"].dtype == inputs["mean"].dtype == torch.float16 \
        else torch.float32
    assert all(o.dtype == dtype for o in ours)
    if inputs["input"].numel() == 0:
        assert all(torch.count_nonzero(o) == 0 for o in ours)
        return
    outputs, bounds = cann_golden.batch_norm_reduce_backward_composite(
        inputs["grad_out"], inputs["input"], inputs["mean"], inputs["invstd"], dtype)
    error = cann_golden.composite_error(ours, outputs, bounds)
    assert error is None, f"npu {case.name}: {error}"


@pytest.mark.npu
@on_npu
def test_empty_inputs_give_zeros_not_garbage():
    # The built-ins leave outputs unwritten for empty input; fill the cache with non-zeros
    # first so stale memory would show.
    torch.full((1 << 20,), 7.0, device="npu").sum().item()
    flce = testing.flce_inputs(testing.FlceCase(0, 16, 256))
    _, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(flce))
    assert torch.count_nonzero(weight_grad.cpu()) == 0
    bn = testing.bn_inputs(testing.BnCase((0, 4, 3)))
    for out in ascend_ops.batch_norm_reduce_backward(**to_npu(bn)):
        assert torch.count_nonzero(out.cpu()) == 0


@pytest.mark.npu
@on_npu
def test_non_contiguous_inputs():
    case = testing.FlceCase(40, 64, 256, torch.bfloat16)
    inputs = testing.flce_inputs(case)
    npu = to_npu(inputs)
    npu["input"] = npu["input"].t().contiguous().t()  # same values, column-major
    npu["weight"] = npu["weight"].t().contiguous().t()
    assert not npu["input"].is_contiguous()
    ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**npu)
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs), "npu")
    bn = testing.bn_inputs(testing.BnCase((4, 6, 5, 5), channels_last=True))
    ours = ascend_ops.batch_norm_reduce_backward(**to_npu(bn))
    assert_matches(to_cpu(ours), testing.bn_oracle(bn), testing.bn_naive(bn), "npu channels_last")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("rule", FLCE_BAD, ids=lambda r: r[0])
def test_flce_npu_rejects_bad_input_like_cpu(rule):
    name, (mode, change), error_type, arg = rule
    if name in VALUE_RULES:
        pytest.skip("the target range is checked on the device: test_target_range_check")
    inputs = to_npu(flce_bad_inputs(mode, change))
    with pytest.raises(error_type) as error:
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="npu")
    check_message(error, arg)


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("rule", BN_BAD, ids=lambda r: r[0])
def test_bn_npu_rejects_bad_input_like_cpu(rule):
    name, change, error_type, arg = rule
    inputs = to_npu(dict(bn_base(), **change))
    with pytest.raises(error_type) as error:
        ascend_ops.batch_norm_reduce_backward(**inputs, impl="npu")
    check_message(error, arg)


@pytest.mark.npu
@on_custom
@pytest.mark.parametrize("case", testing.flce_cases(), ids=lambda c: c.name)
def test_flce_npu_custom_matches_oracle(case):
    inputs = testing.flce_inputs(case)
    ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(clone_inputs(inputs)),
                                                           impl="npu_custom")
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs),
                   what=f"npu_custom {case.name}")


@pytest.mark.npu
@on_custom
@pytest.mark.parametrize("case", testing.bn_cases(), ids=lambda c: c.name)
def test_bn_npu_custom_matches_oracle(case):
    inputs = testing.bn_inputs(case)
    ours = ascend_ops.batch_norm_reduce_backward(**to_npu(inputs), impl="npu_custom")
    assert_matches(to_cpu(ours), testing.bn_oracle(inputs), testing.bn_naive(inputs),
                   what=f"npu_custom {case.name}")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.online_cases(), ids=lambda c: c.name)
def test_online_max_sum_npu_matches_oracle(case):
    # Covers the vocabulary end index: exclusive, as CANN's kernel compares (passed as is).
    inputs = testing.online_inputs(case)
    ours = ascend_ops.fused_linear_online_max_sum(**to_npu(inputs), impl="npu")
    assert_matches(to_cpu(ours), testing.online_oracle(inputs), testing.online_naive(inputs),
                   what=f"npu {case.name}")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("start, end", [(0, 40), (40, 80), (0, 20), (7, 47)])
def test_online_mask_and_targets_npu_match_canns_golden(start, end):
    """Every byte of the mask, padding bits included (13 rows: 3 of them), and the local
    targets, bit for bit as CANN's golden test computes them, on shards that own id 0 and
    not; ids at the shard's edges included."""
    import cann_golden

    gen = torch.Generator().manual_seed(start + end)
    target = torch.randint(0, 120, (13,), generator=gen)
    target[:4] = torch.tensor([0, start, max(end - 1, 0), end])
    input = torch.randn(13, 16, generator=gen).bfloat16()
    weight = torch.randn(end - start, 16, generator=gen).bfloat16()
    ours = ascend_ops.fused_linear_online_max_sum(*to_npu(dict(i=input, w=weight, t=target)).values(),
                                                  start, end, impl="npu")
    golden = cann_golden.online_max_sum(input, weight, target, start, end)
    assert ours[3].cpu().tolist() == golden[3].tolist()
    assert ours[4].cpu().tolist() == golden[4].tolist()


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("case", testing.loss_cases(), ids=lambda c: c.name)
def test_loss_with_max_sum_npu_matches_oracle(case):
    inputs = testing.loss_inputs(case)
    ours = ascend_ops.fused_cross_entropy_loss_with_max_sum(**to_npu(inputs), impl="npu")
    assert_matches(to_cpu(ours), testing.loss_oracle(inputs), testing.loss_naive(inputs),
                   what=f"npu {case.name}")


def f64_cross_entropy(input, weight, target):
    x = input.double().requires_grad_()
    w = weight.double().requires_grad_()
    loss = F.cross_entropy((x @ w.T).flatten(0, -2), target.flatten())
    loss.backward()
    return loss.detach(), x.grad, w.grad


def assert_bf16_grad_close(ours, truth, what):
    """bf16 results against float64: within 2**-5 of max|truth| (SPEC §1 rounds the logits
    gradient to bf16 before the GEMMs), which a 5 % error in one output exceeds."""
    ours, truth = ours.double(), truth.double()
    atol = 2**-5 * max(truth.abs().max().item(), 1e-3)
    error = (ours - truth).abs()
    worst = int(error.argmax())
    assert bool((error <= atol + 2**-6 * truth.abs()).all()), (
        f"{what}: worst element {worst}: ours {ours.flatten()[worst].item():.6g}, "
        f"truth {truth.flatten()[worst].item():.6g}")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_training_step_on_one_npu(mode):
    gen = torch.Generator().manual_seed(7)
    input = (torch.randn(5, 13, 64, generator=gen) / 4).bfloat16()
    weight = (torch.randn(300, 64, generator=gen) / 4).bfloat16()
    target = torch.randint(0, 300, (5, 13), generator=gen)
    target[1, :4] = -100
    x = input.npu().requires_grad_()
    w = weight.npu().requires_grad_()
    loss = ascend_ops.nn.LinearCrossEntropyLoss(mode=mode)(x, w, target.npu())
    loss.backward()
    truth = f64_cross_entropy(input, weight, target)
    torch.testing.assert_close(loss.double().cpu(), truth[0], rtol=1e-2, atol=1e-3)
    assert_bf16_grad_close(x.grad.cpu(), truth[1], f"{mode} input grad")
    assert_bf16_grad_close(w.grad.cpu(), truth[2], f"{mode} weight grad")


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sync_batch_norm_on_one_npu_in_every_dtype(dtype):
    """The layer and its input in `dtype` (model.half(), model.bfloat16()): each step's
    tensors reach CANN's ops in dtypes they admit (docs/npu.md, SyncBatchNorm on NPU), and
    forward and backward agree with the CPU kernels as the first-run check compares."""
    from ascend_ops import acceptance as npu_acceptance

    gen = torch.Generator().manual_seed(3)
    x_host = torch.randn(6, 5, 4, 3, generator=gen).to(dtype)
    g_host = torch.randn(x_host.shape, generator=gen).to(dtype)
    runs = {}
    for device in ("npu", "cpu"):
        bn = ascend_ops.nn.SyncBatchNorm(5).to(device=device, dtype=dtype)
        x = x_host.to(device).requires_grad_()
        y = bn(x)
        y.backward(g_host.to(device))
        runs[device] = tuple(t.detach().cpu() for t in (y, x.grad, bn.weight.grad, bn.bias.grad,
                                                        bn.running_mean, bn.running_var))
    problem = npu_acceptance._disagreement(runs["npu"], runs["cpu"])
    assert problem is None, problem


@pytest.mark.npu
@on_npu
def test_no_host_synchronisation_in_the_backward():
    # torch_npu's sync debug mode (as CUDA's) raises on any blocking device-to-host copy.
    if not hasattr(torch.npu, "set_sync_debug_mode"):
        pytest.skip("this torch_npu has no torch.npu.set_sync_debug_mode")
    if _npu_adapter.adapter().target_check_mode() == "host":
        pytest.skip("ASCEND_OPS_NPU_CHECK_TARGETS=1 copies the targets to the host by design")
    case = testing.FlceCase(40, 64, 256, torch.bfloat16)
    inputs = to_npu(testing.flce_inputs(case))
    inputs["target_mask"] = ascend_ops.masks.unpack_target_mask(inputs["target_mask"], 40)
    torch.npu.synchronize()
    torch.npu.set_sync_debug_mode("error")
    try:
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)  # bool mask: packed on device
    finally:
        torch.npu.set_sync_debug_mode("default")


@pytest.mark.npu
@on_npu
def test_target_range_check():
    mode = _npu_adapter.adapter().target_check_mode()
    inputs = to_npu(flce_bad_inputs(*FLCE_BAD[[r[0] for r in FLCE_BAD].index("target-too-large")][1]))
    if mode == "off":
        pytest.skip("torch_npu registers no PrivateUse1 _assert_async: the range is checked "
                    "only with ASCEND_OPS_NPU_CHECK_TARGETS=1 (test_target_range_debug_switch)")
    with pytest.raises((RuntimeError, ValueError), match="masked_target"):
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
        torch.npu.synchronize()


@pytest.mark.npu
@on_npu
@pytest.mark.parametrize("mask", ["bool", "packed"])
def test_an_out_of_range_target_is_computed_as_masked(mask):
    """High-performance mode: CANN's kernel would write softmax[V*i + t] for t outside
    [0, V); the adapter folds such a row into the mask on the device, so the result is
    that of the row masked and no other row changes."""
    if _npu_adapter.adapter().target_check_mode() != "off":
        pytest.skip("a device-side or host check raises first")
    case = testing.FlceCase(24, 32, 256, torch.bfloat16, testing.HIGH_PERFORMANCE, mask)
    inputs = testing.flce_inputs(case)
    wild = clone_inputs(inputs)
    wild["masked_target"][[1, 5]] = torch.tensor([256, -3], dtype=wild["masked_target"].dtype)
    bits = ascend_ops.masks.unpack_target_mask(inputs["target_mask"], 24) if mask == "packed" \
        else inputs["target_mask"].clone()
    if bool(bits[1]) or bool(bits[5]):
        pytest.skip("rows 1 and 5 are masked in this sample")
    bits[[1, 5]] = True
    expected = clone_inputs(inputs)
    expected["target_mask"] = ascend_ops.masks.pack_target_mask(bits) if mask == "packed" else bits
    ours = to_cpu(ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(wild), impl="npu"))
    want = to_cpu(ascend_ops.fused_linear_cross_entropy_loss_grad(**to_npu(expected), impl="npu"))
    for o, w in zip(ours, want):
        assert torch.equal(o, w)


@pytest.mark.npu
@on_npu
def test_target_range_debug_switch():
    code = ("import torch, torch_npu, ascend_ops\n"
            "from test_validation import FLCE_BAD, flce_bad_inputs\n"
            "rule = [r for r in FLCE_BAD if r[0] == 'target-too-large'][0]\n"
            "inputs = {k: v.npu() if isinstance(v, torch.Tensor) else v\n"
            "          for k, v in flce_bad_inputs(*rule[1]).items()}\n"
            "try:\n"
            "    ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)\n"
            "except ValueError as e:\n"
            "    print('raised:', e)\n")
    tests = pathlib.Path(__file__).resolve().parent
    env = dict(os.environ, ASCEND_OPS_NPU_CHECK_TARGETS="1",
               PYTHONPATH=os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert "raised: fused_linear_cross_entropy_loss_grad: 'masked_target' must lie in [0, V)" \
        in done.stdout, done.stdout + done.stderr


@pytest.mark.npu
@on_npu
def test_nz_weight_is_cast_to_nd():
    import torch_npu

    case = testing.FlceCase(32, 64, 256, torch.float16)
    inputs = testing.flce_inputs(case)
    npu = to_npu(inputs)
    npu["weight"] = torch_npu.npu_format_cast(npu["weight"], 29)  # FRACTAL_NZ
    assert torch_npu.get_npu_format(npu["weight"]) == 29
    ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**npu)
    assert_matches(to_cpu(ours), testing.flce_oracle(inputs), testing.flce_naive(inputs), "npu NZ")


@pytest.mark.npu
@on_npu
def test_training_step_on_two_npus_over_hccl(tmp_path):
    import npu_distributed_worker as worker

    world = 2
    if torch.npu.device_count() < world:
        pytest.skip(f"needs {world} NPUs, {torch.npu.device_count()} visible")
    ranks = run_ranks(worker.__file__, world, tmp_path, timeout=600)

    lce = worker.lce_problem(world)
    truth = f64_cross_entropy(lce["input"], lce["weight"], lce["target"])
    for mode in worker.MODES:
        for rank, results in enumerate(ranks):
            loss, input_grad, weight_grad = results[mode]
            torch.testing.assert_close(loss.double(), truth[0], rtol=1e-2, atol=1e-3)
            assert_bf16_grad_close(input_grad, truth[1], f"{mode} rank {rank} input grad")
            shard = slice(rank * worker.SHARD, (rank + 1) * worker.SHARD)
            assert_bf16_grad_close(weight_grad, truth[2][shard], f"{mode} rank {rank} weight grad")

    bn = worker.bn_problem(world)
    ref = torch.nn.BatchNorm2d(3).double()
    x = bn["x"].double().requires_grad_()
    y = ref(x)
    y.backward(bn["g"].double())
    start = 0
    for rank, results in enumerate(ranks):
        part = slice(start, start + bn["rows"][rank])
        start += bn["rows"][rank]
        got = results["bn"]
        for name, ours, want in (("y", got["y"], y[part]), ("x_grad", got["x_grad"], x.grad[part]),
                                 ("running_mean", got["running_mean"], ref.running_mean),
                                 ("running_var", got["running_var"], ref.running_var)):
            torch.testing.assert_close(ours.double(), want.detach(), rtol=1e-3, atol=1e-3,
                                       msg=lambda m, n=name, r=rank: f"SyncBatchNorm rank {r} {n}: {m}")
    # The weight and bias gradients are each rank's share (as torch.nn.SyncBatchNorm keeps
    # them; data parallelism sums them): their sum over the ranks is the full batch's.
    for name, want in (("weight_grad", ref.weight.grad), ("bias_grad", ref.bias.grad)):
        total = sum(results["bn"][name].double() for results in ranks)
        torch.testing.assert_close(total, want.detach(), rtol=1e-3, atol=1e-3,
                                   msg=lambda m, n=name: f"SyncBatchNorm {n} summed over ranks: {m}")

    check_options_against_float64(ranks, world)


def check_options_against_float64(ranks: list[dict], world: int) -> None:
    """The loss options of npu_distributed_worker on uneven shards against float64 autograd
    of the whole problem (SPEC §7's tolerances); a set needing our op package where none is
    installed must have been refused naming the package."""
    import npu_distributed_worker as worker
    from lce_options_oracle import oracle

    p = worker.options_problem(world)
    bounds = [sum(worker.OPTION_SHARDS[:r]) for r in range(world + 1)]
    for name, options in worker.OPTION_SETS.items():
        got = [results["options"][name] for results in ranks]
        if "refused" in got[0]:
            assert all("op package" in g.get("refused", "") for g in got), got
            continue
        want, want_grads = oracle(
            p["input"].reshape(-1, worker.H), p["weight"], p["target"].reshape(-1),
            linear_bias=p["linear_bias"] if options.get("linear_bias") else None,
            ce_weight=p["ce_weight"] if options.get("ce_weight") else None,
            **{k: v for k, v in worker.option_values(options).items() if not k.startswith("return_")})
        for rank, g in enumerate(got):
            what = f"options {name} rank {rank}"
            torch.testing.assert_close(g["loss"].double(), want["loss"], rtol=1e-5, atol=1e-5,
                                       msg=lambda m, w=what: f"{w} loss: {m}")
            for key in ("z_loss", "lse", "token_accuracy"):
                if g[key] is not None:
                    torch.testing.assert_close(g[key].double().reshape(want[key].shape), want[key],
                                               rtol=1e-5, atol=1e-5,
                                               msg=lambda m, w=what, k=key: f"{w} {k}: {m}")
            assert_bf16_grad_close(g["input"].reshape(-1, worker.H), want_grads["input"],
                                   f"{what} input grad")
            shard = slice(bounds[rank], bounds[rank + 1])
            assert_bf16_grad_close(g["weight"], want_grads["weight"][shard], f"{what} weight grad")
            if g["linear_bias"] is not None:
                assert_bf16_grad_close(g["linear_bias"], want_grads["linear_bias"][shard],
                                       f"{what} bias grad")

"""The emulated `ascend_ops._npu`: our NPU adapter's surface (op_plugin/csrc/npu/module.cpp)
and its PrivateUse1 kernels, in Python, over the emulated device and CANN stand-ins.

The C++ adapter cannot run here (it needs libtorch_npu.so and device memory), so this
states what each of its kernels does between our Python and phase 1, step by step in the
order of op_plugin/csrc/npu/*KernelNpuOpApi.cpp: the shared validation (the real one,
ascend_ops._C's validation.cpp), outputs allocated in SPEC's dtypes, the empty cases filled
without a call, CANN's built-in limits refused up front (the real builtin_limits.cpp, through
ascend_ops._C), the target check and fold (npu_tensors.cpp), then the aclnn call, whose
refusal reads as aclnn_call.cpp's. That these steps are what the C++ does, with the
arguments phase 1 receives, is the recorded-calls check's job (tests/npu_link/
test_recorded_calls.py); this module lets everything above the adapter run.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys
import types

import torch

from npu_emulation import cann
from npu_emulation.device import (FORMAT_NCDHW, FORMAT_NCHW, FORMAT_ND, FORMAT_NHWC,
                                  NpuTensor, empty, kernel)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TORCH_NPU_VERSION = "2.13"
_BASE_FORMATS = (FORMAT_NCHW, FORMAT_NHWC, FORMAT_ND, FORMAT_NCDHW)


def npu_ops() -> list[tuple[str, str, str, str | None]]:
    """[(op, built-in aclnn name, CANN release, custom aclnn name or None)], from the yaml
    the real module is generated from (op_plugin/config/ascend_ops.yaml)."""
    import yaml

    spec = yaml.safe_load((ROOT / "op_plugin" / "config" / "ascend_ops.yaml").read_text())
    return [(op["func"].split("(")[0].strip(), op["aclnn"], op["cann"], op.get("aclnn_custom"))
            for op in spec["ops"]]


# --- torch_npu's GetOpApiFuncAddr, as the emulated CANN install answers it ---

_SEARCH = (os.environ.get("ASCEND_CUSTOM_OPP_PATH"), os.environ.get("ASCEND_OPP_PATH"))


def _custom_libraries() -> list[pathlib.Path]:
    """The custom packages' libcust_opapi.so torch_npu loads, in its order: the
    ASCEND_CUSTOM_OPP_PATH entries, then $ASCEND_OPP_PATH/vendors/config.ini's load_priority,
    as they were when torch_npu loaded; a library owned by another user is skipped (op-plugin
    op_plugin/utils/op_api_common.cpp:36-54, checkOwner)."""
    custom, opp = _SEARCH
    vendors = [pathlib.Path(p) for p in (custom or "").split(os.pathsep) if p]
    config = pathlib.Path(opp or "/nonexistent") / "vendors" / "config.ini"
    if config.is_file():
        for line in config.read_text().splitlines():
            if line.startswith("load_priority="):
                vendors += [config.parent / n.strip() for n in line.split("=", 1)[1].split(",") if n.strip()]
    found = []
    for vendor in vendors:
        library = vendor / "op_api" / "lib" / "libcust_opapi.so"
        if library.is_file():
            uid, owner = os.getuid(), library.resolve().stat().st_uid
            if owner == uid or (uid != 0 and owner == 0):
                found.append(library)
    return found


def aclnn_available(name: str) -> bool:
    """Whether `name` resolves: CANN 9.0.0 ships every built-in of the yaml (less any named
    in NPU_EMULATION_MISSING_ACLNN, an older CANN); our package's ops resolve when the
    ascend_ops vendor's library is found."""
    ops = npu_ops()
    missing = os.environ.get("NPU_EMULATION_MISSING_ACLNN", "").split(",")
    if name in {aclnn for _, aclnn, _, _ in ops}:
        return name not in missing
    if name in {custom for _, _, _, custom in ops if custom}:
        return any(lib.parents[2].name == "ascend_ops" for lib in _custom_libraries())
    return False


def require_aclnn(name: str, cann: str, custom: bool = False) -> None:
    if not aclnn_available(name):  # aclnn_call.cpp:19-30, in short
        raise NotImplementedError(f"{name} not found: install CANN >= {cann}" if not custom else
                                  f"{name} not found: install the ascend_ops custom op package")


def describe_status(status: int) -> str:
    """aclnn_call.cpp:39-57."""
    meanings = {161001: "ACLNN_ERR_PARAM_NULLPTR: a required argument was null",
                161002: "ACLNN_ERR_PARAM_INVALID: a dtype, shape or value outside what the op supports",
                361001: "ACLNN_ERR_RUNTIME_ERROR: the op does not run on this NPU; see docs/npu.md "
                        "for the platforms of each op"}
    if status in meanings:
        return f"{status} ({meanings[status]})"
    if status >= 561000:
        return (f"{status} (ACLNN_ERR_INNER: an internal error of the op, often a limit of its "
                "tiling; see the CANN log)")
    return str(status)


def target_check_mode() -> str:
    """npu_tensors.cpp target_check_mode: host under the debug switch, device when
    aten::_assert_async.msg has a PrivateUse1 kernel, else off."""
    if os.environ.get("ASCEND_OPS_NPU_CHECK_TARGETS") == "1":
        return "host"
    has = torch._C._dispatch_has_kernel_for_dispatch_key("aten::_assert_async.msg", "PrivateUse1")
    return "device" if has else "off"


def _native():
    from ascend_ops._extension import native

    return native()


def _checks():
    from ascend_ops._extension import checks

    return checks()


def run_aclnn(api: str, stand_in, hint: str | None, *args) -> None:
    """run_aclnn / throw_phase1_error (aclnn_call.cpp:111-117)."""
    try:
        stand_in(*args)
    except cann.AclnnRefusal as refusal:
        refused = refusal.status == 161002 or refusal.status >= 561000
        raise RuntimeError(f"{api}GetWorkspaceSize rejected its arguments: "
                           f"{describe_status(refusal.status)}"
                           f"{'. ' + hint if refused and hint else ''}\nCANN: {refusal.message} "
                           f"({refusal.source})") from None


def as_aclnn_input(t: NpuTensor, contiguous: bool) -> NpuTensor:
    """npu_tensors.cpp as_aclnn_input: internal formats cast to their base, views made
    contiguous only for our package."""
    if t.npu_format not in _BASE_FORMATS:
        base = FORMAT_NCHW if t.dim() == 4 else FORMAT_NCDHW if t.dim() == 5 else FORMAT_ND
        t = NpuTensor(t.host.clone(), base)
    return t.contiguous() if contiguous and not t.is_contiguous() else t


def _pack_bits(bits: torch.Tensor, pad: int) -> torch.Tensor:
    """npu_tensors.cpp pack_bits: bool [rows] -> uint8 [ceil(rows / 8)], LSB first."""
    rows = bits.size(0)
    count = (rows + 7) // 8
    padded = torch.nn.functional.pad(bits.to(torch.int32), (0, count * 8 - rows), value=pad)
    weights = 2 ** torch.arange(8, dtype=torch.int32, device=bits.device)  # made on the device
    return (padded.view(count, 8) * weights).sum(1).to(torch.uint8)


def _unpack_bits(mask: torch.Tensor, rows: int) -> torch.Tensor:
    bytes_ = mask[: (rows + 7) // 8].to(torch.int32)
    shifts = 2 ** torch.arange(8, dtype=torch.int32, device=mask.device)
    return (bytes_[:, None] // shifts % 2).reshape(-1)[:rows].to(torch.bool)


def _check_targets(mask, target, vocab: int) -> None:
    """npu_tensors.cpp check_targets."""
    mode = target_check_mode()
    rows = target.size(0)
    if mode == "host":
        masked = mask if mask.dtype == torch.bool else _unpack_bits(mask, rows)
        bad = (~masked.cpu()) & ((target.cpu() < 0) | (target.cpu() >= vocab))
        if bool(bad.any()):
            row = int(bad.nonzero()[0, 0])
            raise ValueError(f"fused_linear_cross_entropy_loss_grad: 'masked_target' must lie in "
                             f"[0, V) = [0, {vocab}) on rows that are not masked, got "
                             f"masked_target[{row}] = {int(target.cpu()[row])}")
    elif mode == "device" and rows > 0:
        masked = mask if mask.dtype == torch.bool else _unpack_bits(mask, rows)
        torch._assert_async(~((~masked) & ((target < 0) | (target >= vocab))).any(),
                            "fused_linear_cross_entropy_loss_grad: 'masked_target' out of range")


def _fold_target_range(mask, target, vocab: int):
    """npu_tensors.cpp fold_target_range: out-of-range rows become masked rows with target 0."""
    outside = (target < 0) | (target >= vocab)
    if mask.dtype == torch.bool:
        folded = mask | outside
    else:
        extra = _pack_bits(outside, 0)
        if mask.size(0) > extra.size(0):
            extra = torch.nn.functional.pad(extra, (0, mask.size(0) - extra.size(0)))
        folded = mask | extra
    return folded, torch.where(outside, torch.zeros((), dtype=target.dtype, device=target.device), target)


def _flce_grad(custom: bool, grad, input, weight, target_mask, masked_target, label_smoothing=0.0,
               logits_max=None, sum_exp_logits=None, softmax=None, *, scratch_bytes=None):
    """FusedLinearCrossEntropyLossGradKernelNpuOpApi.cpp run_flce_grad."""
    _checks().check_fused_linear_cross_entropy_loss_grad(
        grad, input, weight, target_mask, masked_target, label_smoothing, logits_max,
        sum_exp_logits, softmax, check_values=False)
    _checks().check_scratch_bytes("fused_linear_cross_entropy_loss_grad", scratch_bytes)
    input_grad, weight_grad = empty(list(input.shape), input.dtype), empty(list(weight.shape), weight.dtype)
    if input.numel() == 0 or weight.numel() == 0:
        return input_grad.zero_(), weight_grad.zero_()
    if not custom:
        _native().check_builtin_flce_grad_limits(input.size(0), input.size(1), weight.size(0),
                                                 softmax is not None)
    mask = (_pack_bits(target_mask, 1) if target_mask.dtype == torch.bool and custom
            else as_aclnn_input(target_mask, custom))
    target = as_aclnn_input(masked_target, custom)
    _check_targets(mask, target, weight.size(0))
    if softmax is not None or custom:
        mask, target = _fold_target_range(mask, target, weight.size(0))
    args = [as_aclnn_input(t, custom) for t in (grad, input, weight)] + [mask, target]
    stats = ([None, None, as_aclnn_input(softmax, custom)] if softmax is not None else
             [as_aclnn_input(logits_max, custom), as_aclnn_input(sum_exp_logits, custom), None])
    if custom:  # the generated API: the attributes (doubles) after the inputs; no option
        run_aclnn("aclnnAscendOpsFusedLinearCrossEntropyLossGrad",
                  cann.custom_fused_linear_cross_entropy_loss_grad, None, *args, *stats,
                  None, None, None, None, None, float(label_smoothing), 1.0, 0.0, input_grad, weight_grad)
    else:
        # (the C++ appends flce_grad_builtin_hint() to a refusal; _C does not export it)
        run_aclnn("aclnnFusedLinearCrossEntropyLossGrad", cann.fused_linear_cross_entropy_loss_grad,
                  None, *args, float(label_smoothing), *stats, input_grad, weight_grad)
    return input_grad, weight_grad


def _flce_grad_options(input, weight, target_mask, masked_target, logits_max, sum_exp_logits, alpha,
                       beta, gamma, bias, class_weight, logit_scale, softcap):
    """FusedLinearCrossEntropyLossGradKernelNpuOpApi.cpp
    fused_linear_cross_entropy_loss_grad_options_custom."""
    name = "fused_linear_cross_entropy_loss_grad_options_custom"
    _checks().check_fused_linear_cross_entropy_loss_grad(
        alpha, input, weight, target_mask, masked_target, 0.0, logits_max, sum_exp_logits, None,
        check_values=False)
    bt, vocab = input.size(0), weight.size(0)
    for t, n, what in ((beta, bt, "beta"), (gamma, bt, "gamma"), (bias, vocab, "bias"),
                       (class_weight, vocab, "class_weight")):
        if t is not None and not (t.dtype == torch.float32 and t.dim() == 1 and t.size(0) == n):
            raise RuntimeError(f"{name}: {what} must be float32 of shape [{n}], got {t.dtype} of shape "
                               f"{list(t.shape)}")
    if not math.isfinite(logit_scale):
        raise RuntimeError(f"{name}: logit_scale must be finite, got {logit_scale}")
    if not (softcap == 0.0 or (math.isfinite(softcap) and softcap > 0.0)):
        raise RuntimeError(f"{name}: softcap must be 0 (none) or a finite cap > 0, got {softcap}")
    input_grad, weight_grad = empty(list(input.shape), input.dtype), empty(list(weight.shape), weight.dtype)
    if input.numel() == 0 or weight.numel() == 0:
        return input_grad.zero_(), weight_grad.zero_()
    mask = _pack_bits(target_mask, 1) if target_mask.dtype == torch.bool else as_aclnn_input(target_mask, True)
    target = as_aclnn_input(masked_target, True)
    _check_targets(mask, target, vocab)
    mask, target = _fold_target_range(mask, target, vocab)
    alpha_c = as_aclnn_input(alpha, True)
    run_aclnn("aclnnAscendOpsFusedLinearCrossEntropyLossGrad",
              cann.custom_fused_linear_cross_entropy_loss_grad, None, alpha_c,
              as_aclnn_input(input, True), as_aclnn_input(weight, True), mask, target,
              as_aclnn_input(logits_max, True), as_aclnn_input(sum_exp_logits, True), None,
              None if bias is None else as_aclnn_input(bias, True),
              None if class_weight is None else as_aclnn_input(class_weight, True), alpha_c,
              as_aclnn_input(beta, True), as_aclnn_input(gamma, True), 0.0, float(logit_scale),
              float(softcap), input_grad, weight_grad)
    return input_grad, weight_grad


def _bn_reduce_backward(custom: bool, grad_out, input, mean, invstd, weight, input_g, weight_g,
                        bias_g):
    """BatchNormReduceBackwardKernelNpuOpApi.cpp run_bn_reduce_backward."""
    _checks().check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight)
    if not (input_g or weight_g or bias_g):
        return None, None, None, None
    from ascend_ops.reference import batch_norm_reduce_output_dtype

    dtype = batch_norm_reduce_output_dtype(input.dtype, mean.dtype)
    c = input.size(1)
    outputs = [empty([c], dtype) if wanted else None
               for wanted in (input_g, input_g, weight_g, bias_g)]
    if input.numel() == 0:
        return tuple(None if t is None else t.zero_() for t in outputs)
    args = [as_aclnn_input(t, custom) for t in (grad_out, input, mean, invstd)]
    args.append(None if weight is None else as_aclnn_input(weight, custom))
    api = "aclnnAscendOpsBatchNormReduceBackward" if custom else "aclnnBatchNormReduceBackward"
    stand_in = cann.custom_batch_norm_reduce_backward if custom else cann.batch_norm_reduce_backward
    run_aclnn(api, stand_in, None, *args, input_g, weight_g, bias_g, *outputs)
    return tuple(outputs)


@kernel("ascend_ops::fused_linear_cross_entropy_loss_grad")
def fused_linear_cross_entropy_loss_grad(*args, **kwargs):
    return _flce_grad(False, *args, **kwargs)


@kernel("ascend_ops::batch_norm_reduce_backward")
def batch_norm_reduce_backward(*args):
    return _bn_reduce_backward(False, *args)


@kernel("ascend_ops::fused_linear_online_max_sum")
def fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index,
                                return_logits=False):
    """FusedLinearOnlineMaxSumKernelNpuOpApi.cpp."""
    _checks().check_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index)
    bt, vocab = input.size(0), weight.size(0)
    f32 = torch.float32
    outputs = [empty([bt], f32), empty([bt], f32), empty([bt], f32),
               empty([(bt + 7) // 8], torch.uint8), empty([bt], target.dtype),
               empty([bt, vocab] if return_logits else [0], input.dtype)]
    if bt == 0:
        return tuple(outputs)
    if vocab == 0:  # the statistics of an empty shard, every row and padding bit masked
        outputs[0].fill_(float("-inf"))
        outputs[1].zero_()
        outputs[2].zero_()
        outputs[3].fill_(0xFF)
        outputs[4].zero_()
        return tuple(outputs)
    _native().check_builtin_online_max_sum_limits(input.size(1), vocab)
    run_aclnn("aclnnFusedLinearOnlineMaxSum", cann.fused_linear_online_max_sum, None,
              *(as_aclnn_input(t, False) for t in (input, weight, target)), vocab_start_index,
              vocab_end_index, *outputs[:5], outputs[5] if return_logits else None)
    return tuple(outputs)


@kernel("ascend_ops::fused_cross_entropy_loss_with_max_sum")
def fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                          label_smoothing=0.0, input=None, weight=None,
                                          vocab_parallel_logits=None):
    """FusedCrossEntropyLossWithMaxSumKernelNpuOpApi.cpp."""
    _checks().check_fused_cross_entropy_loss_with_max_sum(
        logits_max, sum_exp_logits, predicted_logits, label_smoothing, input, weight,
        vocab_parallel_logits)
    bt = logits_max.size(0)
    loss = empty([bt], torch.float32)
    softmax = empty(list(vocab_parallel_logits.shape) if vocab_parallel_logits is not None else [0],
                    torch.float32)
    if bt == 0:
        return loss, softmax
    logits = softmax_out = None
    if vocab_parallel_logits is not None and vocab_parallel_logits.size(1) > 0:
        logits, softmax_out = as_aclnn_input(vocab_parallel_logits, False), softmax
    run_aclnn("aclnnFusedCrossEntropyLossWithMaxSum", cann.fused_cross_entropy_loss_with_max_sum,
              None, *(as_aclnn_input(t, False) for t in (logits_max, sum_exp_logits, predicted_logits)),
              float(label_smoothing), None, None, logits, loss, softmax_out)
    return loss, softmax


def module() -> types.ModuleType:
    """The module `from ascend_ops import _npu` gets in an emulated process."""
    npu = types.ModuleType("ascend_ops._npu", __doc__)
    npu.__file__ = __file__
    npu.torch_npu_version = TORCH_NPU_VERSION
    npu.npu_ops = npu_ops
    npu.aclnn_available = aclnn_available
    npu.require_aclnn = require_aclnn
    npu.describe_status = describe_status
    npu.target_check_mode = target_check_mode
    for name in ("cann_builtin_limits", "builtin_flce_grad_refusal",
                 "check_builtin_flce_grad_limits", "check_builtin_online_max_sum_limits"):
        setattr(npu, name, lambda *a, _name=name, **k: getattr(_native(), _name)(*a, **k))
    npu.fused_linear_cross_entropy_loss_grad_custom = (
        lambda *args, **kwargs: _flce_grad(True, *args, **kwargs))
    npu.batch_norm_reduce_backward_custom = lambda *args: _bn_reduce_backward(True, *args)
    npu.fused_linear_cross_entropy_loss_grad_options_custom = _flce_grad_options
    return npu


def install() -> None:
    """Import it as ascend_ops._npu (what `from .. import _npu` in ascend_ops.npu.adapter finds)."""
    sys.modules["ascend_ops._npu"] = module()

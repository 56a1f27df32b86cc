"""Stand-ins of the CANN aclnn ops the NPU path calls, on the emulated device (device.py).

Each stand-in takes the arguments of its op's phase 1 (`aclnnXGetWorkspaceSize`), with
NpuTensors for aclTensors (in the format torch_npu's ConvertType gives them: NCL, NCHW or
NCDHW for a 3-, 4- or 5-D tensor in a base format, device.acl_format) and None for a null
pointer, applies CANN v9.0.0's phase-1 checks
rule by rule (each naming the source line it is ported from), refuses a violation with the
status CANN returns (`AclnnRefusal`: 161001 ACLNN_ERR_PARAM_NULLPTR, 161002
ACLNN_ERR_PARAM_INVALID, 361001 ACLNN_ERR_RUNTIME_ERROR), and otherwise writes its outputs,
computed on the host with the reference: the project's oracle (ascend_ops.reference) for
the fused cross entropy ops; the math of aten's sync-BN operators in float64, rounded once
to each output (the l0 kernels' float32 arithmetic is not open source, so the stand-ins
compute as well as a device could: a disagreement under them is ours, not rounding); CANN's
own composite formula where that is what CANN is known to compute
(aclnnBatchNormReduceBackward's Σ dy·x − mean·Σ dy: tests/cann_golden.py); and, for our op
package, our Ascend C kernels on the simulator (impl="sim"). What CANN leaves unwritten
(an empty input on A2/A3) stays unwritten: the poison of the emulated device shows it.

The platform is an Atlas A2 (SocVersion ASCEND910B, NpuArch DAV_2201): where a rule
differs by SoC, the A2/A3 branch is ported. The sources are hicann/ops-nn and
hicann/ops-math at tag v9.0.0 (the constants below), and for our op package its OpDefs
(ascendc_kernels/*/op_host/*_def.cpp). Only phase 1 is ported: the l0 kernels' own dtype
tables (e.g. BNInfer under aclnnBatchNormElemt) are not open source and not checked.
"""

from __future__ import annotations

import collections
import math
import os

import torch

from npu_emulation.device import (FORMAT_NCDHW, FORMAT_NCHW, FORMAT_NCL, FORMAT_ND,
                                  FORMAT_NHWC, PRIVATE_FORMATS, NpuTensor, acl_format)

ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002
ACLNN_ERR_RUNTIME_ERROR = 361001

SOC = "Ascend910B"

STATS = "hicann/ops-math v9.0.0 math/reduce_std_with_mean/op_host/op_api/aclnn_batch_norm_stats.cpp"
GATHER = ("hicann/ops-nn v9.0.0 norm/sync_batch_norm_gather_stats_with_counts/op_host/op_api/"
          "aclnn_batch_norm_gather_stats_with_counts.cpp")
ELEMT = "hicann/ops-nn v9.0.0 norm/batch_norm_elemt/op_host/op_api/aclnn_batch_norm_elemt.cpp"
REDUCE = ("hicann/ops-nn v9.0.0 norm/sync_batch_norm_backward_reduce/op_host/op_api/"
          "aclnn_batch_norm_backward_reduce.cpp")
ELEMT_BACKWARD = ("hicann/ops-nn v9.0.0 norm/sync_batch_norm_backward_elemt/op_host/op_api/"
                  "aclnn_batch_norm_elemt_backward.cpp")
FLCE_GRAD = ("hicann/ops-nn v9.0.0 matmul/fused_linear_cross_entropy_loss_grad/op_host/op_api/"
             "aclnn_fused_linear_cross_entropy_loss_grad.cpp")
ONLINE = "hicann/ops-nn v9.0.0 matmul/fused_linear_online_max_sum/op_api/aclnn_fused_linear_online_max_sum.cpp"
LOSS = ("hicann/ops-nn v9.0.0 loss/fused_cross_entropy_loss_with_max_sum/op_host/op_api/"
        "aclnn_fused_cross_entropy_loss_with_max_sum.cpp")
CUSTOM_FLCE = "ascendc_kernels/fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_def.cpp"
CUSTOM_BN = "ascendc_kernels/batch_norm_reduce_backward/op_host/batch_norm_reduce_backward_def.cpp"

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
#: op_api_def.h:15-16 (ops-nn and ops-math): BN_MIN_SUPPORT_DIMS_NUMS, MAX_SUPPORT_DIMS_NUMS.
BN_MIN_DIMS, MAX_DIMS = 2, 8

#: Faults a test injects, comma-separated: "<aclnn api>=raise" (the op fails) or
#: "<aclnn api>=scale" (its floating outputs come out 5 % too large): how a test shows that
#: a bad op fails its own rows and nothing else.
FAULTS = set(filter(None, os.environ.get("NPU_EMULATION_FAULT", "").split(",")))
_running = [""]  # the api whose outputs _write is writing
#: How many times each aclnn op's phase 1 ran in this process: a test's proof that a path
#: reached the device's ops.
CALLS: collections.Counter = collections.Counter()


class AclnnRefusal(Exception):
    """Phase 1 returned `status`: the rule broken, where CANN states it."""

    def __init__(self, api: str, status: int, message: str, source: str):
        super().__init__(f"{api}GetWorkspaceSize returned {status}: {message} ({source})")
        self.api, self.status, self.message, self.source = api, status, message, source


class Phase1:
    """The checks of one op's phase 1, each raising AclnnRefusal with CANN's status."""

    def __init__(self, api: str, source: str):
        self.api, self.source = api, source
        _running[0] = api
        CALLS[api] += 1
        if f"{api}=raise" in FAULTS:
            raise RuntimeError(f"{api}: an emulated device fault (NPU_EMULATION_FAULT)")

    def fail(self, where: str, message: str, status: int = ACLNN_ERR_PARAM_INVALID):
        raise AclnnRefusal(self.api, status, message, f"{self.source}{where}")  # where: ":line"

    def not_null(self, where: str, status: int = ACLNN_ERR_PARAM_NULLPTR, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_NULL
            if t is None:
                self.fail(where, f"expected a proper Tensor but got null for argument {name}", status)

    def dtype_in(self, where: str, allowed: tuple, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_DTYPE_NOT_SUPPORT
            if t is not None and t.dtype not in allowed:
                self.fail(where, f"{name} not implemented for {_acl(t.dtype)}, should be in dtype "
                          f"support list [{', '.join(_acl(d) for d in allowed)}]")

    def dtype_same(self, where: str, a_name: str, a, b_name: str, b) -> None:
        if a is not None and b is not None and a.dtype != b.dtype:  # OP_CHECK_DTYPE_NOT_SAME/_MATCH
            self.fail(where, f"{a_name} dtype {_acl(a.dtype)} should be the same as {b_name}'s "
                      f"{_acl(b.dtype)}")

    def not_private_format(self, where: str, **tensors) -> None:
        for name, t in tensors.items():  # op::IsPrivateFormat
            if t is not None and _format(t) in PRIVATE_FORMATS:
                self.fail(where, f"Format of {name} only supports ND, NCHW, NHWC, HWCN, NDHWC, "
                          f"NCDHW, got private format {_format(t)}")

    def nd_format(self, where: str, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_FORMAT_NOT_ND: the storage format itself
            if t is not None and _format(t) != FORMAT_ND:
                self.fail(where, f"Tensor {name} only supports ND format, got {_format(t)}")

    def custom_nd_format(self, where: str, **tensors) -> None:
        """An OpDef's FORMAT_ND under FormatMatchMode DEFAULT (_CUSTOM_AS_ND)."""
        for name, t in tensors.items():
            if t is not None and _format(t) != FORMAT_ND and _format(t) not in _CUSTOM_AS_ND:
                self.fail(where, f"Tensor {name}: the OpDef declares ND, got format {_format(t)}")

    def dims(self, where: str, low: int | None, high: int | None, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_MIN_DIM / OP_CHECK_MAX_DIM
            if t is None:
                continue
            if low is not None and t.dim() < low:
                self.fail(where, f"{name} should have at least {low} dims, got {t.dim()}")
            if high is not None and t.dim() > high:
                self.fail(where, f"{name} should have at most {high} dims, got {t.dim()}")

    def dim_is(self, where: str, n: int, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_WRONG_DIMENSION
            if t is not None and t.dim() != n:
                self.fail(where, f"{name} should be {n}-dimensional, got {t.dim()} dims")

    def shape_is(self, where: str, shape, **tensors) -> None:
        for name, t in tensors.items():  # OP_CHECK_SHAPE_NOT_EQUAL(_WITH_EXPECTED_SIZE)
            if t is not None and tuple(t.shape) != tuple(shape):
                self.fail(where, f"expected tensor for {name} to have size {list(shape)}, but got "
                          f"{list(t.shape)}")


def _acl(dtype: torch.dtype) -> str:
    return {F32: "DT_FLOAT", F16: "DT_FLOAT16", BF16: "DT_BF16", torch.int32: "DT_INT32",
            torch.int64: "DT_INT64", torch.uint8: "DT_UINT8", torch.bool: "DT_BOOL",
            torch.float64: "DT_DOUBLE"}.get(dtype, str(dtype))


def _format(t: NpuTensor) -> int:
    """The format of the aclTensor phase 1 receives: torch_npu's ConvertType's."""
    return acl_format(t)


#: The formats the aclnn framework turns into ND for an op of a custom package whose OpDef
#: leaves FormatMatchMode at DEFAULT, as ours do (CANN's Ascend C API reference, OpDef
#: FormatMatchMode, section 6.4.3.3.13: "NCHW/NHWC/DHWCN/NCDHW/NCL ... converted to ND";
#: DHWCN has no aclFormat torch_npu passes).
_CUSTOM_AS_ND = frozenset({FORMAT_NCHW, FORMAT_NHWC, FORMAT_NCDHW, FORMAT_NCL})


def _host(t):
    return None if t is None else t.host


def _write(out: NpuTensor | None, value: torch.Tensor | None) -> None:
    """ViewCopy of a result into an output, cast to its dtype (l0op::Cast, ViewCopy)."""
    if out is not None and value is not None:
        if f"{_running[0]}=scale" in FAULTS and value.dtype.is_floating_point:
            value = value * 1.05
        out.host.copy_(value.to(out.dtype))


def _per_channel(t: torch.Tensor, dim: int) -> torch.Tensor:
    shape = [1] * dim
    shape[1] = -1
    return t.reshape(shape)


def _reduce_dims(t) -> list[int]:
    return [d for d in range(t.dim()) if d != 1]


# --- the sync-BN chain: torch_npu 2.13's kernels of aten's five operators call these ---

def batch_norm_stats(input, eps: float, mean, invstd) -> None:
    """aclnnBatchNormStats (ops-math: its op_api lives beside ReduceStdWithMean)."""
    p = Phase1("aclnnBatchNormStats", STATS)
    p.not_null(":90-96, :133", input=input, mean=mean, invstd=invstd)
    # :66-79 GetDtypeSupportList: FLOAT, FLOAT16 unless IsRegBase() (DAV_3510 only,
    # ops-math common/inc/op_api/aclnn_check.h:197-202): no BFLOAT16 on Atlas A2/A3.
    p.dtype_in(":72-79, :84", (F32, F16), input=input)
    p.dtype_in(":85-86", (F32,), mean=mean, invstd=invstd)
    p.not_private_format(":98-113", input=input, mean=mean, invstd=invstd)
    p.dims(":117-118", BN_MIN_DIMS, MAX_DIMS, input=input)
    p.dim_is(":119-120", 1, mean=mean, invstd=invstd)
    if input.size(1) == 0:
        p.fail(":121-124", "Channel size of input should not be zero.")
    p.shape_is(":125-127", [input.size(1)], mean=mean, invstd=invstd)
    if input.numel() == 0:  # :194-202: mean 0, invstd NaN
        mean.host.fill_(0.0)
        invstd.host.fill_(math.nan)
        return
    # :207 Cast to DT_FLOAT, then ReduceMean and ReduceStdWithMean: their float32
    # arithmetic is the l0 kernels' (not open source); computed here in float64, rounded
    # once to the outputs
    x = input.host.double()
    dims = _reduce_dims(x)
    m = x.mean(dims)
    var = (x - _per_channel(m, x.dim())).pow(2).mean(dims)  # correction 0
    _write(mean, m)
    _write(invstd, (var + eps).rsqrt())


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                        momentum: float, eps: float, counts, mean_all,
                                        invstd_all) -> None:
    """aclnnBatchNormGatherStatsWithCounts."""
    p = Phase1("aclnnBatchNormGatherStatsWithCounts", GATHER)
    p.not_null(":75-86, :168-169", input=input, mean=mean, invstd=invstd, counts=counts,
               meanAll=mean_all, invstdAll=invstd_all)
    # :70-74 SocVersion in [ASCEND910B, ASCEND910E]: the list with BFLOAT16 (:63-64)
    allowed = (F32, F16, BF16)
    p.dtype_in(":96-107", allowed, input=input, mean=mean, invstd=invstd,
               runningMean=running_mean, runningVar=running_var, counts=counts,
               meanAll=mean_all, invstdAll=invstd_all)
    p.not_private_format(":111-119", input=input, mean=mean, invstd=invstd, counts=counts)
    p.dims(":125-126", BN_MIN_DIMS, MAX_DIMS, input=input)
    p.dim_is(":127-128", 2, mean=mean, invstd=invstd)
    if mean.size(0) != invstd.size(0) or counts.size(0) != mean.size(0):
        p.fail(":129-137", f"first dimension of mean, invstd and count should be the same, but "
               f"got mean: {list(mean.shape)}, invstd: {list(invstd.shape)}, counts: "
               f"{list(counts.shape)}")
    c = input.size(1)
    if mean.size(1) != c or invstd.size(1) != c:
        p.fail(":138-146", f"second dimension of mean/invstd should be the channel size of "
               f"input {c}, but got mean: {list(mean.shape)}, invstd: {list(invstd.shape)}")
    p.shape_is(":147-153", [c], runningMean=running_mean, runningVar=running_var)
    if counts.dim() != 1:
        p.fail(":155-158", "dim of counts should be one.")
    p.shape_is(":159-160", [c], meanAll=mean_all, invstdAll=invstd_all)
    if mean.numel() == 0:  # :340-348: meanAll 0, invstdAll NaN, the running stats untouched
        mean_all.host.fill_(0.0)
        invstd_all.host.fill_(math.nan)
        return
    # :202-251 (inputs cast to float32, :210-223): the count-weighted mean
    # (ReduceMeanWithCount), the variance from each rank's invstd
    # (SyncBatchNormGatherStatsWithCounts), then SyncBNTrainingUpdate (:254-290) for the
    # running statistics, unbiased over the total count. The l0 kernels' float32
    # arithmetic is not open source: computed here in float64 from the float32 casts,
    # rounded once to the outputs.
    n = counts.host.float().double()[:, None]                      # [ranks, 1]
    m, s = mean.host.float().double(), invstd.host.float().double()  # [ranks, C]
    total = n.sum(0)                                               # [1]
    global_mean = (m * n).sum(0) / total                           # [C]
    var = ((1.0 / (s * s) - eps) + (m - global_mean) ** 2) * n
    global_var = var.sum(0) / total                                # [C], biased
    _write(mean_all, global_mean)
    _write(invstd_all, (global_var + eps).rsqrt())
    if running_mean is not None:
        running_mean.host.copy_(((1 - momentum) * running_mean.host.double()
                                 + momentum * global_mean).to(running_mean.dtype))
    if running_var is not None:
        unbiased = global_var * total / (total - 1).clamp_min(1)
        running_var.host.copy_(((1 - momentum) * running_var.host.double()
                                + momentum * unbiased).to(running_var.dtype))


def batch_norm_elemt(input, weight, bias, mean, invstd, eps: float, output) -> None:
    """aclnnBatchNormElemt."""
    p = Phase1("aclnnBatchNormElemt", ELEMT)
    # :38-45, :122: a null is ACLNN_ERR_PARAM_INVALID here
    p.not_null(":38-45, :122", ACLNN_ERR_PARAM_INVALID, input=input, mean=mean, invstd=invstd,
               out=output)
    # :47-68 with the ASCEND910B..ASCEND910E list (:51-55, :35-36)
    p.dtype_in(":47-68", (F32, F16, BF16), input=input, weight=weight, bias=bias, mean=mean,
               invstd=invstd, out=output)
    if _format(input) != _format(output):
        p.fail(":72-77", f"Format of input and out should be equal, input [{_format(input)}], "
               f"out [{_format(output)}].")
    p.not_private_format(":79-82", input=input)
    p.dims(":90-93", BN_MIN_DIMS, MAX_DIMS, input=input, out=output)
    p.shape_is(":95", list(input.shape), out=output)
    if input.size(1) == 0:
        p.fail(":96-99", "Input channel size should not be zero.")
    for name, t in (("weight", weight), ("bias", bias), ("mean", mean), ("invstd", invstd)):
        if t is not None and t.dim() != 1:
            p.fail(":101-106", "Weight/bias/mean/invstd dim size should be one.")
        if t is not None and t.size(0) != input.size(1):
            p.fail(":108-114", "Weight/bias/mean/invstd shape should be same as the channel size "
                   f"of input ({name}: {list(t.shape)}).")
    if input.numel() == 0:  # :141-145: nothing to write
        return
    dim = input.dim()  # BNInfer's arithmetic: float64 here, rounded once to out
    y = (input.host.double() - _per_channel(mean.host.double(), dim)) * _per_channel(invstd.host.double(), dim)
    if weight is not None:
        y = y * _per_channel(weight.host.double(), dim)
    if bias is not None:
        y = y + _per_channel(bias.host.double(), dim)
    _write(output, y)


def batch_norm_reduce_backward(grad_out, input, mean, invstd, weight, input_g: bool,
                               weight_g: bool, bias_g: bool, sum_dy, sum_dy_xmu, grad_weight,
                               grad_bias) -> None:
    """aclnnBatchNormReduceBackward: CANN's composite Σ dy·x − mean·Σ dy in float32."""
    p = Phase1("aclnnBatchNormReduceBackward", REDUCE)
    outputs = {"sumDy": (sum_dy, input_g), "sumDyXmu": (sum_dy_xmu, input_g),
               "gradWeight": (grad_weight, weight_g), "gradBias": (grad_bias, bias_g)}
    p.not_null(":79-97, :263", gradOut=grad_out, input=input, mean=mean, invstd=invstd)
    p.not_null(":99-116, :264", **{n: t for n, (t, wanted) in outputs.items() if wanted})
    # :52-64 GetDtypeSupportList: DAV_2201 (A2/A3) takes BFLOAT16 (:54-55)
    allowed = (F32, F16, BF16)
    p.dtype_in(":135-140", allowed, gradOut=grad_out, input=input, mean=mean, invstd=invstd)
    # :142-144 "gradOut和input数据类型必须一样": OP_CHECK_DTYPE_NOT_MATCH(gradOut, input)
    p.dtype_same(":142-144", "gradOut", grad_out, "input", input)
    p.dtype_in(":145-150", allowed, **{n: t for n, (t, wanted) in outputs.items() if wanted})
    if _format(grad_out) != _format(input):
        p.fail(":175-181", f"Format of gradOut and input should be equal. self "
               f"[{_format(grad_out)}], out [{_format(input)}].")
    p.not_private_format(":183-194", gradOut=grad_out, input=input, mean=mean, invstd=invstd)
    p.not_private_format(":196-209", **{n: t for n, (t, wanted) in outputs.items() if wanted})
    p.dims(":219-220", BN_MIN_DIMS, MAX_DIMS, gradOut=grad_out)
    p.dims(":222-223", BN_MIN_DIMS, MAX_DIMS, input=input)
    if input.size(1) == 0:
        p.fail(":225-230", "channel size of input should not be zero.")
    p.shape_is(":232-243", [input.size(1)], **{n: t for n, (t, wanted) in outputs.items() if wanted})
    if min(grad_out.numel(), input.numel(), mean.numel(), invstd.numel()) == 0:
        return  # :483-490 with :442-461: outputs are filled only on RegBase SoCs
    from cann_golden import batch_norm_reduce_backward_composite

    asked = [t for t, wanted in outputs.values() if wanted]
    out_dtype = asked[0].dtype if asked else F32
    # :298-307 casts, :375-394 Mul and ReduceSums, :427 the kernel, :323 the output casts;
    # restated (with its float32 roundings) in tests/cann_golden.py
    values, _ = batch_norm_reduce_backward_composite(grad_out.host, input.host, mean.host,
                                                     invstd.host, out_dtype)
    for (out, wanted), value in zip(outputs.values(), values):
        if wanted:
            _write(out, value)


def batch_norm_elemt_backward(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              counter, grad_input) -> None:
    """aclnnBatchNormElemtBackward."""
    p = Phase1("aclnnBatchNormElemtBackward", ELEMT_BACKWARD)
    p.not_null(":48-62, :214-216", gradOut=grad_out, input=input, mean=mean, invstd=invstd,
               sumDy=sum_dy, sumDyXmu=sum_dy_xmu, counter=counter, gradInput=grad_input)
    # :219-226 ASCEND910B / ASCEND910_93: Check910BDtypeValid (:83-95) and
    # Check910BOtherDtypeValid (:97-105); the counter also takes DT_INT32 (:45-46)
    with_bf16 = (F32, F16, BF16)
    p.dtype_in(":83-95", with_bf16, gradOut=grad_out, input=input, mean=mean, invstd=invstd,
               weight=weight)
    p.dtype_in(":97-105", with_bf16, sumDy=sum_dy, sumDyXmu=sum_dy_xmu, gradInput=grad_input)
    p.dtype_in(":45-46, :102", (F32, F16, torch.int32), counter=counter)
    p.not_private_format(":107-123", gradOut=grad_out, input=input, gradInput=grad_input)
    p.dims(":130-131", BN_MIN_DIMS, MAX_DIMS, input=input)
    p.dims(":132-134", None, MAX_DIMS, gradOut=grad_out, gradInput=grad_input, counter=counter)
    if input.size(1) == 0:
        p.fail(":135-138", "Input channel size should not be zero.")
    p.shape_is(":139-140", list(input.shape), gradOut=grad_out, gradInput=grad_input)
    p.shape_is(":142-149", [input.size(1)], mean=mean, invstd=invstd, weight=weight,
               sumDy=sum_dy, sumDyXmu=sum_dy_xmu)
    if input.numel() == 0 or grad_out.numel() == 0:
        return  # :314-318: nothing written
    # :255-293 MeanByCounter: Σ counter (cast to float), then sumDy / Σ and sumDyXmu / Σ;
    # :409 SyncBatchNormBackwardElemt; :415 the cast to gradInput's dtype
    dim = input.dim()  # the kernels' arithmetic: float64 here, rounded once to gradInput
    total = counter.host.float().double().sum()
    mean_dy = _per_channel(sum_dy.host.double() / total, dim)
    mean_dy_xmu = _per_channel(sum_dy_xmu.host.double() / total, dim)
    s = _per_channel(invstd.host.double(), dim)
    w = _per_channel(weight.host.double(), dim) if weight is not None else 1.0
    centred = input.host.double() - _per_channel(mean.host.double(), dim)
    _write(grad_input, (grad_out.host.double() - mean_dy - centred * s * s * mean_dy_xmu) * s * w)


# --- the fused cross entropy ops: our adapter calls these (impl="npu") ---

def fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                         label_smoothing: float, logits_max, sum_exp_logits,
                                         softmax, input_grad_out, weight_grad_out) -> None:
    """aclnnFusedLinearCrossEntropyLossGrad."""
    p = Phase1("aclnnFusedLinearCrossEntropyLossGrad", FLCE_GRAD)
    if softmax is None and (logits_max is None or sum_exp_logits is None):
        p.fail(":77-82", "softmaxOptional can not be nullptr when logitsMaxOptional or "
               "sumExpLogitsOptional is nullptr", ACLNN_ERR_PARAM_NULLPTR)
    p.not_null(":83-90, :229", grad=grad, input=input, weight=weight, targetMask=target_mask,
               maskedTarget=masked_target, inputGradOut=input_grad_out,
               weightGradOut=weight_grad_out)
    p.dtype_in(":98", (F32,), grad=grad)
    p.dtype_in(":99-100", (F16, BF16), input=input, weight=weight)
    p.dtype_in(":101", (torch.bool, torch.uint8), targetMask=target_mask)
    p.dtype_in(":102", (torch.int32, torch.int64), maskedTarget=masked_target)
    if softmax is not None:
        p.dtype_in(":103-104", (F32,), softmaxOptional=softmax)
    else:
        p.dtype_in(":105-108", (F32,), logitsMaxOptional=logits_max, sumExpLogitsOptional=sum_exp_logits)
    p.dtype_same(":110", "input", input, "weight", weight)
    p.dtype_same(":111", "input", input, "inputGradOut", input_grad_out)
    p.dtype_same(":112", "input", input, "weightGradOut", weight_grad_out)
    stats = {"softmaxOptional": softmax} if softmax is not None else {
        "logitsMaxOptional": logits_max, "sumExpLogitsOptional": sum_exp_logits}
    p.nd_format(":116-133, :37-41", grad=grad, input=input, weight=weight, targetMask=target_mask,
                maskedTarget=masked_target, inputGradOut=input_grad_out,
                weightGradOut=weight_grad_out, **stats)
    if label_smoothing != 0:
        p.fail(":135-143", "aclnnFusedLinearCrossEntropyLossGrad currently only support "
               "labelSmoothing equals 0.")
    p.dim_is(":149", 1, grad=grad)
    p.dim_is(":150-151", 2, input=input, weight=weight)
    p.dim_is(":152-153", 1, targetMask=target_mask, maskedTarget=masked_target)
    if softmax is not None:
        p.dim_is(":154-155", 2, softmaxOptional=softmax)
    else:
        p.dim_is(":157-158", 1, logitsMaxOptional=logits_max, sumExpLogitsOptional=sum_exp_logits)
    p.dim_is(":160-161", 2, inputGradOut=input_grad_out, weightGradOut=weight_grad_out)
    bt, h, v = grad.size(0), input.size(1), weight.size(0)
    if input.size(0) != bt:
        p.fail(":173-176", "input.size(0) should be equal to grad.size(0)")
    if v < 128 and softmax is not None:
        p.fail(":177-180", "weight.size(0) < 128 is not supported")
    if weight.size(1) != h:
        p.fail(":181-184", "weight.size(1) should be equal to input.size(1)")
    if target_mask.dtype == torch.bool and target_mask.size(0) != bt:
        p.fail(":185-189", "targetMask.size(0) should be equal to grad.size(0) when targetMask is in BOOL")
    if target_mask.dtype == torch.uint8 and target_mask.size(0) * 8 < bt:
        p.fail(":190-195", "targetMask.size(0) * 8 should not be less than grad.size(0) when "
               "targetMask is in UINT8")
    if masked_target.size(0) != bt:
        p.fail(":196-199", "maskedTarget.size(0) should be equal to grad.size(0)")
    if softmax is not None:
        p.shape_is(":204-205", [bt, v], softmaxOptional=softmax)
    else:
        p.shape_is(":206-209", [bt], logitsMaxOptional=logits_max, sumExpLogitsOptional=sum_exp_logits)
    p.shape_is(":210", [bt, h], inputGradOut=input_grad_out)
    p.shape_is(":211", [v, h], weightGradOut=weight_grad_out)
    if input.numel() == 0 or weight.numel() == 0:
        return  # :287-292: nothing written
    if SOC not in ("Ascend910B", "Ascend910_93"):  # :215-223, checked at :312-313
        p.fail(":215-223", "Current platform is not supported", ACLNN_ERR_RUNTIME_ERROR)
    from ascend_ops import reference

    input_grad, weight_grad = reference.fused_linear_cross_entropy_loss_grad(
        grad.host, input.host, weight.host, target_mask.host, masked_target.host, 0.0,
        _host(logits_max), _host(sum_exp_logits), _host(softmax))
    _write(input_grad_out, input_grad)
    _write(weight_grad_out, weight_grad)


def fused_linear_online_max_sum(input, weight, target, vocab_start_index: int,
                                vocab_end_index: int, logits_max, sum_exp_logits,
                                predicted_logits, target_mask, masked_target,
                                vocab_parallel_logits) -> None:
    """aclnnFusedLinearOnlineMaxSum."""
    p = Phase1("aclnnFusedLinearOnlineMaxSum", ONLINE)
    p.not_null(":67-80, :178", input=input, weight=weight, target=target,
               logitsMaxLocalOut=logits_max, sumExpLogitsLocalOut=sum_exp_logits,
               predictedLogitsLocalOut=predicted_logits, targetMaskOut=target_mask,
               maskedTargetOut=masked_target)
    p.dtype_in(":85-86", (F16, BF16), input=input, weight=weight)
    p.dtype_in(":87", (torch.int32, torch.int64), target=target)
    p.dtype_same(":88", "input", input, "weight", weight)
    p.dtype_in(":90-92", (F32,), logitsMaxLocalOut=logits_max, sumExpLogitsLocalOut=sum_exp_logits,
               predictedLogitsLocalOut=predicted_logits)
    p.dtype_in(":93", (torch.uint8,), targetMaskOut=target_mask)
    p.dtype_same(":94", "maskedTargetOut", masked_target, "target", target)
    p.dtype_same(":95-97", "vocabParallelLogitsOutOptional", vocab_parallel_logits, "input", input)
    p.dim_is(":105-106", 2, input=input, weight=weight)
    p.dim_is(":107", 1, target=target)
    p.dim_is(":109-113", 1, logitsMaxLocalOut=logits_max, sumExpLogitsLocalOut=sum_exp_logits,
             predictedLogitsLocalOut=predicted_logits, targetMaskOut=target_mask,
             maskedTargetOut=masked_target)
    bt, v = input.size(0), weight.size(0)
    if v == 0:
        p.fail(":120-123", "weight.size(0) should be greater than 0.")
    if input.size(1) > 65534:  # :38 MAX_INPUT_DIM_ONE_SIZE
        p.fail(":125-129", f"input.size(1) should be less than or equal to 65534, but got {input.size(1)}")
    if input.size(1) != weight.size(1):
        p.fail(":131-135", "weight.size(1) should be equal to input.size(1)")
    p.shape_is(":139-142", [bt], target=target, logitsMaxLocalOut=logits_max,
               sumExpLogitsLocalOut=sum_exp_logits, predictedLogitsLocalOut=predicted_logits)
    p.shape_is(":143", [(bt + 7) // 8], targetMaskOut=target_mask)
    p.shape_is(":144", [bt], maskedTargetOut=masked_target)
    if vocab_parallel_logits is not None:
        p.dim_is(":148", 2, vocabParallelLogitsOutOptional=vocab_parallel_logits)
        p.shape_is(":149-150", [bt, v], vocabParallelLogitsOutOptional=vocab_parallel_logits)
    if vocab_start_index < 0:
        p.fail(":158-162", f"vocabStartIndex should be greater than or equal to 0, but got {vocab_start_index}")
    if vocab_end_index < vocab_start_index:
        p.fail(":164-168", "vocabEndIndex should be greater than or equal to vocabStartIndex")
    if bt == 0:
        return  # :260-265: nothing written
    from ascend_ops import reference

    outputs = reference.fused_linear_online_max_sum(
        input.host, weight.host, target.host, vocab_start_index, vocab_end_index,
        vocab_parallel_logits is not None)
    for out, value in zip((logits_max, sum_exp_logits, predicted_logits, target_mask,
                           masked_target, vocab_parallel_logits), outputs):
        _write(out, value)


def fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                          label_smoothing: float, input_optional,
                                          weight_optional, vocab_parallel_logits, loss,
                                          softmax) -> None:
    """aclnnFusedCrossEntropyLossWithMaxSum."""
    p = Phase1("aclnnFusedCrossEntropyLossWithMaxSum", LOSS)
    p.not_null(":40-47, :98", logitsMax=logits_max, sumExpLogits=sum_exp_logits,
               predictedLogits=predicted_logits, lossOut=loss)
    if vocab_parallel_logits is not None:
        p.not_null(":48-50, :98", softMaxOutOptional=softmax)
    p.dtype_in(":58-61", (F32,), logitsMax=logits_max, sumExpLogits=sum_exp_logits,
               predictedLogits=predicted_logits, lossOut=loss)
    if vocab_parallel_logits is not None:
        p.dtype_in(":65", (F32, F16, BF16), vocabParallelLogitsOptional=vocab_parallel_logits)
        p.dtype_in(":66", (F32,), softMaxOutOptional=softmax)
    p.dim_is(":76-77", 1, logitsMax=logits_max)
    p.shape_is(":79-81", list(logits_max.shape), sumExpLogits=sum_exp_logits,
               predictedLogits=predicted_logits, lossOut=loss)
    if vocab_parallel_logits is not None:
        p.dim_is(":84-85", 2, vocabParallelLogitsOptional=vocab_parallel_logits)
        p.shape_is(":86", list(vocab_parallel_logits.shape), softMaxOutOptional=softmax)
    if label_smoothing != 0:
        p.fail(":111-114", "Currently, only labelSmoothing=0 are supported.")
    from ascend_ops import reference

    value_loss, value_softmax = reference.fused_cross_entropy_loss_with_max_sum(
        logits_max.host, sum_exp_logits.host, predicted_logits.host,
        vocab_parallel_logits=_host(vocab_parallel_logits))
    _write(loss, value_loss)
    if vocab_parallel_logits is not None:
        _write(softmax, value_softmax)


# --- our op package (impl="npu_custom"): CANN's generated API over our OpDefs ---

def _custom_combination(p: Phase1, where: str, rows: list[dict], **tensors) -> None:
    """CANN's generated phase 1 accepts the dtype combinations an OpDef declares, one column
    per input (an absent optional input matches any row)."""
    for row in rows:
        if all(t is None or t.dtype == row[name] for name, t in tensors.items() if name in row):
            return
    given = ", ".join(f"{n}={_acl(t.dtype)}" for n, t in tensors.items() if t is not None)
    p.fail(where, f"no dtype combination of the OpDef matches ({given})")


def custom_fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                                logits_max, sum_exp_logits, softmax, bias, class_weight,
                                                alpha, beta, gamma, label_smoothing: float,
                                                logit_scale: float, softcap: float, input_grad_out,
                                                weight_grad_out) -> None:
    """aclnnAscendOpsFusedLinearCrossEntropyLossGrad: our kernel on the simulator (the loss
    options' inputs and attributes after CANN's, as the generated API orders them)."""
    p = Phase1("aclnnAscendOpsFusedLinearCrossEntropyLossGrad", CUSTOM_FLCE)
    p.not_null(":199-203", grad=grad, input=input, weight=weight, target_mask=target_mask,
               masked_target=masked_target, input_grad=input_grad_out, weight_grad=weight_grad_out)
    rows = [dict(grad=F32, input=half, weight=half, target_mask=torch.uint8, masked_target=target,
                 logits_max=F32, sum_exp_logits=F32, softmax=F32, bias=F32, class_weight=F32, alpha=F32,
                 beta=F32, gamma=F32, input_grad=half, weight_grad=half)
            for half, target in ((F16, torch.int32), (F16, torch.int64), (BF16, torch.int32),
                                 (BF16, torch.int64))]
    _custom_combination(p, ":194-213", rows, grad=grad, input=input, weight=weight,
                        target_mask=target_mask, masked_target=masked_target,
                        logits_max=logits_max, sum_exp_logits=sum_exp_logits, softmax=softmax,
                        bias=bias, class_weight=class_weight, alpha=alpha, beta=beta, gamma=gamma,
                        input_grad=input_grad_out, weight_grad=weight_grad_out)
    p.custom_nd_format(":198", grad=grad, input=input, weight=weight, target_mask=target_mask,
                       masked_target=masked_target)
    from ascend_ops.sim import simulator

    options = None
    if alpha is not None:  # the options variant (the TilingFunc refuses an incomplete set)
        options = simulator.FlceOptions(alpha.host, _host(beta), _host(gamma), _host(bias),
                                        _host(class_weight), logit_scale, softcap)
    input_grad, weight_grad = simulator.fused_linear_cross_entropy_loss_grad(
        grad.host, input.host, weight.host, target_mask.host, masked_target.host,
        label_smoothing, _host(logits_max), _host(sum_exp_logits), _host(softmax), options=options)
    _write(input_grad_out, input_grad)
    _write(weight_grad_out, weight_grad)


def custom_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight, input_g: bool,
                                      weight_g: bool, bias_g: bool, sum_dy, sum_dy_xmu,
                                      grad_weight, grad_bias) -> None:
    """aclnnAscendOpsBatchNormReduceBackward: our kernel on the simulator."""
    p = Phase1("aclnnAscendOpsBatchNormReduceBackward", CUSTOM_BN)
    p.not_null(":106-109", grad_out=grad_out, input=input, mean=mean, invstd=invstd)
    kinds = (F32, F16, BF16)
    rows = [dict(grad_out=data, input=data, mean=stat, invstd=stat, weight=w)
            for data in kinds for stat in kinds for w in kinds]
    _custom_combination(p, ":92-110", rows, grad_out=grad_out, input=input, mean=mean,
                        invstd=invstd, weight=weight)
    p.custom_nd_format(":105-110", grad_out=grad_out, input=input, mean=mean, invstd=invstd)
    from ascend_ops.sim import simulator

    values = simulator.batch_norm_reduce_backward(
        grad_out.host, input.host, mean.host, invstd.host, _host(weight), input_g, weight_g, bias_g)
    for out, value in zip((sum_dy, sum_dy_xmu, grad_weight, grad_bias), values):
        _write(out, value)

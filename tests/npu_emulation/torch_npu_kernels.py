"""torch_npu 2.13's PrivateUse1 kernels of aten's five sync-BN operators, on the emulated
device: each allocates its outputs as torch_npu does and calls its aclnn op's stand-in
(cann.py), whose refusal is raised as torch_npu raises a failed phase 1.

Which kernel runs is torch_npu's choice, read from op-plugin branch 26.1.0 (the branch whose
version list ends at v2.13): every one of the five is declared `op_api` in
op_plugin/config/op_plugin_functions.yaml, and the generated dispatch (torchnpugen/gen.py:
`is_jit_disable` and base formats -> op_api::) calls the aclnn kernel; DO_COMPATIBILITY falls
back to the old acl_op kernels only when CANN lacks the aclnn op, which CANN 9.0.0 does not.
So batch_norm_gather_stats_with_counts does NOT cast the counts to float32 (only the acl_op
kernel, BatchNormGatherStatsWithCountsKernelNpu.cpp, does): they reach
aclnnBatchNormGatherStatsWithCounts in the caller's dtype.
"""

from __future__ import annotations

import torch

from npu_emulation import cann
from npu_emulation.device import empty, kernel

OP_PLUGIN = "Ascend/op-plugin 26.1.0"
YAML = f"{OP_PLUGIN} op_plugin/config/op_plugin_functions.yaml"


def call_aclnn(kernel_name: str, stand_in, *args) -> None:
    """EXEC_NPU_CMD: phase 1, and on a failed status NPU_CHECK_ERROR's RuntimeError
    (op_plugin/utils/op_api_common.h:336-337 `call <api> failed`)."""
    try:
        stand_in(*args)
    except cann.AclnnRefusal as refusal:
        raise RuntimeError(
            f"{kernel_name}: NPU function error: call {refusal.api} failed, error code is "
            f"{refusal.status}\n[ERROR] {refusal.message} ({refusal.source})") from None


@kernel("aten::batch_norm_stats")
def batch_norm_stats(input, eps):
    # yaml:1350-1361 (gen_opapi): out0, out1 [C] float32; exec aclnnBatchNormStats
    c = input.size(1)
    mean, invstd = empty([c], torch.float32), empty([c], torch.float32)
    call_aclnn("batch_norm_stats", cann.batch_norm_stats, input, eps, mean, invstd)
    return mean, invstd


@kernel("aten::batch_norm_gather_stats_with_counts")
def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                        momentum, eps, counts):
    # yaml:1337-1348 (gen_opapi): out0, out1 [C], float16 when input and mean are both
    # float16, else float32; exec aclnnBatchNormGatherStatsWithCounts
    half = input.dtype == mean.dtype == torch.float16
    dtype = torch.float16 if half else torch.float32
    c = input.size(1)
    mean_all, invstd_all = empty([c], dtype), empty([c], dtype)
    call_aclnn("batch_norm_gather_stats_with_counts", cann.batch_norm_gather_stats_with_counts,
               input, mean, invstd, running_mean, running_var, momentum, eps, counts, mean_all,
               invstd_all)
    return mean_all, invstd_all


@kernel("aten::batch_norm_elemt")
def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    # op_plugin/ops/opapi/BatchNormElemtKernelNpuOpApi.cpp:36-46: the result allocated like
    # input (apply_tensor_without_format), exec aclnnBatchNormElemt
    result = empty(list(input.shape), input.dtype)
    call_aclnn("batch_norm_elemt", cann.batch_norm_elemt, input, weight, bias, mean, invstd,
               eps, result)
    return result


@kernel("aten::batch_norm_backward_reduce")
def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    # op_plugin/ops/opapi/BatchNormBackwardReduceKernelNpuOpApi.cpp:37-61: float16 outputs
    # when input and mean are both float16 (:38-42), else float32; sum_dy and sum_dy_xmu
    # shaped like mean (:45-48), grad_weight and grad_bias [C] (:50-56), each only when
    # asked for (an undefined tensor, a null aclTensor, otherwise)
    dtype = torch.float16 if input.dtype == mean.dtype == torch.float16 else torch.float32
    c = input.size(1)
    sum_dy = empty(list(mean.shape), dtype) if input_g else None
    sum_dy_xmu = empty(list(mean.shape), dtype) if input_g else None
    grad_weight = empty([c], dtype) if weight_g else None
    grad_bias = empty([c], dtype) if bias_g else None
    call_aclnn("batch_norm_backward_reduce", cann.batch_norm_reduce_backward, grad_out, input,
               mean, invstd, weight, input_g, weight_g, bias_g, sum_dy, sum_dy_xmu,
               grad_weight, grad_bias)
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


@kernel("aten::batch_norm_backward_elemt")
def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    # yaml:1314-1322 (gen_opapi): out sized and typed like input; exec
    # aclnnBatchNormElemtBackward
    grad_input = empty(list(input.shape), input.dtype)
    call_aclnn("batch_norm_backward_elemt", cann.batch_norm_elemt_backward, grad_out, input,
               mean, invstd, weight, sum_dy, sum_dy_xmu, count, grad_input)
    return grad_input

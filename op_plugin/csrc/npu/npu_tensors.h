// What the NPU kernels do to tensors before an aclnn call, all on the device and
// asynchronous (no host synchronisation, so torch_npu's task queue and graph capture
// keep running): formats, bool-mask packing, the masked_target range check and its
// folding into the mask.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ascend_ops::npu {

// Whether an aclnn op takes strided views. CANN's built-ins here make every input
// contiguous inside phase 1 (l0op::Contiguous in each op's aclnn_*.cpp in hicann/ops-nn),
// so a view goes to them as it is; our custom op package's generated API is not known to,
// so its inputs are made contiguous first.
enum class Strides { kAnyView, kContiguousOnly };

// `t` in a form the aclnn op accepts: an internal NPU format (e.g. FRACTAL_NZ for a
// weight) cast to its base format (ND; NCHW / NCDHW for 4-D / 5-D), and, for an op that
// takes kContiguousOnly, strided views made contiguous. An already usable tensor is
// returned as is, never copied.
at::Tensor as_aclnn_input(const at::Tensor& t, Strides strides);

// Bool mask [BT] (True = masked) -> bit-packed uint8 [ceil(BT/8)], LSB first, padding
// bits 1 (never read), computed on the mask's device. For our custom op package, which
// takes the uint8 form only; CANN's built-in takes the bool mask as it is.
at::Tensor pack_bool_mask(const at::Tensor& mask);

// How the NPU kernels check that masked_target lies in [0, V) on unmasked rows (SPEC §1):
//   "device": an asynchronous device-side assert (aten::_assert_async, when the installed
//             torch_npu registers it for PrivateUse1): a bad row fails the stream later;
//   "host":   ASCEND_OPS_NPU_CHECK_TARGETS=1, a debug switch: the validation reads the
//             targets on the host (one blocking copy per call) and raises ValueError at once;
//   "off":    neither: like CANN's built-in, an out-of-range target is not detected.
std::string target_check_mode();

// The mask and targets with every out-of-range target folded into the mask, on the device
// and without a host sync (SPEC §1): a row whose masked_target lies outside [0, V) is
// masked and its target set to 0, whatever target_check_mode() says, so no kernel that
// trusts the targets (CANN's high-performance kernel writes softmax[V*i + t] unchecked,
// fused_linear_cross_entropy_loss_grad_high_perf.h:189,199) ever indexes outside its row.
// `mask` is bool [BT] or bit-packed uint8 and comes back in the same form (the packed
// form's padding bits unchanged); about 5 element-wise ops over [BT] for a bool mask, 16
// for a packed one.
struct MaskedTargets {
  at::Tensor mask;
  at::Tensor target;
};
MaskedTargets fold_target_range(const at::Tensor& mask, const at::Tensor& masked_target,
                                int64_t vocab);

// Applies target_check_mode() to one call: `mask` is the bit-packed uint8 form or the
// bool form [BT]. Raises ValueError in "host" mode; queues the assert in "device" mode.
void check_targets(const at::Tensor& mask, const at::Tensor& masked_target, int64_t vocab);

}  // namespace ascend_ops::npu

// NPU kernel of fused_linear_online_max_sum (SPEC §3, the forward's local statistics):
// the shared validation, then CANN's aclnnFusedLinearOnlineMaxSum, and the cases the op
// refuses filled in:
//   - the id range goes to the op as it is, [start, end) with end exclusive: CANN's kernel
//     masks `target < vocabStartIndex` (CMPMODE::LT) or `target >= vocabEndIndex`
//     (CMPMODE::GE) (ops-nn matmul/fused_linear_online_max_sum/op_kernel/
//     fused_linear_online_max_sum.h, TargetInnerProcess), as CANN's own golden test does
//     (`vocab_end_index` exclusive). Its doc page's `target > vocabEndIndex` disagrees
//     with the kernel; we follow the kernel. An empty range, end == start, is accepted by
//     the op (its check is end >= start) and masks every row;
//   - BT == 0: empty outputs without a call; V == 0 (the op needs V >= 1): the statistics
//     of an empty shard (max -inf, sums 0, every row and padding bit masked), as the
//     reference gives.
#include "aclnn_call.h"
#include "builtin_limits.h"
#include "npu_tensors.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

#include <limits>

namespace ascend_ops::npu {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
fused_linear_online_max_sum(const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& target, int64_t vocab_start_index,
                            int64_t vocab_end_index, bool return_logits) {
  check_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index);
  const c10_npu::NPUGuard guard(input.device());
  const int64_t bt = input.size(0);
  const int64_t vocab = weight.size(0);
  const at::TensorOptions f32 = input.options().dtype(at::kFloat);
  at::Tensor logits_max = at::empty({bt}, f32);                                    // [BT]
  at::Tensor sum_exp_logits = at::empty({bt}, f32);                                // [BT]
  at::Tensor predicted_logits = at::empty({bt}, f32);                              // [BT]
  at::Tensor target_mask = at::empty({(bt + 7) / 8}, input.options().dtype(at::kByte));
  at::Tensor masked_target = at::empty({bt}, target.options());                    // [BT]
  at::Tensor logits = return_logits ? at::empty({bt, vocab}, input.options())     // [BT, V]
                                    : at::empty({0}, input.options());
  if (bt == 0) {
    return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
  }
  if (vocab == 0) {
    logits_max.fill_(-std::numeric_limits<float>::infinity());
    sum_exp_logits.zero_();
    predicted_logits.zero_();
    target_mask.fill_(0xFF);  // end == start: the padding rule gives 1 too (target_mask.h)
    masked_target.zero_();
    return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
  }
  check_builtin_online_max_sum_limits(input.size(1), vocab);

  at::Tensor input_c = as_aclnn_input(input, Strides::kAnyView);
  at::Tensor weight_c = as_aclnn_input(weight, Strides::kAnyView);
  at::Tensor target_c = as_aclnn_input(target, Strides::kAnyView);
  int64_t start = vocab_start_index;
  int64_t end = vocab_end_index;  // exclusive, as the kernel compares (see above)
  std::optional<at::Tensor> logits_out =
      return_logits ? std::optional<at::Tensor>(logits) : std::nullopt;
  run_aclnn<OnlineMaxSumPhase1>(k_fused_linear_online_max_sum, nullptr, input_c, weight_c,
                                target_c, start, end, logits_max, sum_exp_logits,
                                predicted_logits, target_mask, masked_target, logits_out);
  return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
}

}  // namespace ascend_ops::npu

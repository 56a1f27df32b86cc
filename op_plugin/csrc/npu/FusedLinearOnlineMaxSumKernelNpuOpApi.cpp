// NPU kernel of fused_linear_online_max_sum (SPEC §3, the forward's local statistics):
// the shared validation, then CANN's aclnnFusedLinearOnlineMaxSum with our vocabulary
// range convention adapted, and the cases the op refuses filled in:
//   - our vocab_end_index is exclusive, the op's is inclusive (a row is masked when
//     target > vocabEndIndex): we pass end - 1; an empty id range [s, s) has no inclusive
//     form, so its targets are replaced by -1 (< s: masked on every row);
//   - BT == 0: empty outputs without a call; V == 0 (the op needs V >= 1): the statistics
//     of an empty shard (max -inf, sums 0, every row masked), as the reference gives.
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
    target_mask.fill_(0xFF);
    masked_target.zero_();
    return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
  }
  check_builtin_online_max_sum_limits(input.size(1), vocab);

  at::Tensor input_c = as_aclnn_input(input);
  at::Tensor weight_c = as_aclnn_input(weight);
  at::Tensor target_c = as_aclnn_input(target);
  int64_t start = vocab_start_index;
  int64_t last = vocab_end_index - 1;  // inclusive
  if (vocab_end_index == vocab_start_index) {
    target_c = at::full_like(target_c, -1);
    last = start;
  }
  std::optional<at::Tensor> logits_out =
      return_logits ? std::optional<at::Tensor>(logits) : std::nullopt;
  run_aclnn<OnlineMaxSumPhase1>(k_fused_linear_online_max_sum, nullptr, input_c, weight_c,
                                target_c, start, last, logits_max, sum_exp_logits,
                                predicted_logits, target_mask, masked_target, logits_out);
  return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
}

}  // namespace ascend_ops::npu

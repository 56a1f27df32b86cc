// CPU kernel of fused_cross_entropy_loss_with_max_sum (SPEC §3): the loss from the global
// row statistics and, when the forward kept the logits, the softmax:
//   loss[i]       = log(sum_exp_logits[i]) − predicted_logits[i]
//   softmax[i, j] = exp(f32(vocab_parallel_logits[i, j]) − logits_max[i]) / sum_exp_logits[i]
// Element-wise per row, one thread per row: bitwise the same for any thread count.
#include "../../validation.h"

#include <ATen/Dispatch.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/log.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>

namespace ascend_ops {
namespace {

template <typename T>
void softmax_rows(const T* logits, const float* logits_max, const float* sum_exp,
                  int64_t rows, int64_t vocab, float* softmax) {
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* row = logits + i * vocab;
      float* out = softmax + i * vocab;
      const float m = logits_max[i];
      const float inv_sum = 1.0f / sum_exp[i];
      for (int64_t j = 0; j < vocab; ++j) {
        out[j] = std::exp(static_cast<float>(row[j]) - m) * inv_sum;
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_loss_with_max_sum_cpu(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits,
    const at::Tensor& predicted_logits, double label_smoothing,
    const std::optional<at::Tensor>& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& vocab_parallel_logits) {
  check_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                              label_smoothing, input, weight,
                                              vocab_parallel_logits);
  const at::Tensor loss = at::log(sum_exp_logits) - predicted_logits;  // [BT], f32
  if (!vocab_parallel_logits.has_value()) {
    return {loss, at::empty({0}, logits_max.options())};
  }
  const at::Tensor logits = vocab_parallel_logits->contiguous();  // BT x V
  const at::Tensor m = logits_max.contiguous();
  const at::Tensor s = sum_exp_logits.contiguous();
  at::Tensor softmax = at::empty(logits.sizes(), logits_max.options());  // BT x V, f32
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(),
                                  "fused_cross_entropy_loss_with_max_sum", [&] {
    softmax_rows<scalar_t>(logits.const_data_ptr<scalar_t>(), m.const_data_ptr<float>(),
                           s.const_data_ptr<float>(), logits.size(0), logits.size(1),
                           softmax.mutable_data_ptr<float>());
  });
  return {loss, softmax};
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("fused_cross_entropy_loss_with_max_sum", &fused_cross_entropy_loss_with_max_sum_cpu);
}

}  // namespace ascend_ops

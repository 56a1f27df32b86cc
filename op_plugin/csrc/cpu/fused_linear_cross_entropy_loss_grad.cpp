// CPU kernel of fused_linear_cross_entropy_loss_grad (SPEC §1).
//
// Rows are processed in chunks whose [rows, V] scratch fits a fixed budget, so the
// memory-saving mode never holds the whole [BT, V] logits:
//   logits_c = f32(x_c) @ f32(W).T                 GEMM in fp32 (memory-saving mode)
//   G_c      = half((P_c - onehot_c) * grad_c)      one pass over the chunk
//   input_grad[c] = G_c @ W                        GEMM, fp32 accumulation, half out
//   weight_grad  += G_c.T @ x_c                    GEMM, accumulated in fp32 over chunks
// The chunk size depends only on the shapes, never on the thread count, and every
// element is computed by one thread in a fixed order: results are bitwise reproducible.
#include "../target_mask.h"
#include "../validation.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ascend_ops {
namespace {

// Scratch budget for the per-chunk [rows, V] fp32 logits and half G: at V = 16000 a
// memory-saving row costs 16000 * (4 + 2) = 96000 bytes, so a chunk is 699 rows.
constexpr int64_t kChunkScratchBytes = 64LL << 20;

// G_c = half((P - onehot) * grad) for rows [row0, row0 + rows). `probability(i, j)`
// gives P[i, j] in fp32 for the chunk-local row i.
template <typename T, typename Probability>
void logits_grad_chunk(const Probability& probability, const std::vector<RowTarget>& targets,
                       const float* grad, int64_t row0, int64_t rows, int64_t vocab, T* g) {
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float scale = grad[row0 + i];
      T* g_row = g + i * vocab;
      for (int64_t j = 0; j < vocab; ++j) {
        g_row[j] = static_cast<T>(probability(i, j) * scale);
      }
      const RowTarget& target = targets[row0 + i];
      if (!target.masked) {
        g_row[target.column] = static_cast<T>((probability(i, target.column) - 1.0f) * scale);
      }
    }
  });
}

template <typename T>
void flce_grad_impl(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                    const std::vector<RowTarget>& targets, const at::Tensor* logits_max,
                    const at::Tensor* sum_exp_logits, const at::Tensor* softmax,
                    at::Tensor& input_grad, at::Tensor& weight_grad) {
  const int64_t bt = input.size(0);
  const int64_t h = input.size(1);
  const int64_t vocab = weight.size(0);
  const bool recompute = softmax == nullptr;

  const int64_t bytes_per_row = vocab * (static_cast<int64_t>(sizeof(T)) +
                                         (recompute ? static_cast<int64_t>(sizeof(float)) : 0));
  const int64_t chunk_rows = std::clamp<int64_t>(kChunkScratchBytes / bytes_per_row, 1, bt);

  // ATen's GEMMs (MKL, oneDNN) for now: the half operands of the fp32-output GEMMs are
  // widened to fp32 first, because no exported ATen GEMM takes half in and gives fp32 out.
  const at::Tensor weight_f32 = recompute ? weight.to(at::kFloat) : at::Tensor();  // V x H
  const float* g_up = grad.const_data_ptr<float>();
  at::Tensor g_chunk = at::empty({chunk_rows, vocab}, input.options());  // rows x V, half
  at::Tensor dw_acc = at::zeros({vocab, h}, grad.options());             // V x H, fp32
  T* g = g_chunk.mutable_data_ptr<T>();

  for (int64_t row0 = 0; row0 < bt; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, bt - row0);
    const at::Tensor x_c = input.narrow(0, row0, rows).to(at::kFloat);  // rows x H
    at::Tensor g_c = g_chunk.narrow(0, 0, rows);                         // rows x V
    if (recompute) {
      const at::Tensor logits = at::mm(x_c, weight_f32.t());  // rows x V, fp32
      const float* l = logits.const_data_ptr<float>();
      const float* m = logits_max->const_data_ptr<float>() + row0;
      const float* s = sum_exp_logits->const_data_ptr<float>() + row0;
      const auto probability = [=](int64_t i, int64_t j) {
        return std::exp(l[i * vocab + j] - m[i]) / s[i];
      };
      logits_grad_chunk<T>(probability, targets, g_up, row0, rows, vocab, g);
    } else {
      const float* p = softmax->const_data_ptr<float>() + row0 * vocab;
      const auto probability = [=](int64_t i, int64_t j) { return p[i * vocab + j]; };
      logits_grad_chunk<T>(probability, targets, g_up, row0, rows, vocab, g);
    }
    at::Tensor dx_c = input_grad.narrow(0, row0, rows);
    at::mm_out(dx_c, g_c, weight);                 // [rows, V] @ [V, H], fp32 accumulation
    dw_acc.addmm_(g_c.to(at::kFloat).t(), x_c);    // [V, rows] @ [rows, H], fp32 over chunks
  }
  weight_grad.copy_(dw_acc);
}

std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_cpu(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max, const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax) {
  check_fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                             label_smoothing, logits_max, sum_exp_logits,
                                             softmax, /*check_values=*/true);
  const int64_t bt = input.size(0);
  at::Tensor input_grad = at::empty(input.sizes(), input.options());
  at::Tensor weight_grad = at::empty(weight.sizes(), weight.options());
  if (bt == 0 || input.size(1) == 0 || weight.size(0) == 0) {
    // No rows: nothing flows back to the weight. H == 0 or V == 0: empty products.
    input_grad.zero_();
    weight_grad.zero_();
    return {input_grad, weight_grad};
  }

  const std::vector<RowTarget> targets = row_targets(target_mask, masked_target, bt);
  const at::Tensor grad_c = grad.contiguous();
  const at::Tensor input_c = input.contiguous();
  const at::Tensor weight_c = weight.contiguous();
  at::Tensor max_c, sum_c, softmax_c;
  if (softmax.has_value()) {
    softmax_c = softmax->contiguous();
  } else {
    max_c = logits_max->contiguous();
    sum_c = sum_exp_logits->contiguous();
  }
  AT_DISPATCH_REDUCED_FLOATING_TYPES(input.scalar_type(), "fused_linear_cross_entropy_loss_grad", [&] {
    flce_grad_impl<scalar_t>(grad_c, input_c, weight_c, targets,
                             softmax.has_value() ? nullptr : &max_c,
                             softmax.has_value() ? nullptr : &sum_c,
                             softmax.has_value() ? &softmax_c : nullptr, input_grad, weight_grad);
  });
  return {input_grad, weight_grad};
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("fused_linear_cross_entropy_loss_grad", &fused_linear_cross_entropy_loss_grad_cpu);
}

}  // namespace ascend_ops

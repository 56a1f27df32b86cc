#include "lce_options.h"

#include "../gemm/bf16_matrix.h"
#include "../gemm/gemm.h"
#include "../gemm/operands/gemm_operands.h"
#include "lce_grad_cache.h"
#include "logit_options.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>

namespace ascend_ops {
namespace cpu {
namespace {

// fp32 logits of one vocabulary chunk of the recomputing backward, at most: at BT = 4096
// that is 2048 columns (a multiple of the GEMMs' 32-column panels).
constexpr int64_t kChunkLogitsBytes = 32LL << 20;
// Columns per task of the bias gradient's column sums.
constexpr int64_t kColumnBlock = 64;

// The stage's options over this call's tensors (fp32, contiguous; checked by the caller).
struct OptionOperands {
  at::Tensor bias, class_weight;
  LogitOptions options;

  OptionOperands(const std::optional<at::Tensor>& b, double scale, double softcap,
                 const std::optional<at::Tensor>& w) {
    if (b.has_value() && b->defined()) {
      bias = b->to(at::kFloat).contiguous();
      options.bias = bias.const_data_ptr<float>();
    }
    if (w.has_value() && w->defined()) {
      class_weight = w->to(at::kFloat).contiguous();
      options.class_weight = class_weight.const_data_ptr<float>();
    }
    options.scale = static_cast<float>(scale);
    options.softcap = static_cast<float>(softcap);
  }
};

const float* floats(const at::Tensor& t) { return t.const_data_ptr<float>(); }

// dst[rows, cols] (dst's dtype, rows ld_dst apart) = src[rows, cols] (fp32, ld_src apart),
// rounded to nearest even.
void round_into(const at::Tensor& src, at::Tensor& dst) {
  const int64_t rows = src.size(0);
  const int64_t cols = src.size(1);
  if (dst.scalar_type() == at::kBFloat16) {
    round_rows(floats(src), rows, cols, src.stride(0), bf16_bits(dst), dst.stride(0));
  } else {
    dst.copy_(src);  // float16 (ATen's conversion rounds to nearest even) or float32
  }
}

// out[j] = sum_i scale_i * g[i, j] over the rows of a [rows, cols] matrix (float32, bfloat16,
// float16 or float32 elements), in double, rows in order; columns in parallel blocks.
template <typename T>
void column_sums(const T* g, int64_t rows, int64_t cols, int64_t ld, const float* row_scale,
                 float* out) {
  const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    double sums[kColumnBlock];
    for (int64_t b = begin; b < end; ++b) {
      const int64_t c0 = b * kColumnBlock;
      const int64_t n = std::min(kColumnBlock, cols - c0);
      std::fill(sums, sums + n, 0.0);
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = g + i * ld + c0;
        const double s = row_scale != nullptr ? row_scale[i] : 1.0;
        for (int64_t j = 0; j < n; ++j) {
          sums[j] += s * static_cast<float>(row[j]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        out[c0 + j] = static_cast<float>(sums[j]);
      }
    }
  });
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> lce_options_chunk_statistics(
    const at::Tensor& input_chunk, const at::Tensor& weight, const at::Tensor& columns,
    at::Tensor& logits_buffer, const std::optional<at::Tensor>& bias, double scale, double softcap,
    const std::optional<at::Tensor>& class_weight, bool want_weighted_sum, bool want_argmax) {
  const int64_t rows = input_chunk.size(0);
  const int64_t vocab = weight.size(0);
  TORCH_INTERNAL_ASSERT(columns.numel() == rows && columns.scalar_type() == at::kLong &&
                        logits_buffer.scalar_type() == at::kFloat &&
                        logits_buffer.size(0) >= rows && logits_buffer.size(1) >= vocab &&
                        logits_buffer.stride(1) == 1);
  const OptionOperands op(bias, scale, softcap, class_weight);
  at::Tensor logits = logits_buffer.narrow(0, 0, rows).narrow(1, 0, vocab);
  if (rows > 0 && vocab > 0) {
    lce_chunk_logits(input_chunk.contiguous(), weight.contiguous(), logits);
  }

  const at::TensorOptions f32 = input_chunk.options().dtype(at::kFloat);
  at::Tensor row_max = at::empty({rows}, f32);
  at::Tensor sum_exp = at::empty({rows}, f32);
  at::Tensor predicted = at::empty({rows}, f32);
  at::Tensor weighted_sum = at::zeros({rows}, f32);
  at::Tensor argmax = at::zeros({rows}, f32.dtype(at::kLong));
  float* m = row_max.mutable_data_ptr<float>();
  float* s = sum_exp.mutable_data_ptr<float>();
  float* p = predicted.mutable_data_ptr<float>();
  float* ws = weighted_sum.mutable_data_ptr<float>();
  int64_t* am = argmax.mutable_data_ptr<int64_t>();
  const int64_t* column = columns.const_data_ptr<int64_t>();
  float* base = logits_buffer.mutable_data_ptr<float>();
  const int64_t ld = logits_buffer.stride(0);
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* y = base + i * ld;
      apply_logit_options(op.options, 0, vocab, y);
      const RowStatistics r = logit_row_statistics(op.options, 0, vocab, y, want_weighted_sum, want_argmax);
      m[i] = r.max;
      s[i] = static_cast<float>(r.sum_exp);
      p[i] = column[i] < 0 ? 0.0f : y[column[i]] - r.max;
      ws[i] = static_cast<float>(r.weighted_sum);
      if (want_argmax) {
        am[i] = r.argmax;
      }
    }
  });
  return {row_max, sum_exp, predicted, weighted_sum, argmax};
}

void lce_options_write_grad_rows(at::Tensor& logits_buffer, const at::Tensor& global_max,
                                 const at::Tensor& global_sum, const at::Tensor& columns,
                                 const at::Tensor& alpha, const at::Tensor& beta,
                                 const at::Tensor& gamma, double scale, double softcap,
                                 const std::optional<at::Tensor>& class_weight,
                                 at::Tensor& grad_rows) {
  const int64_t rows = grad_rows.size(0);
  const int64_t width = grad_rows.size(1);  // V and the cache's row padding
  const int64_t vocab = std::min(width, logits_buffer.size(1));
  TORCH_INTERNAL_ASSERT(grad_rows.stride(1) == 1 && logits_buffer.size(0) >= rows &&
                        logits_buffer.scalar_type() == at::kFloat && logits_buffer.stride(1) == 1 &&
                        global_max.numel() == rows && global_sum.numel() == rows &&
                        alpha.numel() == rows && beta.numel() == rows && gamma.numel() == rows &&
                        columns.numel() == rows && columns.scalar_type() == at::kLong);
  const OptionOperands op(std::nullopt, scale, softcap, class_weight);
  const float* big_m = floats(global_max);
  const float* big_s = floats(global_sum);
  const float* a = floats(alpha);
  const float* b = floats(beta);
  const float* c = floats(gamma);
  const int64_t* column = columns.const_data_ptr<int64_t>();
  float* base = logits_buffer.mutable_data_ptr<float>();
  const int64_t ld = logits_buffer.stride(0);
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const RowGradient g{big_m[i], 1.0f / big_s[i], a[i], b[i], c[i], column[i]};
      logit_gradient_row(op.options, g, 0, vocab, base + i * ld);
    }
  });
  at::Tensor values = logits_buffer.narrow(0, 0, rows).narrow(1, 0, vocab);
  at::Tensor out = grad_rows.narrow(1, 0, vocab);
  round_into(values, out);
  if (width > vocab) {
    // zero padding, so that the backward may hand the cache to oneDNN in place
    grad_rows.narrow(1, vocab, width - vocab).zero_();
  }
}

at::Tensor lce_cached_bias_grad(const at::Tensor& grad_cache, const std::optional<at::Tensor>& row_scale,
                                int64_t vocab) {
  const int64_t rows = grad_cache.size(0);
  TORCH_INTERNAL_ASSERT(grad_cache.dim() == 2 && grad_cache.size(1) >= vocab &&
                        grad_cache.stride(1) == 1 && grad_cache.scalar_type() == at::kBFloat16);
  at::Tensor scale;
  if (row_scale.has_value() && row_scale->defined()) {
    scale = row_scale->to(at::kFloat).contiguous();
    TORCH_INTERNAL_ASSERT(scale.numel() == rows);
  }
  at::Tensor out = at::empty({vocab}, grad_cache.options().dtype(at::kFloat));
  column_sums(grad_cache.const_data_ptr<at::BFloat16>(), rows, vocab, grad_cache.stride(0),
              scale.defined() ? floats(scale) : nullptr, out.mutable_data_ptr<float>());
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lce_options_backward(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& columns,
    const at::Tensor& global_max, const at::Tensor& global_sum, const at::Tensor& alpha,
    const at::Tensor& beta, const at::Tensor& gamma, const std::optional<at::Tensor>& bias,
    double scale, double softcap, const std::optional<at::Tensor>& class_weight,
    bool want_input_grad, bool want_weight_grad, bool want_bias_grad,
    std::optional<int64_t> chunk_columns) {
  const int64_t bt = input.size(0);
  const int64_t h = input.size(1);
  const int64_t vocab = weight.size(0);
  const at::ScalarType dtype = input.scalar_type();
  TORCH_INTERNAL_ASSERT(weight.size(1) == h && weight.scalar_type() == dtype &&
                        columns.numel() == bt && columns.scalar_type() == at::kLong &&
                        global_max.numel() == bt && global_sum.numel() == bt &&
                        alpha.numel() == bt && beta.numel() == bt && gamma.numel() == bt);
  const bool half = dtype != at::kFloat;
  // Chosen before anything is allocated (a process's first call measures the engines).
  const GemmEngine fp32_engine = half ? gemm_engine(dtype, GemmKind::kFp32Out) : GemmEngine::kPortable;
  const GemmEngine rounded_engine = half ? gemm_engine(dtype, GemmKind::kRounded) : GemmEngine::kPortable;
  at::Tensor input_grad, weight_grad, bias_grad;
  if (want_weight_grad) {
    weight_grad = scratch_empty(weight.sizes(), weight.options());  // all written
  }
  if (want_bias_grad) {
    bias_grad = at::empty({vocab}, input.options().dtype(at::kFloat));
  }
  at::Tensor dx_acc;  // BT x H, fp32
  if (want_input_grad) {
    dx_acc = at::zeros({bt, h}, input.options().dtype(at::kFloat));
  }
  if (bt == 0 || vocab == 0 || !(want_input_grad || want_weight_grad || want_bias_grad)) {
    if (want_weight_grad) weight_grad.zero_();
    if (want_bias_grad) bias_grad.zero_();
    if (want_input_grad) input_grad = dx_acc.to(dtype);
    return {input_grad, weight_grad, bias_grad};
  }

  const OptionOperands op(bias, scale, softcap, class_weight);
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t panel = 32;  // the GEMMs' column panels
  const int64_t vc = chunk_columns.has_value()
                         ? std::clamp<int64_t>(*chunk_columns, 1, vocab)
                         : std::min(vocab, std::max(panel, kChunkLogitsBytes / (bt * 4) / panel * panel));
  at::Tensor logits = scratch_empty({bt, vc}, input.options().dtype(at::kFloat));  // BT x vc
  at::Tensor g_half = half ? scratch_empty({bt, vc}, input.options()) : at::Tensor();  // BT x vc
  const GemmOperand x_op(x);  // widened once for every chunk where the engine needs it
  WideningBuffer weight_room(vc * h);
  WideningBuffer g_room(bt * vc);
  const float* big_m = floats(global_max);
  const float* big_s = floats(global_sum);
  const float* a = floats(alpha);
  const float* b = floats(beta);
  const float* c = floats(gamma);
  const int64_t* column = columns.const_data_ptr<int64_t>();

  for (int64_t v0 = 0; v0 < vocab; v0 += vc) {
    const int64_t cols = std::min(vc, vocab - v0);
    at::Tensor l = logits.narrow(1, 0, cols);  // BT x cols, fp32, rows vc apart
    at::Tensor w_c = w.narrow(0, v0, cols);    // cols x H
    lce_chunk_logits(x, w_c, l);
    float* base = l.mutable_data_ptr<float>();
    const int64_t row_grain = std::max<int64_t>(1, 16384 / cols);
    at::parallel_for(0, bt, row_grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float* row = base + i * vc;
        apply_logit_options(op.options, v0, cols, row);
        const int64_t t = column[i] >= v0 && column[i] < v0 + cols ? column[i] - v0 : -1;
        logit_gradient_row(op.options, RowGradient{big_m[i], 1.0f / big_s[i], a[i], b[i], c[i], t},
                           v0, cols, row);
      }
    });
    if (want_bias_grad) {  // from the fp32 gradient, before its rounding
      column_sums(static_cast<const float*>(base), bt, cols, vc, nullptr,
                  bias_grad.mutable_data_ptr<float>() + v0);
    }
    if (!half) {
      if (want_input_grad) dx_acc.addmm_(l, w_c);                        // dx += G_c @ W_c
      if (want_weight_grad) {
        at::Tensor dw = weight_grad.narrow(0, v0, cols);
        at::mm_out(dw, l.t(), x);                                         // dW[c] = G_c.T @ x
      }
      continue;
    }
    at::Tensor g = g_half.narrow(1, 0, cols);  // BT x cols, input's dtype
    round_into(l, g);
    const GemmOperand g_op(g, &g_room);
    if (want_input_grad) {
      gemm(g_op, GemmOperand(w_c, &weight_room), dx_acc, /*accumulate=*/true, fp32_engine);
    }
    if (want_weight_grad) {
      at::Tensor dw = weight_grad.narrow(0, v0, cols);  // cols x H: K = BT complete
      gemm_rounded(g_op.t(), x_op, dw, rounded_engine);
    }
  }
  if (want_input_grad) {
    input_grad = dx_acc.to(dtype);  // rounded once
  }
  return {input_grad, weight_grad, bias_grad};
}

}  // namespace cpu
}  // namespace ascend_ops

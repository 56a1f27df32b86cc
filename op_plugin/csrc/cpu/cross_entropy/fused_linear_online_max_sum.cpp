// CPU kernel of fused_linear_online_max_sum (SPEC §3): the local row statistics of
// logits = input @ weight.T without ever holding [BT, V] (unless return_logits asks for it).
//
// Rows are cut into chunks and the vocabulary into blocks, both sized to fixed scratch
// budgets from the shapes alone. For each row chunk, the block logits are computed in fp32
// and folded into running per-row statistics, online-softmax style:
//   m'  = max(m, max_j l_j)
//   s'  = s · exp(m − m') + Σ_j exp(l_j − m')          (s kept in double)
// The block's maximum and Σ_j come from the vectorised row kernels (bf16_matrix.h: exp in
// fp32 vectors summed over blocks of 1024 elements into a double).
// Each row is folded by one thread, blocks in vocabulary order, so the results are
// bitwise the same for any thread count.
//
// The block logits come from the GEMM layer (gemm.h), fp32 out of half operands, on the
// engine it chose for the dtype's fp32-out products (float16: portable, which widens chunk and block to fp32).
#include "../../target_mask.h"
#include "../../validation.h"
#include "../gemm/bf16_matrix.h"
#include "../gemm/gemm.h"
#include "../gemm/operands/gemm_operands.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ascend_ops {
namespace {

// fp32 copy of one vocabulary block of the weight (onednn and portable engines): at H = 4096 a block is
// 16 MiB / (4096 · 4 B) = 1024 vocabulary rows.
constexpr int64_t kWeightBlockBytes = 16LL << 20;
// fp32 copy of a row chunk of the input (onednn and portable engines) plus its [rows, vocab_block] logits: at H = 4096
// and a 1024-row block that is 32 MiB / (16 KiB + 4 KiB) = 1638 rows.
constexpr int64_t kRowChunkBytes = 32LL << 20;

// Running statistics of one row over the vocabulary blocks seen so far.
struct RowState {
  float max = -std::numeric_limits<float>::infinity();
  double sum_exp = 0.0;
  float target_logit = 0.0f;  // raw logit of the target column, once its block is seen
};

template <typename T>
void online_max_sum(const at::Tensor& input, const at::Tensor& weight,
                    const std::vector<int64_t>& columns, std::vector<RowState>& state,
                    T* logits_out) {
  const int64_t bt = input.size(0);
  const int64_t h = input.size(1);
  const int64_t vocab = weight.size(0);
  const int64_t block = std::clamp<int64_t>(kWeightBlockBytes / std::max<int64_t>(1, h * 4), 1,
                                            std::max<int64_t>(vocab, 1));
  const int64_t chunk = std::clamp<int64_t>(kRowChunkBytes / ((h + block) * 4), 1, bt);
  at::Tensor logits_buffer = cpu::scratch_empty({chunk * block}, input.options().dtype(at::kFloat));
  const cpu::GemmEngine engine = cpu::gemm_engine(input.scalar_type(), cpu::GemmKind::kFp32Out);

  // The fp32 copies of the row chunks and of the weight blocks, each in one reused buffer.
  cpu::WideningBuffer input_room(chunk * h);
  cpu::WideningBuffer weight_room(block * h);
  for (int64_t row0 = 0; row0 < bt; row0 += chunk) {
    const int64_t rows = std::min(chunk, bt - row0);
    // rows x H, widened once if needed
    const cpu::GemmOperand x(input.narrow(0, row0, rows), &input_room);
    for (int64_t col0 = 0; col0 < vocab; col0 += block) {
      const int64_t cols = std::min(block, vocab - col0);
      at::Tensor logits = logits_buffer.narrow(0, 0, rows * cols).view({rows, cols});
      // [rows, H] @ [H, cols]: the weight block read transposed, fp32 out
      const cpu::GemmOperand w_block(weight.narrow(0, col0, cols), &weight_room);
      cpu::gemm(x, w_block.t(), logits, false, engine);
      const float* l = logits.const_data_ptr<float>();
      at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const float* row = l + i * cols;
          RowState& s = state[row0 + i];
          // NaN wins (std::max would keep s.max): a NaN logit makes the row's statistics NaN, as torch's
          const float block_max = cpu::logits_row_max(row, cols);
          const float new_max = std::isnan(block_max) ? block_max : std::max(s.max, block_max);
          const double block_sum = cpu::logits_exp_sum(row, cols, new_max);
          // Rescale what was summed against the old maximum (0 before the first block).
          const double rescale = s.sum_exp == 0.0 ? 0.0 : std::exp(double(s.max) - new_max);
          s.sum_exp = s.sum_exp * rescale + block_sum;
          s.max = new_max;
          const int64_t column = columns[row0 + i];
          if (column >= col0 && column < col0 + cols) {
            s.target_logit = row[column - col0];
          }
          if (logits_out != nullptr) {
            T* out = logits_out + (row0 + i) * vocab + col0;
            for (int64_t j = 0; j < cols; ++j) {
              out[j] = static_cast<T>(row[j]);
            }
          }
        }
      });
    }
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
fused_linear_online_max_sum_cpu(const at::Tensor& input, const at::Tensor& weight,
                                const at::Tensor& target, int64_t vocab_start_index,
                                int64_t vocab_end_index, bool return_logits) {
  check_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index);
  const int64_t bt = input.size(0);
  const int64_t vocab = weight.size(0);
  const at::TensorOptions f32 = input.options().dtype(at::kFloat);

  // Which rows this shard owns, and their local columns (-1 where masked).
  const at::Tensor target_long = target.to(at::kLong).contiguous();
  const int64_t* t = target_long.const_data_ptr<int64_t>();
  std::vector<int64_t> columns(bt);
  at::Tensor target_mask = at::empty({(bt + 7) / 8}, input.options().dtype(at::kByte));
  uint8_t* mask_bytes = target_mask.mutable_data_ptr<uint8_t>();
  std::fill(mask_bytes, mask_bytes + target_mask.numel(), uint8_t{0xFF});
  at::Tensor masked_long = at::empty({bt}, target_long.options());
  int64_t* mt = masked_long.mutable_data_ptr<int64_t>();
  for (int64_t i = 0; i < bt; ++i) {
    const bool masked = t[i] < vocab_start_index || t[i] >= vocab_end_index;
    columns[i] = masked ? -1 : t[i] - vocab_start_index;
    mt[i] = masked ? 0 : columns[i];
    if (!masked) {
      mask_bytes[i / 8] &= static_cast<uint8_t>(~(1u << (i % 8)));  // LSB first
    }
  }
  if (!padding_row_masked(vocab_start_index, vocab_end_index)) {  // as CANN's kernel
    for (int64_t i = bt; i < target_mask.numel() * 8; ++i) {
      mask_bytes[i / 8] &= static_cast<uint8_t>(~(1u << (i % 8)));
    }
  }
  const at::Tensor masked_target = masked_long.to(target.scalar_type());

  at::Tensor logits = return_logits ? at::empty({bt, vocab}, input.options())
                                    : at::empty({0}, input.options());
  std::vector<RowState> state(bt);
  const at::Tensor input_c = input.contiguous();
  const at::Tensor weight_c = weight.contiguous();
  AT_DISPATCH_REDUCED_FLOATING_TYPES(input.scalar_type(), "fused_linear_online_max_sum", [&] {
    online_max_sum<scalar_t>(input_c, weight_c, columns, state,
                             return_logits ? logits.mutable_data_ptr<scalar_t>() : nullptr);
  });

  at::Tensor logits_max = at::empty({bt}, f32);
  at::Tensor sum_exp_logits = at::empty({bt}, f32);
  at::Tensor predicted_logits = at::empty({bt}, f32);
  float* m = logits_max.mutable_data_ptr<float>();
  float* s = sum_exp_logits.mutable_data_ptr<float>();
  float* p = predicted_logits.mutable_data_ptr<float>();
  for (int64_t i = 0; i < bt; ++i) {
    m[i] = state[i].max;
    s[i] = static_cast<float>(state[i].sum_exp);
    p[i] = columns[i] < 0 ? 0.0f : state[i].target_logit - state[i].max;
  }
  return {logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits};
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("fused_linear_online_max_sum", &fused_linear_online_max_sum_cpu);
}

}  // namespace ascend_ops

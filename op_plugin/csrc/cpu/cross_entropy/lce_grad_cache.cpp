#include "lce_grad_cache.h"

#include "../gemm/bf16_matrix.h"
#include "../gemm/gemm.h"
#include "../gemm/operands/gemm_operands.h"
#include "../gemm/operands/kept_scratch.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>

#include <algorithm>
#include <cmath>

namespace ascend_ops {
namespace cpu {
namespace {

// onednn and portable: the fp32 copy of one vocabulary block of the weight for the logits
// GEMM (16 MiB, as fused_linear_online_max_sum). The own GEMMs (avx512bf16, avx2) and mkl
// multiply the whole weight in place.
constexpr int64_t kWeightBlockBytes = 16LL << 20;
// Scratch of the backward: a vocabulary slab of G made row-major (G'.T), and, with row
// scales other than 1, a block of scaled rows.
constexpr int64_t kSlabBytes = 16LL << 20;
// input_grad_in_room's K blocks are at least this deep: thinner blocks would
// make each product a thin GEMM that adds into the fp32 sums once more per block.
constexpr int64_t kMinRoomDepth = 256;

GemmEngine checked_engine(const at::Tensor& input, GemmKind kind) {
  TORCH_INTERNAL_ASSERT(input.scalar_type() == at::kBFloat16,
                        "linear_cross_entropy's gradient cache needs bfloat16");
  return gemm_engine(input.scalar_type(), kind);
}

// One row of G, bf16((P - onehot) * scale), by the FLCE kernel's own row function, and the
// row's padding up to `width` zeroed, so the backward hands the cache to oneDNN in place.
// `recompute`: `row` holds the logits (P = exp(l - max) / sum); else the exps of the row
// taken against a maximum equal to `max` (P = e / sum): the same product of the same values.
void write_grad_row(const float* row, int64_t vocab, bool recompute, float max, float sum,
                    float scale, int64_t column, uint16_t* g, int64_t width) {
  write_logits_grad_row(row, vocab, recompute, max, 1.0f / sum, scale, column, g);
  std::fill(g + vocab, g + width, uint16_t{0});
}

// The weight gradient's storage (V x H bf16) as fp32 room: V * H / 2 floats.
at::Tensor fp32_room(const at::Tensor& weight_grad) {
  const int64_t floats = weight_grad.numel() / 2;
  return weight_grad.view(-1).narrow(0, 0, 2 * floats).view(at::kFloat);
}

// G is the cache's [BT, V] view (rows ld_g apart); s the row scales, or null for all 1.

// input_grad = bf16(G @ W) on `portable` with the fp32 sums [BT, H] and the widened K
// blocks of G and W in weight_grad's storage, before weight_grad is written: every row at
// once, so W and G are each widened once and each block product is a large GEMM
// (input_grad_room_depth() gives the block depth).
void input_grad_in_room(const at::Tensor& g, const at::Tensor& weight, at::Tensor& input_grad,
                        const at::Tensor& weight_grad, int64_t depth) {
  const at::Tensor room = fp32_room(weight_grad);
  const int64_t bt = g.size(0);
  const int64_t vocab = g.size(1);
  const int64_t h = weight.size(1);
  at::Tensor sums = room.narrow(0, 0, bt * h).view({bt, h});
  WideningBuffer g_blocks(room.narrow(0, bt * h, bt * depth));
  WideningBuffer w_blocks(room.narrow(0, bt * h + bt * depth, depth * h));
  for (int64_t k0 = 0; k0 < vocab; k0 += depth) {
    const int64_t d = std::min(depth, vocab - k0);
    gemm(GemmOperand(g.narrow(1, k0, d), &g_blocks), GemmOperand(weight.narrow(0, k0, d), &w_blocks),
         sums, /*accumulate=*/k0 > 0, GemmEngine::kPortable);
  }
  input_grad.copy_(sums);  // rounded to nearest even, once
}

// input_grad = bf16(G' @ W): K = V whole in one product (per block of scaled rows), or on
// `portable` with every scale 1 in the storage of `weight_grad` (undefined when not
// wanted), not yet written, where that is large enough.
void backward_input_grad(const at::Tensor& g, const float* s, const at::Tensor& weight,
                         at::Tensor& input_grad, GemmEngine engine, const at::Tensor& weight_grad) {
  const int64_t bt = g.size(0);
  const int64_t vocab = g.size(1);
  const int64_t ld_g = g.stride(0);
  if (engine == GemmEngine::kPortable && s == nullptr && weight_grad.defined()) {
    const int64_t depth = input_grad_room_depth(bt, weight.size(1), vocab);
    if (depth > 0) {
      input_grad_in_room(g, weight, input_grad, weight_grad, depth);
      return;
    }
  }
  const GemmOperand w(weight.contiguous());
  if (s == nullptr) {
    gemm_rounded(GemmOperand(g), w, input_grad, engine);
  } else {
    const int64_t ld = scratch_ld(vocab);
    const int64_t block = std::clamp<int64_t>(kSlabBytes / (ld * 2), 1, bt);
    at::Tensor scaled = scratch_empty({block, ld}, input_grad.options());
    zero_padding_columns(scaled, vocab);  // so oneDNN takes the padded rows in place
    for (int64_t r0 = 0; r0 < bt; r0 += block) {
      const int64_t rows = std::min(block, bt - r0);
      rescale_rows_bf16(bf16_bits(g) + r0 * ld_g, rows, vocab, ld_g, s + r0, bf16_bits(scaled), ld);
      at::Tensor out = input_grad.narrow(0, r0, rows);
      gemm_rounded(GemmOperand(scaled.narrow(0, 0, rows).narrow(1, 0, vocab)), w, out, engine);
    }
  }
}

// weight_grad = bf16(G'.T @ x): K = BT whole, per vocabulary slab of G' made row-major
// (portable with G' = G: one product on G.T as it lies).
void backward_weight_grad(const at::Tensor& g, const float* s, const at::Tensor& input,
                          at::Tensor& weight_grad, GemmEngine engine) {
  const int64_t bt = g.size(0);
  const int64_t vocab = g.size(1);
  const int64_t ld_g = g.stride(0);
  const GemmOperand x(input.contiguous());
  if ((engine == GemmEngine::kPortable || engine == GemmEngine::kAvx2 ||
       engine == GemmEngine::kAvx512Bf16 || engine == GemmEngine::kAmx ||
       engine == GemmEngine::kMkl) && s == nullptr) {
    // ATen's GEMM reads G.T in place from the widened blocks of G (gemm_rounded keeps a
    // transposed block column-major), the AVX2 GEMM packs it from G's rows as they lie,
    // and MKL takes it transposed in place (the cache's padding is zero): no transposed
    // copy, and no slabs.
    gemm_rounded(GemmOperand(g).t(), x, weight_grad, engine);
    return;
  }
  const int64_t ld_t = scratch_ld(bt);
  const int64_t slab = std::clamp<int64_t>(kSlabBytes / (ld_t * 2), 1, vocab);
  at::Tensor g_t = scratch_empty({slab, ld_t}, input.options());  // slab x BT
  zero_padding_columns(g_t, bt);  // so oneDNN takes the padded rows in place
  const int64_t ld_scaled = scratch_ld(slab);
  at::Tensor scaled = s != nullptr ? scratch_empty({bt, ld_scaled}, input.options()) : at::Tensor();
  for (int64_t v0 = 0; v0 < vocab; v0 += slab) {
    const int64_t cols = std::min(slab, vocab - v0);
    const uint16_t* src = bf16_bits(g) + v0;
    int64_t ld_src = ld_g;
    if (s != nullptr) {
      rescale_rows_bf16(src, bt, cols, ld_g, s, bf16_bits(scaled), ld_scaled);
      src = bf16_bits(scaled);
      ld_src = ld_scaled;
    }
    transpose_bf16(src, bt, cols, ld_src, bf16_bits(g_t), ld_t);
    at::Tensor out = weight_grad.narrow(0, v0, cols);
    gemm_rounded(GemmOperand(g_t.narrow(0, 0, cols).narrow(1, 0, bt)), x, out, engine);
  }
}

}  // namespace

int64_t input_grad_room_depth(int64_t bt, int64_t h, int64_t vocab) {
  if (bt <= 0 || h <= 0 || vocab <= 0) {
    return 0;
  }
  // V * H / 2 floats, less the fp32 sums, shared by a G block (BT x d) and a W block (d x H):
  // d < V / 2 always, so V must pass 512.
  const int64_t free_floats = vocab * h / 2 - bt * h;
  const int64_t depth = std::max<int64_t>(0, free_floats) / (bt + h);
  return depth >= kMinRoomDepth ? depth : 0;
}

std::string lce_cache_engine(at::ScalarType dtype) {
  if (dtype != at::kBFloat16) {
    return "";
  }
  // The forward's logits are an fp32-out product, the backward's two are rounded ones.
  return std::string("fp32_out=") + engine_name(gemm_engine(dtype, GemmKind::kFp32Out)) +
         ",rounded=" + engine_name(gemm_engine(dtype, GemmKind::kRounded));
}

void lce_chunk_logits(const at::Tensor& input_chunk, const at::Tensor& weight, at::Tensor& logits) {
  const int64_t rows = input_chunk.size(0);
  const int64_t h = input_chunk.size(1);
  const int64_t vocab = weight.size(0);
  TORCH_INTERNAL_ASSERT(weight.size(1) == h && logits.scalar_type() == at::kFloat &&
                        logits.size(0) == rows && logits.size(1) == vocab &&
                        (vocab <= 1 || logits.stride(1) == 1));
  if (input_chunk.scalar_type() == at::kFloat) {  // the options' float32 path: ATen's GEMM
    at::mm_out(logits, input_chunk, weight.t());
    return;
  }
  const GemmEngine engine = gemm_engine(input_chunk.scalar_type(), GemmKind::kFp32Out);
  // The own GEMM reads x in place; a row stride of a multiple of 2 KiB would make its
  // panels evict each other in L1 (bf16_matrix.h), so such a chunk is copied once.
  at::Tensor x = input_chunk;
  if (engine == GemmEngine::kAvx512Bf16 && (x.stride(0) * 2) % 2048 == 0) {
    x = scratch_empty({rows, scratch_ld(h)}, x.options()).narrow(1, 0, h);
    x.copy_(input_chunk);
  }
  const GemmOperand x_op(x);  // onednn and portable widen it once for every weight block
  const int64_t block = reads_half_in_place(engine)
                            ? vocab
                            : std::clamp<int64_t>(kWeightBlockBytes / std::max<int64_t>(1, h * 4), 1,
                                                  vocab);
  WideningBuffer weight_room(block * h);  // every block's fp32 copy in one (gemm.h)
  for (int64_t v0 = 0; v0 < vocab; v0 += block) {
    const int64_t cols = std::min(block, vocab - v0);
    at::Tensor l = logits.narrow(1, v0, cols);
    gemm(x_op, GemmOperand(weight.narrow(0, v0, cols), &weight_room).t(), l, false, engine);
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lce_chunk_statistics(
    const at::Tensor& input_chunk, const at::Tensor& weight, const at::Tensor& columns,
    at::Tensor& logits_buffer, bool keep_exps, const std::optional<at::Tensor>& row_scale,
    const std::optional<at::Tensor>& grad_rows) {
  checked_engine(input_chunk, GemmKind::kFp32Out);
  const int64_t rows = input_chunk.size(0);
  const int64_t vocab = weight.size(0);
  TORCH_INTERNAL_ASSERT(columns.numel() == rows && columns.scalar_type() == at::kLong &&
                        logits_buffer.scalar_type() == at::kFloat &&
                        logits_buffer.size(0) >= rows && logits_buffer.size(1) >= vocab &&
                        logits_buffer.stride(1) == 1);
  const bool write_grad = grad_rows.has_value();
  TORCH_INTERNAL_ASSERT(!write_grad || (keep_exps && row_scale.has_value() &&
                                        grad_rows->scalar_type() == at::kBFloat16 &&
                                        grad_rows->size(0) == rows && grad_rows->size(1) >= vocab &&
                                        grad_rows->stride(1) == 1 &&
                                        row_scale->scalar_type() == at::kFloat &&
                                        row_scale->numel() == rows && row_scale->is_contiguous()));
  at::Tensor logits = logits_buffer.narrow(0, 0, rows).narrow(1, 0, vocab);
  lce_chunk_logits(input_chunk, weight, logits);

  const at::TensorOptions f32 = input_chunk.options().dtype(at::kFloat);
  at::Tensor logits_max = at::empty({rows}, f32);
  at::Tensor sum_exp = at::empty({rows}, f32);
  at::Tensor predicted = at::empty({rows}, f32);
  float* m = logits_max.mutable_data_ptr<float>();
  float* s = sum_exp.mutable_data_ptr<float>();
  float* p = predicted.mutable_data_ptr<float>();
  const int64_t* column = columns.const_data_ptr<int64_t>();
  float* base = logits.mutable_data_ptr<float>();
  const int64_t ld = logits_buffer.stride(0);
  const float* scale = write_grad ? row_scale->const_data_ptr<float>() : nullptr;
  at::Tensor grad = write_grad ? *grad_rows : at::Tensor();  // written through: a view of G
  uint16_t* g = write_grad ? bf16_bits(grad) : nullptr;
  const int64_t ld_g = write_grad ? grad_rows->stride(0) : 0;
  const int64_t width = write_grad ? grad_rows->size(1) : 0;
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = base + i * ld;
      m[i] = logits_row_max(row, vocab);
      p[i] = column[i] < 0 ? 0.0f : row[column[i]] - m[i];
      s[i] = static_cast<float>(keep_exps ? logits_exp_sum_in_place(row, vocab, m[i])
                                          : logits_exp_sum(row, vocab, m[i]));
      if (write_grad) {
        // From the exps just summed, while they are in cache, on the row's own statistics
        // (the global ones on one shard).
        write_grad_row(row, vocab, /*recompute=*/false, m[i], s[i], scale[i], column[i],
                       g + i * ld_g, width);
      }
    }
  });
  return {logits_max, sum_exp, predicted};
}

void lce_write_grad_rows(const at::Tensor& logits, const at::Tensor& global_max,
                         const at::Tensor& global_sum, const at::Tensor& columns,
                         const at::Tensor& row_scale, at::Tensor& grad_rows) {
  const int64_t rows = grad_rows.size(0);
  const int64_t vocab = std::min(grad_rows.size(1), logits.size(1));
  const int64_t width = grad_rows.size(1);  // vocab and the cache's row padding
  TORCH_INTERNAL_ASSERT(grad_rows.scalar_type() == at::kBFloat16 && grad_rows.stride(1) == 1 &&
                        logits.size(0) >= rows && logits.stride(1) == 1 &&
                        global_max.numel() == rows && global_sum.numel() == rows &&
                        row_scale.numel() == rows && columns.numel() == rows &&
                        columns.scalar_type() == at::kLong);
  const float* l = logits.const_data_ptr<float>();
  const float* big_m = global_max.const_data_ptr<float>();
  const float* big_s = global_sum.const_data_ptr<float>();
  const float* scale = row_scale.const_data_ptr<float>();
  const int64_t* column = columns.const_data_ptr<int64_t>();
  uint16_t* g = bf16_bits(grad_rows);
  const int64_t ld_l = logits.stride(0);
  const int64_t ld_g = grad_rows.stride(0);
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      write_grad_row(l + i * ld_l, vocab, /*recompute=*/true, big_m[i], big_s[i], scale[i],
                     column[i], g + i * ld_g, width);
    }
  });
}

std::tuple<at::Tensor, at::Tensor> lce_cached_backward(const at::Tensor& grad_cache,
                                                       const std::optional<at::Tensor>& row_scale,
                                                       const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       bool want_input_grad, bool want_weight_grad,
                                                       int64_t keep_weight_grad_at_most) {
  const GemmEngine engine = checked_engine(input, GemmKind::kRounded);
  const int64_t bt = input.size(0);
  const int64_t vocab = weight.size(0);
  TORCH_INTERNAL_ASSERT(grad_cache.scalar_type() == at::kBFloat16 && grad_cache.dim() == 2 &&
                        grad_cache.size(0) == bt && grad_cache.size(1) >= vocab &&
                        grad_cache.stride(1) == 1);
  const at::Tensor g = grad_cache.narrow(1, 0, vocab);  // BT x V
  at::Tensor input_grad, weight_grad;

  // G' = bf16(G * scale) only where some row's scale is not 1 (mean and sum reductions
  // under loss.backward() have every scale 1: then G' is G and nothing is copied).
  at::Tensor scale;
  if (row_scale.has_value()) {
    scale = row_scale->to(at::kFloat).contiguous();
    TORCH_INTERNAL_ASSERT(scale.numel() == bt);
    if (scale.eq(1.0f).all().item<bool>()) {
      scale = at::Tensor();
    }
  }
  const float* s = scale.defined() ? scale.const_data_ptr<float>() : nullptr;

  // weight_grad is allocated first: until it is written, its storage is the room of the
  // input gradient's GEMM on `portable` (input_grad_in_room). It goes in the block the
  // forward's logits chunk used, kept for the next step once the caller drops the gradient
  // (optimizer.zero_grad()): kept_scratch.h.
  if (want_weight_grad) {
    weight_grad = kept_scratch_empty(KeptScratch::kLceLogitsOrWeightGrad, weight.sizes(),
                                     weight.options(), keep_weight_grad_at_most);  // all written
  }
  if (want_input_grad) {
    input_grad = scratch_empty(input.sizes(), input.options());  // all written
    backward_input_grad(g, s, weight, input_grad, engine, weight_grad);
  }
  if (want_weight_grad) {
    backward_weight_grad(g, s, input, weight_grad, engine);
  }
  return {input_grad, weight_grad};
}

}  // namespace cpu
}  // namespace ascend_ops

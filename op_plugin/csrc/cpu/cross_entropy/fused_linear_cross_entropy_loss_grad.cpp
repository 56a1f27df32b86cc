// CPU kernel of fused_linear_cross_entropy_loss_grad (SPEC §1).
//
// Two paths compute the same math:
//
// * bfloat16 (except high-performance mode with onednn for the rounded products): the
//   vocabulary is cut into
//   chunks of `vc` columns sized from the scratch budget (by default, so that the whole
//   working memory stays within half of the fp32 [BT, V] logits where it can), so the
//   memory-saving mode never holds [BT, V]. Per chunk c:
//     logits_c [BT, vc] = x @ W_c.T           bf16 GEMM, fp32 out (memory-saving only)
//     G_c      [BT, vc] = bf16((P_c - onehot) * grad)   one vectorised pass
//     dx_acc   [BT, H] += G_c @ W_c            fp32 accumulation across chunks
//     weight_grad[c]    = bf16(G_c.T @ x)      complete in one GEMM (K = BT)
//   then input_grad = bf16(dx_acc). The GEMMs run on the engines the GEMM layer chose
//   (gemm.h), one for the fp32-out products (logits_c, dx_acc) and one for the rounded
//   weight_grad[c]: onednn (fp32 copies of G and W_c for the fp32-out products, oneDNN's
//   bf16 kernels; weight_grad[c] by its bf16-in/bf16-out GEMM on G_c.T in place, rounded
//   once), mkl (MKL's bf16 GEMM on G_c, W_c and x in place, fp32 out; weight_grad[c] that
//   on G_c.T in place, rounded once), avx512bf16 or avx2 (the own GEMMs; for
//   weight_grad[c] G_c.T transposed once per chunk so the AVX512 one reads A row-major in
//   place and the AVX2 one packs it from rows) or portable (ATen's fp32 GEMM on fp32
//   copies, as onednn but in IEEE fp32).
// * high-performance mode with onednn for the rounded products: no chunks. G is written in bf16 over the
//   softmax (flce_g_over_softmax), and both gradient GEMMs are oneDNN's bf16-in/bf16-out
//   GEMM with K complete (V, BT), rounded once.
// * float16 (always the portable engine): rows in chunks, the layer's fp32 GEMMs on
//   widened operands.
//
// Chunk sizes depend on the shapes and the budget only, never on the thread count, and
// every element is summed in one fixed order: results are bitwise reproducible.
#include "../../target_mask.h"
#include "../../validation.h"
#include "../gemm/engines/avx512bf16/avx512_kernels.h"
#include "../gemm/bf16_matrix.h"
#include "../gemm/gemm.h"
#include "../gemm/operands/gemm_operands.h"

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace ascend_ops {
namespace {

// Chunk scratch of the float16 row path, and the most a bfloat16 call's chunks take by
// default. At (BT, H) = (4096, 4096) a memory-saving vocabulary column costs
// 4096 * (4 + 2 + 2) + 4096 * 4 = 48 KiB, so 64 MiB is 1344 columns (a multiple of the GEMM's
// 32-column panels).
constexpr int64_t kDefaultScratchBytes = 64LL << 20;
// The bfloat16 default never goes below this: a chunk narrower than a few hundred columns
// repacks x for too little GEMM work.
constexpr int64_t kMinDefaultScratchBytes = 16LL << 20;
// Kept aside for what the GEMM engines allocate for themselves per product (avx2: a packed
// 512-step B block, 2 KiB per column of the product; avx512bf16: K x 512 bytes per thread;
// oneDNN its scratchpad): 8-10 MiB at H = 4096 on 2 threads.
constexpr int64_t kGemmReserveBytes = 16LL << 20;

// The scratch budget the caller set: the `scratch_bytes` argument, else
// ASCEND_OPS_FLCE_SCRATCH_MIB; none means the path's default.
std::optional<int64_t> requested_scratch(std::optional<int64_t> scratch_bytes) {
  if (scratch_bytes.has_value()) {
    return scratch_bytes;
  }
  if (const char* mib = std::getenv("ASCEND_OPS_FLCE_SCRATCH_MIB")) {
    char* end = nullptr;
    const long long value = std::strtoll(mib, &end, 10);
    TORCH_CHECK_VALUE(end != mib && *end == '\0' && value > 0,
                      "ASCEND_OPS_FLCE_SCRATCH_MIB must be a positive integer (MiB), got '",
                      mib, "'");
    return value << 20;
  }
  return std::nullopt;
}

// Default chunk scratch of the bfloat16 path: 64 MiB, less where the call's whole working
// memory would pass half of the fp32 [BT, V] logits that chunking avoids (BT * V * 2 bytes,
// the memory-saving target): the chunks, the fp32 input-gradient accumulator (BT x H), the
// fp32 copy of x (`x_widened`: oneDNN, ATen) and the GEMM reserve. Never under 16 MiB, so
// a call whose accumulator alone passes that bound (BT x H large against V) keeps chunks
// wide enough to run at GEMM speed. Depends on the shapes only (bitwise reproducibility).
int64_t default_chunk_scratch(int64_t bt, int64_t h, int64_t vocab, bool x_widened) {
  const int64_t target = bt * vocab * 2;
  const int64_t fixed = bt * h * 4 * (x_widened ? 2 : 1) + kGemmReserveBytes;
  return std::clamp(target - fixed, kMinDefaultScratchBytes, kDefaultScratchBytes);
}

// The contiguous operands of one call.
struct FlceOperands {
  at::Tensor grad, input, weight;
  std::vector<RowTarget> targets;
  at::Tensor logits_max, sum_exp_logits;  // memory-saving mode
  at::Tensor softmax;                     // high-performance mode
  bool recompute() const { return !softmax.defined(); }
};

// High-performance mode with onednn for the rounded products: G [BT, V] is written in bf16 over the softmax
// it is computed from (the schema declares softmax writable; SPEC §1 leaves its contents
// undefined on return), dense with row stride V, so both gradient GEMMs see all of G at
// once: K = V and K = BT are complete, and oneDNN's bf16-in/bf16-out GEMM rounds each
// output once, as SPEC §1 does, with no fp32 copy of G or of the weight, no fp32
// accumulator and no scratch at all.
//
// G's row i takes the buffer's fp32 elements [iV / 2, (i + 1)V / 2), inside softmax rows
// that must have been read first. Rows are therefore done in waves [n, 2n) (n = 1, 2, 4,
// ...): a wave writes below element nV, into softmax rows [0, n) that earlier waves read,
// and reads rows [n, 2n) that no one writes yet. Row 0, which G overlays in place, is read
// from a copy. (With V odd a word holds the last bf16 of one G row and the first of the
// next: two writes to different halves, never a read of an unread softmax element.)
void flce_g_over_softmax(const FlceOperands& op, cpu::GemmEngine engine, at::Tensor& input_grad,
                         at::Tensor& weight_grad) {
  using cpu::GemmOperand;
  const int64_t bt = op.input.size(0);
  const int64_t vocab = op.weight.size(0);
  // The first BT * V bf16 elements of the fp32 [BT, V] buffer, as a dense [BT, V].
  at::Tensor g = op.softmax.view(at::kBFloat16).view({-1}).narrow(0, 0, bt * vocab).view({bt, vocab});
  const float* p = op.softmax.const_data_ptr<float>();
  uint16_t* g_bits = cpu::bf16_bits(g);
  const float* scale = op.grad.const_data_ptr<float>();
  const auto write_row = [&](const float* p_row, int64_t i) {
    const RowTarget& t = op.targets[i];
    cpu::write_logits_grad_row(p_row, vocab, /*recompute=*/false, 0.0f, 1.0f, scale[i],
                               t.masked ? -1 : t.column, g_bits + i * vocab);
  };
  const std::vector<float> first_row(p, p + vocab);
  write_row(first_row.data(), 0);
  const int64_t row_grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / vocab);
  for (int64_t n = 1; n < bt; n *= 2) {
    at::parallel_for(n, std::min(bt, 2 * n), row_grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        write_row(p + i * vocab, i);
      }
    });
  }
  const GemmOperand g_op(g);
  cpu::gemm_rounded(g_op, GemmOperand(op.weight), input_grad, engine);  // G @ W, K = V
  cpu::gemm_rounded(g_op.t(), GemmOperand(op.input), weight_grad, engine);  // G.T @ x, K = BT
}

// The bfloat16 path: vocabulary chunks (see the top).
void flce_vocab_chunks(const FlceOperands& op, std::optional<int64_t> requested,
                       cpu::GemmEngine fp32_engine, cpu::GemmEngine rounded_engine,
                       at::Tensor& input_grad, at::Tensor& weight_grad) {
  using cpu::GemmOperand;
  const int64_t bt = op.input.size(0);
  const int64_t h = op.input.size(1);
  const int64_t vocab = op.weight.size(0);
  const bool recompute = op.recompute();
  // weight_grad[c] on an own GEMM: G_c.T made row-major, fp32 out, rounded by rows. The
  // other engines take G_c.T as it lies (oneDNN and MKL in place, ATen from G_c's fp32 copy).
  const bool own_rounded = cpu::is_own_gemm(rounded_engine);
  // oneDNN and ATen multiply fp32 copies of x, G_c and the weight chunk for the fp32-out
  // products; MKL and the own GEMMs read the bf16 operands in place.
  const bool widen_fp32_out = !cpu::reads_half_in_place(fp32_engine);
  const bool portable_rounded = rounded_engine == cpu::GemmEngine::kPortable;
  const bool g_widened = widen_fp32_out || portable_rounded;

  // Scratch per vocabulary column of a chunk, for every row: its fp32 logits (memory-saving
  // mode), bf16 G, bf16 G.T (own rounded GEMM), fp32 G (where widened); plus its fp32
  // weight_grad row (own rounded GEMM; portable: the fp32 sums it rounds) and its fp32
  // weight row (widened fp32-out products). At least one 32-column panel per chunk.
  const int64_t per_column = bt * ((recompute ? 4 : 0) + 2 + (own_rounded ? 2 : 0) + (g_widened ? 4 : 0)) +
                             h * ((own_rounded || portable_rounded ? 4 : 0) + (widen_fp32_out ? 4 : 0));
  const int64_t budget =
      requested.value_or(default_chunk_scratch(bt, h, vocab, widen_fp32_out || portable_rounded));
  const int64_t panel = cpu::kNr;
  const int64_t vc = std::min(vocab, std::max(panel, budget / per_column / panel * panel));

  at::Tensor logits = recompute ? cpu::scratch_empty({bt, vc}, op.grad.options()) : at::Tensor();
  const int64_t ld_g = cpu::scratch_ld(vc);
  const int64_t ld_g_t = cpu::scratch_ld(bt);
  at::Tensor g = cpu::scratch_empty({bt, ld_g}, op.input.options());  // BT x vc, bf16
  at::Tensor g_t = own_rounded ? cpu::scratch_empty({vc, ld_g_t}, op.input.options())  // vc x BT
                            : at::Tensor();
  at::Tensor dw_chunk = own_rounded ? cpu::scratch_empty({vc, h}, op.grad.options())  // vc x H
                                 : at::Tensor();
  at::Tensor dx_acc = cpu::scratch_empty({bt, h}, op.grad.options());    // BT x H, fp32
  const GemmOperand x(op.input);  // BT x H; oneDNN and ATen widen it once, for every chunk
  if (portable_rounded) {
    // Widened now in high-performance mode too, so that every chunk's G_c.T @ x takes it
    // whole instead of widening blocks of it again (gemm_rounded).
    x.widened();
  }
  uint16_t* g_bits = cpu::bf16_bits(g);
  const float* scale = op.grad.const_data_ptr<float>();
  const float* row_max = recompute ? op.logits_max.const_data_ptr<float>() : nullptr;
  const float* sum_exp = recompute ? op.sum_exp_logits.const_data_ptr<float>() : nullptr;
  // oneDNN and MKL read G_c (fp32-out on mkl) and G_c.T (rounded on onednn or mkl) in
  // place, so g's columns past the chunk are kept zero (gemm_operands.h): [zero_from, ld_g)
  // are; a shorter last chunk zeroes a few more.
  const bool zero_g_padding = fp32_engine == cpu::GemmEngine::kMkl || !own_rounded;
  int64_t zero_from = ld_g;

  // oneDNN and ATen: the fp32 copies of each chunk's weight rows and G_c, one buffer each.
  cpu::WideningBuffer weight_room(vc * h);
  cpu::WideningBuffer g_room(bt * vc);
  for (int64_t v0 = 0; v0 < vocab; v0 += vc) {
    const int64_t cols = std::min(vc, vocab - v0);
    const GemmOperand w_chunk(op.weight.narrow(0, v0, cols), &weight_room);  // cols x H
    const float* src = nullptr;
    int64_t ld_src = 0;
    if (recompute) {
      at::Tensor l = logits.narrow(1, 0, cols);  // BT x cols, fp32
      cpu::gemm(x, w_chunk.t(), l, false, fp32_engine);  // logits_c = x @ W_c.T
      src = l.const_data_ptr<float>();
      ld_src = vc;
    } else {
      src = op.softmax.const_data_ptr<float>() + v0;
      ld_src = vocab;
    }
    const int64_t row_grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / cols);
    at::parallel_for(0, bt, row_grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const RowTarget& t = op.targets[i];
        const bool here = !t.masked && t.column >= v0 && t.column < v0 + cols;
        cpu::write_logits_grad_row(src + i * ld_src, cols, recompute, recompute ? row_max[i] : 0.0f,
                        recompute ? 1.0f / sum_exp[i] : 1.0f, scale[i], here ? t.column - v0 : -1,
                        g_bits + i * ld_g);
      }
    });
    if (zero_g_padding && cols < zero_from) {
      g.narrow(1, cols, zero_from - cols).zero_();
      zero_from = cols;
    }
    const GemmOperand g_c(g.narrow(1, 0, cols), &g_room);  // BT x cols
    cpu::gemm(g_c, w_chunk, dx_acc, v0 > 0, fp32_engine);  // dx_acc += G_c @ W_c
    if (own_rounded) {
      // weight_grad[c] = G_c.T @ x, with G_c.T made row-major first: the own GEMM reads a
      // row-major A in place but would repack a transposed one for every column tile.
      at::Tensor dw = dw_chunk.narrow(0, 0, cols);  // cols x H
      cpu::transpose_bf16(g_bits, bt, cols, ld_g, cpu::bf16_bits(g_t), ld_g_t);
      cpu::gemm(GemmOperand(g_t.narrow(0, 0, cols).narrow(1, 0, bt)), x, dw, false, rounded_engine);
      cpu::round_rows(dw.const_data_ptr<float>(), cols, h, h, cpu::bf16_bits(weight_grad) + v0 * h, h);
    } else {
      // K = BT is complete: oneDNN's bf16 GEMM rounds its fp32 sums once (SPEC §1), with no
      // fp32 copy of G_c nor fp32 result (measured 2x faster than the fp32-out product);
      // mkl rounds MKL's fp32 sums of G_c.T in place by row blocks; portable rounds ATen's
      // fp32 product of the widened G_c.T (the copy of G_c made for the GEMM above, or now)
      // and the widened x, in one product.
      at::Tensor dw = weight_grad.narrow(0, v0, cols);  // cols x H, bf16
      cpu::gemm_rounded(g_c.t(), x, dw, rounded_engine);
    }
  }
  cpu::round_rows(dx_acc.const_data_ptr<float>(), bt, h, h, cpu::bf16_bits(input_grad), h);
}

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

// float16 (always the portable engine): rows in chunks of the budget, through the GEMM
// layer's fp32 GEMMs on fp32 copies of the half operands, so it also holds an fp32 copy of
// the weight and an fp32 weight_grad accumulator.
template <typename T>
void flce_portable(const FlceOperands& op, int64_t budget, at::Tensor& input_grad,
                   at::Tensor& weight_grad) {
  using cpu::GemmOperand;
  constexpr cpu::GemmEngine engine = cpu::GemmEngine::kPortable;
  const int64_t bt = op.input.size(0);
  const int64_t h = op.input.size(1);
  const int64_t vocab = op.weight.size(0);
  const bool recompute = op.recompute();
  // Per row of a chunk: half G, fp32 logits (memory-saving), fp32 input_grad row.
  const int64_t bytes_per_row = vocab * (static_cast<int64_t>(sizeof(T)) +
                                         (recompute ? static_cast<int64_t>(sizeof(float)) : 0)) +
                                h * static_cast<int64_t>(sizeof(float));
  const int64_t chunk_rows = std::clamp<int64_t>(budget / bytes_per_row, 1, bt);

  const GemmOperand weight(op.weight);  // V x H, widened once
  const float* g_up = op.grad.const_data_ptr<float>();
  at::Tensor g_chunk = cpu::scratch_empty({chunk_rows, vocab}, op.input.options());  // rows x V
  at::Tensor logits_chunk = recompute ? cpu::scratch_empty({chunk_rows, vocab}, op.grad.options())
                                      : at::Tensor();                  // rows x V, fp32
  at::Tensor dx_chunk = cpu::scratch_empty({chunk_rows, h}, op.grad.options());  // rows x H, fp32
  at::Tensor dw_acc = cpu::scratch_empty({vocab, h}, op.grad.options());         // V x H, fp32
  T* g = g_chunk.mutable_data_ptr<T>();

  for (int64_t row0 = 0; row0 < bt; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, bt - row0);
    const GemmOperand x_c(op.input.narrow(0, row0, rows));  // rows x H
    if (recompute) {
      at::Tensor logits = logits_chunk.narrow(0, 0, rows);  // rows x V
      cpu::gemm(x_c, weight.t(), logits, false, engine);
      const float* l = logits.const_data_ptr<float>();
      const float* m = op.logits_max.const_data_ptr<float>() + row0;
      const float* s = op.sum_exp_logits.const_data_ptr<float>() + row0;
      const auto probability = [=](int64_t i, int64_t j) {
        return std::exp(l[i * vocab + j] - m[i]) / s[i];
      };
      logits_grad_chunk<T>(probability, op.targets, g_up, row0, rows, vocab, g);
    } else {
      const float* p = op.softmax.const_data_ptr<float>() + row0 * vocab;
      const auto probability = [=](int64_t i, int64_t j) { return p[i * vocab + j]; };
      logits_grad_chunk<T>(probability, op.targets, g_up, row0, rows, vocab, g);
    }
    const GemmOperand g_c(g_chunk.narrow(0, 0, rows));  // rows x V
    at::Tensor dx_c = dx_chunk.narrow(0, 0, rows);
    cpu::gemm(g_c, weight, dx_c, false, engine);           // [rows, V] @ [V, H]
    input_grad.narrow(0, row0, rows).copy_(dx_c);
    cpu::gemm(g_c.t(), x_c, dw_acc, row0 > 0, engine);     // [V, rows] @ [rows, H], over chunks
  }
  weight_grad.copy_(dw_acc);
}

std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_cpu(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max, const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, std::optional<int64_t> scratch_bytes) {
  check_fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                             label_smoothing, logits_max, sum_exp_logits,
                                             softmax, /*check_values=*/true);
  check_scratch_bytes("fused_linear_cross_entropy_loss_grad", scratch_bytes);
  const std::optional<int64_t> requested = requested_scratch(scratch_bytes);
  const int64_t bt = input.size(0);
  // Chosen before anything is allocated: a process's first call measures the engines
  // (gemm.h), whose operands would otherwise add to this call's peak.
  const at::ScalarType dtype = input.scalar_type();
  const cpu::GemmEngine fp32_engine = cpu::gemm_engine(dtype, cpu::GemmKind::kFp32Out);
  const cpu::GemmEngine rounded_engine = cpu::gemm_engine(dtype, cpu::GemmKind::kRounded);
  // Every element is written below (poisoned in tests, as scratch is).
  at::Tensor input_grad = cpu::scratch_empty(input.sizes(), input.options());
  at::Tensor weight_grad = cpu::scratch_empty(weight.sizes(), weight.options());
  if (bt == 0 || input.size(1) == 0 || weight.size(0) == 0) {
    // No rows: nothing flows back to the weight. H == 0 or V == 0: empty products.
    input_grad.zero_();
    weight_grad.zero_();
    return {input_grad, weight_grad};
  }

  FlceOperands op;
  op.grad = grad.contiguous();
  op.input = input.contiguous();
  op.weight = weight.contiguous();
  op.targets = row_targets(target_mask, masked_target, bt);
  if (softmax.has_value()) {
    op.softmax = softmax->contiguous();
  } else {
    op.logits_max = logits_max->contiguous();
    op.sum_exp_logits = sum_exp_logits->contiguous();
  }
  if (dtype == at::kHalf) {
    flce_portable<at::Half>(op, requested.value_or(kDefaultScratchBytes), input_grad, weight_grad);
  } else if (rounded_engine == cpu::GemmEngine::kOneDnn && !op.recompute()) {
    // Both products are rounded ones with K complete: no fp32-out product at all.
    flce_g_over_softmax(op, rounded_engine, input_grad, weight_grad);
  } else {
    flce_vocab_chunks(op, requested, fp32_engine, rounded_engine, input_grad, weight_grad);
  }
  return {input_grad, weight_grad};
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("fused_linear_cross_entropy_loss_grad", &fused_linear_cross_entropy_loss_grad_cpu);
}

}  // namespace ascend_ops

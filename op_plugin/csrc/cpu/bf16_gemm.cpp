#include "bf16_gemm.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE

#include <algorithm>
#include <vector>

namespace ascend_ops {
namespace cpu {
namespace {

// Cache blocking for a 32 KiB L1 / 1 MiB L2 core: a B micro-panel (kKc/2 pairs x 32
// words = 24 KiB) stays in L1, an A block (kMc x kKc bf16 = 72 KiB) in L2, a B block
// (kKc x kNc bf16 = 768 KiB) in L2/L3.
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 16 * kMr;
constexpr int64_t kNc = 4096;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
               bool accumulate) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  const int64_t max_pairs = kKc / 2;
  std::vector<uint32_t> b_block(static_cast<size_t>(ceil_div(kNc, kNr) * kNr * max_pairs));
  const int64_t row_blocks = ceil_div(m, kMc);

  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    const Bf16View b_cols{b.data + jc * b.col_stride, b.row_stride, b.col_stride};
    for (int64_t pc = 0; pc < k; pc += kKc) {
      const int64_t kc = std::min(kKc, k - pc);
      const int64_t pairs = (kc + 1) / 2;
      const int64_t b_panels = ceil_div(nc, kNr);
      // Packing is cheap: split it only when each thread gets ~32K words.
      const int64_t pack_grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / (pairs * kNr));
      at::parallel_for(0, b_panels, pack_grain, [&](int64_t begin, int64_t end) {
        const Bf16View panel{b_cols.data + begin * kNr * b.col_stride, b.row_stride, b.col_stride};
        pack_b(panel, pc, kc, std::min(nc, end * kNr) - begin * kNr,
               b_block.data() + begin * pairs * kNr);
      });
      const bool add = accumulate || pc > 0;
      // A row block is kMc x nc x kc multiply-adds: worth a thread when nc * kc is not tiny.
      const int64_t block_grain = nc * kc >= (1 << 14) ? 1 : row_blocks;
      at::parallel_for(0, row_blocks, block_grain, [&](int64_t begin, int64_t end) {
        std::vector<uint32_t> a_block(static_cast<size_t>(kMc * max_pairs));
        for (int64_t block = begin; block < end; ++block) {
          const int64_t ic = block * kMc;
          const int64_t mc = std::min(kMc, m - ic);
          const Bf16View rows{a.data + ic * a.row_stride, a.row_stride, a.col_stride};
          pack_a(rows, mc, pc, kc, a_block.data());
          gemm_packed(mc, nc, pairs, a_block.data(), b_block.data(), c + ic * ldc + jc, ldc, add);
        }
      });
    }
  }
}

}  // namespace cpu
}  // namespace ascend_ops

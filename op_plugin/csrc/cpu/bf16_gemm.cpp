#include "bf16_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace ascend_ops {
namespace cpu {
namespace {

// C is cut into column tiles of kTileCols, each computed over all rows and the whole K
// by one thread, with no synchronisation between threads. Per K block of kKc the thread
// packs its B block once (kKc x kTileCols bf16 = 128 KiB, kept in L2) and runs every
// row panel of A against it. A row-major A is read in place (its 12-row x 256-K panel,
// 6 KiB, stays in L1 across the tile's B panels); any other A is packed per K block.
constexpr int64_t kKc = 2 * kMaxPairs;
constexpr int64_t kTileCols = 256;

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
  // A row-major A with an even row stride can be read as bf16 pairs in place.
  const bool a_in_place = a.col_stride == 1 && a.row_stride % 2 == 0 &&
                          reinterpret_cast<uintptr_t>(a.data) % alignof(uint32_t) == 0;
  const int64_t col_tiles = ceil_div(n, kTileCols);
  // Tiny products stay on the calling thread.
  const int64_t grain = m * n * k >= (1LL << 22) ? 1 : col_tiles;
  at::parallel_for(0, col_tiles, grain, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> b_block(static_cast<size_t>(kTileCols * kMaxPairs));
    std::vector<uint32_t> a_block;
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t j0 = tile * kTileCols;
      const int64_t cols = std::min(kTileCols, n - j0);
      const Bf16View b_cols{b.data + j0 * b.col_stride, b.row_stride, b.col_stride};
      for (int64_t pc = 0; pc < k; pc += kKc) {
        const int64_t kc = std::min(kKc, k - pc);
        const int64_t pairs = (kc + 1) / 2;
        pack_b(b_cols, pc, kc, cols, b_block.data());
        const bool add = accumulate || pc > 0;
        if (a_in_place && kc % 2 == 0) {
          const auto* words = reinterpret_cast<const uint32_t*>(a.data + pc);
          gemm_packed(m, cols, pairs, words, a.row_stride / 2, b_block.data(), c + j0, ldc, add);
        } else {
          a_block.resize(static_cast<size_t>(ceil_div(m, kMr) * kMr * pairs));
          pack_a(a, m, pc, kc, a_block.data());
          gemm_packed(m, cols, pairs, a_block.data(), 0, b_block.data(), c + j0, ldc, add);
        }
      }
    }
  });
}

}  // namespace cpu
}  // namespace ascend_ops

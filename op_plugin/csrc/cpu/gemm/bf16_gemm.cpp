#include "bf16_gemm.h"

#include "bf16_matrix.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace ascend_ops {
namespace cpu {
namespace {

// C is cut into column tiles of kTileCols, each computed over all rows and the whole K
// by one thread, with no synchronisation between threads. The thread packs its B tile
// for the whole K once (K x kTileCols bf16: 2 MiB at K = 4096, in L2/L3), then walks
// the rows in chunks of kRowChunk: a chunk's C (192 x 256 fp32 = 192 KiB) stays in L2
// through every K block, and each 12-row A panel (12 x kKc bf16 = 24 KiB, read in place
// when A is row-major) stays in L1 across the tile's B panels.
constexpr int64_t kKc = 2 * kMaxPairs;
constexpr int64_t kTileCols = 256;
constexpr int64_t kRowChunk = 16 * kMr;

// All threads' packed B tiles together (K x kTileCols bf16 each) stay under this: a longer
// K is multiplied in passes of whole K blocks, each added into C. That gives the same sums
// in the same order as one pass (each K block's partial sums are added into C in turn).
constexpr int64_t kPackedBytes = 64LL << 20;
// fp32 sums of a block of rows for bf16_gemm_rounded when K takes several passes.
constexpr int64_t kRoundedBlockBytes = 16LL << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t k_per_pass() {
  const int64_t bytes_per_k = kTileCols * 2 * std::max(1, at::get_num_threads());
  return std::max<int64_t>(kKc, kPackedBytes / bytes_per_k / kKc * kKc);
}

// Where the sums go: an fp32 C (added to when `accumulate`), or, when `rounded` is set,
// bf16 rows rounded from a per-thread fp32 row chunk.
struct GemmOutput {
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  uint16_t* rounded = nullptr;
  int64_t ld_rounded = 0;
};

void gemm_blocks(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, const GemmOutput& out) {
  const bool accumulate = out.accumulate;
  // A row-major A with an even row stride can be read as bf16 pairs in place.
  const bool a_in_place = a.col_stride == 1 && a.row_stride % 2 == 0 &&
                          reinterpret_cast<uintptr_t>(a.data) % alignof(uint32_t) == 0;
  const int64_t col_tiles = ceil_div(n, kTileCols);
  // Tiny products stay on the calling thread.
  const int64_t grain = m * n * k >= (1LL << 22) ? 1 : col_tiles;
  const int64_t k_blocks = ceil_div(k, kKc);
  at::parallel_for(0, col_tiles, grain, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> b_tile(static_cast<size_t>(k_blocks * kTileCols * kMaxPairs));
    std::vector<uint32_t> a_block;
    std::vector<float> c_local(out.rounded != nullptr ? kRowChunk * kTileCols : 0);
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t j0 = tile * kTileCols;
      const int64_t cols = std::min(kTileCols, n - j0);
      const Bf16View b_cols{b.data + j0 * b.col_stride, b.row_stride, b.col_stride};
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const int64_t pc = kb * kKc;
        pack_b(b_cols, pc, std::min(kKc, k - pc), cols, b_tile.data() + kb * kTileCols * kMaxPairs);
      }
      for (int64_t i0 = 0; i0 < m; i0 += kRowChunk) {
        const int64_t rows = std::min(kRowChunk, m - i0);
        const Bf16View a_rows{a.data + i0 * a.row_stride, a.row_stride, a.col_stride};
        float* c_chunk = out.rounded != nullptr ? c_local.data() : out.c + i0 * out.ldc + j0;
        const int64_t ldc = out.rounded != nullptr ? kTileCols : out.ldc;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t pc = kb * kKc;
          const int64_t kc = std::min(kKc, k - pc);
          const int64_t pairs = (kc + 1) / 2;
          const uint32_t* b_block = b_tile.data() + kb * kTileCols * kMaxPairs;
          const bool add = accumulate || kb > 0;
          if (a_in_place && kc % 2 == 0) {
            const auto* words = reinterpret_cast<const uint32_t*>(a_rows.data + pc);
            gemm_packed(rows, cols, pairs, words, a.row_stride / 2, b_block, c_chunk, ldc, add);
          } else {
            a_block.resize(static_cast<size_t>(ceil_div(rows, kMr) * kMr * pairs));
            pack_a(a_rows, rows, pc, kc, a_block.data());
            gemm_packed(rows, cols, pairs, a_block.data(), 0, b_block, c_chunk, ldc, add);
          }
        }
        if (out.rounded != nullptr) {
          for (int64_t r = 0; r < rows; ++r) {
            round_to_bf16(c_chunk + r * ldc, cols, out.rounded + (i0 + r) * out.ld_rounded + j0);
          }
        }
      }
    }
  });
}

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
  const int64_t pass = k_per_pass();
  for (int64_t k0 = 0; k0 < k; k0 += pass) {
    const Bf16View a_k{a.data + k0 * a.col_stride, a.row_stride, a.col_stride};
    const Bf16View b_k{b.data + k0 * b.row_stride, b.row_stride, b.col_stride};
    gemm_blocks(a_k, b_k, m, n, std::min(pass, k - k0),
                GemmOutput{c, ldc, accumulate || k0 > 0, nullptr, 0});
  }
}

void bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                       int64_t ld_out) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill_n(out + i * ld_out, n, uint16_t{0});
    return;
  }
  if (k <= k_per_pass()) {
    gemm_blocks(a, b, m, n, k, GemmOutput{nullptr, 0, false, out, ld_out});
    return;
  }
  // Several passes: each block of rows summed in fp32 over all of them, then rounded.
  const int64_t block_rows = std::clamp<int64_t>(kRoundedBlockBytes / (n * 4), 1, m);
  std::vector<float> block(static_cast<size_t>(block_rows * n));
  for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
    const int64_t rows = std::min(block_rows, m - r0);
    bf16_gemm(Bf16View{a.data + r0 * a.row_stride, a.row_stride, a.col_stride}, b, rows, n, k,
              block.data(), n, false);
    round_rows(block.data(), rows, n, n, out + r0 * ld_out, ld_out);
  }
}

}  // namespace cpu
}  // namespace ascend_ops

#include "avx2_gemm.h"

#include "avx2_gemm_kernels.h"
#include "bf16_matrix.h"
#include "gemm_operands.h"

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>

namespace ascend_ops {
namespace cpu {
namespace {

using avx2::kAvx2Mr;
using avx2::kAvx2Nr;

// Blocking: a K block of 512 steps, rows in blocks of 192 (the packed A block, 384 KiB,
// stays in a core's 512 KiB L2 on AMD EPYC Zen), each thread's columns in tiles of at most
// 4096 (the packed B block, up to 8 MiB, in L3). Each row block streams the whole B block
// past its A block, so 192 rows read B from L3 half as often as 96 did: on an AMD EPYC
// (Zen, AVX2 only, 2 threads) the training step's three products at (4096, 4096, 16000)
// took 0.97-0.98x the time of 96-row blocks (medians of 5-7 interleaved runs, a standalone
// harness over these kernels; 240 rows alike, 384 with K blocks of 256 slower).
constexpr int64_t kKc = 512;
constexpr int64_t kMc = 32 * kAvx2Mr;
// Rows a thread's part holds at least where the columns are too few to share out: the
// block height before it grew, so small products split between threads as they did.
constexpr int64_t kMinPartRows = 16 * kAvx2Mr;
constexpr int64_t kMaxTileCols = 4096;
// fp32 sums of a block of rows for avx2_bf16_gemm_rounded.
constexpr int64_t kRoundedBlockBytes = 16LL << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void avx2_bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c,
                    int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  // Work items: column tiles (one per thread where n allows), and, where there are fewer
  // tiles than threads, row parts too. Tiny products stay on the calling thread.
  const int64_t threads = m * n * k >= (1LL << 22) ? std::max(1, at::get_num_threads()) : 1;
  // Each thread's columns in equal tiles of at most kMaxTileCols: 16000 columns on two
  // threads are 4 tiles of 4000, not 3 of 4096 and one of 3712 (one thread 5 % idle).
  const int64_t thread_cols = ceil_div(n, threads);
  const int64_t tiles_per_thread = ceil_div(thread_cols, kMaxTileCols);
  const int64_t tile_cols = ceil_div(ceil_div(thread_cols, tiles_per_thread), kAvx2Nr) * kAvx2Nr;
  const int64_t col_tiles = ceil_div(n, tile_cols);
  const int64_t row_parts = std::min(ceil_div(threads, col_tiles), ceil_div(m, kMinPartRows));
  const int64_t part_rows = ceil_div(ceil_div(m, row_parts), kAvx2Mr) * kAvx2Mr;
  const int64_t depth = std::min(kKc, k);
  at::parallel_for(0, col_tiles * row_parts, 1, [&](int64_t begin, int64_t end) {
    // Uninitialised: every panel is packed before it is read.
    std::unique_ptr<float[]> b_block(new float[depth * tile_cols]);
    std::unique_ptr<float[]> a_block(new float[kMc * depth + avx2::kPackSlack]);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t j0 = (item / row_parts) * tile_cols;
      const int64_t cols = std::min(tile_cols, n - j0);
      const int64_t r_begin = (item % row_parts) * part_rows;
      const int64_t r_end = std::min(m, r_begin + part_rows);
      const Bf16View b_cols{b.data + j0 * b.col_stride, b.row_stride, b.col_stride};
      for (int64_t pc = 0; pc < k; pc += kKc) {
        const int64_t kc = std::min(kKc, k - pc);
        avx2::pack_b(b_cols, pc, kc, cols, b_block.get());
        for (int64_t i0 = r_begin; i0 < r_end; i0 += kMc) {
          const int64_t rows = std::min(kMc, r_end - i0);
          const Bf16View a_rows{a.data + i0 * a.row_stride, a.row_stride, a.col_stride};
          avx2::pack_a(a_rows, rows, pc, kc, a_block.get());
          avx2::gemm_packed(rows, cols, kc, a_block.get(), b_block.get(), c + i0 * ldc + j0,
                            ldc, accumulate || pc > 0);
        }
      }
    }
  });
}

void avx2_bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                            uint16_t* out, int64_t ld_out) {
  if (m == 0 || n == 0) {
    return;
  }
  const int64_t block_rows = std::clamp<int64_t>(kRoundedBlockBytes / (n * 4), 1, m);
  at::Tensor block = scratch_empty({block_rows, n}, at::TensorOptions().dtype(at::kFloat));
  float* sums = block.mutable_data_ptr<float>();
  for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
    const int64_t rows = std::min(block_rows, m - r0);
    avx2_bf16_gemm(Bf16View{a.data + r0 * a.row_stride, a.row_stride, a.col_stride}, b, rows, n,
                   k, sums, n, false);
    round_rows(sums, rows, n, n, out + r0 * ld_out, ld_out);
  }
}

}  // namespace cpu
}  // namespace ascend_ops

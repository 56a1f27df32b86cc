#include "avx2_gemm.h"

#include "avx2_gemm_kernels.h"
#include "../../bf16_matrix.h"
#include "../../cpu_caches.h"
#include "../../operands/gemm_operands.h"

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>

namespace ascend_ops {
namespace cpu {
namespace {

using avx2::kAvx2Mr;
using avx2::kAvx2Nr;

// Blocking, from the CPU's cache sizes (cpu_caches.h): a K block of kc steps, whose B
// micro-panel (kc x 16 fp32) fills L1; rows in blocks of mc, whose packed A block (mc x kc
// fp32) takes 3/8 of L2 (a core's other hardware thread runs a block of its own); each
// thread's columns in tiles of at most max_tile_cols, whose packed B block (kc x cols fp32)
// takes at most L3 / 2 shared out between the threads. On AMD EPYC Zen 4 (32 KiB, 1 MiB,
// 32 MiB, 2 threads): 512, 192, 4096, the constants measured best there before they were
// derived (each row block streams the whole B block past its A block, so 192 rows read B
// from L3 half as often as 96 did: the training step's three products at (4096, 4096,
// 16000) took 0.97-0.98x the time of 96-row blocks; 240 rows alike, 384 with K blocks of
// 256 slower).
struct Avx2Blocking {
  int64_t kc;
  int64_t mc;
  int64_t max_tile_cols;
};

Avx2Blocking avx2_blocking(int64_t threads) {
  const CpuCaches& caches = cpu_caches();
  const int64_t kc = std::clamp<int64_t>(caches.l1d / (kAvx2Nr * 4) / 64 * 64, 128, 2048);
  const int64_t mc = std::clamp<int64_t>(caches.l2 * 3 / 8 / (kc * 4) / kAvx2Mr * kAvx2Mr, kAvx2Mr, 1536);
  const int64_t l3 = caches.l3 > 0 ? caches.l3 : caches.l2 * 4;
  const int64_t cols = l3 / 2 / std::max<int64_t>(1, threads) / (kc * 4) / kAvx2Nr * kAvx2Nr;
  return {kc, mc, std::max<int64_t>(kAvx2Nr, cols)};
}

// Rows a thread's part holds at least where the columns are too few to share out.
constexpr int64_t kMinPartRows = 16 * kAvx2Mr;
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
  // K blocks depend on L1 only (never on the thread count): the same sums in the same order.
  const Avx2Blocking blocking = avx2_blocking(std::max(1, at::get_num_threads()));
  const int64_t k_block = blocking.kc;
  const int64_t m_block = blocking.mc;
  const int64_t max_tile_cols = blocking.max_tile_cols;
  // Each thread's columns in equal tiles of at most max_tile_cols: 16000 columns on two
  // threads are 4 tiles of 4000, not 3 of 4096 and one of 3712 (one thread 5 % idle).
  const int64_t thread_cols = ceil_div(n, threads);
  const int64_t tiles_per_thread = ceil_div(thread_cols, max_tile_cols);
  const int64_t tile_cols = ceil_div(ceil_div(thread_cols, tiles_per_thread), kAvx2Nr) * kAvx2Nr;
  const int64_t col_tiles = ceil_div(n, tile_cols);
  const int64_t row_parts = std::min(ceil_div(threads, col_tiles), ceil_div(m, kMinPartRows));
  const int64_t part_rows = ceil_div(ceil_div(m, row_parts), kAvx2Mr) * kAvx2Mr;
  const int64_t depth = std::min(k_block, k);
  at::parallel_for(0, col_tiles * row_parts, 1, [&](int64_t begin, int64_t end) {
    // Uninitialised: every panel is packed before it is read.
    std::unique_ptr<float[]> b_block(new float[depth * tile_cols]);
    std::unique_ptr<float[]> a_block(new float[m_block * depth + avx2::kPackSlack]);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t j0 = (item / row_parts) * tile_cols;
      const int64_t cols = std::min(tile_cols, n - j0);
      const int64_t r_begin = (item % row_parts) * part_rows;
      const int64_t r_end = std::min(m, r_begin + part_rows);
      const Bf16View b_cols{b.data + j0 * b.col_stride, b.row_stride, b.col_stride};
      for (int64_t pc = 0; pc < k; pc += k_block) {
        const int64_t kc = std::min(k_block, k - pc);
        avx2::pack_b(b_cols, pc, kc, cols, b_block.get());
        for (int64_t i0 = r_begin; i0 < r_end; i0 += m_block) {
          const int64_t rows = std::min(m_block, r_end - i0);
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

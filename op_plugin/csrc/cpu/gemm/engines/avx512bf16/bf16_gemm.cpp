#include "bf16_gemm.h"

#include "../amx/amx_kernels.h"
#include "../../bf16_matrix.h"
#include "../../cpu_caches.h"
#include "../../operands/gemm_operands.h"
#include "../../operands/packing_buffers.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

namespace ascend_ops {
namespace cpu {
namespace {

// A BLIS-style loop nest around the 12 x 32 VDPBF16PS micro-kernel (avx512_kernels.h):
//
//   per thread, its columns in panels of nc:           B panel kc x nc packed   (L3)
//     per K block of kc:
//       per block of mc rows:                          A block mc x kc packed   (L2)
//         per 12-row A panel:                          kMr x kc                 (L1)
//           per 32-column B panel: micro-kernel, C tile 12 x 32 in registers for all kc
//
// Measured on AMD EPYC Zen 4 (2 vCPUs sharing one core; standalone harness, one thread,
// medians of interleaved runs against a VDPBF16PS register-only loop): a nest with a 12-row
// A panel read in place, 256-column B tiles packed for the whole K and 192-row chunks ran the
// step's products at 0.60-0.66 of that peak; with both operands packed, the K block 1024 to
// 2048 deep and mc ~100 rows, 0.87-0.92 (kc 512: 0.86; mc 192: 0.82-0.86, the A blocks of
// the two hardware threads then overflow the shared L2; nc 256 against 1024: 0.89 against
// 0.91, each A block being packed once per B panel).
constexpr int64_t kMaxKc = 4096;
constexpr int64_t kMaxMc = 1536;
// A thread's part of the columns is at least this wide where the rows can be shared out
// instead: each part packs every A block once per B panel.
constexpr int64_t kMinPartCols = 256;
// fp32 sums of a block of rows for bf16_gemm_rounded's row-block path.
constexpr int64_t kRoundedBlockBytes = 16LL << 20;
// bf16_gemm_rounded's column-tile path: at most this many tiles (each packs all of A).
constexpr int64_t kMaxRoundedTiles = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_down(int64_t a, int64_t b) { return a / b * b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// What the loop nests below multiply with: the AVX512-BF16 micro-kernel on pair-major A
// panels of kMr rows, or AMX tiles on row-major A panels of kAmxPanelRows rows, whose K
// blocks are whole tiles deep (the last one zero-padded).
struct PanelKernel {
  bool amx;  // AMX tiles: amx_gemm_on's loop nest, which calls amx_gemm_packed itself
  int64_t panel_rows;
  int64_t pair_align;  // every K block's packed pairs are a multiple of this
  int64_t kc;          // the deepest K block
  int64_t mc;          // the rows of a packed A block
  void (*pack_a)(Bf16View a, int64_t rows, int64_t k0, int64_t depth, int64_t pairs, uint32_t* out);
  // gemm_packed's contract, for the AVX512-BF16 nests (null on AMX).
  void (*multiply)(int64_t rows, int64_t cols, int64_t pairs, const uint32_t* a, const uint32_t* b,
                   float* c, int64_t ldc, bool accumulate);
};

void pack_a_panels(Bf16View a, int64_t rows, int64_t k0, int64_t depth, int64_t /*pairs*/,
                   uint32_t* out) {
  pack_a(a, rows, k0, depth, out);
}

void pack_a_tiles(Bf16View a, int64_t rows, int64_t k0, int64_t depth, int64_t pairs, uint32_t* out) {
  pack_a_rows(a, rows, k0, depth, kAmxPanelRows, pairs, out);
}

PanelKernel avx512_kernel() {
  const Bf16GemmBlocking blocking = bf16_gemm_blocking(1);
  return {false, kMr, 1, blocking.kc, blocking.mc, pack_a_panels, gemm_packed};
}

// AMX: the micro-kernel keeps a B panel (kNr columns x kc) in L1 while the A block's 32-row
// panels stream past it from L2, so kc is what fits 2/3 of L1, and the A block an eighth of
// L2 (amx_gemm_on keeps the block's running sums, mc x nc fp32, in a quarter of it). Measured
// on an Intel Xeon with AMX (L1d 48 KiB, L2 2 MiB; 2 threads, medians of 15, the step's three
// product shapes at 683 rows): kc 512 with mc 256 and nc 512 ran 1.44-1.50 TFLOP/s; mc 128
// with nc 1024, 1.27-1.43; kc 256, 0.73-1.66.
PanelKernel amx_kernel() {
  const CpuCaches& caches = cpu_caches();
  const int64_t kc = std::clamp<int64_t>(round_down(caches.l1d * 2 / 3 / (kNr * 2), 2 * kAmxTilePairs),
                                         2 * kAmxTilePairs * 4, kMaxKc);
  const int64_t mc = std::clamp<int64_t>(round_down(caches.l2 / 8 / (kc * 2), kAmxPanelRows),
                                         kAmxPanelRows, kMaxMc);
  return {true, kAmxPanelRows, kAmxTilePairs, kc, mc, pack_a_tiles, nullptr};
}

// The K blocks: as deep as the kernel's kc allows, of equal depth that fills whole packed
// pairs (the last one takes the rest). Depends on k and the caches only.
int64_t k_block_depth(const PanelKernel& kernel, int64_t k) {
  return round_up(ceil_div(k, ceil_div(k, kernel.kc)), 2 * kernel.pair_align);
}

// The packed pairs of a K block `depth` deep.
int64_t packed_pairs(const PanelKernel& kernel, int64_t depth) {
  return round_up((depth + 1) / 2, kernel.pair_align);
}

// pack_b with each panel `pairs` pairs long, zero past the block's own pairs (AMX's last K
// block).
void pack_b_padded(Bf16View b, int64_t k0, int64_t depth, int64_t cols, int64_t pairs, uint32_t* out) {
  const int64_t own_pairs = (depth + 1) / 2;
  if (own_pairs == pairs) {
    pack_b(b, k0, depth, cols, out);
    return;
  }
  for (int64_t j = 0; j < cols; j += kNr) {
    uint32_t* panel = out + (j / kNr) * pairs * kNr;
    pack_b(Bf16View{b.data + j * b.col_stride, b.row_stride, b.col_stride}, k0, depth,
           std::min(kNr, cols - j), panel);
    std::fill(panel + own_pairs * kNr, panel + pairs * kNr, 0u);
  }
}

void bf16_gemm_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                  float* c, int64_t ldc, bool accumulate);
void amx_gemm_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                 float* c, int64_t ldc, bool accumulate);
void bf16_gemm_rounded_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n,
                          int64_t k, uint16_t* out, int64_t ld_out);

}  // namespace

Bf16GemmBlocking bf16_gemm_blocking(int threads) {
  const CpuCaches& caches = cpu_caches();
  const int64_t kc = std::clamp<int64_t>(round_down(caches.l1d * 3 / 4 / (kMr * 2), 64), 128, kMaxKc);
  // mc: whole cache lines of a column-major A's rows where it can (96 bf16 = 3 lines, a
  // multiple of kMr), else whole panels.
  const int64_t rows = caches.l2 / 4 / (kc * 2);
  const int64_t mc = std::clamp<int64_t>(rows >= 96 ? round_down(rows, 96) : round_down(rows, kMr), kMr, kMaxMc);
  const int64_t l3 = caches.l3 > 0 ? caches.l3 : caches.l2 * 4;
  const int64_t b_panel = std::max<int64_t>(kc * 2 * kNr, l3 / 2 / std::max(1, threads));
  return {kc, mc, b_panel, l3 / 4};
}

void bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
               bool accumulate) {
  bf16_gemm_on(avx512_kernel(), a, b, m, n, k, c, ldc, accumulate);
}

void amx_bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
                   bool accumulate) {
  bf16_gemm_on(amx_kernel(), a, b, m, n, k, c, ldc, accumulate);
}

void bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                       int64_t ld_out) {
  bf16_gemm_rounded_on(avx512_kernel(), a, b, m, n, k, out, ld_out);
}

void amx_bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                           int64_t ld_out) {
  bf16_gemm_rounded_on(amx_kernel(), a, b, m, n, k, out, ld_out);
}

namespace {

// How the threads share out a product: col_parts x row_parts work items of part_cols x
// part_rows, each in B panels of nc columns and A blocks of mc rows.
struct WorkSplit {
  int64_t col_parts, row_parts, part_cols, part_rows, nc, mc;
};

// `b_col_bytes`: the packed bytes of one column of a B panel (one K block, or all of K).
WorkSplit split_work(const PanelKernel& kernel, int64_t m, int64_t n, int64_t threads,
                     int64_t b_col_bytes) {
  const Bf16GemmBlocking blocking = bf16_gemm_blocking(static_cast<int>(threads));
  // Work items: the threads split the columns or the rows, whichever packs less per thread.
  // A column part packs all of A once per B panel and its share of B; a row part packs its
  // share of A once per B panel and all of B. At (BT, H, V) = (4096, 4096, 16000) the logits
  // (683 x 16000 x 4096 per chunk) split columns, weight_grad (16000 x 4096 x 4096) rows.
  const int64_t nc_max = std::max<int64_t>(kNr, round_down(blocking.b_panel_bytes / b_col_bytes, kNr));
  const auto packed_per_thread = [&](int64_t cols, int64_t rows) {
    return static_cast<double>(rows) * ceil_div(cols, nc_max) + static_cast<double>(cols);
  };
  const int64_t max_col_parts = std::clamp<int64_t>(n / kMinPartCols, 1, threads);
  const int64_t max_row_parts = std::clamp<int64_t>(ceil_div(m, kernel.mc), 1, threads);
  const bool split_rows = max_row_parts == threads &&
                          packed_per_thread(n, ceil_div(m, threads)) <
                              packed_per_thread(ceil_div(n, max_col_parts), m);
  WorkSplit split;
  split.col_parts = split_rows ? 1 : max_col_parts;
  split.part_cols = round_up(ceil_div(n, split.col_parts), kNr);
  split.row_parts =
      split_rows ? threads : std::min(ceil_div(threads, split.col_parts), ceil_div(m, kernel.mc));
  split.part_rows = round_up(ceil_div(m, split.row_parts), kernel.panel_rows);
  // Each part's columns in equal B panels of at most b_panel_bytes.
  split.nc = round_up(ceil_div(split.part_cols, ceil_div(split.part_cols, nc_max)), kNr);
  split.mc = std::min(kernel.mc, split.part_rows);
  return split;
}

void bf16_gemm_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                  float* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  if (kernel.amx) {
    amx_gemm_on(kernel, a, b, m, n, k, c, ldc, accumulate);
    return;
  }
  // Tiny products stay on the calling thread.
  const int64_t threads = m * n * k >= (1LL << 22) ? std::max(1, at::get_num_threads()) : 1;
  const int64_t kc = k_block_depth(kernel, k);
  const int64_t pairs_max = packed_pairs(kernel, std::min(kc, k));
  const WorkSplit split = split_work(kernel, m, n, threads, pairs_max * 4);
  const int64_t col_parts = split.col_parts, row_parts = split.row_parts;
  const int64_t part_cols = split.part_cols, part_rows = split.part_rows;
  const int64_t nc = split.nc, mc = split.mc;
  at::parallel_for(0, col_parts * row_parts, 1, [&](int64_t begin, int64_t end) {
    // Kept by the thread between calls (packing_buffers.h); every panel is packed before it
    // is read.
    const PackingWords b_words(PackingBuffer::kBPanel, nc * pairs_max);
    const PackingWords a_words(PackingBuffer::kABlock, round_up(mc, kernel.panel_rows) * pairs_max);
    uint32_t* const b_panel = b_words.data();
    uint32_t* const a_block = a_words.data();
    for (int64_t item = begin; item < end; ++item) {
      const int64_t col0 = (item / row_parts) * part_cols;
      const int64_t col1 = std::min(n, col0 + part_cols);
      const int64_t row0 = (item % row_parts) * part_rows;
      const int64_t row1 = std::min(m, row0 + part_rows);
      for (int64_t jc = col0; jc < col1; jc += nc) {
        const int64_t cols = std::min(nc, col1 - jc);
        const Bf16View b_cols{b.data + jc * b.col_stride, b.row_stride, b.col_stride};
        for (int64_t pc = 0; pc < k; pc += kc) {
          const int64_t depth = std::min(kc, k - pc);
          const int64_t pairs = packed_pairs(kernel, depth);
          pack_b_padded(b_cols, pc, depth, cols, pairs, b_panel);
          for (int64_t ic = row0; ic < row1; ic += mc) {
            const int64_t rows = std::min(mc, row1 - ic);
            kernel.pack_a(Bf16View{a.data + ic * a.row_stride, a.row_stride, a.col_stride}, rows, pc,
                          depth, pairs, a_block);
            kernel.multiply(rows, cols, pairs, a_block, b_panel, c + ic * ldc + jc, ldc,
                            accumulate || pc > 0);
          }
        }
      }
    }
  });
}

// bf16_gemm_on's loop nest on AMX, with K inside the A blocks: B is packed for all of K per
// panel of nc columns, and each A block takes every K block in turn, its running sums kept in
// per-thread blocked scratch (kAmxBlockedSums) from one K block to the next; the first K block
// starts from C (accumulate) or zero and the last one stores into C. The same sums in the same
// order as K blocks outside: only where they wait between K blocks differs.
void amx_gemm_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                 float* c, int64_t ldc, bool accumulate) {
  const int64_t threads = m * n * k >= (1LL << 22) ? std::max(1, at::get_num_threads()) : 1;
  const int64_t kc = k_block_depth(kernel, k);
  const int64_t k_blocks = ceil_div(k, kc);
  const int64_t pairs_full = packed_pairs(kernel, std::min(kc, k));
  const int64_t pairs_all = (k_blocks - 1) * pairs_full + packed_pairs(kernel, k - (k_blocks - 1) * kc);
  WorkSplit split = split_work(kernel, m, n, threads, pairs_all * 4);
  const int64_t mc = split.mc;
  // The running sums of an A block (mc x nc fp32) stay within a quarter of L2 between K blocks,
  // or within L2 where A is packed by transposition (G.T: a column-major A), whose packing,
  // repeated for every B panel, costs more than sums that spill. Measured on an Intel Xeon
  // with AMX (2 threads, (4096, 4096, 16000), mc 256): nc 512 / 1024 / 2048 / 4096 ran
  // G @ W (row-major A) at 1.54 / 1.26 / 1.11 / 1.15 TFLOP/s and G.T @ x at 1.03 / 1.17 /
  // 1.41 / 1.36; the logits (row-major A) 1.30-1.40 at any of them.
  const bool transposing_pack = a.row_stride == 1 && a.col_stride != 1;
  const int64_t sums_bytes = cpu_caches().l2 / (transposing_pack ? 1 : 4);
  const int64_t nc_cap =
      std::max<int64_t>(kNr, round_down(sums_bytes / (round_up(mc, kAmxPanelRows) * 4), kNr));
  split.nc = std::min(split.nc, round_up(ceil_div(split.part_cols, ceil_div(split.part_cols, nc_cap)), kNr));
  at::parallel_for(0, split.col_parts * split.row_parts, 1, [&](int64_t begin, int64_t end) {
    // Kept by the thread between calls (packing_buffers.h); all written before they are read.
    const PackingWords b_words(PackingBuffer::kBPanel, split.nc * pairs_all);
    const PackingWords a_words(PackingBuffer::kABlock, round_up(mc, kernel.panel_rows) * pairs_full);
    const PackingWords sums_words(PackingBuffer::kSums,
                                  k_blocks > 1 ? round_up(mc, kAmxPanelRows) * split.nc : 0);
    uint32_t* const b_panel = b_words.data();
    uint32_t* const a_block = a_words.data();
    float* const sums = reinterpret_cast<float*>(sums_words.data());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t col0 = (item / split.row_parts) * split.part_cols;
      const int64_t col1 = std::min(n, col0 + split.part_cols);
      const int64_t row0 = (item % split.row_parts) * split.part_rows;
      const int64_t row1 = std::min(m, row0 + split.part_rows);
      for (int64_t jc = col0; jc < col1; jc += split.nc) {
        const int64_t cols = std::min(split.nc, col1 - jc);
        const Bf16View b_cols{b.data + jc * b.col_stride, b.row_stride, b.col_stride};
        // K block kb of the panel at b_panel + cols_padded * kb * pairs_full.
        const int64_t cols_padded = round_up(cols, kNr);
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t depth = std::min(kc, k - kb * kc);
          pack_b_padded(b_cols, kb * kc, depth, cols, packed_pairs(kernel, depth),
                        b_panel + cols_padded * kb * pairs_full);
        }
        for (int64_t ic = row0; ic < row1; ic += mc) {
          const int64_t rows = std::min(mc, row1 - ic);
          float* const c_block = c + ic * ldc + jc;
          for (int64_t kb = 0; kb < k_blocks; ++kb) {
            const int64_t depth = std::min(kc, k - kb * kc);
            const int64_t pairs = packed_pairs(kernel, depth);
            kernel.pack_a(Bf16View{a.data + ic * a.row_stride, a.row_stride, a.col_stride}, rows,
                          kb * kc, depth, pairs, a_block);
            const bool first = kb == 0;
            const bool last = kb == k_blocks - 1;
            amx_gemm_packed(rows, cols, pairs, a_block, b_panel + cols_padded * kb * pairs_full,
                            first ? (accumulate ? c_block : nullptr) : sums,
                            first ? ldc : kAmxBlockedSums, last ? c_block : sums,
                            last ? ldc : kAmxBlockedSums);
          }
        }
      }
    }
  });
}

// The widest column tile whose packed B (every K block) fits the blocking's budget; 0 where
// not even kNr columns do.
int64_t rounded_tile_cols(const PanelKernel& kernel, int64_t k) {
  return round_down(bf16_gemm_blocking(1).rounded_tile_bytes / (round_up(k, 2 * kernel.pair_align) * 2),
                    kNr);
}

bool rounded_in_tiles(const PanelKernel& kernel, int64_t n, int64_t k) {
  // AMX: the row blocks, whose bf16_gemm_on keeps the sums between K blocks in blocked
  // scratch (the tiles' row-major sums are what that avoids).
  if (kernel.amx) return false;
  const int64_t max_nt = rounded_tile_cols(kernel, k);
  return max_nt > 0 && ceil_div(n, max_nt) <= kMaxRoundedTiles;
}

// bf16_gemm_rounded where B is short (K small against the budget), with B packed once per
// column tile and shared by the threads, and each block of rows rounded as soon as its
// last K block is summed:
//
//   per column tile of nt:             B tile k x nt packed, every K block      (L3)
//     threads take blocks of mc rows:
//       per K block: A block mc x kc packed; sums[mc, nt] (+)= A @ B tile's block
//       round the block's sums into out
//
// The row-block path below packs B again for every 16 MiB block of rows, and its sums go
// through memory once per K block and once more to be rounded. This is the weight
// gradient's shape (G.T @ x: K = BT, B = x). Measured on AMD EPYC Zen 4 (quiet, interleaved,
// medians of 5): at (BT, H, V) = (1755, 2048, 16384) 0.358 -> 0.399 TFLOP/s (0.77 -> 0.86
// of the VDPBF16PS loop's 0.466), at (3511, 4096, 16000) 0.384 -> 0.404; the same path
// for grad_input (K = V: 8+ tiles, A packed again per tile) ran 5 % slower, hence at most
// kMaxRoundedTiles tiles. Rows per block: the generic mc (96 here; 24 rows, which keep the
// sums within a quarter of L2, ran 0.387). Same sums in the same order as bf16_gemm: the
// same bits.
void bf16_gemm_rounded_tiles(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n,
                             int64_t k, uint16_t* out, int64_t ld_out) {
  const int64_t kc = k_block_depth(kernel, k);
  const int64_t k_blocks = ceil_div(k, kc);
  const int64_t pairs_full = packed_pairs(kernel, std::min(kc, k));
  // Tile width: the whole B tile (every K block) within the budget, in equal tiles.
  const int64_t max_nt = std::max<int64_t>(kNr, rounded_tile_cols(kernel, k));
  const int64_t tiles = ceil_div(n, max_nt);
  const int64_t nt = round_up(ceil_div(n, tiles), kNr);
  const int64_t mc = kernel.mc;
  const int64_t block_words = (nt / kNr) * pairs_full * kNr;  // one K block of the B tile
  // Kept by the calling thread (packing_buffers.h); packed before it is read.
  const PackingWords b_tile_words(PackingBuffer::kBTile, k_blocks * block_words);
  uint32_t* const b_tile = b_tile_words.data();
  // Tiny products stay on the calling thread.
  const bool tiny = m * n * k < (1LL << 22);
  const int64_t threads = tiny ? 1 : std::max(1, at::get_num_threads());
  const int64_t row_blocks = ceil_div(m, mc);
  for (int64_t j0 = 0; j0 < n; j0 += nt) {
    const int64_t cols = std::min(nt, n - j0);
    const Bf16View b_cols{b.data + j0 * b.col_stride, b.row_stride, b.col_stride};
    // Pack: the threads share out (K block, group of panels) items.
    const int64_t col_panels = ceil_div(cols, kNr);
    const int64_t panel_groups = std::min<int64_t>(col_panels, threads);
    const int64_t group_panels = ceil_div(col_panels, panel_groups);
    at::parallel_for(0, k_blocks * panel_groups, tiny ? k_blocks * panel_groups : 1,
                     [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t kb = item / panel_groups;
        const int64_t first = (item % panel_groups) * group_panels;
        const int64_t width = std::min(cols, (first + group_panels) * kNr) - first * kNr;
        if (width <= 0) continue;
        const int64_t pc = kb * kc;
        const int64_t depth = std::min(kc, k - pc);
        const int64_t pairs = packed_pairs(kernel, depth);
        pack_b_padded(Bf16View{b_cols.data + first * kNr * b.col_stride, b.row_stride, b.col_stride},
                      pc, depth, width, pairs, b_tile + kb * block_words + first * pairs * kNr);
      }
    });
    at::parallel_for(0, row_blocks, tiny ? row_blocks : 1, [&](int64_t begin, int64_t end) {
      const PackingWords a_words(PackingBuffer::kABlock, round_up(mc, kernel.panel_rows) * pairs_full);
      const PackingWords sums_words(PackingBuffer::kSums, mc * nt);
      uint32_t* const a_block = a_words.data();
      float* const sums = reinterpret_cast<float*>(sums_words.data());
      for (int64_t block = begin; block < end; ++block) {
        const int64_t i0 = block * mc;
        const int64_t rows = std::min(mc, m - i0);
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t pc = kb * kc;
          const int64_t depth = std::min(kc, k - pc);
          const int64_t pairs = packed_pairs(kernel, depth);
          kernel.pack_a(Bf16View{a.data + i0 * a.row_stride, a.row_stride, a.col_stride}, rows, pc,
                        depth, pairs, a_block);
          kernel.multiply(rows, cols, pairs, a_block, b_tile + kb * block_words, sums, nt,
                          /*accumulate=*/kb > 0);
        }
        round_rows(sums, rows, cols, nt, out + i0 * ld_out + j0, ld_out);
      }
    });
  }
}

void bf16_gemm_rounded_on(const PanelKernel& kernel, Bf16View a, Bf16View b, int64_t m, int64_t n,
                          int64_t k, uint16_t* out, int64_t ld_out) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k > 0 && rounded_in_tiles(kernel, n, k)) {
    bf16_gemm_rounded_tiles(kernel, a, b, m, n, k, out, ld_out);
    return;
  }
  const int64_t block_rows = std::clamp<int64_t>(kRoundedBlockBytes / (n * 4), 1, m);
  at::Tensor block = scratch_empty({block_rows, n}, at::TensorOptions().dtype(at::kFloat));
  float* sums = block.mutable_data_ptr<float>();
  for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
    const int64_t rows = std::min(block_rows, m - r0);
    bf16_gemm_on(kernel, Bf16View{a.data + r0 * a.row_stride, a.row_stride, a.col_stride}, b, rows,
                 n, k, sums, n, false);
    round_rows(sums, rows, n, n, out + r0 * ld_out, ld_out);
  }
}

}  // namespace

}  // namespace cpu
}  // namespace ascend_ops

// The order of fused_linear_cross_entropy_loss_grad's work: which cube core does what, in
// which step. Pure arithmetic on the tiling data, shared by the kernel (op_kernel/…grad.cpp)
// and the cost model (sim/host/flce_model.cpp), so the model walks exactly the kernel's
// order. Include it after kernel_operator.h (it uses __aicore__ only).
//
// Work items:
//   a logits task   (memory-saving mode): logits[rowBlock x colBlock] = x_b · w_bᵀ, turned into
//                   G by the task's two vector cores (FlceTask);
//   an output tile  of one of the two backward GEMMs (FlceTile), tileM x tileN of
//                   input_grad = G · w (gemm 0) or weight_grad = Gᵀ · x (gemm 1), over a
//                   range of K: output-stationary (one Matmul call adds the whole range).
//
// Memory-saving mode goes window by window (CANN's sliding window, in our own form): a window
// is windowRowBlocks x windowColBlocks logits tasks, windows row-major. Step s holds the
// logits tasks of window s and the output tiles of window s - 1, whose G the vector cores
// wrote during step s - 1: input_grad rows of the window (K = its vocabulary columns) and
// weight_grad rows of its vocabulary columns (K = its rows). Between steps every cube core
// meets the others, so each accumulator tile has one writer per step and the windows add
// into it in window order: bitwise the same result for any number of cores. High-
// performance mode is one step of output tiles over all of K (G written over the softmax
// first), each output written once.
//
// Within a step each core does its logits tasks, then its tiles. The tasks are dealt round-
// robin (task q to core q % cores); when they do not divide evenly, the cores left with
// one task fewer (the "light" ones) first take `lightTiles` tiles each -- about one task's
// worth of tiles -- and the rest of the tiles (gemm 0's, then gemm 1's) go round-robin to
// all cores: the cores' loads end up within about one tile of each other.
#pragma once

#include <cstdint>

#include "fused_linear_cross_entropy_loss_grad_tiling_data.h"

namespace flce {

struct FlceTask {  // a logits block: rows x cols of BT x V
  uint64_t row0, col0;
  uint32_t rows, cols;
};

struct FlceTile {  // an output tile: rows x cols of input_grad (gemm 0) or weight_grad (gemm 1), K range
  uint32_t gemm;
  uint64_t row0, col0;  // row0 in BT (gemm 0) or V (gemm 1); col0 in H
  uint32_t rows, cols;
  uint64_t k0;          // V (gemm 0) or BT (gemm 1)
  uint32_t k;
  bool add;             // added into what an earlier window wrote (memory-saving), else written
};

struct FlceWindow {  // memory-saving mode: blocks [rowBlock0, +rowBlocks) x [colBlock0, +colBlocks)
  uint64_t index, windowRow, windowCol;
  uint64_t rowBlock0, colBlock0;
  uint32_t rowBlocks, colBlocks;
  uint64_t row0, col0;  // in BT and V
  uint32_t rows, cols;  // their extent (the last window of a row or column is cut by BT or V)
};

__aicore__ inline uint64_t MinU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

__aicore__ inline FlceWindow WindowAt(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t w) {
  FlceWindow win;
  win.index = w;
  win.windowRow = w / t.windowCols;
  win.windowCol = w % t.windowCols;
  win.rowBlock0 = win.windowRow * t.windowRowBlocks;
  win.colBlock0 = win.windowCol * t.windowColBlocks;
  win.rowBlocks = static_cast<uint32_t>(MinU64(t.windowRowBlocks, t.rowBlocks - win.rowBlock0));
  win.colBlocks = static_cast<uint32_t>(MinU64(t.windowColBlocks, t.colBlocks - win.colBlock0));
  win.row0 = win.rowBlock0 * t.rowBlock;
  win.col0 = win.colBlock0 * t.colBlock;
  win.rows = static_cast<uint32_t>(MinU64(uint64_t(win.rowBlocks) * t.rowBlock, t.bt - win.row0));
  win.cols = static_cast<uint32_t>(MinU64(uint64_t(win.colBlocks) * t.colBlock, t.v - win.col0));
  return win;
}

// Steps: memory-saving windows + 1 (the last holds only the last window's tiles); high-performance 1.
__aicore__ inline uint64_t StepCount(const FusedLinearCrossEntropyLossGradTilingData& t) {
  return t.mode == 0 ? t.windows + 1 : 1;
}

// Tiles of `rows` output rows (in tileM rows) x H (in tileN columns).
__aicore__ inline uint64_t TileCount(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t rows) {
  return (rows + t.tileM - 1) / t.tileM * t.hTiles;
}

struct FlceStep {  // the item counts of one step
  uint64_t tasks;   // logits tasks (window `step`)
  uint64_t tiles0;  // gemm 0 tiles
  uint64_t tiles1;  // gemm 1 tiles
  __aicore__ inline uint64_t Items() const { return tasks + tiles0 + tiles1; }
};

__aicore__ inline FlceStep StepAt(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t s) {
  FlceStep st{0, 0, 0};
  if (t.mode != 0) {
    st.tiles0 = TileCount(t, t.bt);
    st.tiles1 = TileCount(t, t.v);
    return st;
  }
  if (s < t.windows) {
    const FlceWindow w = WindowAt(t, s);
    st.tasks = uint64_t(w.rowBlocks) * w.colBlocks;
  }
  if (s >= 1) {
    const FlceWindow w = WindowAt(t, s - 1);
    st.tiles0 = TileCount(t, w.rows);
    st.tiles1 = TileCount(t, w.cols);
  }
  return st;
}

// How many tiles a light core takes first in step s: a logits task's work in tiles of the
// step (a tile of gemm 0: tileM x tileN x the window's vocabulary columns), rounded.
__aicore__ inline uint64_t LightTiles(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t s) {
  if (t.mode != 0 || s == 0) return 0;
  const uint64_t k = WindowAt(t, s - 1).cols;
  const uint64_t task = uint64_t(t.rowBlock) * t.colBlock * t.h, tile = uint64_t(t.tileM) * t.tileN * k;
  return (task + tile / 2) / tile;
}

// Core `core`'s j-th logits task of step s: its index q in the window, false past the last.
__aicore__ inline bool CoreTask(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t s, uint64_t core,
                                uint64_t cores, uint64_t j, uint64_t& q) {
  q = j * cores + core;
  return q < StepAt(t, s).tasks;
}

// Core `core`'s j-th tile of step s: its index q among the step's tiles (gemm 0's, then
// gemm 1's), false past the last.
__aicore__ inline bool CoreTile(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t s, uint64_t core,
                                uint64_t cores, uint64_t j, uint64_t& q) {
  const FlceStep st = StepAt(t, s);
  const uint64_t heavy = st.tasks % cores;  // cores [0, heavy) have one task more
  const uint64_t light = heavy == 0 ? 0 : cores - heavy;
  const uint64_t first = light * LightTiles(t, s);  // the tiles the light cores take first
  if (core >= heavy && light != 0 && j < LightTiles(t, s)) {
    q = j * light + (core - heavy);
  } else {
    const uint64_t jj = core >= heavy && light != 0 ? j - LightTiles(t, s) : j;
    q = first + jj * cores + core;
  }
  return q < st.tiles0 + st.tiles1;
}

// Logits task `q` of window `w` (row-major within the window).
__aicore__ inline FlceTask TaskOf(const FusedLinearCrossEntropyLossGradTilingData& t, const FlceWindow& w, uint64_t q) {
  FlceTask k;
  k.row0 = (w.rowBlock0 + q / w.colBlocks) * t.rowBlock;
  k.col0 = (w.colBlock0 + q % w.colBlocks) * t.colBlock;
  k.rows = static_cast<uint32_t>(MinU64(t.rowBlock, t.bt - k.row0));
  k.cols = static_cast<uint32_t>(MinU64(t.colBlock, t.v - k.col0));
  return k;
}

// Tile `q` of `rows` output rows from `row0`: in groups of groupRowBlocks tile rows, a
// group's rows vary fastest, so the tiles in flight at once share A rows and B columns.
__aicore__ inline FlceTile GroupedTile(const FusedLinearCrossEntropyLossGradTilingData& t, uint32_t gemm, uint64_t row0,
                                       uint64_t rows, uint64_t q) {
  const uint64_t tileRows = (rows + t.tileM - 1) / t.tileM;
  const uint64_t perGroup = uint64_t(t.groupRowBlocks) * t.hTiles;
  const uint64_t group = q / perGroup, inGroup = q % perGroup;
  const uint64_t groupRows = MinU64(t.groupRowBlocks, tileRows - group * t.groupRowBlocks);
  const uint64_t r = group * t.groupRowBlocks + inGroup % groupRows, c = inGroup / groupRows;
  FlceTile tile;
  tile.gemm = gemm;
  tile.row0 = row0 + r * t.tileM;
  tile.col0 = c * t.tileN;
  tile.rows = static_cast<uint32_t>(MinU64(t.tileM, row0 + rows - tile.row0));
  tile.cols = static_cast<uint32_t>(MinU64(t.tileN, t.h - tile.col0));
  tile.k0 = 0;
  tile.k = 0;
  tile.add = false;
  return tile;
}

// Tile q of step s (gemm 0's first).
__aicore__ inline FlceTile TileAt(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t s, uint64_t q) {
  const FlceStep st = StepAt(t, s);
  const bool first = q < st.tiles0;
  const uint32_t gemm = first ? 0 : 1;
  if (!first) q -= st.tiles0;
  FlceTile tile;
  if (t.mode != 0) {
    tile = GroupedTile(t, gemm, 0, gemm == 0 ? t.bt : t.v, q);
    tile.k0 = 0;
    tile.k = static_cast<uint32_t>(gemm == 0 ? t.v : t.bt);
    return tile;
  }
  const FlceWindow w = WindowAt(t, s - 1);
  tile = GroupedTile(t, gemm, gemm == 0 ? w.row0 : w.col0, gemm == 0 ? w.rows : w.cols, q);
  tile.k0 = gemm == 0 ? w.col0 : w.row0;
  tile.k = gemm == 0 ? w.cols : w.rows;
  // The first window along the K direction writes, the others add: windows are row-major,
  // so input_grad's rows are first reached by window column 0, weight_grad's by window row 0.
  tile.add = gemm == 0 ? w.windowCol > 0 : w.windowRow > 0;
  return tile;
}

}  // namespace flce

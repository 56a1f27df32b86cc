// The modelled 910B cost of one fused_linear_cross_entropy_loss_grad launch at any shape,
// from the TilingFunc's tiling data and the kernel's own order of work (op_kernel/
// …_schedule.h, the functions the kernel calls), without simulating any element: each
// Matmul call, DMA and vector instruction the kernel issues is walked as the address
// ranges it touches and the time it takes, and
//
//   - L2 is a cache: LRU over `line_bytes` lines (192 MiB of them on the 910B), write-back
//     and write-allocate (a write that covers a whole line fetches nothing); a miss reads
//     the line from HBM, an evicted dirty line is written to it, and every line still dirty
//     at the end is too (the outputs must reach HBM);
//   - the cores run concurrently: each core's work is cut into pieces (a Matmul into slices
//     of 256 along K, a DMA per row) that reach L2 in the order of the time they start;
//     the steps end at the kernel's barriers (…_schedule.h);
//   - a Matmul call (IterateAll) on one cube core runs as the tiling CANN's library returned
//     for it lays it out: its first L1 fill of A and B (stepKa, stepKb base blocks along K)
//     and the first slice into L0A/L0B before the first mmad; then per baseK slice the
//     longer of the mmad (16 x 16 x 16 a cycle, fractals padded) and the next slice's
//     operand fill (L1 double-buffered in every tiling used here); then the fixpipe drain
//     of C out of L0C (dbL0C = 1: the next call's mmads wait for it). At the fast end of the
//     rates the drain overlaps the next call's fill, at the slow end it does not;
//   - each vector core at one 256-byte repeat per cycle; the loss options' vector work and
//     operand loads (…_g_stage.h) when the tiling has them;
//   - a fixpipe atomic add is a read and a write of its lines in L2; within a step, the
//     number of cores adding into one line is its contention (the kernel never has two);
//
// and each step takes the longest of: its busiest core (cube, or vector), its HBM bytes at
// the HBM bandwidth, its L2 reads and writes at the L2's (added at the slow end, each on its
// own port at the fast end). The launch is the sum of its steps. Every rate comes from
// common/platform.h's ChipRates, one set per end of the range the public sources give.
// Traffic is counted as the simulator counts it (Matmul operand loads in bytes, everything
// else in the 32-byte sectors it touches), and tests/test_ascendc_sim.py checks the model's
// FLOPs, reads, writes and vector repeats against the simulator's counters at small shapes.
// Not modelled: latencies (barriers, flags, DMA issue and first-byte latency), how bandwidth
// limits interleave the cores (a step's pieces keep their compute-time order), L2 banks and
// the placement of lines, the cube's L1 reuse beyond one Matmul call, the row-by-row fills
// of GetNormalConfig(true) past a 65535-element pitch (none at the report's shapes).
#include <algorithm>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernel_operator.h"  // __aicore__ for the kernel's headers
#include "asim_abi.h"
#include "../../fused_linear_cross_entropy_loss_grad/op_kernel/fused_linear_cross_entropy_loss_grad_schedule.h"

namespace {

namespace akn = ascend_ops_kernels;
using flce::FlceTask;
using flce::FlceTile;
using flce::FlceWindow;
using Tiling = FusedLinearCrossEntropyLossGradTilingData;

constexpr uint64_t kSector = 32;    // the simulator's unit of DMA traffic
constexpr uint64_t kFractal = 16;   // the cube's M, N and K granule
constexpr uint64_t kSliceK = 256;   // a Matmul call reaches L2 in slices of 256 along K
constexpr uint64_t kAlign = 1 << 16;

uint64_t Sectors(uint64_t addr, uint64_t bytes) {
  return bytes == 0 ? 0 : ((addr + bytes + kSector - 1) / kSector - addr / kSector) * kSector;
}

enum class Use : uint8_t { Read, Write, Add };

// L2 as an LRU cache of lines, write-back and write-allocate.
class L2Cache {
 public:
  L2Cache(uint64_t bytes, uint64_t line, uint64_t space)
      : line_(line), capacity_(std::max<uint64_t>(bytes / line, 1)), lines_(space / line + 1),
        prev_(lines_, -1), next_(lines_, -1), state_(lines_, 0) {}

  // Touches [addr, addr + bytes); returns nothing, counts HBM traffic.
  void Access(uint64_t addr, uint64_t bytes, Use use) {
    if (bytes == 0) return;
    for (uint64_t l = addr / line_, last = (addr + bytes - 1) / line_; l <= last; ++l) {
      const bool whole = use == Use::Write && addr <= l * line_ && addr + bytes >= (l + 1) * line_;
      Touch(l, use, whole);
    }
  }

  uint64_t hbm_read = 0, hbm_write = 0;

  // Writes back every dirty line (the end of the launch).
  void Flush() {
    for (int64_t l = head_; l >= 0; l = next_[l])
      if (state_[l] & kDirty) hbm_write += line_;
  }

 private:
  static constexpr uint8_t kResident = 1, kDirty = 2;

  void Unlink(int64_t l) {
    if (prev_[l] >= 0) next_[prev_[l]] = next_[l]; else head_ = next_[l];
    if (next_[l] >= 0) prev_[next_[l]] = prev_[l]; else tail_ = prev_[l];
    prev_[l] = next_[l] = -1;
  }
  void PushFront(int64_t l) {
    next_[l] = head_;
    prev_[l] = -1;
    if (head_ >= 0) prev_[head_] = l;
    head_ = l;
    if (tail_ < 0) tail_ = l;
  }
  void Touch(uint64_t line, Use use, bool whole) {
    const int64_t l = static_cast<int64_t>(line);
    if (state_[l] & kResident) {
      Unlink(l);
    } else {
      if (!whole) hbm_read += line_;  // fetched: a read, an add, or a partial write
      if (resident_ == capacity_) {  // evict the least recently used
        const int64_t victim = tail_;
        Unlink(victim);
        if (state_[victim] & kDirty) hbm_write += line_;
        state_[victim] = 0;
        --resident_;
      }
      state_[l] = kResident;
      ++resident_;
    }
    if (use != Use::Read) state_[l] |= kDirty;
    PushFront(l);
  }

  uint64_t line_, capacity_, lines_;
  std::vector<int64_t> prev_, next_;
  std::vector<uint8_t> state_;
  int64_t head_ = -1, tail_ = -1;
  uint64_t resident_ = 0;
};

// One piece of a core's work: its time and the ranges it touches.
struct Range {
  uint64_t addr, bytes;
  Use use;
  bool dma;  // counted in sectors (a DMA), else in bytes (a Matmul operand load)
};
struct Piece {
  double seconds = 0;
  std::vector<Range> ranges;
  double not_before = 0;    // it cannot start earlier (a barrier)
  int64_t waits = -1;       // it cannot start before event `waits` (another core's piece) is done
  int64_t signals = -1;     // its end is event `signals`
};

class Model {
 public:
  Model(const Tiling& t, uint32_t dtype, uint64_t line_bytes, const akn::ChipRates& rates, uint32_t layouts)
      : t_(t), p_(akn::kAscend910B), r_(rates), layouts_(layouts), e_(akn::DtypeBytes(dtype)), cores_(t.cubeCores),
        line_(line_bytes) {
    uint64_t at = 0;
    auto place = [&](uint64_t bytes) { const uint64_t a = at; at += (bytes + kAlign - 1) / kAlign * kAlign + kAlign; return a; };
    x_ = place(t.bt * t.h * e_);
    w_ = place(t.v * t.h * e_);
    grad_ = place(t.bt * 4);
    mask_ = place((t.bt + 7) / 8);
    target_ = place(t.bt * 8);
    if (t.mode == 0) {
      max_ = place(t.bt * 4);
      sum_ = place(t.bt * 4);
    } else {
      softmax_ = place(t.bt * t.v * 4);
    }
    if (t.options != 0) {
      alpha_ = place(t.bt * 4);
      beta_ = place(t.bt * 4);
      gamma_ = place(t.bt * 4);
      if (t.options & kFlceOptBias) bias_ = place(t.v * 4);
      if (t.options & kFlceOptClassWeight) classWeight_ = place(t.v * 4);
    }
    inputGrad_ = place(t.bt * t.h * e_);
    weightGrad_ = place(t.v * t.h * e_);
    user_ = place(t.userWorkspaceBytes);
    footprint_ = at;
    cache_ = new L2Cache(p_.l2Bytes, line_, at);
  }
  ~Model() { delete cache_; }

  AsimFlceModel Run() {
    if (t_.mode == 0) {
      double gDone = 0;  // when the previous window's G was written by every vector core
      for (uint64_t s = 0; s < flce::StepCount(t_); ++s) gDone = CubeStep(s, gDone);
      VectorStep([&](uint64_t aiv, uint64_t aivs, std::vector<Piece>& work) { CastWork(aiv, aivs, work); });
    } else {
      VectorStep([&](uint64_t aiv, uint64_t aivs, std::vector<Piece>& work) { GPassWork(aiv, aivs, work); });
      CubeStep(0, now_);
    }
    VectorStep([&](uint64_t aiv, uint64_t, std::vector<Piece>& work) { ReportWork(aiv, work); }, /*count=*/false);
    cache_->Flush();
    out_.hbm_read_bytes = cache_->hbm_read;
    out_.hbm_write_bytes = cache_->hbm_write;
    out_.modelled_s = now_;
    out_.roofline_s = out_.cube_flops / (p_.aiCores * akn::kCubeFlopsPerCycle * r_.clockHz);
    for (uint64_t c : core_calls_) out_.max_core_calls = std::max(out_.max_core_calls, c);
    out_.footprint_bytes = footprint_;
    out_.line_bytes = line_;
    out_.l2_lines = p_.l2Bytes / line_;
    return out_;
  }

 private:
  // ---- the kernel's pieces --------------------------------------------------------

  // A Matmul call m x n x k with the tiling `mm`: A [m, k] (or, transposed, stored [k, m])
  // at `a` with row pitch `lda`, in NZ when `aNz` (else ND); B [k, n] (or, transposed,
  // stored [n, k]) at `b` with pitch `ldb`; C [m, n] at `c` with pitch `ldc`, `cBytes` an
  // element; in pieces of kSliceK along K (see the top for the timing).
  void Matmul(std::vector<Piece>& work, const AscendC::tiling::TCubeTiling& mm, uint64_t m, uint64_t n, uint64_t k,
              uint64_t a, uint64_t lda, bool aTrans, bool aNz, uint64_t b, uint64_t ldb, bool bTrans, bool bNz,
              uint64_t c, uint64_t ldc, uint64_t cBytes, Use cUse) {
    const double clock = r_.clockHz;
    const double rateA = (aNz ? r_.nzFillBytesPerCycle : r_.ndFillBytesPerCycle) * clock;
    const double rateB = (bNz ? r_.nzFillBytesPerCycle : r_.ndFillBytesPerCycle) * clock;
    const uint64_t baseK = std::max<uint64_t>(mm.baseK, kFractal);
    const auto fractals = [](uint64_t x) { return (x + kFractal - 1) / kFractal; };
    const auto mmad = [&](uint64_t kc) { return double(fractals(m) * fractals(n) * fractals(kc)) / clock; };
    const auto operands = [&](uint64_t kc) { return double(m * kc * e_) / rateA + double(n * kc * e_) / rateB; };
    // The first fill: stepKa (stepKb) base blocks of A (B) along K, then one slice into L0.
    const uint64_t firstKa = std::min<uint64_t>(k, uint64_t(std::max(mm.stepKa, 1)) * baseK);
    const uint64_t firstKb = std::min<uint64_t>(k, uint64_t(std::max(mm.stepKb, 1)) * baseK);
    const double fill = double(m * firstKa * e_) / rateA + double(n * firstKb * e_) / rateB +
                        double((m + n) * std::min(k, baseK) * e_) / (r_.l1ToL0BytesPerCycle * clock);
    const double drain = double(m * n * cBytes) / (r_.drainBytesPerCycle * clock);
    // Every tiling used here holds two L1 fills of each operand (depthA1 >= 2·stepKa): the
    // next slice's fill overlaps this slice's mmad; with one, they would take turns.
    const bool buffered = mm.depthA1 >= 2 * mm.stepKa && mm.depthB1 >= 2 * mm.stepKb;
    const size_t first = work.size();
    for (uint64_t k0 = 0; k0 < k; k0 += kSliceK) {
      const uint64_t kc = std::min(kSliceK, k - k0);
      Piece piece;
      for (uint64_t j = k0; j < k0 + kc; j += baseK) {
        const uint64_t kk = std::min(baseK, k0 + kc - j);
        const double compute = mmad(kk), supply = j == 0 ? 0.0 : operands(kk);
        piece.seconds += buffered ? std::max(compute, supply) : compute + supply;
        out_.mmad_s += compute;
        out_.operand_wait_s += buffered ? std::max(0.0, supply - compute) : supply;
      }
      if (aTrans) {
        for (uint64_t i = 0; i < kc; ++i) piece.ranges.push_back({a + ((k0 + i) * lda) * e_, m * e_, Use::Read, false});
      } else {
        for (uint64_t i = 0; i < m; ++i) piece.ranges.push_back({a + (i * lda + k0) * e_, kc * e_, Use::Read, false});
      }
      if (bTrans) {
        for (uint64_t j = 0; j < n; ++j) piece.ranges.push_back({b + (j * ldb + k0) * e_, kc * e_, Use::Read, false});
      } else {
        for (uint64_t i = 0; i < kc; ++i) piece.ranges.push_back({b + ((k0 + i) * ldb) * e_, n * e_, Use::Read, false});
      }
      work.push_back(std::move(piece));
    }
    Piece store;  // the fixpipe's C rows
    for (uint64_t i = 0; i < m; ++i) store.ranges.push_back({c + i * ldc * cBytes, n * cBytes, cUse, true});
    if (r_.drainOverlapsFill) {  // this call's drain under the next call's fill
      work[first].seconds += std::max(fill, drain);
    } else {
      work[first].seconds += fill;
      store.seconds = drain;
    }
    work.push_back(std::move(store));
    out_.fill_s += fill;
    out_.drain_s += drain;
    out_.cube_flops += 2.0 * m * n * k;
    ++out_.calls;
    ++core_calls_[current_core_];
  }

  bool AllNz() const { return (layouts_ & kAsimAllNz) != 0; }
  bool TransposedGNz() const { return (layouts_ & (kAsimAllNz | kAsimTransposedGNz)) != 0; }

  void LogitsWork(const FlceTask& k, uint64_t slot, uint64_t core, std::vector<Piece>& work) {
    const uint64_t ring = user_ + core * t_.ringBytes + slot * t_.logitsSlotBytes;
    Matmul(work, t_.logitsMm, k.rows, k.cols, t_.h, x_ + k.row0 * t_.h * e_, t_.h, false, AllNz(),
           w_ + k.col0 * t_.h * e_, t_.h, true, AllNz(), ring, t_.colBlock, 4, Use::Write);
  }

  void TileWork(const FlceTile& tile, std::vector<Piece>& work) {
    if (t_.mode == 0) {
      const FlceWindow w = flce::WindowAt(t_, current_window_);
      const uint64_t g = user_ + t_.gOffset + (w.index % 2) * t_.gWindowBytes;
      const uint64_t pitch = uint64_t(t_.windowColBlocks) * t_.colBlock;
      const Use cUse = tile.add ? Use::Add : Use::Write;
      const uint64_t acc = user_ + t_.accOffset;
      if (tile.gemm == 0)
        Matmul(work, t_.inputGradMm, tile.rows, tile.cols, tile.k, g + (tile.row0 - w.row0) * pitch * e_, pitch, false,
               AllNz(), w_ + (tile.k0 * t_.h + tile.col0) * e_, t_.h, false, AllNz(),
               acc + (tile.row0 * t_.h + tile.col0) * 4, t_.h, 4, cUse);
      else
        Matmul(work, t_.weightGradMm, tile.rows, tile.cols, tile.k, g + (tile.row0 - w.col0) * e_, pitch, true,
               TransposedGNz(), x_ + (tile.k0 * t_.h + tile.col0) * e_, t_.h, false, AllNz(),
               acc + ((t_.bt + tile.row0) * t_.h + tile.col0) * 4, t_.h, 4, cUse);
      return;
    }
    const uint64_t pitch = 2 * t_.v;  // G over the softmax
    if (tile.gemm == 0)
      Matmul(work, t_.inputGradMm, tile.rows, tile.cols, tile.k, softmax_ + tile.row0 * pitch * e_, pitch, false,
             AllNz(), w_ + tile.col0 * e_, t_.h, false, AllNz(), inputGrad_ + (tile.row0 * t_.h + tile.col0) * e_,
             t_.h, e_, Use::Write);
    else  // A = Gᵀ: per K row a 256-byte run of G at a 4V-byte pitch (an ND fill), unless G is in NZ
      Matmul(work, t_.weightGradMm, tile.rows, tile.cols, tile.k, softmax_ + tile.row0 * e_, pitch, true,
             TransposedGNz(), x_ + tile.col0 * e_, t_.h, false, AllNz(),
             weightGrad_ + (tile.row0 * t_.h + tile.col0) * e_, t_.h, e_, Use::Write);
  }

  // The per-row scalars the vector stage reads (…_g_stage.h Row): grad, the mask byte, the
  // target (read only on rows not masked: counted always here), and max and sum.
  void RowScalars(uint64_t row, Piece& piece) {
    piece.ranges.push_back({grad_ + row * 4, 4, Use::Read, true});
    piece.ranges.push_back({mask_ + row / 8, 1, Use::Read, true});
    piece.ranges.push_back({target_ + row * 8, 8, Use::Read, true});
    if (t_.mode == 0) {
      piece.ranges.push_back({max_ + row * 4, 4, Use::Read, true});
      piece.ranges.push_back({sum_ + row * 4, 4, Use::Read, true});
    }
    if (t_.options != 0)  // alpha, beta, gamma (they replace grad)
      for (uint64_t coefficient : {alpha_, beta_, gamma_}) piece.ranges.push_back({coefficient + row * 4, 4, Use::Read, true});
  }

  bool Has(uint32_t option) const { return (t_.options & option) != 0; }

  // The vector stage's fp32 repeats for one row of `cols` columns (…_g_stage.h Apply and
  // ApplyOptions, instruction by instruction; the Cast counts its fp32 side).
  uint64_t RowRepeats(uint64_t cols) const {
    const uint64_t r = Repeats(cols);
    const bool fromLogits = t_.mode == 0;
    if (t_.options == 0) return (fromLogits ? 5 : 2) * r;  // [Adds, Exp, Muls], Muls, Cast
    uint64_t n = 1 + (Has(kFlceOptClassWeight) ? 2 : 1) + (Has(kFlceOptScale) ? 1 : 0) + 1;  // alpha, -gamma(·w), scale, Cast
    if (fromLogits)
      n += (Has(kFlceOptBias) ? 1 : 0) + (Has(kFlceOptScale) ? 1 : 0) + (Has(kFlceOptSoftcap) ? 8 + 4 : 0) + 3;
    return n * r;
  }

  // LoadColumns (…_g_stage.h): an AIV's bias and class-weight columns, when they changed.
  void LoadColumns(uint64_t aiv, uint64_t col0, uint64_t cols, Piece& piece) {
    const uint32_t wanted = t_.mode == 0 ? (kFlceOptBias | kFlceOptClassWeight) : kFlceOptClassWeight;
    if ((t_.options & wanted) == 0 || (loaded_[aiv].first == col0 && loaded_[aiv].second == cols)) return;
    if (t_.mode == 0 && Has(kFlceOptBias)) piece.ranges.push_back({bias_ + col0 * 4, cols * 4, Use::Read, true});
    if (Has(kFlceOptClassWeight)) piece.ranges.push_back({classWeight_ + col0 * 4, cols * 4, Use::Read, true});
    loaded_[aiv] = {col0, cols};
  }

  static uint64_t Repeats(uint64_t count) { return (count + 63) / 64; }  // fp32: 64 a repeat

  // One AIV's share of a logits task's G (MakeWindowG): rows in tiles of gTileRows.
  void GWork(const FlceTask& k, uint64_t slot, uint64_t core, uint32_t sub, std::vector<Piece>& work) {
    const FlceWindow w = flce::WindowAt(t_, current_window_);
    const uint32_t half = (k.rows + 1) / 2, r0 = sub == 0 ? 0 : half, r1 = sub == 0 ? half : k.rows;
    const uint64_t ring = user_ + core * t_.ringBytes + slot * t_.logitsSlotBytes;
    const uint64_t pitch = uint64_t(t_.windowColBlocks) * t_.colBlock;
    const uint64_t g = user_ + t_.gOffset + (w.index % 2) * t_.gWindowBytes +
                       ((k.row0 - w.row0) * pitch + (k.col0 - w.col0)) * e_;
    for (uint32_t r = r0; r < r1; r += t_.gTileRows) {
      const uint32_t rows = std::min(t_.gTileRows, r1 - r);
      Piece piece;
      LoadColumns(2 * core + sub, k.col0, k.cols, piece);
      for (uint32_t i = 0; i < rows; ++i) {
        piece.ranges.push_back({ring + uint64_t(r + i) * t_.colBlock * 4, k.cols * 4ull, Use::Read, true});
        RowScalars(k.row0 + r + i, piece);
        piece.ranges.push_back({g + uint64_t(r + i) * pitch * e_, k.cols * e_, Use::Write, true});
      }
      piece.seconds = double(rows) * RowRepeats(k.cols) / (akn::kVectorRepeatsPerCycle * r_.clockHz);
      out_.vector_repeats += uint64_t(rows) * RowRepeats(k.cols);
      work.push_back(std::move(piece));
    }
  }

  // High-performance mode's G pass of one AIV: chunk by chunk, its rows, in place.
  void GPassWork(uint64_t aiv, uint64_t aivs, std::vector<Piece>& work) {
    const uint64_t row0 = t_.bt * aiv / aivs, rowEnd = t_.bt * (aiv + 1) / aivs;
    for (uint64_t c0 = 0; c0 < t_.v && row0 < rowEnd; c0 += t_.chunkCols) {
      const uint64_t cols = std::min<uint64_t>(t_.chunkCols, t_.v - c0);
      for (uint64_t row = row0; row < rowEnd; ++row) {
        Piece piece;
        if (row == row0) LoadColumns(aiv, c0, cols, piece);
        RowScalars(row, piece);
        piece.ranges.push_back({softmax_ + (row * t_.v + c0) * 4, cols * 4, Use::Read, true});
        piece.ranges.push_back({softmax_ + (row * 2 * t_.v + c0) * e_, cols * e_, Use::Write, true});
        piece.seconds = double(RowRepeats(cols)) / (akn::kVectorRepeatsPerCycle * r_.clockHz);
        out_.vector_repeats += RowRepeats(cols);
        work.push_back(std::move(piece));
      }
    }
  }

  // Memory-saving mode's final cast of one AIV: its share of the [BT + V, H] accumulators.
  void CastWork(uint64_t aiv, uint64_t aivs, std::vector<Piece>& work) {
    const uint64_t all = t_.bt + t_.v, begin = all * aiv / aivs, end = all * (aiv + 1) / aivs;
    for (uint64_t r = begin; r < end;) {
      const uint64_t limit = r < t_.bt ? std::min(end, t_.bt) : end;
      const uint64_t rows = std::min<uint64_t>(t_.castRows, limit - r);
      for (uint64_t c = 0; c < t_.h; c += t_.castCols) {
        const uint64_t cols = std::min<uint64_t>(t_.castCols, t_.h - c);
        Piece piece;
        for (uint64_t i = 0; i < rows; ++i) {
          const uint64_t row = r + i;
          piece.ranges.push_back({user_ + t_.accOffset + (row * t_.h + c) * 4, cols * 4, Use::Read, true});
          const uint64_t out = row < t_.bt ? inputGrad_ + (row * t_.h + c) * e_ : weightGrad_ + ((row - t_.bt) * t_.h + c) * e_;
          piece.ranges.push_back({out, cols * e_, Use::Write, true});
        }
        piece.seconds = double(rows) * Repeats(cols) / (akn::kVectorRepeatsPerCycle * r_.clockHz);
        out_.vector_repeats += rows * Repeats(cols);
        work.push_back(std::move(piece));
      }
      r += rows;
    }
  }

  void ReportWork(uint64_t aiv, std::vector<Piece>& work) {
    Piece piece;
    piece.ranges.push_back({user_ + t_.reportOffset + aiv * 8, 8, Use::Write, true});
    work.push_back(std::move(piece));
  }

  // ---- time and traffic --------------------------------------------------------------

  void Apply(const Piece& piece, uint64_t agent) {
    for (const Range& r : piece.ranges) {
      const uint64_t bytes = r.dma ? Sectors(r.addr, r.bytes) : r.bytes;
      if (r.use == Use::Read) {
        out_.l2_read_bytes += bytes;
      } else {
        out_.l2_write_bytes += bytes;  // an add: the simulator counts its C store as a write
        if (r.use == Use::Add) out_.atomic_add_bytes += bytes;
      }
      if (r.use != Use::Write) step_l2_read_ += bytes;  // an add also reads its bytes in L2
      if (r.use != Use::Read) step_l2_write_ += bytes;
      cache_->Access(r.addr, r.bytes, r.use);
      if (r.use == Use::Add) Contend(r.addr, r.bytes, agent);
    }
  }

  // Atomic adds of one step into the same line from different cores.
  void Contend(uint64_t addr, uint64_t bytes, uint64_t agent) {
    for (uint64_t l = addr / line_, last = (addr + bytes - 1) / line_; l <= last; ++l) {
      ++out_.atomic_rmw_lines;
      auto& [who, count] = adders_[l];
      if (count == 0 || who != agent + 1) {
        ++count;
        who = agent + 1;
      }
      out_.max_line_adders = std::max<uint64_t>(out_.max_line_adders, count);
    }
  }

  // Runs the agents' work lists concurrently, agent a from start[a]: pieces reach L2 in
  // the order they start; a piece waits for its barrier and for the event it needs.
  // Returns each agent's finish time.
  std::vector<double> RunAgents(std::vector<std::vector<Piece>>& work, std::vector<double> start, size_t events) {
    using Next = std::pair<double, uint64_t>;
    std::priority_queue<Next, std::vector<Next>, std::greater<Next>> ready;
    std::vector<size_t> at(work.size(), 0);
    std::vector<double> done(events, -1.0);
    std::vector<std::vector<uint64_t>> waiting(events);
    for (uint64_t a = 0; a < work.size(); ++a)
      if (!work[a].empty()) ready.push({start[a], a});
    while (!ready.empty()) {
      const auto [time, a] = ready.top();
      ready.pop();
      const Piece& piece = work[a][at[a]];
      if (piece.waits >= 0 && done[piece.waits] < 0) {  // resumed when the event happens
        waiting[piece.waits].push_back(a);
        continue;
      }
      const double begin = std::max({time, piece.not_before, piece.waits >= 0 ? done[piece.waits] : 0.0});
      if (begin > time) {  // later than it was queued: wait its turn
        start[a] = begin;
        ready.push({begin, a});
        continue;
      }
      Apply(piece, a);
      ++at[a];
      start[a] = begin + piece.seconds;
      if (piece.signals >= 0) {
        done[piece.signals] = start[a];
        for (uint64_t w : waiting[piece.signals]) ready.push({std::max(start[w], start[a]), w});
        waiting[piece.signals].clear();
      }
      if (at[a] < work[a].size()) ready.push({start[a], a});
    }
    return start;
  }

  // Ends a step that began at `begin` whose cores finished at `busy`: the longest of the
  // busy time, its HBM traffic and its L2 traffic at their bandwidths.
  void EndStep(double begin, double busy, bool cube) {
    const double hbm = double(cache_->hbm_read + cache_->hbm_write - step_hbm_mark_) / r_.hbmBytesPerS;
    const double reads = double(step_l2_read_) / r_.l2ReadBytesPerS, writes = double(step_l2_write_) / r_.l2WriteBytesPerS;
    const double l2 = r_.l2PortsShared ? reads + writes : std::max(reads, writes);
    const double take = std::max({busy, hbm, l2});
    if (take == busy) (cube ? out_.cube_bound_s : out_.vector_bound_s) += take;
    else if (take == hbm) out_.hbm_bound_s += take;
    else out_.l2_bound_s += take;
    now_ = begin + take;
    step_hbm_mark_ = cache_->hbm_read + cache_->hbm_write;
    step_l2_read_ = step_l2_write_ = 0;
    adders_.clear();
    ++out_.steps;
  }

  // Step s of the cube cores (…_schedule.h): each AIC's items in order; a logits task's G
  // follows on its two AIVs once the block is in the ring; tiles start once the previous
  // window's G is written (`gDone`). Returns when this step's window G is written.
  double CubeStep(uint64_t s, double gDone) {
    const double begin = now_;
    // Agents: AIC c is c, its AIVs are cores + 2c and cores + 2c + 1.
    std::vector<std::vector<Piece>> work(3 * cores_);
    size_t events = 0;
    for (uint64_t c = 0; c < cores_; ++c) {
      uint64_t q = 0;
      current_window_ = s;
      current_core_ = c;
      for (uint64_t j = 0; flce::CoreTask(t_, s, c, cores_, j, q); ++j) {
        const FlceTask task = flce::TaskOf(t_, flce::WindowAt(t_, s), q);
        const uint64_t slot = tasks_[c]++ % 2;
        LogitsWork(task, slot, c, work[c]);
        work[c].back().signals = static_cast<int64_t>(events);
        for (uint32_t sub = 0; sub < 2; ++sub) {
          std::vector<Piece>& g = work[cores_ + 2 * c + sub];
          const size_t first = g.size();
          GWork(task, slot, c, sub, g);
          if (g.size() > first) g[first].waits = static_cast<int64_t>(events);
        }
        ++events;
      }
      if (t_.mode == 0 && s == 0) continue;
      current_window_ = s - 1;
      const size_t first = work[c].size();
      for (uint64_t j = 0; flce::CoreTile(t_, s, c, cores_, j, q); ++j) TileWork(flce::TileAt(t_, s, q), work[c]);
      if (work[c].size() > first) work[c][first].not_before = gDone;
    }
    const std::vector<double> end = RunAgents(work, std::vector<double>(3 * cores_, begin), events);
    double busy = 0, windowG = begin;
    for (uint64_t c = 0; c < cores_; ++c) busy = std::max(busy, end[c] - begin);
    for (uint64_t a = cores_; a < 3 * cores_; ++a) windowG = std::max(windowG, end[a]);
    EndStep(begin, busy, true);
    return windowG;
  }

  // A step of the 2 x cores vector cores only, each with the work `make` gives it.
  template <typename Make>
  void VectorStep(Make make, bool count = true) {
    const uint64_t aivs = 2 * cores_;
    std::vector<std::vector<Piece>> work(aivs);
    for (uint64_t a = 0; a < aivs; ++a) make(a, aivs, work[a]);
    const double begin = now_;
    const std::vector<double> end = RunAgents(work, std::vector<double>(aivs, begin), 0);
    double busy = 0;
    for (uint64_t a = 0; a < aivs; ++a) busy = std::max(busy, end[a] - begin);
    if (count) EndStep(begin, busy, false);
  }

  const Tiling& t_;
  const akn::PlatformFacts p_;
  const akn::ChipRates r_;
  const uint32_t layouts_;  // AsimFlceLayouts: what-if NZ operands
  const uint64_t e_, cores_, line_;
  uint64_t x_ = 0, w_ = 0, grad_ = 0, mask_ = 0, target_ = 0, max_ = 0, sum_ = 0, softmax_ = 0;
  uint64_t bias_ = 0, classWeight_ = 0, alpha_ = 0, beta_ = 0, gamma_ = 0;
  uint64_t inputGrad_ = 0, weightGrad_ = 0, user_ = 0, footprint_ = 0;
  L2Cache* cache_ = nullptr;
  double now_ = 0;
  uint64_t step_l2_read_ = 0, step_l2_write_ = 0, step_hbm_mark_ = 0, current_window_ = 0, current_core_ = 0;
  std::vector<uint64_t> tasks_ = std::vector<uint64_t>(cores_, 0);  // logits blocks per AIC so far
  std::vector<uint64_t> core_calls_ = std::vector<uint64_t>(cores_, 0);  // Matmul calls per AIC
  // The columns each AIV's option buffers hold (LoadColumns).
  std::vector<std::pair<uint64_t, uint64_t>> loaded_ =
      std::vector<std::pair<uint64_t, uint64_t>>(2 * cores_, {~uint64_t(0), 0});
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> adders_;  // line -> (last adder + 1, adders)
  AsimFlceModel out_{};
};

}  // namespace

extern "C" {

// The model of one launch with this tiling (the FLCE TilingFunc's data), input dtype
// (ascend_ops_kernels::DtypeCode), L2 line size (64 or 512 bytes, or any power of two), the
// rates of one end of their range (common/platform.h) and what-if operand layouts
// (AsimFlceLayouts; 0: the kernel's own, every operand ND).
int asim_flce_model(const FusedLinearCrossEntropyLossGradTilingData* tiling, uint32_t dtype, uint64_t line_bytes,
                    const ascend_ops_kernels::ChipRates* rates, uint32_t layouts, AsimFlceModel* out, char* error,
                    uint64_t error_bytes) {
  try {
    if (line_bytes < 32 || (line_bytes & (line_bytes - 1)) != 0) throw std::runtime_error("line_bytes must be a power of two >= 32");
    if (tiling->cubeCores == 0 || tiling->cubeCores > 4096) throw std::runtime_error("the tiling launches no cube core");
    Model model(*tiling, dtype, line_bytes, *rates, layouts);
    *out = model.Run();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}

// The two ends of the rates' range (common/platform.h): 0 the fast end, 1 the slow end.
void asim_chip_rates(uint32_t slow, ascend_ops_kernels::ChipRates* out) {
  *out = slow ? ascend_ops_kernels::kA2RatesSlow : ascend_ops_kernels::kA2RatesFast;
}

}  // extern "C"

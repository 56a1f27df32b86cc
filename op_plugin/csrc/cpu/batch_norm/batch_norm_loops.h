// The inner loops of the batch-norm CPU kernels (batch_norm_stats, _elemt,
// _backward_elemt, and the sums of batch_norm_reduce_backward), compiled three times
// from one source (batch_norm_loops.inc): for AVX512, for AVX2 (+ FMA, F16C) and for any
// x86-64/ARM CPU. The kernels call them through bn_loops(), which picks the build this CPU
// runs.
//
// Plain C types only: the AVX512 build must share no inline or template code with the
// rest of the library (see avx512_kernels.h).
//
// Two layouts, as the kernels read them in place:
//   run:  `runs` runs of `run_length` contiguous elements of one channel, `run_stride`
//         elements apart (contiguous [N, C, S]: run n of channel c starts at (n*C + c)*S);
//   rows: `rows` rows of `channels` contiguous channels, `row_stride` elements apart
//         (channels_last, or [N, C]).
// Per-channel coefficient arrays of the element-wise loops (`mean`, `scale`, ...) are
// float, or double when the element type is kFloat64: those loops compute in that type.
// The two reductions (stats, reduce) convert every element to double and sum in double
// for every element type.
#pragma once

#include <stdint.h>

namespace ascend_ops {
namespace cpu {

enum class BnElem : int { kFloat32, kFloat64, kFloat16, kBFloat16 };

// The run loops add into 16 lane sums then 16 more (element j of a run into lane
// j % 16): kBnLanes doubles each, flushed by the caller in lane order.
constexpr int64_t kBnLanes = 16;

struct BnLoops {
  // Adds Σ (x − shift) and Σ (x − shift)² over n contiguous elements to `lanes`
  // (kBnLanes sums then kBnLanes sums of squares).
  void (*stats_lanes)(BnElem type, const void* x, int64_t n, double shift, double* lanes);
  // The same per channel over rows, straight into sum[c] and sum_sq[c].
  void (*stats_rows)(BnElem type, const void* x, int64_t rows, int64_t channels,
                     int64_t row_stride, const double* shift, double* sum, double* sum_sq);
  // y = (x − mean) · scale + bias over n contiguous elements of one channel.
  void (*elemt_run)(BnElem type, const void* x, void* y, int64_t n, double mean, double scale,
                    double bias);
  void (*elemt_rows)(BnElem type, const void* x, void* y, int64_t rows, int64_t channels,
                     int64_t row_stride, const void* mean, const void* scale, const void* bias);
  // dx = (dy − mean_dy − (x − mean) · k) · scale over n contiguous elements of one channel.
  void (*backward_elemt_run)(BnElem type, const void* dy, const void* x, void* dx, int64_t n,
                             double mean, double k, double mean_dy, double scale);
  void (*backward_elemt_rows)(BnElem type, const void* dy, const void* x, void* dx,
                              int64_t rows, int64_t channels, int64_t row_stride,
                              const void* mean, const void* k, const void* mean_dy,
                              const void* scale);
  // batch_norm_reduce_backward's Σ dy and Σ dy·(x − mean) over `runs` runs of
  // `run_length` contiguous elements, `run_stride` elements apart, added to `lanes`
  // (kBnLanes sums of dy then kBnLanes of dy·(x − mean)). The portable build's float and
  // double loop adds into lanes 0-7 of each only (element j to lane j % 8, see the .inc).
  void (*reduce_runs)(BnElem type, const void* dy, const void* x, int64_t runs,
                      int64_t run_length, int64_t run_stride, double mean, double* lanes);
  // The same per channel over rows, straight into sum_dy[c] and sum_dy_xmu[c].
  void (*reduce_rows)(BnElem type, const void* dy, const void* x, int64_t rows,
                      int64_t channels, int64_t row_stride, const double* mean, double* sum_dy,
                      double* sum_dy_xmu);
  // stats_lanes and reduce_runs with every element converted to double and summed in
  // double, in every build. The kernels sum a channel again with these when its sums came
  // out Inf or NaN (resum_non_finite_channels, batch_norm_layout.h): the portable and AVX2
  // builds sum half inputs in float blocks (see the .inc), exact rearrangements of the
  // double sums for finite terms only (an Inf in dy made Σ dy·(x − mean) NaN where aten's
  // is ±Inf; bfloat16 products past 3.4e38 overflow a float sum whose double twin is
  // finite).
  void (*stats_lanes_double)(BnElem type, const void* x, int64_t n, double shift, double* lanes);
  void (*reduce_runs_double)(BnElem type, const void* dy, const void* x, int64_t runs,
                             int64_t run_length, int64_t run_stride, double mean, double* lanes);
  const char* engine;  // "avx512", "avx2" or "portable", for benchmark rows
};

// The widest build this CPU runs: AVX512 where it has AVX512-F/BW/VL/DQ, else AVX2 where it
// has AVX2, FMA and F16C, else the portable one. ASCEND_OPS_CPU_BN_LOOPS = auto | avx512 |
// avx2 | portable forces one (ValueError for a build this CPU cannot run, or a bad
// value); ASCEND_OPS_CPU_GEMM=portable (engine_switch.h) forces the portable one too.
const BnLoops& bn_loops();

namespace bn_avx512 {
extern const BnLoops kLoops;
}  // namespace bn_avx512
namespace bn_avx2 {
extern const BnLoops kLoops;
}  // namespace bn_avx2
namespace bn_portable {
extern const BnLoops kLoops;
}  // namespace bn_portable

}  // namespace cpu
}  // namespace ascend_ops

// The GEMMs the FLCE host side composes around its vector kernel. On CANN they are
// matmul operator launches (the cube unit); here they are plain fp32-accumulating loops
// that count what such a launch costs: 2·M·N·K cube FLOPs and one GM read of each
// operand (the L1-resident lower bound) plus the write of C.
#pragma once

#include <cstdint>

#include "sim_runtime.h"

namespace sim {

enum class MatDtype : uint8_t { F32, F16, BF16 };

struct MatView {
  const void* data;
  MatDtype dtype;
  uint64_t rows, cols;   // logical shape of the operand as used (after transposition)
  uint64_t ld;           // elements between consecutive stored rows
  bool transposed;       // stored as [cols, rows]
};

// C[M, N] = A[M, K] · B[K, N] (+ accumulate[M, N] in fp32 when given), written in C's
// dtype with round-to-nearest-even. `counters` receives the modelled costs.
void HostMatmul(const MatView& a, const MatView& b, void* c, MatDtype c_dtype, uint64_t ldc,
                const float* accumulate, LaunchCounters& counters);

}  // namespace sim

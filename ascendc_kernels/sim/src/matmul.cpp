#include "sim_matmul.h"

#include <stdexcept>
#include <vector>

#include "sim_dtypes.h"

namespace sim {
namespace {

uint32_t Bytes(MatDtype d) { return d == MatDtype::F32 ? 4 : 2; }

float Load(const void* p, MatDtype d, uint64_t i) {
  switch (d) {
    case MatDtype::F32: return static_cast<const float*>(p)[i];
    case MatDtype::F16: return HalfBitsToFloat(static_cast<const uint16_t*>(p)[i]);
    case MatDtype::BF16: return Bf16BitsToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

// The operand as a dense row-major fp32 matrix [rows, cols] (inputs are exact in fp32).
std::vector<float> Dense(const MatView& m) {
  std::vector<float> out(m.rows * m.cols);
  for (uint64_t r = 0; r < m.rows; ++r)
    for (uint64_t c = 0; c < m.cols; ++c)
      out[r * m.cols + c] = Load(m.data, m.dtype, m.transposed ? c * m.ld + r : r * m.ld + c);
  return out;
}

}  // namespace

void HostMatmul(const MatView& a, const MatView& b, void* c, MatDtype c_dtype, uint64_t ldc,
                const float* accumulate, LaunchCounters& counters) {
  if (a.cols != b.rows) throw SimError("simulator: HostMatmul: inner dimensions differ");
  const uint64_t m = a.rows, k = a.cols, n = b.cols;
  const std::vector<float> da = Dense(a), db = Dense(b);
  std::vector<float> row(n);
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t j = 0; j < n; ++j) row[j] = accumulate ? accumulate[i * n + j] : 0.0f;
    for (uint64_t p = 0; p < k; ++p) {  // fp32 accumulation in k order
      const float x = da[i * k + p];
      const float* brow = &db[p * n];
      for (uint64_t j = 0; j < n; ++j) row[j] += x * brow[j];
    }
    for (uint64_t j = 0; j < n; ++j) {
      switch (c_dtype) {
        case MatDtype::F32: static_cast<float*>(c)[i * ldc + j] = row[j]; break;
        case MatDtype::F16: static_cast<uint16_t*>(c)[i * ldc + j] = FloatToHalfBits(row[j]); break;
        case MatDtype::BF16: static_cast<uint16_t*>(c)[i * ldc + j] = FloatToBf16Bits(row[j]); break;
      }
    }
  }
  counters.cube_flops += 2 * m * n * k;
  counters.gm_read_bytes += m * k * Bytes(a.dtype) + k * n * Bytes(b.dtype) + (accumulate ? m * n * 4 : 0);
  counters.gm_write_bytes += m * n * Bytes(c_dtype);
}

}  // namespace sim

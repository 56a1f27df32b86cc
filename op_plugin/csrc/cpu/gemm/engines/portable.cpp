#include "portable.h"

#include "../gemm.h"
#include "../operands/gemm_operands.h"
#include "matmul_precision.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>

#include <algorithm>

namespace ascend_ops {
namespace cpu {
namespace {

// Scratch bounds of the portable gemm_rounded: B is widened whole when its fp32 copy fits
// kWholeBBytes (or exists already), else in K blocks of that size; the rows of A go in
// blocks whose fp32 sums and fp32 A block fit kRowBlockBytes. At (BT, H, V) = (4096, 4096,
// 16000), G @ W (K = V) takes K blocks of 1024 and row blocks of 1638: at most 48 MiB held,
// where widening G and W whole would hold 500 MiB.
constexpr int64_t kWholeBBytes = 16LL << 20;
constexpr int64_t kRowBlockBytes = 32LL << 20;

}  // namespace

void fp32_copies_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate,
                      GemmEngine engine) {
  const at::Tensor a_f32 = a.widened();  // dense copies: no padding to read
  const at::Tensor b_f32 = b.widened();
  check_handed_operand(a_f32, "A", engine);
  check_handed_operand(b_f32, "B", engine);
  if (accumulate) {
    c.addmm_(a_f32, b_f32);
  } else {
    at::mm_out(c, a_f32, b_f32);
  }
}

void portable_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate) {
  // IEEE fp32, whatever precision the user set for their own matmuls.
  const MatmulPrecisionGuard precision(at::Float32Precision::IEEE);
  fp32_copies_gemm(a, b, c, accumulate, GemmEngine::kPortable);
}

// out = half(A @ B) on the portable engine: IEEE fp32 GEMMs on fp32 copies of blocks of the
// operands, summed in fp32 over K blocks and rounded once per output row block (one
// product on the whole operands where the caller widened A already). The blocks depend on
// the shapes only, so the result is reproducible.
void portable_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out) {
  const int64_t m = a.rows();
  const int64_t k = a.cols();
  const int64_t n = b.cols();
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    out.zero_();
    return;
  }
  const MatmulPrecisionGuard precision(at::Float32Precision::IEEE);
  if (a.is_widened()) {
    // The caller holds A's fp32 copy already (FLCE's G_c, shared with its fp32-out GEMM)
    // and sized its scratch for one fp32 product: no blocks.
    const at::Tensor a_f32 = a.widened();
    const at::Tensor b_f32 = b.widened();
    check_handed_operand(a_f32, "A", GemmEngine::kPortable);
    check_handed_operand(b_f32, "B", GemmEngine::kPortable);
    out.copy_(at::mm(a_f32, b_f32));
    return;
  }
  const bool whole_b = b.is_widened() || k * n * 4 <= kWholeBBytes;
  const int64_t kb = whole_b ? k : std::clamp<int64_t>(kWholeBBytes / (n * 4), 1, k);
  const int64_t mb = std::clamp<int64_t>(kRowBlockBytes / ((n + kb) * 4), 1, m);
  const at::Tensor b_whole = whole_b ? b.widened() : at::Tensor();
  if (whole_b) {
    check_handed_operand(b_whole, "B", GemmEngine::kPortable);
  }
  at::Tensor sums = at::empty({mb, n}, out.options().dtype(at::kFloat));
  // One buffer each for the blocks of A and of B, reused (WideningBuffer); a block of a
  // transposed operand (G.T) stays column-major, which ATen's GEMM reads in place.
  WideningBuffer a_room(mb * kb);
  WideningBuffer b_room(whole_b ? 0 : kb * n);
  for (int64_t r0 = 0; r0 < m; r0 += mb) {
    const int64_t rows = std::min(mb, m - r0);
    at::Tensor c = sums.narrow(0, 0, rows);
    for (int64_t k0 = 0; k0 < k; k0 += kb) {
      const int64_t depth = std::min(kb, k - k0);
      const at::Tensor a_block = a_room.widen(a.half().narrow(0, r0, rows).narrow(1, k0, depth));
      const at::Tensor b_block = whole_b ? b_whole : b_room.widen(b.half().narrow(0, k0, depth));
      check_handed_operand(a_block, "A", GemmEngine::kPortable);
      check_handed_operand(b_block, "B", GemmEngine::kPortable);
      if (k0 == 0) {
        at::mm_out(c, a_block, b_block);
      } else {
        c.addmm_(a_block, b_block);
      }
    }
    out.narrow(0, r0, rows).copy_(c);  // rounded to nearest even, once
  }
}

}  // namespace cpu
}  // namespace ascend_ops

#include "mkl_gemm.h"

#include "../gemm.h"
#include "../operands/gemm_operands.h"

#include <dlfcn.h>

#include <algorithm>
#include <limits>

namespace ascend_ops {
namespace cpu {
namespace {

// CBLAS's enums, as MKL numbers them (mkl_cblas.h).
constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

// The sizes are declared 64-bit (MKL_INT of the ILP64 interface). Were the exported symbol
// the LP64 one, the x86-64 calling convention still hands it the right values: each integer
// travels in a register or an 8-byte stack slot whose low half is the 32-bit value, for
// sizes below 2^31, which mkl_bf16_gemm checks.
using GemmBf16Bf16F32 = void (*)(int layout, int trans_a, int trans_b, int64_t m, int64_t n,
                                 int64_t k, float alpha, const uint16_t* a, int64_t lda,
                                 const uint16_t* b, int64_t ldb, float beta, float* c,
                                 int64_t ldc);

// MKL's mkl_free_buffers, under the name libtorch_cpu exports it.
using FreeBuffers = void (*)();

void* lookup(const char* symbol) {
  if (void* global = dlsym(RTLD_DEFAULT, symbol)) {
    return global;
  }
  // torch loads libtorch_cpu without RTLD_GLOBAL: ask the loaded library itself.
  if (void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD)) {
    return dlsym(torch_cpu, symbol);
  }
  return nullptr;
}

GemmBf16Bf16F32 function() {
  static const auto f = reinterpret_cast<GemmBf16Bf16F32>(lookup("cblas_gemm_bf16bf16f32"));
  return f;
}

// One operand as CBLAS takes it: its data, whether it is transposed (column-major), and its
// leading dimension. A view that is neither row- nor column-major is copied row-major into
// `copy`.
struct CblasOperand {
  const uint16_t* data;
  int trans;
  int64_t ld;
};

CblasOperand cblas_operand(const at::Tensor& t, at::Tensor& copy) {
  const int64_t rows = t.size(0);
  const int64_t cols = t.size(1);
  // A dimension of extent 1 has no meaningful stride: take the dense one.
  const int64_t s0 = rows == 1 ? std::max<int64_t>(cols, 1) : t.stride(0);
  const int64_t s1 = cols == 1 ? 1 : t.stride(1);
  const auto bits = [](const at::Tensor& x) {
    return reinterpret_cast<const uint16_t*>(x.const_data_ptr<at::BFloat16>());
  };
  if (s1 == 1 && s0 >= std::max<int64_t>(cols, 1)) {
    return {bits(t), kCblasNoTrans, s0};
  }
  const int64_t c0 = rows == 1 ? 1 : t.stride(0);
  const int64_t c1 = cols == 1 ? std::max<int64_t>(rows, 1) : t.stride(1);
  if (c0 == 1 && c1 >= std::max<int64_t>(rows, 1)) {
    return {bits(t), kCblasTrans, c1};
  }
  copy = t.contiguous();
  return {bits(copy), kCblasNoTrans, std::max<int64_t>(cols, 1)};
}

// The mkl engine's rounded product: fp32 sums of row blocks of at most kMklRowBlockBytes,
// each rounded once (to nearest even) into out. At (BT, H) = (4096, 4096), 1024 rows a block.
constexpr int64_t kMklRowBlockBytes = 16LL << 20;

void mkl_bf16_gemm_rounded(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  const int64_t m = a.size(0);
  const int64_t n = b.size(1);
  if (m == 0 || n == 0) {
    return;
  }
  const int64_t block = std::clamp<int64_t>(kMklRowBlockBytes / std::max<int64_t>(1, n * 4), 1, m);
  at::Tensor sums = scratch_empty({block, n}, out.options().dtype(at::kFloat));
  for (int64_t r0 = 0; r0 < m; r0 += block) {
    const int64_t rows = std::min(block, m - r0);
    at::Tensor c = sums.narrow(0, 0, rows);
    mkl_bf16_gemm(a.narrow(0, r0, rows), b, c, /*accumulate=*/false);
    out.narrow(0, r0, rows).copy_(c);  // rounded to nearest even, once
  }
}

}  // namespace

bool mkl_bf16_gemm_available() { return function() != nullptr; }

void mkl_release_buffers() {
  static const auto free_buffers = reinterpret_cast<FreeBuffers>(lookup("mkl_serv_free_buffers"));
  if (free_buffers != nullptr) {
    free_buffers();
  }
}

void mkl_bf16_gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, bool accumulate) {
  const int64_t m = a.size(0);
  const int64_t k = a.size(1);
  const int64_t n = b.size(1);
  TORCH_INTERNAL_ASSERT(function() != nullptr && a.scalar_type() == at::kBFloat16 &&
                        b.scalar_type() == at::kBFloat16 && b.size(0) == k &&
                        c.scalar_type() == at::kFloat && c.size(0) == m && c.size(1) == n &&
                        (n <= 1 || c.stride(1) == 1));
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (!accumulate) {
      c.zero_();
    }
    return;
  }
  at::Tensor a_copy, b_copy;
  const CblasOperand op_a = cblas_operand(a, a_copy);
  const CblasOperand op_b = cblas_operand(b, b_copy);
  const int64_t ldc = m == 1 ? std::max<int64_t>(n, 1) : c.stride(0);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(std::max({m, n, k, op_a.ld, op_b.ld, ldc}) <= kMax,
              "the mkl GEMM engine takes sizes and leading dimensions below 2^31, got m=", m,
              " n=", n, " k=", k, "; choose another with ASCEND_OPS_CPU_GEMM");
  function()(kCblasRowMajor, op_a.trans, op_b.trans, m, n, k, 1.0f, op_a.data, op_a.ld, op_b.data,
             op_b.ld, accumulate ? 1.0f : 0.0f, c.mutable_data_ptr<float>(), ldc);
}

void mkl_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate) {
  const at::Tensor a_half = engine_ready(a.half());
  const at::Tensor b_half = engine_ready(b.half());
  check_handed_operand(a_half, "A", GemmEngine::kMkl);
  check_handed_operand(b_half, "B", GemmEngine::kMkl);
  mkl_bf16_gemm(a_half, b_half, c, accumulate);
}

void mkl_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out) {
  const at::Tensor a_half = engine_ready(a.half());
  const at::Tensor b_half = engine_ready(b.half());
  check_handed_operand(a_half, "A", GemmEngine::kMkl);
  check_handed_operand(b_half, "B", GemmEngine::kMkl);
  mkl_bf16_gemm_rounded(a_half, b_half, out);
}

}  // namespace cpu
}  // namespace ascend_ops

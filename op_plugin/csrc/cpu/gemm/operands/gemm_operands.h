// The operand contract between the CPU kernels and the GEMM engines they do not own
// (oneDNN, MKL's bf16 GEMM and ATen's fp32 GEMM): an operand handed to such an engine is
// either dense (its leading dimension equals its contiguous extent) or its padding, the
// elements between the contiguous extent and the leading dimension, is zero.
//
// Why: oneDNN's AMX bf16 kernels read A's K-tail up to the row stride and rely on B's
// zero padding along K to cancel it; a NaN or Inf in that padding (uninitialised scratch,
// or the other columns of a user's `big[:, :H]`) turns whole output rows into NaN. On CPUs
// without AMX oneDNN does not read there, so a test cannot see the bug by its results;
// gemm_operand_check_enabled() (engine_switch.h) makes the contract itself an assertion.
//
// The project's own GEMM (avx512bf16) reads only the logical [rows, K] region (its packing
// puts a zero in the second half of an odd K's last pair itself) and takes any strides.
#pragma once

#include "../choice/engine_switch.h"

#include <ATen/core/Tensor.h>

namespace ascend_ops {
namespace cpu {

// True when `matrix` (2-D) is dense, or every padding element of it lies inside its
// storage and is ±0. Reads only the padding: rows x (ld - extent) elements.
bool dense_or_zero_padded(const at::Tensor& matrix);

// `matrix` itself when dense_or_zero_padded(), else a dense row-major copy of it.
at::Tensor engine_ready(const at::Tensor& matrix);

// With ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS=1: RuntimeError unless dense_or_zero_padded(),
// naming the operand (`role`, e.g. "A"), its shape, strides and `engine`. Free otherwise.
void check_handed_operand(const at::Tensor& matrix, const char* role, GemmEngine engine);

// at::empty, filled with NaN (floating dtypes) when ASCEND_OPS_CPU_POISON_SCRATCH=1, so a
// test sees every element a kernel reads before writing it.
at::Tensor scratch_empty(at::IntArrayRef sizes, const at::TensorOptions& options);

// buffer[:, used_cols:] = 0: the padding of a row-padded scratch matrix, so that oneDNN
// can take its [:, :used_cols] view in place (a rows x (ld - used_cols) write).
void zero_padding_columns(at::Tensor& buffer, int64_t used_cols);

}  // namespace cpu
}  // namespace ascend_ops

// ascend_ops._C: loading it registers the operators (schemas and CPU kernels); the
// Python functions below expose the shared validation to the reference and the fake
// kernels, so every implementation rejects bad input with the same message.
#include "aten_registration.h"
#include "cpu/isa_builds.h"
#include "cpu/gemm/engines/avx512bf16/avx512_kernels.h"
#include "cpu/batch_norm/batch_norm_kernels.h"
#include "cpu/batch_norm/batch_norm_loops.h"
#include "cpu/gemm/bf16_matrix.h"
#if ASCEND_OPS_X86_KERNELS
#include "cpu/gemm/engines/avx512bf16/bf16_gemm.h"
#endif
#include "cpu/gemm/cpu_caches.h"
#include "cpu/gemm/choice/engine_cache.h"
#include "cpu/gemm/gemm.h"
#include "cpu/gemm/operands/gemm_operands.h"
#include "cpu/gemm/operands/kept_scratch.h"
#include "cpu/gemm/operands/packing_buffers.h"
#include "cpu/gemm/peak_loops/peak_loops.h"
#include "cpu/cross_entropy/lce_grad_cache.h"
#include "cpu/cross_entropy/lce_options.h"
#include "npu/builtin_limits_py.h"
#include "validation.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>

namespace {

// a @ b for 2-D half CPU tensors of any strides, fp32 result, through the CPU kernels'
// GEMM layer on `engine` (default: the one the kernels use): lets the benchmark and the
// tests measure and check each engine alone.
at::Tensor cpu_gemm(const at::Tensor& a, const at::Tensor& b, std::optional<std::string> engine,
                    std::optional<at::Tensor> accumulate_into, bool rounded) {
  using ascend_ops::cpu::GemmEngine;
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                    "cpu_gemm: expected [m, k] @ [k, n], got ", a.sizes(), " @ ", b.sizes());
  TORCH_CHECK_TYPE((a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kHalf) &&
                       b.scalar_type() == a.scalar_type() && a.device().is_cpu() &&
                       b.device().is_cpu(),
                   "cpu_gemm: expected two bfloat16 or two float16 CPU tensors, got ",
                   a.scalar_type(), " and ", b.scalar_type());
  using ascend_ops::cpu::GemmKind;
  GemmEngine chosen =
      ascend_ops::cpu::gemm_engine(a.scalar_type(), rounded ? GemmKind::kRounded : GemmKind::kFp32Out);
  if (engine.has_value()) {
    const std::optional<GemmEngine> named = ascend_ops::cpu::engine_named(*engine);
    TORCH_CHECK_VALUE(named.has_value(),
                      "cpu_gemm: 'engine' must be onednn, mkl, amx, avx512bf16, avx2 or portable, got '",
                      *engine, "'");
    chosen = *named;
    TORCH_CHECK_VALUE(ascend_ops::cpu::engine_usable(chosen, a.scalar_type()), "cpu_gemm: engine '",
                      *engine, "' cannot multiply ", a.scalar_type(), " on this CPU");
  }
  if (rounded) {
    TORCH_CHECK_VALUE(!accumulate_into.has_value(),
                      "cpu_gemm: 'rounded' and 'accumulate_into' exclude each other");
    at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
    ascend_ops::cpu::gemm_rounded(ascend_ops::cpu::GemmOperand(a), ascend_ops::cpu::GemmOperand(b),
                                  out, chosen);
    return out;
  }
  at::Tensor c;
  if (accumulate_into.has_value()) {
    c = *accumulate_into;
    TORCH_CHECK_VALUE(c.scalar_type() == at::kFloat && c.device().is_cpu() && c.dim() == 2 &&
                          c.size(0) == a.size(0) && c.size(1) == b.size(1) &&
                          (c.size(1) <= 1 || c.stride(1) == 1),
                      "cpu_gemm: 'accumulate_into' must be a float32 CPU [", a.size(0), ", ",
                      b.size(1), "] matrix with contiguous rows, got ", c.scalar_type(), " ",
                      c.sizes(), " strides ", c.strides());
  } else {
    c = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  }
  ascend_ops::cpu::gemm(ascend_ops::cpu::GemmOperand(a), ascend_ops::cpu::GemmOperand(b), c,
                        accumulate_into.has_value(), chosen);
  return c;
}

std::vector<std::string> cpu_gemm_engines() {
  std::vector<std::string> names;
  for (const auto engine : ascend_ops::cpu::available_gemm_engines()) {
    names.emplace_back(ascend_ops::cpu::engine_name(engine));
  }
  return names;
}

ascend_ops::cpu::GemmKind kind_named(const std::string& kind) {
  TORCH_CHECK_VALUE(kind == "fp32_out" || kind == "rounded",
                    "'kind' must be fp32_out or rounded, got '", kind, "'");
  return kind == "fp32_out" ? ascend_ops::cpu::GemmKind::kFp32Out : ascend_ops::cpu::GemmKind::kRounded;
}

std::vector<std::pair<std::string, double>> cpu_gemm_timings(const std::string& kind) {
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& t : ascend_ops::cpu::gemm_engine_timings(kind_named(kind))) {
    rows.emplace_back(ascend_ops::cpu::engine_name(t.engine), t.tflops);
  }
  return rows;
}

// The engine choice for `kind` on an injected table: the environment's forcing as the
// kernels read it, `available` engines and `timings` (engine, TFLOP/s) in place of this
// CPU's. Lets a test prove the choice for a CPU it does not run on (an AMX one, say).
std::string cpu_gemm_choice(const std::string& kind, const std::vector<std::string>& available,
                            const std::vector<std::pair<std::string, double>>& timings) {
  using ascend_ops::cpu::EngineTiming;
  using ascend_ops::cpu::GemmEngine;
  const auto engine_of = [](const std::string& name) {
    const std::optional<GemmEngine> e = ascend_ops::cpu::engine_named(name);
    TORCH_CHECK_VALUE(e.has_value(), "cpu_gemm_choice: unknown engine '", name, "'");
    return *e;
  };
  std::vector<GemmEngine> offered;
  for (const std::string& name : available) {
    offered.push_back(engine_of(name));
  }
  std::vector<EngineTiming> table;
  for (const auto& [name, tflops] : timings) {
    table.push_back({engine_of(name), tflops});
  }
  const ascend_ops::cpu::GemmKind k = kind_named(kind);
  return ascend_ops::cpu::engine_name(ascend_ops::cpu::choose_gemm_engine(
      k, ascend_ops::cpu::forced_gemm_engine(k), offered, [&] { return table; }));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ascend_ops native library: operator registration and shared validation";
  ascend_ops::npu::def_builtin_limits(m);  // CANN's limits, read here without torch_npu
  m.def("check_fused_linear_cross_entropy_loss_grad",
        &ascend_ops::check_fused_linear_cross_entropy_loss_grad, py::arg("grad"),
        py::arg("input"), py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
        py::arg("label_smoothing"), py::arg("logits_max"), py::arg("sum_exp_logits"),
        py::arg("softmax"), py::arg("check_values"),
        "Raise TypeError/ValueError for input SPEC §1 rejects; check_values also reads "
        "masked_target (not possible on fake tensors).");
  m.def("check_scratch_bytes", &ascend_ops::check_scratch_bytes, py::arg("op"),
        py::arg("scratch_bytes"), "Raise ValueError unless scratch_bytes is None or > 0.");
  m.def("check_batch_norm_reduce_backward", &ascend_ops::check_batch_norm_reduce_backward,
        py::arg("grad_out"), py::arg("input"), py::arg("mean"), py::arg("invstd"),
        py::arg("weight"), "Raise TypeError/ValueError for input SPEC §2 rejects.");
  m.def("check_fused_linear_online_max_sum", &ascend_ops::check_fused_linear_online_max_sum,
        py::arg("input"), py::arg("weight"), py::arg("target"), py::arg("vocab_start_index"),
        py::arg("vocab_end_index"), "Raise TypeError/ValueError for input SPEC §3 rejects.");
  m.def("check_fused_cross_entropy_loss_with_max_sum",
        &ascend_ops::check_fused_cross_entropy_loss_with_max_sum, py::arg("logits_max"),
        py::arg("sum_exp_logits"), py::arg("predicted_logits"), py::arg("label_smoothing"),
        py::arg("input"), py::arg("weight"), py::arg("vocab_parallel_logits"),
        "Raise TypeError/ValueError for input SPEC §3 rejects.");
  m.def("aten_batch_norm_ops", &ascend_ops::aten_batch_norm_ops,
        "The aten sync-BN operators ascend_ops can serve on CPU.");
  m.def("register_aten_batch_norm_cpu", &ascend_ops::register_aten_batch_norm_cpu,
        py::arg("op"),
        "Register our CPU kernel of aten::<op>; the caller checks that none is registered. "
        "Returns false if this library already registered it.");
  m.def("batch_norm_stats_float64", &ascend_ops::batch_norm_stats_float64_cpu, py::arg("input"),
        py::arg("eps"),
        "aten::batch_norm_stats on CPU before its outputs are rounded: float64 (mean, invstd).");
  m.def("cpu_batch_norm_engine", [] { return std::string(ascend_ops::cpu::bn_loops().engine); },
        "The build of the batch-norm loops this CPU runs: 'avx512', 'avx2' or 'portable' "
        "(only 'portable' in a build without the x86 kernels, such as aarch64's).");
  m.def("batch_norm_reduce_output_dtype", &ascend_ops::batch_norm_reduce_output_dtype,
        py::arg("input_dtype"), py::arg("mean_dtype"),
        "dtype of the batch_norm_reduce_backward sums, as the CPU and NPU kernels choose it.");
  m.def("cpu_avx512_kernels_supported", &ascend_ops::cpu::avx512_kernels_supported,
        "Whether this CPU runs the bfloat16 fast path (AVX512-BF16); false in a build without "
        "the x86 kernels.");
  m.def("cpu_gemm_cache_path", &ascend_ops::cpu::engine_cache_path,
        "The file that keeps the GEMM engine choices per CPU (\"\" when turned off).");
  m.def("cpu_gemm_cache_key", &ascend_ops::cpu::engine_cache_key,
        "This process's key in that file (CPU, flags, torch version, threads).");
  m.def("cpu_gemm_from_cache",
        [](const std::string& kind) { return ascend_ops::cpu::gemm_engine_from_cache(kind_named(kind)); },
        py::arg("kind"), "Whether this process took the kind's engine from the cache file.");
  m.def("cpu_gemm_measure",
        [](const std::string& kind) {
          std::vector<std::pair<std::string, double>> rows;
          for (const auto& t : ascend_ops::cpu::measure_gemm_engines(kind_named(kind))) {
            rows.emplace_back(ascend_ops::cpu::engine_name(t.engine), t.tflops);
          }
          return rows;
        },
        py::arg("kind"), "A fresh measurement of every engine on the kind's probe product.");
  m.def("cpu_peak_loops",
        [] {
          std::vector<std::pair<std::string, double>> loops;
          for (const auto& loop : ascend_ops::cpu::available_peak_loops()) {
            loops.emplace_back(loop.instruction, loop.flops_per_iteration);
          }
          return loops;
        },
        "The register-only loops this CPU runs: (instruction, flops per iteration).");
  m.def("cpu_peak_loop_seconds", &ascend_ops::cpu::time_peak_loop, py::arg("instruction"),
        py::arg("iterations"),
        "Wall seconds of `iterations` of the instruction's register-only loop on each of the "
        "kernels' threads at once.");
  m.def("cpu_caches",
        [] {
          const auto& c = ascend_ops::cpu::cpu_caches();
          return py::dict(py::arg("l1d") = c.l1d, py::arg("l2") = c.l2, py::arg("l3") = c.l3,
                          py::arg("source") = std::string(c.source));
        },
        "The data cache sizes (bytes) the own GEMMs derive their blocking from, and where they "
        "were read.");
  m.def("cpu_kept_packing_bytes", &ascend_ops::cpu::kept_packing_bytes,
        "Bytes of packing buffers the own GEMMs' threads keep between calls (at most "
        "16 MiB per buffer, 4 buffers per thread).");
#if ASCEND_OPS_X86_KERNELS  // bf16_gemm.cpp is an x86 build
  m.def("cpu_gemm_blocking",
        [] {
          const auto b = ascend_ops::cpu::bf16_gemm_blocking(at::get_num_threads());
          return py::dict(py::arg("kc") = b.kc, py::arg("mc") = b.mc,
                          py::arg("b_panel_bytes") = b.b_panel_bytes,
                          py::arg("rounded_tile_bytes") = b.rounded_tile_bytes);
        },
        "The avx512bf16 GEMM's cache blocking on this CPU at the current thread count.");
#endif
  m.def("cpu_gemm", &cpu_gemm, py::arg("a"), py::arg("b"), py::arg("engine") = py::none(),
        py::arg("accumulate_into") = py::none(), py::arg("rounded") = false,
        "a @ b in fp32 through the CPU GEMM layer, on `engine` (default: the kernels' choice); "
        "with `accumulate_into` (fp32 [m, n]) adds the product to it in place and returns it; "
        "with `rounded` returns it rounded once to a's dtype (gemm_rounded).");
  m.def("cpu_gemm_engines", &cpu_gemm_engines,
        "Names of the GEMM engines that run bfloat16 on this CPU.");
  m.def("cpu_gemm_engine",
        [](const std::string& kind) {
          return std::string(ascend_ops::cpu::engine_name(
              ascend_ops::cpu::gemm_engine(at::kBFloat16, kind_named(kind))));
        },
        py::arg("kind") = "fp32_out",
        "The engine the CPU kernels use for bfloat16 products of `kind` (fp32_out or rounded): "
        "forced by the environment, else the fastest measured.");
  m.def("cpu_gemm_choice", &cpu_gemm_choice, py::arg("kind"), py::arg("available"),
        py::arg("timings"),
        "The engine choice for `kind` on injected `available` engines and (engine, TFLOP/s) "
        "`timings`, with the environment's forcing (a test hook).");
  // linear_cross_entropy's logits-gradient cache (cpu/cross_entropy/lce_grad_cache.h); internal to
  // python/ascend_ops/training/lce/grad_cache.py (the arguments checked by lce/checks.py).
  m.def("cpu_scratch_ld", &ascend_ops::cpu::scratch_ld, py::arg("n"),
        "Leading dimension (>= n) the CPU kernels give a bf16 scratch matrix of n columns.");
  m.def("cpu_scratch_empty",
        [](std::vector<int64_t> sizes, at::ScalarType dtype) {
          return ascend_ops::cpu::scratch_empty(sizes, at::TensorOptions().dtype(dtype));
        },
        py::arg("sizes"), py::arg("dtype"),
        "torch.empty for a kernel's scratch; NaN-filled with ASCEND_OPS_CPU_POISON_SCRATCH=1.");
  m.def("cpu_kept_scratch_empty",
        [](const std::string& role, std::vector<int64_t> sizes, at::ScalarType dtype,
           int64_t keep_at_most) {
          using ascend_ops::cpu::KeptScratch;
          TORCH_CHECK_VALUE(role == "lce_grad_cache" || role == "lce_logits",
                            "cpu_kept_scratch_empty: role must be 'lce_grad_cache' or "
                            "'lce_logits', got '", role, "'");
          return ascend_ops::cpu::kept_scratch_empty(
              role == "lce_grad_cache" ? KeptScratch::kLceGradCache
                                       : KeptScratch::kLceLogitsOrWeightGrad,
              sizes, at::TensorOptions().dtype(dtype), keep_at_most);
        },
        py::arg("role"), py::arg("sizes"), py::arg("dtype"), py::arg("keep_at_most"),
        "cpu_scratch_empty in the block kept for `role` from one step to the next, where the "
        "request is at most `keep_at_most` bytes and that block is free (the logits chunk's "
        "block serves the backward's weight gradient too).");
  m.def("cpu_kept_scratch_bytes", &ascend_ops::cpu::kept_scratch_bytes,
        "Bytes linear_cross_entropy's CPU step keeps between steps (the blocks of its gradient "
        "cache, and of its logits chunk and weight gradient).");
  m.def("cpu_release_kept_scratch", &ascend_ops::cpu::release_kept_scratch,
        "Frees the blocks linear_cross_entropy's CPU step keeps between steps (one in use "
        "now goes when its step is done with it).");
  m.def("cpu_gemm_operand_ready", &ascend_ops::cpu::dense_or_zero_padded, py::arg("matrix"),
        "Whether a 2-D operand may be handed to oneDNN as it is: dense, or zero-padded.");
  m.def("cpu_check_gemm_operand",
        [](const at::Tensor& matrix, const std::string& role) {
          ascend_ops::cpu::check_handed_operand(matrix, role.c_str(),
                                                ascend_ops::cpu::GemmEngine::kOneDnn);
        },
        py::arg("matrix"), py::arg("role"),
        "The check the GEMM layer makes of each operand it hands to oneDNN under "
        "ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS=1 (a no-op without it).");
  m.def("lce_cache_engine", [](at::ScalarType dtype) { return ascend_ops::cpu::lce_cache_engine(dtype); },
        py::arg("dtype"));
  m.def("lce_chunk_statistics", &ascend_ops::cpu::lce_chunk_statistics, py::arg("input_chunk"),
        py::arg("weight"), py::arg("columns"), py::arg("logits_buffer"),
        py::arg("keep_exps") = false, py::arg("row_scale") = py::none(),
        py::arg("grad_rows") = py::none());
  m.def("lce_write_grad_rows", &ascend_ops::cpu::lce_write_grad_rows, py::arg("logits_buffer"),
        py::arg("global_max"), py::arg("global_sum"), py::arg("columns"), py::arg("row_scale"),
        py::arg("grad_rows"));
  m.def("lce_cached_backward", &ascend_ops::cpu::lce_cached_backward, py::arg("grad_cache"),
        py::arg("row_scale"), py::arg("input"), py::arg("weight"), py::arg("want_input_grad"),
        py::arg("want_weight_grad"), py::arg("keep_weight_grad_at_most") = 0);
  // linear_cross_entropy's loss options (cpu/cross_entropy/lce_options.h, SPEC §7); internal
  // to python/ascend_ops/training/lce/route_cpu_options.py (its arguments checked by lce/checks.py).
  m.def("lce_options_chunk_statistics", &ascend_ops::cpu::lce_options_chunk_statistics,
        py::arg("input_chunk"), py::arg("weight"), py::arg("columns"), py::arg("logits_buffer"),
        py::arg("bias"), py::arg("scale"), py::arg("softcap"), py::arg("class_weight"),
        py::arg("want_weighted_sum"), py::arg("want_argmax"));
  m.def("lce_options_write_grad_rows", &ascend_ops::cpu::lce_options_write_grad_rows,
        py::arg("logits_buffer"), py::arg("global_max"), py::arg("global_sum"), py::arg("columns"),
        py::arg("alpha"), py::arg("beta"), py::arg("gamma"), py::arg("scale"), py::arg("softcap"),
        py::arg("class_weight"), py::arg("grad_rows"));
  m.def("lce_cached_bias_grad", &ascend_ops::cpu::lce_cached_bias_grad, py::arg("grad_cache"),
        py::arg("row_scale"), py::arg("vocab"));
  m.def("lce_options_backward", &ascend_ops::cpu::lce_options_backward, py::arg("input"),
        py::arg("weight"), py::arg("columns"), py::arg("global_max"), py::arg("global_sum"),
        py::arg("alpha"), py::arg("beta"), py::arg("gamma"), py::arg("bias"), py::arg("scale"),
        py::arg("softcap"), py::arg("class_weight"), py::arg("want_input_grad"),
        py::arg("want_weight_grad"), py::arg("want_bias_grad"),
        py::arg("chunk_columns") = py::none());
  m.def("lce_input_grad_room_depth", &ascend_ops::cpu::input_grad_room_depth, py::arg("bt"),
        py::arg("h"), py::arg("vocab"),
        "K depth of the input gradient's blocks in the weight gradient's storage on portable "
        "(0: row and K blocks of scratch instead).");
  m.def("cpu_gemm_timings", &cpu_gemm_timings, py::arg("kind") = "fp32_out",
        "(engine, TFLOP/s) of each available engine on `kind`'s representative product "
        "(fp32_out or rounded), measured once per process.");
}

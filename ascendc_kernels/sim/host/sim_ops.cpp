// The simulator's host side of both operators, as a C ABI for ctypes: for each op an
// aclnn-style two-phase pair (…_workspace_size, then the call with that workspace), which
// tiles with the same pure functions the CANN TilingFunc uses and launches the kernel
// (one launch per call) through ICPU_RUN_KF. FLCE launches with the tiling its CANN
// TilingFunc produced (the caller passes it in: python/ascend_ops/sim/cann_tiling.py). Errors come back as a non-zero status and asim_last_error().
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "sim_matmul.h"
#include "asim_abi.h"
#include "../../batch_norm_reduce_backward/op_host/batch_norm_reduce_backward_tiling.h"
#include "../../fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_tiling.h"

extern "C" void ascend_ops_batch_norm_reduce_backward(GM_ADDR gradOut, GM_ADDR input, GM_ADDR mean, GM_ADDR invstd,
                                                      GM_ADDR weight, GM_ADDR sumDy, GM_ADDR sumDyXmu,
                                                      GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                                      GM_ADDR tiling);
extern "C" void ascend_ops_fused_linear_cross_entropy_loss_grad(GM_ADDR grad, GM_ADDR input, GM_ADDR weight,
                                                                GM_ADDR targetMask, GM_ADDR maskedTarget,
                                                                GM_ADDR logitsMax, GM_ADDR sumExpLogits,
                                                                GM_ADDR softmax, GM_ADDR bias, GM_ADDR classWeight,
                                                                GM_ADDR alpha, GM_ADDR beta, GM_ADDR gamma,
                                                                GM_ADDR inputGrad, GM_ADDR weightGrad,
                                                                GM_ADDR workspace, GM_ADDR tiling);

namespace akn = ascend_ops_kernels;

namespace {

thread_local std::string t_error;
thread_local sim::LaunchCounters t_counters;

// Counters summed over the launches (and host GEMMs) of one operator call.
void Accumulate(sim::LaunchCounters& total, const sim::LaunchCounters& one) {
  total.kernel = total.kernel.empty() ? one.kernel : total.kernel;
  total.block_dim = std::max(total.block_dim, one.block_dim);
  total.gm_read_bytes += one.gm_read_bytes;
  total.gm_write_bytes += one.gm_write_bytes;
  total.ub_high_water = std::max(total.ub_high_water, one.ub_high_water);
  total.vector_instructions += one.vector_instructions;
  total.vector_repeats += one.vector_repeats;
  total.max_block_vector_repeats += one.max_block_vector_repeats;  // launches run one after another
  total.cube_flops += one.cube_flops;
  total.max_core_cube_flops += one.max_core_cube_flops;  // launches run one after another
  total.cube_cores = std::max(total.cube_cores, one.cube_cores);
  total.touched_data_bytes += one.touched_data_bytes;
  total.touched_workspace_bytes += one.touched_workspace_bytes;
}

akn::PlatformFacts Platform(uint32_t vector_cores) {
  akn::PlatformFacts p = akn::kAscend910B;
  if (vector_cores != 0) p.vectorCores = vector_cores;
  return p;
}

// A caller's mistake the kernel found (SPEC §1's ValueError), not a simulator rule.
struct BadTarget : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// 0: ran; 1: a simulator rule or a host error (SimulatorError); 2: bad input (ValueError).
template <typename F>
int Guard(F&& body) {
  t_error.clear();
  try {
    body();
    return 0;
  } catch (const BadTarget& e) {
    t_error = e.what();
    return 2;
  } catch (const std::exception& e) {
    t_error = e.what();
    return 1;
  }
}

sim::GmRegion Input(const void* p, uint64_t bytes, const char* name) {
  return sim::GmRegion{static_cast<const uint8_t*>(p), bytes, name, sim::GmRole::Input};
}

sim::GmRegion Output(const void* p, uint64_t bytes, const char* name) {
  return sim::GmRegion{static_cast<const uint8_t*>(p), bytes, name, sim::GmRole::Output};
}

akn::BatchNormReduceBackwardShape BnShape(uint64_t n, uint64_t c, uint64_t s, uint32_t dtype, uint32_t stat_dtype,
                                          int input_g, int weight_g, int bias_g) {
  return akn::BatchNormReduceBackwardShape{n, c, s, dtype, stat_dtype, input_g != 0, weight_g != 0, bias_g != 0};
}

}  // namespace

extern "C" {

const char* asim_last_error() { return t_error.c_str(); }

void asim_last_counters(AsimCounters* out) {
  const sim::LaunchCounters& c = t_counters;
  *out = AsimCounters{c.gm_read_bytes, c.gm_write_bytes, c.ub_high_water, c.vector_instructions, c.vector_repeats,
                      c.max_block_vector_repeats, c.cube_flops, c.block_dim,
                      static_cast<uint64_t>(sim::RecordedLaunches().size()), c.max_core_cube_flops, c.cube_cores,
                      c.touched_data_bytes, c.touched_workspace_bytes};
}

// ---- batch_norm_reduce_backward -------------------------------------------------------

int asim_batch_norm_reduce_backward_workspace_size(uint64_t n, uint64_t c, uint64_t s, uint32_t dtype,
                                                   uint32_t stat_dtype,
                                                   int input_g, int weight_g, int bias_g, uint32_t vector_cores,
                                                   uint64_t* workspace_bytes) {
  return Guard([&] {
    const auto t = akn::TileBatchNormReduceBackward(BnShape(n, c, s, dtype, stat_dtype, input_g, weight_g, bias_g),
                                                    Platform(vector_cores));
    if (!t.error.empty()) throw sim::SimError("batch_norm_reduce_backward tiling: " + t.error);
    // As the TilingFunc sizes it: GetLibApiWorkSpaceSize() (16 MiB on A2/A3) + the user part.
    *workspace_bytes = sim::kReservedWorkspace + t.workspaceBytes;
  });
}

// mean and invstd are [C] of stat_dtype; outputs not asked for may be null (nothing is written there).
int asim_batch_norm_reduce_backward(const void* grad_out, const void* input, const void* mean, const void* invstd,
                                    void* sum_dy, void* sum_dy_xmu, void* grad_weight, void* grad_bias,
                                    void* workspace, uint64_t workspace_bytes, uint64_t n, uint64_t c, uint64_t s,
                                    uint32_t dtype, uint32_t stat_dtype, int input_g, int weight_g, int bias_g,
                                    uint32_t vector_cores) {
  return Guard([&] {
    t_counters = sim::LaunchCounters{};
    sim::RecordedLaunches().clear();
    const auto t = akn::TileBatchNormReduceBackward(BnShape(n, c, s, dtype, stat_dtype, input_g, weight_g, bias_g),
                                                    Platform(vector_cores));
    if (!t.error.empty()) throw sim::SimError("batch_norm_reduce_backward tiling: " + t.error);
    if (workspace_bytes < sim::kReservedWorkspace + t.workspaceBytes)
      throw sim::SimError("batch_norm_reduce_backward: workspace too small");
    const uint64_t data_bytes = n * c * s * akn::DtypeBytes(dtype);
    const uint64_t out_bytes = c * (akn::BnOutputHalf(dtype, stat_dtype) ? 2 : 4);
    const uint64_t stat_bytes = c * akn::DtypeBytes(stat_dtype);
    BatchNormReduceBackwardTilingData tiling = t.data;
    std::vector<sim::GmRegion> regions = {Input(mean, stat_bytes, "mean"), Input(invstd, stat_bytes, "invstd"),
                                          Input(&tiling, sizeof(tiling), "tiling")};
    if (data_bytes) {
      regions.push_back(Input(grad_out, data_bytes, "grad_out"));
      regions.push_back(Input(input, data_bytes, "input"));
    }
    const void* outs[4] = {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
    const char* names[4] = {"sum_dy", "sum_dy_xmu", "grad_weight", "grad_bias"};
    for (int i = 0; i < 4; ++i)
      if (outs[i]) regions.push_back(Output(outs[i], out_bytes, names[i]));
    // The system part GetUserWorkspace skips on the device, then the kernel's partial sums.
    regions.push_back({static_cast<uint8_t*>(workspace), sim::kReservedWorkspace, "system workspace",
                       sim::GmRole::SystemWorkspace});
    if (t.workspaceBytes)
      regions.push_back({static_cast<uint8_t*>(workspace) + sim::kReservedWorkspace, t.workspaceBytes, "workspace",
                         sim::GmRole::Workspace});
    sim::NextLaunch() = sim::LaunchArgs{t.tilingKey, regions, Platform(vector_cores)};
    auto* tiling_gm = reinterpret_cast<GM_ADDR>(&tiling);
    const sim::LaunchCounters counters = ICPU_RUN_KF(
        ascend_ops_batch_norm_reduce_backward, t.blockDim, (GM_ADDR)grad_out, (GM_ADDR)input, (GM_ADDR)mean, (GM_ADDR)invstd,
        nullptr, (GM_ADDR)sum_dy, (GM_ADDR)sum_dy_xmu, (GM_ADDR)grad_weight, (GM_ADDR)grad_bias,
        (GM_ADDR)workspace, tiling_gm);
    // The tiling struct is host data the launch copies to the device, not GM traffic.
    Accumulate(t_counters, counters);
  });
}

// ---- fused_linear_cross_entropy_loss_grad ---------------------------------------------

// target_mask as the kernel reads it: bit i of byte i / 8 (LSB first) is row i's flag.
// The kernel reads the bit-packed mask the op takes; a bool mask is packed here first
// (as the NPU adapter does).
static std::vector<uint8_t> PackedMask(const AsimFlceArgs& a) {
  std::vector<uint8_t> bits((a.bt + 7) / 8, 0);
  const auto* flags = static_cast<const uint8_t*>(a.target_mask);
  for (uint64_t i = 0; i < a.bt; ++i)
    if (flags[i] != 0) bits[i / 8] = static_cast<uint8_t>(bits[i / 8] | (1u << (i % 8)));
  return bits;
}

// How the caller asked the launch to be scheduled: seed (kDefaultSeed: a new one per
// launch) and whether to run it twice and compare the outputs bit for bit.
static sim::Schedule FlceSchedule(const AsimFlceArgs& a) {
  return sim::Schedule{a.schedule_seed, a.check_determinism != 0};
}

static akn::PlatformFacts FlcePlatform(uint32_t ai_cores) {
  akn::PlatformFacts p = akn::kAscend910B;
  if (ai_cores != 0) {
    p.aiCores = ai_cores;
    p.vectorCores = 2 * ai_cores;
  }
  return p;
}

// The tiling the host hands the launch must be the one for these arguments: shapes, mode,
// key and cores as the TilingFunc would set them for this call (a mismatch is a host bug,
// not something for the kernel to run into).
static void CheckFlceHostTiling(const AsimFlceArgs& a, const FusedLinearCrossEntropyLossGradTilingData& d,
                                uint64_t key, uint32_t block_dim, uint64_t workspace_bytes) {
  const auto fail = [](const std::string& what) {
    throw sim::SimError("fused_linear_cross_entropy_loss_grad: the TilingFunc's tiling does not fit this call: " + what);
  };
  if (d.bt != a.bt || d.h != a.h || d.v != a.v)
    fail("it is for BT, H, V = " + std::to_string(d.bt) + ", " + std::to_string(d.h) + ", " + std::to_string(d.v) +
         ", the call has " + std::to_string(a.bt) + ", " + std::to_string(a.h) + ", " + std::to_string(a.v));
  const uint32_t mode = a.softmax ? akn::kHighPerformance : akn::kMemorySaving;
  const uint64_t expected_key =
      mode + 2 * (a.dtype == akn::kBFloat16) + 4 * (a.target64 != 0) + 8 * (a.alpha != nullptr);
  if (d.mode != mode || key != expected_key)
    fail("tiling key " + std::to_string(key) + " / mode " + std::to_string(d.mode) + ", the call needs key " +
         std::to_string(expected_key));
  const akn::PlatformFacts p = FlcePlatform(a.ai_cores);
  if (block_dim == 0 || block_dim != d.cubeCores || block_dim > p.aiCores)
    fail("blockDim " + std::to_string(block_dim) + " (cubeCores " + std::to_string(d.cubeCores) + ", " +
         std::to_string(p.aiCores) + " AI cores)");
  if (workspace_bytes < d.userWorkspaceBytes) fail("its workspace is smaller than its user part");
}

// One MIX launch does everything (no GEMM on the host), with the tiling data, key and
// blockDim the FLCE TilingFunc produced (ascend_ops._cann_tiling_funcs) and its workspace
// size: the Matmul library's system part (what the TilingFunc reserved in front, from
// GetLibApiWorkSpaceSize) followed by the kernel's user part.
int asim_fused_linear_cross_entropy_loss_grad(const AsimFlceArgs* args,
                                              const FusedLinearCrossEntropyLossGradTilingData* host_tiling,
                                              uint64_t tiling_key, uint32_t block_dim,
                                              uint64_t tiling_workspace_bytes, void* workspace,
                                              uint64_t workspace_bytes) {
  return Guard([&] {
    const AsimFlceArgs& a = *args;
    t_counters = sim::LaunchCounters{};
    sim::RecordedLaunches().clear();
    const uint32_t e = akn::DtypeBytes(a.dtype);
    // Nothing to launch (the TilingFunc refuses an empty shape): both outputs are zero (memsets), as the
    // NPU adapter gives without calling the op (an empty shard, V = 0, included).
    if (a.bt == 0 || a.h == 0 || a.v == 0) {
      if (host_tiling != nullptr) throw sim::SimError("fused_linear_cross_entropy_loss_grad: BT, H or V = 0 has no tiling");
      // An empty output may come as a null pointer, which memset must not get even for 0 bytes.
      if (a.bt * a.h > 0) std::memset(a.input_grad, 0, a.bt * a.h * e);
      if (a.v * a.h > 0) std::memset(a.weight_grad, 0, a.v * a.h * e);
      t_counters.gm_write_bytes += (a.bt + a.v) * a.h * e;
      t_counters.touched_data_bytes += (a.bt + a.v) * a.h * e;
      return;
    }
    if (host_tiling == nullptr) throw sim::SimError("fused_linear_cross_entropy_loss_grad: no tiling from the TilingFunc");
    CheckFlceHostTiling(a, *host_tiling, tiling_key, block_dim, tiling_workspace_bytes);
    if (workspace_bytes < tiling_workspace_bytes)
      throw sim::SimError("fused_linear_cross_entropy_loss_grad: workspace too small");
    FusedLinearCrossEntropyLossGradTilingData tiling = *host_tiling;
    const uint64_t sys_bytes = tiling_workspace_bytes - tiling.userWorkspaceBytes;
    auto* ws = static_cast<uint8_t*>(workspace);
    std::vector<uint8_t> packed;
    const void* mask = a.target_mask;
    uint64_t mask_bytes = a.mask_bytes;
    if (!a.mask_packed) {
      packed = PackedMask(a);
      mask = packed.data();
      mask_bytes = packed.size();
    }
    std::vector<sim::GmRegion> regions = {
        Input(a.grad, a.bt * 4, "grad"), Input(a.input, a.bt * a.h * e, "input"),
        Input(a.weight, a.v * a.h * e, "weight"), Input(mask, mask_bytes, "target_mask"),
        Input(a.masked_target, a.bt * (a.target64 ? 8 : 4), "masked_target"),
        Output(a.input_grad, a.bt * a.h * e, "input_grad"), Output(a.weight_grad, a.v * a.h * e, "weight_grad")};
    if (a.alpha) {  // the loss options' inputs
      regions.push_back(Input(a.alpha, a.bt * 4, "alpha"));
      regions.push_back(Input(a.beta, a.bt * 4, "beta"));
      regions.push_back(Input(a.gamma, a.bt * 4, "gamma"));
      if (a.bias) regions.push_back(Input(a.bias, a.v * 4, "bias"));
      if (a.class_weight) regions.push_back(Input(a.class_weight, a.v * 4, "class_weight"));
    }
    if (a.softmax) {
      // High-performance mode writes G over the softmax (each row into the first half of its own).
      regions.push_back(Output(a.softmax, a.bt * a.v * 4, "softmax"));
    } else {
      regions.push_back(Input(a.logits_max, a.bt * 4, "logits_max"));
      regions.push_back(Input(a.sum_exp_logits, a.bt * 4, "sum_exp_logits"));
    }
    regions.push_back({ws, sys_bytes, "system workspace", sim::GmRole::SystemWorkspace});
    regions.push_back({ws + sys_bytes, tiling.userWorkspaceBytes, "user workspace", sim::GmRole::Workspace});
    sim::NextLaunch() = sim::LaunchArgs{tiling_key, regions, FlcePlatform(a.ai_cores), sim::LaunchKind::MixAic1To2,
                                        FlceSchedule(a)};
    const sim::LaunchCounters counters = ICPU_RUN_KF(
        ascend_ops_fused_linear_cross_entropy_loss_grad, block_dim, (GM_ADDR)a.grad, (GM_ADDR)a.input, (GM_ADDR)a.weight,
        (GM_ADDR)mask, (GM_ADDR)a.masked_target, (GM_ADDR)a.logits_max, (GM_ADDR)a.sum_exp_logits,
        (GM_ADDR)a.softmax, (GM_ADDR)a.bias, (GM_ADDR)a.class_weight, (GM_ADDR)a.alpha, (GM_ADDR)a.beta,
        (GM_ADDR)a.gamma, (GM_ADDR)a.input_grad, (GM_ADDR)a.weight_grad, (GM_ADDR)workspace,
        reinterpret_cast<GM_ADDR>(&tiling));
    Accumulate(t_counters, counters);
    // The kernel's report: per vector core the first row whose unmasked target lies outside
    // [0, V), or -1 (the vector stage computed those rows as masked).
    const auto* report = reinterpret_cast<const int64_t*>(ws + sys_bytes + tiling.reportOffset);
    int64_t bad = -1;
    for (uint64_t i = 0; i < 2ull * block_dim; ++i)
      if (report[i] >= 0 && (bad < 0 || report[i] < bad)) bad = report[i];
    if (bad >= 0) {
      const int64_t target = a.target64 ? static_cast<const int64_t*>(a.masked_target)[bad]
                                        : static_cast<const int32_t*>(a.masked_target)[bad];
      throw BadTarget("fused_linear_cross_entropy_loss_grad: masked_target[" + std::to_string(bad) + "] = " +
                      std::to_string(target) + " is outside [0, " + std::to_string(a.v) +
                      ") on a row that is not masked (the kernel computed it as masked and reported it)");
    }
  });
}

}  // extern "C"

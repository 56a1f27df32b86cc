#include "gemm.h"

#include "../isa_builds.h"
#include "engines/amx/amx_kernels.h"
#include "engines/avx2/avx2_kernels.h"
#include "engines/avx512bf16/avx512_kernels.h"
#include "bf16_matrix.h"
#include "choice/engine_cache.h"
#include "operands/gemm_operands.h"
#include "engines/mkl_gemm.h"
#if ASCEND_OPS_X86_KERNELS
#include "engines/avx2/avx2_gemm.h"
#include "engines/avx512bf16/bf16_gemm.h"
#endif

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>

namespace ascend_ops {
namespace cpu {
namespace {

// Sets oneDNN's fp32 matmul precision for the lifetime of the guard and then restores what
// was there. The precision is process-wide state: the mutex keeps our own calls from
// restoring each other's setting; a user's fp32 matmul running on another Python thread
// at the same moment would see it too (documented in docs/cpu_kernels.md).
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(at::Float32Precision precision) : lock_(mutex()) {
    auto& context = at::globalContext();
    saved_ = context.float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL);
    context.setFloat32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL, precision);
  }
  ~MatmulPrecisionGuard() {
    at::globalContext().setFloat32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL,
                                            saved_);
  }
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> lock_;
  at::Float32Precision saved_ = at::Float32Precision::NONE;
};

// The onednn engine is offered where torch itself sends bf16 matmuls to oneDNN: torch's
// mkldnn::_is_mkldnn_bf16_supported, the device check of its own bf16 matmul dispatch
// (x86: AVX512 BW/VL/DQ, on which AVX512-BF16 and AMX make oneDNN faster; aarch64: the
// BF16 extension, where oneDNN runs Arm's Compute Library). Elsewhere oneDNN would not run
// the product at all (ATen's own bf16 loops would, or an fp32 GEMM, as portable), so the
// engine is not offered: a Kunpeng 920 (Armv8.2, no BF16) has portable only. Asking torch
// rather than the CPU's flags keeps the two decisions one.
bool onednn_bf16_supported() {
  static const bool supported = [] {
    if (!at::hasMKLDNN()) {
      return false;
    }
    const auto op =
        c10::Dispatcher::singleton().findSchema({"mkldnn::_is_mkldnn_bf16_supported", ""});
    return op.has_value() && op->typed<bool()>().call();
  }();
  return supported;
}

#if ASCEND_OPS_X86_KERNELS
Bf16View bf16_view(const at::Tensor& t) {
  return Bf16View{reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>()),
                  t.stride(0), t.stride(1)};
}
#endif

// CPU seconds the calling thread spent in `run`. Unlike wall time, a moment the scheduler
// gives the core to another process does not count, so engines measured on a busy machine
// rank as on a quiet one (scripts/benchmark_gemm_peak.py --choice shows it).
double thread_cpu_seconds_of(const std::function<void()>& run) {
  const auto now = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double start = now();
  run();
  return now() - start;
}

// Runs the engines on the calling thread alone for the lifetime of the guard (ATen, oneDNN
// and MKL all follow at::set_num_threads), so that the thread's CPU time is the product's
// whole cost; restores the thread count after.
class SingleThreadGuard {
 public:
  SingleThreadGuard() : saved_(at::get_num_threads()) { at::set_num_threads(1); }
  ~SingleThreadGuard() { at::set_num_threads(saved_); }
  SingleThreadGuard(const SingleThreadGuard&) = delete;
  SingleThreadGuard& operator=(const SingleThreadGuard&) = delete;

 private:
  int saved_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

// One kind's representative product (gemm.h, gemm_engine_timings) on every available
// engine, on one thread, in rounds that alternate the engines (each round in another
// order), timed in the thread's CPU seconds; each engine's median over the rounds counts.
// The first round warms up (oneDNN creates its kernel on the first call, MKL its buffers)
// and is not timed. One thread, because CPU time is a fair measure only of work that keeps
// every thread it has busy: an engine that left the second thread idle would look twice as
// fast per CPU second.
constexpr int kMeasuredRounds = 9;

std::vector<EngineTiming> measure_engines(GemmKind kind) {
  const bool fp32_out = kind == GemmKind::kFp32Out;
  const int64_t m = 512, n = fp32_out ? 2048 : 1024, k = fp32_out ? 1024 : 4096;
  const at::Generator gen = at::detail::createCPUGenerator(9);
  const at::Tensor a = at::randn({m, k}, gen, at::kFloat).to(at::kBFloat16);
  // fp32-out: B is a weight block [n, k] read as B.T (x @ W_c.T); rounded: W's rows [k, n].
  const at::Tensor b = (fp32_out ? at::randn({n, k}, gen, at::kFloat)
                                 : at::randn({k, n}, gen, at::kFloat)).to(at::kBFloat16);
  at::Tensor c = at::empty({m, n}, at::kFloat);
  at::Tensor out = at::empty({m, n}, at::kBFloat16);
  const std::vector<GemmEngine> engines = available_gemm_engines();
  std::vector<std::vector<double>> seconds(engines.size());
  // fp32-out: A is kept (widened once, in the warm-up, as the kernels keep x), B is fresh
  // each run (widened per product, as a weight chunk is): the cost of widening counts.
  // Rounded: both fresh (G and W are each used once per product).
  const GemmOperand a_kept(a);
  const int threads = std::max(1, at::get_num_threads());
  const SingleThreadGuard one_thread;
  for (int round = 0; round <= kMeasuredRounds; ++round) {
    for (size_t i = 0; i < engines.size(); ++i) {
      const size_t e = (i + static_cast<size_t>(round)) % engines.size();
      const double s = thread_cpu_seconds_of([&] {
        if (fp32_out) {
          gemm(a_kept, GemmOperand(b).t(), c, false, engines[e]);
        } else {
          gemm_rounded(GemmOperand(a), GemmOperand(b), out, engines[e]);
        }
      });
      if (round > 0) {
        seconds[e].push_back(s);
      }
    }
  }
  // One thread's speed times the thread count: the speed the kernels' threads would reach.
  std::vector<EngineTiming> timings;
  for (size_t e = 0; e < engines.size(); ++e) {
    timings.push_back({engines[e], 2.0 * m * n * k * threads / std::max(median(seconds[e]), 1e-9) / 1e12});
  }
  // The probe runs inside some op's first call; what MKL kept from it would stay resident
  // (mkl_gemm.h). Where mkl wins, its next product allocates them again.
  if (std::find(engines.begin(), engines.end(), GemmEngine::kMkl) != engines.end()) {
    mkl_release_buffers();
  }
  return timings;
}

// The mkl engine's rounded product: fp32 sums of row blocks of at most kMklRowBlockBytes,
// each rounded once (to nearest even) into out. At (BT, H) = (4096, 4096), 1024 rows a block.
constexpr int64_t kMklRowBlockBytes = 16LL << 20;

void mkl_gemm_rounded(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
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

// Scratch bounds of the portable gemm_rounded: B is widened whole when its fp32 copy fits
// kWholeBBytes (or exists already), else in K blocks of that size; the rows of A go in
// blocks whose fp32 sums and fp32 A block fit kRowBlockBytes. At (BT, H, V) = (4096, 4096,
// 16000), G @ W (K = V) takes K blocks of 1024 and row blocks of 1638: at most 48 MiB held,
// where widening G and W whole would hold 500 MiB.
constexpr int64_t kWholeBBytes = 16LL << 20;
constexpr int64_t kRowBlockBytes = 32LL << 20;

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

}  // namespace

WideningBuffer::WideningBuffer(at::Tensor room) : elements_(room.numel()), room_(std::move(room)) {
  TORCH_INTERNAL_ASSERT(room_.scalar_type() == at::kFloat && room_.dim() == 1 &&
                        (room_.numel() <= 1 || room_.stride(0) == 1));
}

at::Tensor WideningBuffer::widen(const at::Tensor& half) {
  TORCH_INTERNAL_ASSERT(half.dim() == 2 && half.numel() <= elements_);
  if (!room_.defined()) {
    room_ = scratch_empty({elements_}, half.options().dtype(at::kFloat));
  }
  const at::Tensor room = room_.narrow(0, 0, half.numel());
  if (half.stride(0) == 1 && half.stride(1) != 1 && half.size(0) > 1) {
    // A transposed view: copied along its contiguous columns, handed over column-major.
    at::Tensor dense = room.view({half.size(1), half.size(0)});
    dense.copy_(half.t());
    return dense.t();
  }
  at::Tensor dense = room.view(half.sizes());
  dense.copy_(half);
  return dense;
}

GemmOperand::GemmOperand(at::Tensor matrix) : storage_(std::make_shared<Storage>()) {
  TORCH_INTERNAL_ASSERT(matrix.dim() == 2, "GemmOperand: expected a matrix");
  storage_->matrix = std::move(matrix);
}

GemmOperand::GemmOperand(at::Tensor matrix, WideningBuffer* buffer) : GemmOperand(std::move(matrix)) {
  storage_->buffer = buffer;
}

GemmOperand GemmOperand::t() const {
  GemmOperand transposed = *this;
  transposed.transposed_ = !transposed_;
  return transposed;
}

at::Tensor GemmOperand::half() const {
  return transposed_ ? storage_->matrix.t() : storage_->matrix;
}

bool GemmOperand::is_widened() const { return storage_->f32.defined(); }

at::Tensor GemmOperand::widened() const {
  if (!storage_->f32.defined()) {
    storage_->f32 = storage_->buffer != nullptr
                        ? storage_->buffer->widen(storage_->matrix)
                        : storage_->matrix.to(at::kFloat, /*non_blocking=*/false, /*copy=*/false,
                                              at::MemoryFormat::Contiguous);
  }
  return transposed_ ? storage_->f32.t() : storage_->f32;
}

void gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate,
          GemmEngine engine) {
  TORCH_INTERNAL_ASSERT(a.cols() == b.rows() && c.size(0) == a.rows() && c.size(1) == b.cols() &&
                        c.scalar_type() == at::kFloat && (c.size(1) <= 1 || c.stride(1) == 1));
  TORCH_INTERNAL_ASSERT(engine_usable(engine, a.half().scalar_type()),
                        "gemm: engine ", engine_name(engine), " cannot run this dtype here");
#if ASCEND_OPS_X86_KERNELS
  if (is_own_gemm(engine)) {  // the own GEMMs share one signature
    const auto own_gemm = engine == GemmEngine::kAvx2 ? avx2_bf16_gemm
                          : engine == GemmEngine::kAmx ? amx_bf16_gemm
                                                        : bf16_gemm;
    own_gemm(bf16_view(a.half()), bf16_view(b.half()), a.rows(), b.cols(), a.cols(),
             c.mutable_data_ptr<float>(), c.stride(0), accumulate);
    return;
  }
#endif
  if (engine == GemmEngine::kMkl) {
    // MKL reads the bf16 operands in place, within the contract (gemm_operands.h): a padded
    // view whose padding is not zero is multiplied from a dense copy.
    const at::Tensor a_half = engine_ready(a.half());
    const at::Tensor b_half = engine_ready(b.half());
    check_handed_operand(a_half, "A", engine);
    check_handed_operand(b_half, "B", engine);
    mkl_bf16_gemm(a_half, b_half, c, accumulate);
    return;
  }
  // onednn: bf16 products through oneDNN's bf16 kernels; portable: IEEE fp32, whatever
  // precision the user set for their own matmuls.
  const MatmulPrecisionGuard precision(engine == GemmEngine::kOneDnn ? at::Float32Precision::BF16
                                                                     : at::Float32Precision::IEEE);
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

void gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out,
                  GemmEngine engine) {
  TORCH_INTERNAL_ASSERT(a.cols() == b.rows() && out.size(0) == a.rows() &&
                        out.size(1) == b.cols() && out.scalar_type() == a.half().scalar_type() &&
                        (out.size(1) <= 1 || out.stride(1) == 1));
  TORCH_INTERNAL_ASSERT(engine_usable(engine, a.half().scalar_type()),
                        "gemm_rounded: engine ", engine_name(engine), " cannot run this dtype here");
#if ASCEND_OPS_X86_KERNELS
  if (is_own_gemm(engine)) {
    const auto own_gemm_rounded = engine == GemmEngine::kAvx2 ? avx2_bf16_gemm_rounded
                                  : engine == GemmEngine::kAmx ? amx_bf16_gemm_rounded
                                                                : bf16_gemm_rounded;
    own_gemm_rounded(bf16_view(a.half()), bf16_view(b.half()), a.rows(), b.cols(), a.cols(),
                     bf16_bits(out), out.stride(0));
    return;
  }
#endif
  if (engine == GemmEngine::kMkl) {
    const at::Tensor a_half = engine_ready(a.half());
    const at::Tensor b_half = engine_ready(b.half());
    check_handed_operand(a_half, "A", engine);
    check_handed_operand(b_half, "B", engine);
    mkl_gemm_rounded(a_half, b_half, out);
    return;
  }
  if (engine == GemmEngine::kOneDnn) {
    // oneDNN reads the operands in place, padding included (gemm_operands.h): a padded
    // view whose padding is not zero is multiplied from a dense copy instead.
    const at::Tensor a_half = engine_ready(a.half());
    const at::Tensor b_half = engine_ready(b.half());
    check_handed_operand(a_half, "A", engine);
    check_handed_operand(b_half, "B", engine);
    at::mm_out(out, a_half, b_half);  // bf16 in, fp32 accumulation, bf16 out
    return;
  }
  portable_gemm_rounded(a, b, out);
}

bool reads_half_in_place(GemmEngine engine) {
  return is_own_gemm(engine) || engine == GemmEngine::kMkl;
}

bool is_own_gemm(GemmEngine engine) {
  return engine == GemmEngine::kAmx || engine == GemmEngine::kAvx512Bf16 ||
         engine == GemmEngine::kAvx2;
}

std::vector<GemmEngine> available_gemm_engines() {
  std::vector<GemmEngine> engines;
  if (onednn_bf16_supported()) {
    engines.push_back(GemmEngine::kOneDnn);
  }
  if (mkl_bf16_gemm_available()) {
    engines.push_back(GemmEngine::kMkl);
  }
  if (amx_kernels_supported()) {
    engines.push_back(GemmEngine::kAmx);
  }
  if (avx512_kernels_supported()) {
    engines.push_back(GemmEngine::kAvx512Bf16);
  }
  if (avx2_kernels_supported()) {
    engines.push_back(GemmEngine::kAvx2);
  }
  engines.push_back(GemmEngine::kPortable);
  return engines;
}

bool engine_usable(GemmEngine engine, at::ScalarType dtype) {
  switch (engine) {
    case GemmEngine::kOneDnn:
      return dtype == at::kBFloat16 && onednn_bf16_supported();
    case GemmEngine::kMkl:
      return dtype == at::kBFloat16 && mkl_bf16_gemm_available();
    case GemmEngine::kAmx:
      return dtype == at::kBFloat16 && amx_kernels_supported();
    case GemmEngine::kAvx512Bf16:
      return dtype == at::kBFloat16 && avx512_kernels_supported();
    case GemmEngine::kAvx2:
      return dtype == at::kBFloat16 && avx2_kernels_supported();
    case GemmEngine::kPortable:
      return dtype == at::kBFloat16 || dtype == at::kHalf;
  }
  return false;
}

namespace {

// Ties go to the own engines whose bits do not depend on the thread count, except that amx
// ranks after onednn: on the one AMX machine measured (2026-12-05) the rounded probe put
// amx at 0.86-0.95 of onednn from one start to the next, across the tie band; ranked
// first, amx would have been chosen in some starts and not in others. The step itself was
// no faster either way (0.88x / 0.91x torch.compile at the two benchmark shapes with amx
// for the rounded products, 0.92x / 0.83-0.85x with onednn).
int engine_preference(GemmEngine engine) {
  switch (engine) {
    case GemmEngine::kAvx512Bf16:
      return 0;
    case GemmEngine::kAvx2:
      return 1;
    case GemmEngine::kOneDnn:
      return 2;
    case GemmEngine::kAmx:
      return 3;
    case GemmEngine::kMkl:
      return 4;
    case GemmEngine::kPortable:
      return 5;
  }
  return 6;
}

}  // namespace

GemmEngine choose_gemm_engine(GemmKind kind, const std::optional<ForcedEngine>& forced,
                              const std::vector<GemmEngine>& available,
                              const std::function<std::vector<EngineTiming>()>& timings) {
  const auto offered = [&](GemmEngine e) {
    return std::find(available.begin(), available.end(), e) != available.end();
  };
  if (forced.has_value()) {
    if (!offered(forced->engine)) {  // the list is built only for the message
      std::string names;
      for (const GemmEngine engine : available) {
        names += std::string(names.empty() ? "" : ", ") + engine_name(engine);
      }
      TORCH_CHECK_VALUE(false, forced->variable, "='", engine_name(forced->engine),
                        "' is not available on this CPU (available: ", names, ")");
    }
    return forced->engine;
  }
  const std::vector<EngineTiming> table = timings();
  double fastest = 0.0;
  for (const EngineTiming& t : table) {
    if (offered(t.engine)) fastest = std::max(fastest, t.tflops);
  }
  TORCH_CHECK(fastest > 0.0, "no GEMM engine was timed for the ", kind_name(kind), " products");
  // Engines within kTieBand of the fastest are a tie, broken by a fixed preference (the own
  // engines first: the same bits for any thread count), so that measurement noise between
  // two engines of the same speed cannot flip the choice from one process to the next.
  std::optional<GemmEngine> chosen;
  for (const EngineTiming& t : table) {
    if (offered(t.engine) && t.tflops >= fastest * (1.0 - kEngineTieBand) &&
        (!chosen.has_value() || engine_preference(t.engine) < engine_preference(*chosen))) {
      chosen = t.engine;
    }
  }
  return *chosen;
}

namespace {

// The unforced decision for a kind, made once per process: the engine the cache file names
// for this CPU (engine_cache.h), else the choice among the engines measured now, which the
// file then keeps.
struct EngineDecision {
  GemmEngine engine;
  std::vector<EngineTiming> timings;
  bool from_cache;
};

EngineDecision decide(GemmKind kind) {
  const std::vector<GemmEngine> available = available_gemm_engines();
  if (const std::optional<CachedChoice> cached = read_cached_choice(kind, available)) {
    return {cached->engine, cached->timings, true};
  }
  const std::vector<EngineTiming> timings = measure_engines(kind);
  const GemmEngine engine = choose_gemm_engine(kind, std::nullopt, available, [&] { return timings; });
  store_cached_choice(kind, engine, timings);
  return {engine, timings, false};
}

const EngineDecision& decision(GemmKind kind) {
  static const EngineDecision fp32_out = decide(GemmKind::kFp32Out);
  if (kind == GemmKind::kFp32Out) {
    return fp32_out;
  }
  static const EngineDecision rounded = decide(GemmKind::kRounded);
  return rounded;
}

}  // namespace

GemmEngine gemm_engine(at::ScalarType dtype, GemmKind kind) {
  // A bad value throws for any dtype.
  const std::optional<ForcedEngine> forced = forced_gemm_engine(kind);
  if (dtype != at::kBFloat16) {
    return GemmEngine::kPortable;
  }
  if (forced.has_value()) {
    return choose_gemm_engine(kind, forced, available_gemm_engines(), [] { return std::vector<EngineTiming>{}; });
  }
  return decision(kind).engine;
}

const std::vector<EngineTiming>& gemm_engine_timings(GemmKind kind) { return decision(kind).timings; }

bool gemm_engine_from_cache(GemmKind kind) { return decision(kind).from_cache; }

std::vector<EngineTiming> measure_gemm_engines(GemmKind kind) { return measure_engines(kind); }

}  // namespace cpu
}  // namespace ascend_ops

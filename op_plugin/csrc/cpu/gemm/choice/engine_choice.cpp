#include "engine_choice.h"

#include "../engines/mkl_gemm.h"
#include "../gemm.h"
#include "engine_cache.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <ctime>
#include <string>

namespace ascend_ops {
namespace cpu {
namespace {

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

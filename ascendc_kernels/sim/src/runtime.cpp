#include "sim_runtime.h"
#include "kernel_operator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

namespace sim {

const SocSpec& Soc910B() { return ascend_ops_kernels::kAscend910B; }

namespace {
thread_local BlockContext* t_ctx = nullptr;
thread_local std::vector<LaunchCounters> t_recorded;
}  // namespace

std::vector<LaunchCounters>& RecordedLaunches() { return t_recorded; }

bool InKernel() { return t_ctx != nullptr; }

BlockContext& Ctx() {
  if (t_ctx == nullptr) throw SimError("AscendC API called outside a kernel launch (use ICPU_RUN_KF)");
  return *t_ctx;
}

CallScope::CallScope(const char* call) : previous_(Ctx().call) { Ctx().call = call; }
CallScope::~CallScope() { if (t_ctx) t_ctx->call = previous_; }

std::string Where() {
  BlockContext& c = Ctx();
  std::ostringstream s;
  s << "kernel '" << c.launch->kernel << "' block " << c.block_idx << "/" << c.launch->block_dim
    << ", " << c.call;
  return s.str();
}

void Fail(const std::string& what) { throw SimError("simulator: " + Where() + ": " + what); }

void Defer(const std::string& what) {
  BlockContext& c = Ctx();
  if (c.deferred_error.empty()) c.deferred_error = "simulator: " + Where() + ": " + what;
}

const uint8_t* CheckGm(const void* p, uint64_t bytes, const char* what) {
  const auto* q = static_cast<const uint8_t*>(p);
  for (const GmRegion& r : Ctx().launch->regions) {
    // A pointer one past a region's end belongs to it only for an empty access (regions
    // may be adjacent, like the parts of one workspace).
    const bool inside = q >= r.begin && (q < r.begin + r.bytes || (bytes == 0 && q == r.begin + r.bytes));
    if (inside) {
      if (static_cast<uint64_t>(q - r.begin) + bytes > r.bytes) {
        std::ostringstream s;
        s << what << " out of bounds of GM '" << r.name << "' (" << r.bytes << " bytes): bytes ["
          << (q - r.begin) << ", " << (q - r.begin) + bytes << ")";
        Fail(s.str());
      }
      return r.begin + r.bytes;
    }
  }
  std::ostringstream s;
  s << what << " at an address outside every GM buffer of the launch";
  Fail(s.str());
}

const char* PipeName(Pipe p) {
  switch (p) {
    case kPipeS: return "S";
    case kPipeV: return "V";
    case kPipeMte2: return "MTE2";
    case kPipeMte3: return "MTE3";
    default: return "?";
  }
}

namespace {
const char* PipeLongName(Pipe p) {
  switch (p) {
    case kPipeS: return "the scalar unit";
    case kPipeV: return "the vector pipe";
    case kPipeMte2: return "MTE2 (copy-in)";
    case kPipeMte3: return "MTE3 (copy-out)";
    default: return "?";
  }
}

[[noreturn]] void Race(Pipe pipe, Pipe other, bool write, bool other_wrote, uint64_t begin, uint64_t end) {
  std::ostringstream s;
  s << PipeLongName(pipe) << (write ? " writes" : " reads") << " UB bytes [" << begin << ", " << end << ") that "
    << PipeLongName(other) << (other_wrote ? " wrote" : " still reads") << ", with no " << PipeName(other) << " -> "
    << PipeName(pipe) << " synchronisation in between (SetFlag/WaitFlag<HardEvent::" << PipeName(other) << "_"
    << PipeName(pipe) << ">, or the queue's EnQue/DeQue): a race on the device";
  Fail(s.str());
}
}  // namespace

void PipeAccess(Pipe pipe, const void* ub_ptr, uint64_t bytes, bool write) {
  if (bytes == 0) return;
  BlockContext& c = Ctx();
  PipeState& ps = c.pipes;
  const uint64_t block = c.launch->soc->blockBytes;
  const uint64_t off = static_cast<uint64_t>(static_cast<const uint8_t*>(ub_ptr) - c.ub.data());
  const uint64_t now = ++ps.seen[pipe][pipe];
  const PipeClock& mine = ps.seen[pipe];
  for (uint64_t b = off / block, last = (off + bytes - 1) / block; b <= last && b < ps.ub.size(); ++b) {
    UbBlockShadow& u = ps.ub[b];
    if (u.writer != kPipeCount && u.writer != pipe && mine[u.writer] < u.written_at)
      Race(pipe, static_cast<Pipe>(u.writer), write, true, b * block, (b + 1) * block);
    if (write) {
      for (int q = 0; q < kPipeCount; ++q)
        if (q != pipe && u.read_at[q] > mine[q]) Race(pipe, static_cast<Pipe>(q), true, false, b * block, (b + 1) * block);
      u.writer = pipe;
      u.written_at = now;
    } else {
      u.read_at[pipe] = now;
    }
  }
}

PipeClock PipeView(Pipe pipe) { return Ctx().pipes.seen[pipe]; }

void PipeMerge(Pipe pipe, const PipeClock& view) {
  PipeClock& mine = Ctx().pipes.seen[pipe];
  for (int q = 0; q < kPipeCount; ++q) mine[q] = std::max(mine[q], view[q]);
}

void PipeBarrierAll() {
  PipeState& ps = Ctx().pipes;
  PipeClock all{};
  for (int p = 0; p < kPipeCount; ++p)
    for (int q = 0; q < kPipeCount; ++q) all[q] = std::max(all[q], ps.seen[p][q]);
  for (int p = 0; p < kPipeCount; ++p) ps.seen[p] = all;
}

uint64_t CurrentTilingKey() { return Ctx().launch->tiling_key; }

void SyncAllBlocks() {
  PipeBarrierAll();  // the hardware SyncAll waits on every pipe of the core (PIPE_ALL)
  Launch& l = *Ctx().launch;
  std::unique_lock<std::mutex> lock(l.mutex);
  if (l.aborted) throw SimError("");
  const uint64_t gen = l.generation;
  if (++l.arrived == l.block_dim) {
    l.arrived = 0;
    ++l.generation;
    l.cv.notify_all();
    return;
  }
  auto stranded = [&] { return l.finished > 0 && l.arrived + l.finished == l.block_dim; };
  l.cv.wait(lock, [&] { return l.generation != gen || l.aborted || stranded(); });
  if (l.generation != gen) return;
  if (l.aborted) throw SimError("");  // another block failed: stop quietly
  lock.unlock();
  Fail(std::to_string(l.finished) + " block(s) returned without reaching this SyncAll: the device would hang");
}

LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc) {
  if (block_dim == 0 || block_dim > 65535)
    throw SimError("simulator: kernel '" + kernel + "': blockDim must be in [1, 65535], got " +
                   std::to_string(block_dim));
  Launch launch{kernel, block_dim, tiling_key, &soc, regions, {}, {}, 0, 0, 0, false, {}};
  const uint64_t ub_blocks = soc.ubBytes / soc.blockBytes;
  std::vector<BlockContext> contexts(block_dim);
  auto run_block = [&](uint32_t idx) {
    BlockContext& c = contexts[idx];
    c.launch = &launch;
    c.block_idx = idx;
    c.ub.assign(soc.ubBytes, 0xff);  // all-ones: an unwritten float reads as NaN
    c.pipes.ub.assign(ub_blocks, UbBlockShadow{});
    t_ctx = &c;
    std::string error;
    try {
      body();
      if (!c.deferred_error.empty()) error = c.deferred_error;
    } catch (const SimError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = "simulator: " + Where() + ": unexpected exception: " + e.what();
    }
    t_ctx = nullptr;
    std::lock_guard<std::mutex> lock(launch.mutex);
    ++launch.finished;
    if (!error.empty() && !launch.aborted) {
      launch.aborted = true;
      launch.first_error = error;
    }
    launch.cv.notify_all();
  };
  std::vector<std::thread> threads;
  threads.reserve(block_dim);
  for (uint32_t i = 0; i < block_dim; ++i) threads.emplace_back(run_block, i);
  for (auto& t : threads) t.join();
  if (launch.aborted) throw SimError(launch.first_error);

  LaunchCounters total;
  total.kernel = kernel;
  total.block_dim = block_dim;
  for (const BlockContext& c : contexts) {
    total.gm_read_bytes += c.counters.gm_read_bytes;
    total.gm_write_bytes += c.counters.gm_write_bytes;
    total.ub_high_water = std::max(total.ub_high_water, c.counters.ub_high_water);
    total.vector_instructions += c.counters.vector_instructions;
    total.vector_repeats += c.counters.vector_repeats;
    total.max_block_vector_repeats = std::max(total.max_block_vector_repeats, c.counters.vector_repeats);
  }
  t_recorded.push_back(total);
  return total;
}

}  // namespace sim

namespace sim {
LaunchArgs& NextLaunch() {
  static thread_local LaunchArgs args;
  return args;
}
}  // namespace sim

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
  s << "kernel '" << c.launch->kernel << "' ";
  if (c.launch->kind == LaunchKind::Vector)
    s << "block " << c.block_idx << "/" << c.launch->block_dim;
  else if (c.core == CoreKind::Aic)
    s << "AIC " << c.block_idx << "/" << c.launch->block_dim;
  else
    s << "AIV " << c.block_idx << "/" << c.launch->aiv_cores;
  s << ", " << c.call;
  return s.str();
}

void Fail(const std::string& what) { throw SimError("simulator: " + Where() + ": " + what); }

void Defer(const std::string& what) {
  BlockContext& c = Ctx();
  if (c.deferred_error.empty()) c.deferred_error = "simulator: " + Where() + ": " + what;
}

namespace {
// Marks the 32-byte sectors of [p, p + bytes) in region `r` as touched (the L2 model).
void Touch(Launch& l, size_t r, const uint8_t* p, uint64_t bytes) {
  if (bytes == 0) return;
  const uint64_t first = uint64_t(p - l.regions[r].begin) / 32, last = (uint64_t(p - l.regions[r].begin) + bytes - 1) / 32;
  std::vector<uint64_t>& bits = l.touched[r];
  std::lock_guard<std::mutex> lock(l.atomic_mutex);
  for (uint64_t s = first; s <= last; ++s) bits[s / 64] |= uint64_t(1) << (s % 64);
}
}  // namespace

const uint8_t* CheckGm(const void* p, uint64_t bytes, const char* what) {
  const auto* q = static_cast<const uint8_t*>(p);
  Launch& l = *Ctx().launch;
  // A pointer one past a region's end belongs to it only for an empty access, and only
  // when no region starts there (regions may be adjacent, like the parts of a workspace).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < l.regions.size(); ++i) {
      const GmRegion& r = l.regions[i];
      const bool inside = q >= r.begin && (pass == 0 ? q < r.begin + r.bytes : (bytes == 0 && q == r.begin + r.bytes));
      if (!inside) continue;
      if (static_cast<uint64_t>(q - r.begin) + bytes > r.bytes) {
        std::ostringstream s;
        s << what << " out of bounds of GM '" << r.name << "' (" << r.bytes << " bytes): bytes ["
          << (q - r.begin) << ", " << (q - r.begin) + bytes << ")";
        Fail(s.str());
      }
      if (r.role == GmRole::SystemWorkspace && bytes != 0 && !Ctx().library_access)
        Fail(std::string(what) + " inside the system workspace (reserved for the Matmul library): "
             "kernel code must use GetUserWorkspace(workspace)");
      // SetGlobalBuffer only names a range; the accesses through it are what touch GM.
      if (std::strcmp(what, "SetGlobalBuffer") != 0) {
        Touch(l, i, q, bytes);
        if (r.role == GmRole::Workspace) RaceCheck(i, q, bytes, CurrentGmAccess(what), CurrentGmPipe(what));
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
    case kPipeMte1: return "MTE1";
    case kPipeM: return "M";
    case kPipeFix: return "FIX";
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
    case kPipeMte1: return "MTE1 (L1 -> L0)";
    case kPipeM: return "the cube";
    case kPipeFix: return "FIX (L0C -> out)";
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

void WakeAll() { Ctx().launch->cv.notify_all(); }

void BlockOn(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready, const std::string& what) {
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  if (ready()) return;
  l.waiting.push_back(Launch::Waiter{&ready, c.thread, &what});
  auto leave = [&] {
    l.waiting.erase(std::find_if(l.waiting.begin(), l.waiting.end(),
                                 [&](const Launch::Waiter& w) { return w.ready == &ready; }));
  };
  while (!ready()) {
    if (l.aborted) {
      leave();
      throw SimError("");  // another core failed: stop quietly
    }
    bool someone_can_run = l.waiting.size() + l.finished_threads < l.threads;
    for (const Launch::Waiter& w : l.waiting) someone_can_run = someone_can_run || (*w.ready)();
    if (!someone_can_run) {
      // The hang report: every other blocked core and what it waits for, cores waiting for
      // the same thing together (in thread order).
      std::vector<Launch::Waiter> others;
      for (const Launch::Waiter& w : l.waiting)
        if (w.thread != c.thread) others.push_back(w);
      std::sort(others.begin(), others.end(),
                [](const Launch::Waiter& a, const Launch::Waiter& b) { return a.thread < b.thread; });
      std::vector<std::pair<std::string, std::string>> groups;  // (what, cores)
      for (const Launch::Waiter& w : others) {
        auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == *w.what; });
        if (g == groups.end()) groups.emplace_back(*w.what, l.thread_names[w.thread]);
        else g->second += ", " + l.thread_names[w.thread];
      }
      std::string report;
      for (const auto& g : groups) report += "; " + g.second + " wait" + (g.second.find(',') == std::string::npos ? "s" : "") + " in " + g.first;
      leave();
      lock.unlock();
      Fail(what + ": every core of the launch is waiting or has returned and none can proceed (the device would "
           "hang)" + report);
    }
    l.cv.wait(lock);
  }
  leave();
}

void SyncAllBlocks() {
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  if (c.core == CoreKind::Aic) Fail("SyncAll<isAIVOnly = true> called on a cube core");
  PipeBarrierAll();  // the hardware SyncAll waits on every pipe of the core (PIPE_ALL)
  std::unique_lock<std::mutex> lock(l.mutex);
  if (l.aborted) throw SimError("");
  const uint64_t gen = l.generation;
  // Happens-before: everything each participant did before SyncAll precedes what every
  // participant does after it.
  c.clock[c.thread] = c.pipes.seen[kPipeS];  // after the barrier every pipe has seen all
  JoinClock(l.barrier_next, c.clock);
  if (++l.arrived == l.aiv_cores) {
    l.arrived = 0;
    ++l.generation;
    l.barrier_done = l.barrier_next;
    std::fill(l.barrier_next.begin(), l.barrier_next.end(), PipeClock{});
    JoinClock(c.clock, l.barrier_done);
    l.cv.notify_all();
    return;
  }
  l.cv.notify_all();  // a deadlock check elsewhere may depend on this arrival
  const std::function<bool()> ready = [&] {
    return l.generation != gen || (l.finished > 0 && l.arrived + l.finished == l.aiv_cores);
  };
  BlockOn(lock, ready, "SyncAll");
  if (l.generation != gen) {
    JoinClock(c.clock, l.barrier_done);
    return;
  }
  const uint32_t finished = l.finished;
  lock.unlock();
  Fail(std::to_string(finished) + " block(s) returned without reaching this SyncAll: the device would hang");
}

namespace {
// After a clean launch: a cross-core flag still set would be seen by the next kernel on
// that AI core (its counters are hardware state), so every set must have been waited for.
std::string LeftoverFlags(const Launch& l) {
  const bool mix = l.kind == LaunchKind::MixAic1To2;
  const std::string aiv = mix ? "AIV " : "block ";
  for (size_t g = 0; g < l.groups.size(); ++g) {
    const GroupFlags& f = l.groups[g];
    for (int id = 0; id < kCrossCoreFlags; ++id) {
      std::string who;
      if (f.to_aic[id]) who = "set for the AIC";
      for (int s = 0; s < 2 && who.empty(); ++s)
        if (f.to_aiv[s][id]) who = "set for " + aiv + std::to_string(2 * g + s);
      for (int s = 0; s < 2 && who.empty(); ++s)
        if (f.aiv_mode2[s][id] || f.aiv_mode1[s][id]) who = "set by " + aiv + std::to_string(2 * g + s) + " only";
      if (!who.empty())
        return "simulator: kernel '" + l.kernel + "' " + (mix ? "AI core " : "blocks ") + std::to_string(g) +
               (mix ? "" : "/" + std::to_string(2 * g + 1)) + ", kernel end: cross-core flag " + std::to_string(id) +
               " " + who + " was never waited for (it would leak into the next kernel)";
    }
  }
  for (int kind = 0; kind < 2; ++kind)
    for (int id = 0; id < kCrossCoreFlags; ++id)
      for (size_t core = 0; core < l.mode0[kind][id].pending.size(); ++core)
        if (!l.mode0[kind][id].pending[core].empty())
          return "simulator: kernel '" + l.kernel + "' " + (kind ? "AIC " : aiv) + std::to_string(core) +
                 ", kernel end: its mode-0 CrossCoreSetFlag(" + std::to_string(id) +
                 ") was never matched by every other core of its kind (a counter would leak into the next kernel)";
  return "";
}
}  // namespace

LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc, LaunchKind kind) {
  if (block_dim == 0 || block_dim > 65535)
    throw SimError("simulator: kernel '" + kernel + "': blockDim must be in [1, 65535], got " +
                   std::to_string(block_dim));
  Launch launch;
  launch.kernel = kernel;
  launch.block_dim = block_dim;
  launch.tiling_key = tiling_key;
  launch.soc = &soc;
  launch.regions = regions;
  launch.kind = kind;
  const bool mix = kind == LaunchKind::MixAic1To2;
  launch.threads = mix ? 3 * block_dim : block_dim;
  launch.aiv_cores = mix ? 2 * block_dim : block_dim;
  launch.groups.resize(mix ? block_dim : (block_dim + 1) / 2);
  for (const GmRegion& r : regions) {
    launch.touched.emplace_back((r.bytes / 32 + 64) / 64, 0);
    launch.race_units.emplace_back(r.role == GmRole::Workspace ? r.bytes / 4 + 1 : 0);
  }
  launch.barrier_next.assign(launch.threads, PipeClock{});
  launch.barrier_done.assign(launch.threads, PipeClock{});
  for (uint32_t i = 0; i < launch.threads; ++i) {
    if (!mix) launch.thread_names.push_back("block " + std::to_string(i));
    else if (i < block_dim) launch.thread_names.push_back("AIC " + std::to_string(i));
    else launch.thread_names.push_back("AIV " + std::to_string(i - block_dim));
  }
  const uint64_t ub_blocks = soc.ubBytes / soc.blockBytes;
  std::vector<BlockContext> contexts(launch.threads);
  auto run_block = [&](uint32_t thread) {
    BlockContext& c = contexts[thread];
    c.launch = &launch;
    c.thread = thread;
    c.clock.assign(launch.threads, PipeClock{});
    // The framework hands every core the system workspace (SetSysWorkspace is deprecated).
    for (const GmRegion& r : regions)
      if (r.role == GmRole::SystemWorkspace) c.sys_workspace = r.begin;
    // MIX: threads [0, B) are the AIC cores, [B, 3B) the AIV cores 0..2B-1.
    if (mix && thread < block_dim) {
      c.core = CoreKind::Aic;
      c.block_idx = c.group = thread;
    } else {
      c.block_idx = mix ? thread - block_dim : thread;
      c.group = c.block_idx / 2;
      c.sub_block = c.block_idx % 2;
      c.ub.assign(soc.ubBytes, 0xff);  // all-ones: an unwritten float reads as NaN
      c.pipes.ub.assign(ub_blocks, UbBlockShadow{});
    }
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
    ++launch.finished_threads;
    if (c.core == CoreKind::Aiv) ++launch.finished;
    if (!error.empty() && !launch.aborted) {
      launch.aborted = true;
      launch.first_error = error;
    }
    launch.cv.notify_all();
  };
  std::vector<std::thread> threads;
  threads.reserve(launch.threads);
  for (uint32_t i = 0; i < launch.threads; ++i) threads.emplace_back(run_block, i);
  for (auto& t : threads) t.join();
  if (launch.aborted) throw SimError(launch.first_error);
  const std::string leftover = LeftoverFlags(launch);
  if (!leftover.empty()) throw SimError(leftover);

  LaunchCounters total;
  total.kernel = kernel;
  total.block_dim = block_dim;
  total.cube_cores = mix ? block_dim : 0;
  for (const BlockContext& c : contexts) {
    total.gm_read_bytes += c.counters.gm_read_bytes;
    total.gm_write_bytes += c.counters.gm_write_bytes;
    total.ub_high_water = std::max(total.ub_high_water, c.counters.ub_high_water);
    total.vector_instructions += c.counters.vector_instructions;
    total.vector_repeats += c.counters.vector_repeats;
    total.max_block_vector_repeats = std::max(total.max_block_vector_repeats, c.counters.vector_repeats);
    total.cube_flops += c.counters.cube_flops;
    total.max_core_cube_flops = std::max(total.max_core_cube_flops, c.counters.cube_flops);
  }
  for (size_t r = 0; r < regions.size(); ++r) {
    uint64_t sectors = 0;
    for (uint64_t word : launch.touched[r]) sectors += __builtin_popcountll(word);
    const uint64_t bytes = std::min(sectors * 32, regions[r].bytes);
    if (regions[r].role == GmRole::Data) total.touched_data_bytes += bytes;
    if (regions[r].role == GmRole::Workspace) total.touched_workspace_bytes += bytes;
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

#include "sim_runtime.h"
#include "kernel_operator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <initializer_list>
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

namespace {

// GlobalTensor::SetValue writes the core's data cache, which goes out to GM later, one
// 64-byte line at a time (AscendC docs, GlobalTensor SetValue, 6.2.2.2.7, and
// DataCacheCleanAndInvalid, 6.2.3.8.2): DMA units read and write GM directly.
constexpr uint64_t kDataCacheLine = 64;

// The bytes of region `r` a 64-byte data-cache line covers.
std::string LineText(const GmRegion& r, uint64_t line) {
  const uint64_t base = reinterpret_cast<uint64_t>(r.begin);
  const uint64_t lo = std::max(line * kDataCacheLine, base) - base;
  const uint64_t hi = std::min((line + 1) * kDataCacheLine, base + r.bytes) - base;
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

// Rules A and E: an access that meets a line some core holds dirty in its data cache.
void DataCacheCheck(Launch& l, const GmRegion& r, const uint8_t* q, uint64_t bytes, GmAccess access, Pipe pipe) {
  BlockContext& c = Ctx();
  const bool scalar = pipe == kPipeS;
  if (!scalar && l.dirty_line_count.load() == 0) return;
  const uint64_t first = reinterpret_cast<uint64_t>(q) / kDataCacheLine;
  const uint64_t last = (reinterpret_cast<uint64_t>(q) + bytes - 1) / kDataCacheLine;
  std::lock_guard<std::mutex> lock(l.dcache_mutex);
  for (uint64_t line = first; line <= last; ++line) {
    const auto it = l.dirty_lines.find(line);
    const uint32_t owner = it == l.dirty_lines.end() ? 0 : it->second;
    if (owner == c.thread + 1 && scalar) continue;  // the scalar unit sees its own data cache
    const std::string where = "GM '" + r.name + "' bytes [" + std::to_string(q - r.begin) + ", " +
                              std::to_string(q - r.begin + bytes) + ")";
    if (owner != 0) {
      const std::string holder = owner == c.thread + 1 ? "this core" : l.thread_names[owner - 1];
      const std::string line_text = "64-byte data-cache line (its bytes " + LineText(r, line) + ")";
      if (access == GmAccess::Read)
        Fail(std::string(scalar ? "the scalar unit" : "a DMA") + " reads " + where + " in the " + line_text +
             " that " + holder + " wrote with GlobalTensor::SetValue and has not written back: SetValue writes the "
             "core's data cache, which reaches GM per 64-byte line later (AscendC docs: GlobalTensor SetValue, "
             "DataCacheCleanAndInvalid), so this read sees the old bytes; call DataCacheCleanAndInvalid<T, "
             "CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT> on it after the SetValue (rule A)");
      Fail(std::string(scalar ? "GlobalTensor::SetValue" : "a DMA") + " writes " + where + " in the " + line_text +
           " that " + holder + " holds dirty in its data cache (GlobalTensor::SetValue, not yet cleaned): that "
           "line's write-back carries all 64 bytes and would overwrite these (AscendC docs: SetValue writes out per "
           "64-byte cache line); clean it with DataCacheCleanAndInvalid first, and keep other cores' data off a "
           "line the scalar unit writes (rule E)");
    }
    if (scalar && access != GmAccess::Read) {
      l.dirty_lines[line] = c.thread + 1;
      l.dirty_line_count = l.dirty_lines.size();
    }
  }
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
      if (std::strcmp(what, "SetGlobalBuffer") != 0 && bytes != 0) {
        const GmAccess access = CurrentGmAccess(what);
        const Pipe pipe = CurrentGmPipe(what);
        if (access != GmAccess::Read && r.role == GmRole::Input)
          Fail(std::string(what) + " writes GM '" + r.name + "', an input of the launch: the kernel may only read it "
               "(the host registers a buffer the op updates in place as an output)");
        Touch(l, i, q, bytes);
        if (access != GmAccess::AtomicAdd) FlushAtomicsBefore(l, q, bytes);
        DataCacheCheck(l, r, q, bytes, access, pipe);
        if (r.role == GmRole::Workspace || r.role == GmRole::Output) {
          if (pipe == kPipeS && access != GmAccess::Read) {
            // The write-back carries the whole line: for the race check the store writes it all.
            const uint64_t at = reinterpret_cast<uint64_t>(q), base = reinterpret_cast<uint64_t>(r.begin);
            const uint64_t lo = std::max(at / kDataCacheLine * kDataCacheLine, base);
            const uint64_t hi = std::min((at + bytes + kDataCacheLine - 1) / kDataCacheLine * kDataCacheLine,
                                         base + r.bytes);
            RaceCheck(i, r.begin + (lo - base), hi - lo, access, pipe);
          } else {
            RaceCheck(i, q, bytes, access, pipe);
          }
        }
      }
      return r.begin + r.bytes;
    }
  }
  std::ostringstream s;
  s << what << " at an address outside every GM buffer of the launch";
  Fail(s.str());
}

void CleanDataCacheLine(const void* p, bool entire) {
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  std::lock_guard<std::mutex> lock(l.dcache_mutex);
  if (entire) {
    for (auto it = l.dirty_lines.begin(); it != l.dirty_lines.end();)
      it = it->second == c.thread + 1 ? l.dirty_lines.erase(it) : std::next(it);
  } else {
    const auto it = l.dirty_lines.find(reinterpret_cast<uint64_t>(p) / kDataCacheLine);
    if (it != l.dirty_lines.end() && it->second == c.thread + 1) l.dirty_lines.erase(it);
  }
  l.dirty_line_count = l.dirty_lines.size();
}

namespace {

uint64_t Mix64(uint64_t x) {  // splitmix64's finaliser: a seeded order that is not the creation order
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The rank of core (thread) `thread` in schedule `seed`: seed 0 puts the cores in index
// order, seed 1 in the reverse, any other seed in a permutation of its own. It orders the
// threads' start and the atomic adds no synchronisation orders, whatever the timing.
uint64_t OrderKey(uint64_t seed, uint64_t thread) {
  if (seed == 0) return thread;
  if (seed == 1) return ~thread;
  return Mix64(seed ^ Mix64(thread));
}

// Applies every pending atomic add, each core's in program order and a core's add after
// every add it is ordered after (happens-before through flags or SyncAll); among the cores
// whose next add is free to go, the schedule seed picks. Called with atomic_mutex held.
void ApplyPendingAtomics(Launch& l) {
  std::vector<AtomicRecord>& pending = l.pending_atomics;
  std::vector<std::vector<size_t>> chains(l.threads);
  for (size_t i = 0; i < pending.size(); ++i) chains[pending[i].thread].push_back(i);
  for (auto& chain : chains)
    std::sort(chain.begin(), chain.end(), [&](size_t a, size_t b) { return pending[a].seq < pending[b].seq; });
  std::vector<size_t> head(l.threads, 0);
  auto before = [&](const AtomicRecord& g, const AtomicRecord& h) {  // g happened before h
    return h.clock[g.thread][kPipeFix] >= g.fix_count;
  };
  for (size_t done = 0; done < pending.size(); ++done) {
    int64_t pick = -1, fallback = -1;
    for (uint32_t t = 0; t < l.threads; ++t) {
      if (head[t] >= chains[t].size()) continue;
      const AtomicRecord& h = pending[chains[t][head[t]]];
      if (fallback < 0 || h.seq < pending[chains[fallback][head[fallback]]].seq) fallback = t;
      bool ready = true;
      for (uint32_t u = 0; u < l.threads && ready; ++u)
        if (u != t && head[u] < chains[u].size()) ready = !before(pending[chains[u][head[u]]], h);
      if (ready && (pick < 0 || OrderKey(l.schedule_seed, t) < OrderKey(l.schedule_seed, pick))) pick = t;
    }
    if (pick < 0) pick = fallback;  // cannot happen with consistent clocks
    const AtomicRecord& a = pending[chains[pick][head[pick]++]];
    for (int64_t i = 0; i < a.rows; ++i)
      for (int64_t j = 0; j < a.cols; ++j) a.dst[i * a.ldc + j] += a.values[i * a.cols + j];
  }
  pending.clear();
  l.pending_atomic_count = 0;
}

}  // namespace

void FlushAtomicsBefore(Launch& l, const void* p, uint64_t bytes) {
  if (l.pending_atomic_count.load() == 0) return;
  const auto* q = static_cast<const uint8_t*>(p);
  std::lock_guard<std::mutex> lock(l.atomic_mutex);
  bool overlaps = false;
  for (const AtomicRecord& a : l.pending_atomics) overlaps = overlaps || (q < a.hi && a.lo < q + bytes);
  if (overlaps) ApplyPendingAtomics(l);
}

void DeferAtomicAdd(AtomicRecord record) {
  Launch& l = *Ctx().launch;
  std::lock_guard<std::mutex> lock(l.atomic_mutex);
  record.seq = ++l.atomic_seq;
  l.pending_atomics.push_back(std::move(record));
  l.pending_atomic_count = l.pending_atomics.size();
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

namespace {
// Rule G: the vector pipe's access [off, off + bytes) against its earlier ones not known
// complete (the launch has auto-sync off).
void CheckVectorOrder(BlockContext& c, uint64_t off, uint64_t bytes, bool write, uint64_t now) {
  PipeState& ps = c.pipes;
  std::vector<VectorAccess>& pending = ps.vector_pending;
  size_t kept = 0;  // drop what is known complete (they are in access order)
  while (kept < pending.size() && pending[kept].at <= ps.vector_done) ++kept;
  if (kept) pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(kept));
  const uint64_t instruction = ps.in_vector_instruction ? ps.vector_instruction : ++ps.vector_instruction;
  for (const VectorAccess& e : pending) {
    if (e.instruction == instruction || !(e.write || write) || e.hi <= off || off + bytes <= e.lo) continue;
    std::ostringstream s;
    const uint64_t lo = std::max(e.lo, off), hi = std::min(e.hi, off + bytes);
    s << "the vector pipe's " << c.call << (write ? " writes" : " reads") << " UB bytes [" << lo << ", " << hi
      << ") that its earlier " << e.call << (e.write ? " wrote" : " reads")
      << ", with no PipeBarrier<PIPE_V> in between: vector instructions overlap in the pipe, so this one may "
      << (write ? (e.write ? "write them before the earlier write lands" : "overwrite them before they are read")
                : "read them before they are written")
      << " (rule G: a same-pipe data dependency needs PipeBarrier<PIPE_V>; without bisheng's --cce-auto-sync "
         "nothing inserts it)";
    Fail(s.str());
  }
  // Bounded: a kernel that never orders its vector pipe would keep every access.
  if (pending.size() >= 4096) pending.erase(pending.begin());
  pending.push_back(VectorAccess{off, off + bytes, now, instruction, write, c.call});
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
  if (pipe == kPipeV && !c.launch->auto_sync) CheckVectorOrder(c, off, bytes, write, now);
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
  PipeState& ps = Ctx().pipes;
  PipeClock& mine = ps.seen[pipe];
  for (int q = 0; q < kPipeCount; ++q) mine[q] = std::max(mine[q], view[q]);
  // The sender had seen the vector pipe's accesses up to view[V] complete: the vector
  // pipe's later instructions come after them.
  if (pipe == kPipeV) ps.vector_done = std::max(ps.vector_done, view[kPipeV]);
}

void PipeBarrierAll() {
  PipeState& ps = Ctx().pipes;
  PipeClock all{};
  for (int p = 0; p < kPipeCount; ++p)
    for (int q = 0; q < kPipeCount; ++q) all[q] = std::max(all[q], ps.seen[p][q]);
  for (int p = 0; p < kPipeCount; ++p) ps.seen[p] = all;
  ps.vector_done = ps.seen[kPipeV][kPipeV];
}

void PipeBarrierVector() {
  PipeState& ps = Ctx().pipes;
  ps.vector_done = ps.seen[kPipeV][kPipeV];
}

VectorInstruction::VectorInstruction() {
  PipeState& ps = Ctx().pipes;
  ++ps.vector_instruction;
  ps.in_vector_instruction = true;
}

VectorInstruction::~VectorInstruction() {
  if (InKernel()) Ctx().pipes.in_vector_instruction = false;
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

namespace {

// One launch with schedule seed `seed` (see Schedule).
LaunchCounters RunOnce(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                       const std::vector<GmRegion>& regions, const std::function<void()>& body, const SocSpec& soc,
                       LaunchKind kind, uint64_t seed, bool auto_sync) {
  Launch launch;
  launch.schedule_seed = seed;
  launch.auto_sync = auto_sync;
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
    const bool raced = r.role == GmRole::Workspace || r.role == GmRole::Output;
    launch.race_units.emplace_back(raced ? r.bytes / 4 + 1 : 0);
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
  // The seed also picks the order the cores' threads start in (the OS schedules the rest).
  std::vector<uint32_t> order(launch.threads);
  for (uint32_t i = 0; i < launch.threads; ++i) order[i] = i;
  if (seed == 1) std::reverse(order.begin(), order.end());
  if (seed > 1)
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return OrderKey(seed, a) < OrderKey(seed, b); });
  std::vector<std::thread> threads;
  threads.reserve(launch.threads);
  for (uint32_t i : order) threads.emplace_back(run_block, i);
  for (auto& t : threads) t.join();
  if (launch.aborted) throw SimError(launch.first_error);
  {  // atomic adds nobody read back: they land before the host sees GM
    std::lock_guard<std::mutex> lock(launch.atomic_mutex);
    ApplyPendingAtomics(launch);
  }
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
    if (regions[r].role == GmRole::Input || regions[r].role == GmRole::Output) total.touched_data_bytes += bytes;
    if (regions[r].role == GmRole::Workspace) total.touched_workspace_bytes += bytes;
  }
  t_recorded.push_back(total);
  return total;
}

// The bytes of every region of `roles` (host memory: the launch's GM).
std::vector<std::string> Snapshot(const std::vector<GmRegion>& regions, std::initializer_list<GmRole> roles) {
  std::vector<std::string> out;
  for (const GmRegion& r : regions) {
    const bool kept = std::find(roles.begin(), roles.end(), r.role) != roles.end();
    out.emplace_back(kept ? std::string(reinterpret_cast<const char*>(r.begin), r.bytes) : std::string());
  }
  return out;
}

void Restore(const std::vector<GmRegion>& regions, const std::vector<std::string>& saved) {
  for (size_t i = 0; i < regions.size(); ++i)
    if (!saved[i].empty()) std::memcpy(const_cast<uint8_t*>(regions[i].begin), saved[i].data(), saved[i].size());
}

std::atomic<uint64_t> g_next_seed{2};

}  // namespace

LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc, LaunchKind kind, Schedule schedule) {
  if (block_dim == 0 || block_dim > 65535)
    throw SimError("simulator: kernel '" + kernel + "': blockDim must be in [1, 65535], got " +
                   std::to_string(block_dim));
  if (!schedule.check_determinism) {
    const uint64_t seed = schedule.seed == kDefaultSeed ? g_next_seed++ : schedule.seed;
    return RunOnce(kernel, block_dim, tiling_key, regions, body, soc, kind, seed, schedule.auto_sync);
  }
  // Twice from the same GM, with opposite orders of everything the simulator may order
  // (thread start, unordered atomic adds); every output must come out bit for bit the same.
  const std::vector<std::string> initial = Snapshot(regions, {GmRole::Output, GmRole::Workspace});
  const LaunchCounters counters = RunOnce(kernel, block_dim, tiling_key, regions, body, soc, kind, 0, schedule.auto_sync);
  const std::vector<std::string> first = Snapshot(regions, {GmRole::Output});
  Restore(regions, initial);
  RunOnce(kernel, block_dim, tiling_key, regions, body, soc, kind, 1, schedule.auto_sync);
  t_recorded.pop_back();  // one launch as far as the counters go
  for (size_t i = 0; i < regions.size(); ++i) {
    if (first[i].empty()) continue;
    const auto* now = reinterpret_cast<const char*>(regions[i].begin);
    const auto diff = std::mismatch(first[i].begin(), first[i].end(), now);
    if (diff.first == first[i].end()) continue;
    const uint64_t at = static_cast<uint64_t>(diff.first - first[i].begin());
    uint64_t differing = 0;
    for (uint64_t b = at; b < first[i].size(); ++b) differing += first[i][b] != now[b];
    throw SimError("simulator: kernel '" + kernel + "' is not deterministic: GM '" + regions[i].name + "' differs "
                   "between two runs from the same inputs with opposite thread-start and atomic-add orders (schedule "
                   "seeds 0 and 1), first at byte " + std::to_string(at) + ", " + std::to_string(differing) +
                   " bytes in all: its result depends on the order of operations nothing in the kernel orders "
                   "(e.g. atomic adds from several cores into the same bytes; rule F)");
  }
  return counters;
}

}  // namespace sim

namespace sim {
LaunchArgs& NextLaunch() {
  static thread_local LaunchArgs args;
  return args;
}
}  // namespace sim

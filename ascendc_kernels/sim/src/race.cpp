// Happens-before race detection on the workspace (see sim_race.h).
#include <cstring>
#include <sstream>

#include "sim_runtime.h"

namespace sim {

void JoinClock(VectorClock& mine, const VectorClock& other) {
  for (size_t i = 0; i < mine.size() && i < other.size(); ++i)
    for (int q = 0; q < kPipeCount; ++q) mine[i][q] = std::max(mine[i][q], other[i][q]);
}

Pipe CurrentGmPipe(const char* what) {
  if (std::strcmp(what, "Matmul C store") == 0) return kPipeFix;
  if (std::strncmp(what, "Matmul", 6) == 0) return kPipeMte2;
  const char* call = Ctx().call;
  if (std::strstr(call, "UB->GM") != nullptr) return kPipeMte3;
  if (std::strstr(call, "GM->UB") != nullptr) return kPipeMte2;
  return kPipeS;
}

GmAccess CurrentGmAccess(const char* what) {
  if (std::strcmp(what, "Matmul C store") == 0) return Ctx().atomic_store ? GmAccess::AtomicAdd : GmAccess::Write;
  if (std::strncmp(what, "Matmul", 6) == 0) return GmAccess::Read;  // A and B loads
  // Accesses through a GlobalTensor: the call in progress says the direction.
  const char* call = Ctx().call;
  const bool write = std::strstr(call, "->GM") != nullptr || std::strstr(call, "SetValue") != nullptr;
  return write ? GmAccess::Write : GmAccess::Read;
}

namespace {

bool HappenedBefore(const RaceEpoch& e, const BlockContext& c) {
  return e.tid1 == 0 || e.tid1 - 1 == c.thread || c.clock[e.tid1 - 1][e.pipe] >= e.count;
}

[[noreturn]] void Race(const Launch& l, size_t region, uint64_t offset, const RaceEpoch& other, const char* other_did,
                       const char* this_does) {
  std::ostringstream s;
  s << "data race on GM '" << l.regions[region].name << "' bytes [" << offset << ", " << offset + 4 << "): "
    << l.thread_names[other.tid1 - 1] << " (" << PipeName(static_cast<Pipe>(other.pipe)) << ") " << other_did
    << " them and this core " << this_does
    << " them with no synchronisation in between (CrossCoreSetFlag/CrossCoreWaitFlag or SyncAll; a flag "
       "publishes only the accesses of the pipe it is set on and of the pipes ordered before that one)";
  Fail(s.str());
}

// Puts `e` into one of two slots: its own thread's (the bytes merged), a free one, or one
// that happened before the current core (superseded); else the older slot is overwritten
// (an approximation: more than two unordered accessors of one unit are not all remembered).
void Remember(RaceEpoch (&slots)[2], RaceEpoch e, const BlockContext& c, uint32_t* atomic_bits, bool atomic) {
  int at = -1;
  for (int i = 0; i < 2 && at < 0; ++i)
    if (slots[i].tid1 == e.tid1) {
      at = i;
      e.mask |= slots[i].mask;
    }
  for (int i = 0; i < 2 && at < 0; ++i)
    if (slots[i].tid1 == 0 || (HappenedBefore(slots[i], c) && slots[i].tid1 != e.tid1)) at = i;
  if (at < 0) at = slots[0].count <= slots[1].count ? 0 : 1;
  slots[at] = e;
  if (atomic_bits) *atomic_bits = (*atomic_bits & ~(1u << at)) | (atomic ? 1u << at : 0u);
}

// Drops bytes `mask` from a slot (a later write covers them); an empty slot is free.
void Forget(RaceEpoch& slot, uint32_t mask) {
  slot.mask &= ~mask;
  if (slot.mask == 0) slot = RaceEpoch{};
}

}  // namespace

void RaceCheck(size_t region, const uint8_t* p, uint64_t bytes, GmAccess access, Pipe pipe) {
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  std::vector<RaceUnit>& units = l.race_units[region];
  if (units.empty() || bytes == 0) return;
  const uint64_t offset = uint64_t(p - l.regions[region].begin);
  const uint64_t first = offset / 4, last = (offset + bytes - 1) / 4;
  // Each GM access is one more access of its pipe: a flag set on that pipe later covers it.
  const uint32_t count = static_cast<uint32_t>(++c.pipes.seen[pipe][pipe]);
  std::lock_guard<std::mutex> lock(l.race_mutex);
  for (uint64_t u = first; u <= last; ++u) {
    // The bytes of unit u this access touches.
    const uint64_t lo = std::max(offset, u * 4), hi = std::min(offset + bytes, u * 4 + 4);
    const uint32_t mask = ((1u << (hi - lo)) - 1) << (lo - u * 4);
    const RaceEpoch me{c.thread + 1, pipe, mask, count};
    RaceUnit& r = units[u];
    for (int i = 0; i < 2; ++i) {
      const RaceEpoch& w = r.writes[i];
      const bool both_atomic = access == GmAccess::AtomicAdd && (r.atomic >> i & 1u);
      if ((w.mask & mask) && !HappenedBefore(w, c) && !both_atomic)
        Race(l, region, u * 4, w, (r.atomic >> i & 1u) ? "added into" : "wrote",
             access == GmAccess::Read ? "reads" : "writes");
    }
    if (access == GmAccess::Read) {
      Remember(r.reads, me, c, nullptr, false);
      continue;
    }
    for (const RaceEpoch& rd : r.reads)
      if ((rd.mask & mask) && !HappenedBefore(rd, c)) Race(l, region, u * 4, rd, "read", "writes");
    for (RaceEpoch& rd : r.reads) Forget(rd, mask);
    if (access == GmAccess::AtomicAdd) {
      Remember(r.writes, me, c, &r.atomic, true);
    } else {
      for (int i = 0; i < 2; ++i) {
        Forget(r.writes[i], mask);
        if (r.writes[i].tid1 == 0) r.atomic &= ~(1u << i);
      }
      Remember(r.writes, me, c, &r.atomic, false);
    }
  }
}

}  // namespace sim

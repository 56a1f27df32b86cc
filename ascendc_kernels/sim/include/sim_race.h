// Data-race detection on the workspace between the cores of a launch (happens-before with
// vector clocks). Each core has a clock; CrossCoreSetFlag hands the setter's clock to the
// waiter(s) with the flag, SyncAll joins the clocks of all participants. Every 4-byte unit
// of a Workspace-role GM region remembers its last writers and readers (up to two each,
// with their clocks); an access conflicts with an earlier one by another core unless that
// one happened before it. Two atomic adds (the fixpipe's enAtomic = 1) never conflict.
// A conflict is a race the device could lose: the launch stops naming both cores.
#pragma once

#include <cstdint>
#include <vector>

namespace sim {

struct Launch;
struct BlockContext;

using VectorClock = std::vector<uint32_t>;

enum class GmAccess : uint8_t { Read, Write, AtomicAdd };

// One access, epoch-encoded: core thread id + 1 (0 = none) and that core's clock then.
struct RaceEpoch {
  uint32_t tid1 = 0;
  uint32_t clock = 0;
};

struct RaceUnit {
  RaceEpoch writes[2];  // the last writers not yet ordered before each other (atomic adds)
  RaceEpoch reads[2];   // readers since the last write
  uint32_t atomic = 0;  // bit i: writes[i] was an atomic add
};

// Joins `other` into `mine` (element-wise max).
void JoinClock(VectorClock& mine, const VectorClock& other);

// Records an access of [p, p + bytes) in region `region` of the current core's launch and
// fails on a race. Called by CheckGm for Workspace regions.
void RaceCheck(size_t region, const uint8_t* p, uint64_t bytes, GmAccess access);

// The kind of access the current API call makes to GM (from the call's name).
GmAccess CurrentGmAccess(const char* what);

}  // namespace sim

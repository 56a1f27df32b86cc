// Data-race detection on the workspace between the cores of a launch (happens-before with
// vector clocks). A core's clock says, per core and per pipe of that core, how many of that
// pipe's accesses it is ordered after. CrossCoreSetFlag<mode, pipe> is an instruction on
// `pipe`: it hands the waiter(s) the setter's clock with the setter's own entry limited to
// what that pipe is ordered after (sim_pipes.h), so a flag set on MTE2 does not publish
// MTE3's writes. SyncAll joins the clocks of all participants (all pipes). Every 4-byte unit
// of a Workspace- or Output-role GM region remembers its last writers and readers (up to
// two each, with the bytes of the unit they touched); an access conflicts with an earlier
// one by another core to a byte they share unless that one happened before it. Two atomic adds (the fixpipe's enAtomic = 1) never conflict.
// A conflict is a race the device could lose: the launch stops naming both cores.
#pragma once

#include <cstdint>
#include <vector>

#include "sim_pipes.h"

namespace sim {

struct Launch;
struct BlockContext;

// One PipeClock per core (thread) of the launch.
using VectorClock = std::vector<PipeClock>;

enum class GmAccess : uint8_t { Read, Write, AtomicAdd };

// One access: core thread id + 1 (0 = none), the pipe that made it, which of the unit's
// four bytes it touched (bit i: byte i; two cores may write neighbouring half elements of
// one unit), and that pipe's access count then (its own entry of the core's PipeState).
struct RaceEpoch {
  uint32_t tid1 : 24;
  uint32_t pipe : 4;
  uint32_t mask : 4;
  uint32_t count = 0;
  RaceEpoch() : tid1(0), pipe(0), mask(0) {}
  RaceEpoch(uint32_t t, uint32_t p, uint32_t m, uint32_t n) : tid1(t), pipe(p), mask(m), count(n) {}
};

struct RaceUnit {
  RaceEpoch writes[2];  // the last writers not yet ordered before each other (atomic adds)
  RaceEpoch reads[2];   // readers since the last write
  uint32_t atomic = 0;  // bit i: writes[i] was an atomic add
};

// Joins `other` into `mine` (element-wise max).
void JoinClock(VectorClock& mine, const VectorClock& other);

// Records an access of [p, p + bytes) in region `region` of the current core's launch by
// `pipe` and fails on a race. Called by CheckGm for Workspace regions.
void RaceCheck(size_t region, const uint8_t* p, uint64_t bytes, GmAccess access, Pipe pipe);

// The kind of access the current API call makes to GM, and the pipe making it (from the
// call's name: DMA GM->UB is MTE2, UB->GM MTE3, Matmul loads MTE2, its C stores FIX,
// GlobalTensor element access the scalar unit).
GmAccess CurrentGmAccess(const char* what);
Pipe CurrentGmPipe(const char* what);

}  // namespace sim
